"""A small stand-in for the Hugging Face Hub on 127.0.0.1, for tests (no machine of this project reaches the Hub).

It serves one repository at one commit, answering the routes huggingface_hub 2.4.0 uses (read from its
``file_download.py`` and ``hf_api.py``):

- ``HEAD``/``GET /{repo}/resolve/{revision}/{file}``: ``X-Repo-Commit``, ``ETag`` (sha256 for LFS files, the git
  blob id for others), ``Content-Length``, and for LFS files ``X-Linked-Size``/``X-Linked-Etag``. Errors carry
  ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``), which the client maps to its
  exception types. No ``X-Xet-Hash`` is sent, so the client uses plain HTTP.
- ``GET /api/models/{repo}/revision/{revision}`` (``?blobs=True`` adds sizes, blob ids and LFS sha256).
- ``POST /api/models/{repo}/paths-info/{revision}`` (form field ``paths``, repeated).

Faults (``hub.faults[file] = kind``, or ``hub.faults["*"]`` for every file), applied to ``resolve`` requests:
``"missing"`` 404 EntryNotFound; ``"server_error"`` 500; ``"truncate"`` the body is half the file with an
honest ``Content-Length`` (the metadata still says the full size); ``"cut"`` ``Content-Length`` says the full
size but the connection closes half way, and every later GET of that file is dropped unanswered (the network
stays down); ``"cut_once"`` the same cut, then later GETs are served (with ``Range`` honoured, so the client
resumes); ``"flip"`` one byte changed, same size; ``"resize"`` one byte appended.

Misbehaviours against the client's byte and time bounds (each ends when the client hangs up or the hub stops):
``"oversize_unframed"`` no Content-Length, the file then endless zero bytes until the connection closes;
``"oversize_chunked"`` the same as chunked transfer encoding; ``"trickle"`` an honest Content-Length, then one
byte every ``hub.trickle_interval`` seconds; ``"trickle_headers"`` the status line, then the headers one byte
at a time, never finished; ``"silent"`` accepts the request and never answers; ``"stall_ignore_range"`` every GET
answers 200 from byte 0 whatever its ``Range``, sends half the file and stalls; ``"redirect"`` a 302 to a
second address that serves the file (as the Hub sends LFS files to its CDN); ``"redirect_loop"`` a 302 to itself.
Every request is logged in ``hub.requests`` as ``(method, path)``.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

LFS_FILES = ("model.safetensors",)  # stored with git LFS on the Hub; everything else is a plain git blob
FAULT_KINDS = (
    "missing", "server_error", "truncate", "cut", "cut_once", "flip", "resize", "oversize_unframed",
    "oversize_chunked", "trickle", "trickle_headers", "silent", "stall_ignore_range", "redirect", "redirect_loop",
)  # fmt: skip
STREAM_CAP = 256 << 20  # an endless body stops here even if the client never hangs up
CDN_PREFIX = "/cdn/"


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(data: bytes) -> bytes:
    return (
        "version https://git-lfs.github.com/spec/v1\n"
        f"oid sha256:{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n"
    ).encode()


class FakeHub:
    """``with FakeHub(repo, revision, files) as hub: ... hub.endpoint ...``; stops on exit."""

    def __init__(self, repository: str, revision: str, files: dict[str, bytes]):
        self.repository = repository
        self.revision = revision
        self.files = dict(files)
        self.faults: dict[str, str] = {}
        self.requests: list[tuple[str, str]] = []
        self.cut_files: set[str] = set()  # files whose transfer was already cut once
        self.trickle_interval = 0.05  # seconds between bytes of a "trickle" fault
        self.stopping = threading.Event()  # ends every stall and endless body when the hub stops
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_directory(cls, repository: str, revision: str, directory: Path, extra_files: dict | None = None):
        files = {path.name: path.read_bytes() for path in sorted(Path(directory).iterdir()) if path.is_file()}
        files.update(extra_files or {})
        return cls(repository, revision, files)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-hub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=10)
            self._server = None

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    def resolved_files(self) -> list[str]:
        """File names requested through the resolve route (HEAD or GET), in order."""
        marker = f"/{self.repository}/resolve/"
        return [unquote(path.split(marker, 1)[1].split("/", 1)[1]) for _, path in self.requests if marker in path]

    def fault_for(self, name: str) -> str | None:
        return self.faults.get(name) or self.faults.get("*")

    def served_bytes(self, name: str) -> bytes:
        data = self.files[name]
        fault = self.fault_for(name)
        if fault == "flip":
            middle = len(data) // 2
            return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
        if fault == "resize":
            return data + b"\n"
        return data

    def file_record(self, name: str) -> dict:
        """The true metadata of a file (what the Hub's API reports; faults never change it)."""
        data = self.files[name]
        record = {"size": len(data), "blob_id": git_blob_id(data), "lfs": None}
        if name in LFS_FILES:
            pointer = lfs_pointer(data)
            record["blob_id"] = git_blob_id(pointer)
            record["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": len(pointer)}
        return record


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output quiet; the hub keeps its own log
        pass

    # ---- helpers ----
    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, error_code: str | None = None):
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if error_code:
            self.send_header("X-Error-Code", error_code)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value, status: int = 200):
        self._send(status, json.dumps(value).encode(), {"Content-Type": "application/json"})

    def _revision_ok(self, revision: str) -> bool:
        return unquote(revision) in (self.hub.revision, "main")

    # ---- routes ----
    def do_HEAD(self):
        self._route()

    def do_GET(self):
        self._route()

    def do_POST(self):
        self._route()

    def _route(self):
        hub = self.hub
        hub.log(self.command, self.path)
        url = urlsplit(self.path)
        path = unquote(url.path)
        api_prefix = f"/api/models/{hub.repository}/"
        resolve_prefix = f"/{hub.repository}/resolve/"
        if path.startswith("/api/models/"):
            if not path.startswith(api_prefix):
                return self._send(404, b"repository not found", error_code="RepoNotFound")
            kind, _, revision = path[len(api_prefix) :].partition("/")
            if not self._revision_ok(revision):
                return self._send(404, b"revision not found", error_code="RevisionNotFound")
            if kind == "revision" and self.command == "GET":
                return self._model_info(parse_qs(url.query))
            if kind == "paths-info" and self.command == "POST":
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                return self._paths_info(form.get("paths", []))
            return self._send(404, b"no such route")
        if path.startswith(CDN_PREFIX) and self.command == "GET":
            name = path[len(CDN_PREFIX) :]
            return self._send(200, hub.files[name]) if name in hub.files else self._send(404, b"no such object")
        if "/resolve/" in path and self.command in ("HEAD", "GET"):
            if not path.startswith(resolve_prefix):
                return self._send(404, b"repository not found", error_code="RepoNotFound")
            revision, _, name = path[len(resolve_prefix) :].partition("/")
            if not self._revision_ok(revision):
                return self._send(404, b"revision not found", error_code="RevisionNotFound")
            return self._resolve(name)
        return self._send(404, b"no such route")

    def _model_info(self, query: dict):
        hub = self.hub
        with_blobs = query.get("blobs", ["false"])[0].lower() == "true"
        siblings = []
        for name in sorted(hub.files):
            sibling = {"rfilename": name}
            if with_blobs:
                record = hub.file_record(name)
                sibling.update(size=record["size"], blobId=record["blob_id"])
                if record["lfs"]:
                    sibling["lfs"] = dict(record["lfs"])
            siblings.append(sibling)
        self._json({"id": hub.repository, "modelId": hub.repository, "sha": hub.revision, "private": False, "siblings": siblings})

    def _paths_info(self, paths: list[str]):
        hub = self.hub
        answer = []
        for name in paths:
            if name not in hub.files:
                continue  # the Hub ignores paths it does not have
            record = hub.file_record(name)
            entry = {"type": "file", "path": name, "size": record["size"], "oid": record["blob_id"]}
            if record["lfs"]:
                entry["lfs"] = {"oid": record["lfs"]["sha256"], "size": record["lfs"]["size"], "pointerSize": record["lfs"]["pointerSize"]}
            answer.append(entry)
        self._json(answer)

    def _resolve(self, name: str):
        hub = self.hub
        fault = hub.fault_for(name)
        if name not in hub.files or fault == "missing":
            return self._send(404, b"entry not found", {"X-Repo-Commit": hub.revision}, error_code="EntryNotFound")
        if fault == "server_error":
            return self._send(500, b"internal error")
        data = hub.served_bytes(name)
        if name in LFS_FILES:
            etag = hashlib.sha256(data).hexdigest()
        else:
            etag = git_blob_id(data)
        headers = {"X-Repo-Commit": hub.revision, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if name in LFS_FILES:
            headers["X-Linked-Size"] = str(len(data))
            headers["X-Linked-Etag"] = f'"{etag}"'
        if self.command == "HEAD":
            return self._send(200, b"", {**headers, "Content-Length": str(len(data))})
        if fault in MISBEHAVIOURS:
            self.close_connection = True
            try:
                MISBEHAVIOURS[fault](self, name, data)
            except OSError:  # the client hung up, as a bounded client does
                pass
            return
        if fault == "truncate":
            return self._send(200, data[: len(data) // 2], headers)
        if fault in ("cut", "cut_once") and self._already_cut(name):
            if fault == "cut":  # the network stays down: close without answering
                self.close_connection = True
                return self._drop()
            # cut_once: the network is back; serve the rest, honouring the client's Range (resume)
        elif fault in ("cut", "cut_once"):
            self.send_response(200)
            for key, value in {**headers, "Content-Length": str(len(data))}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return self._drop()
        start = self._range_start()
        if start:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            return self._send(206, data[start:], headers)
        return self._send(200, data, headers)

    # ---- misbehaviours (each returns when the client hangs up or the hub stops) ----
    def _endless(self, data: bytes, chunked: bool) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding" if chunked else "Connection", "chunked" if chunked else "close")
        self.end_headers()
        block, sent = data + bytes(1 << 16), 0
        while sent < STREAM_CAP and not self.hub.stopping.is_set():
            self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
            sent += len(block)
            block = bytes(1 << 16)

    def _oversize_unframed(self, name: str, data: bytes) -> None:
        self._endless(data, chunked=False)

    def _oversize_chunked(self, name: str, data: bytes) -> None:
        self._endless(data, chunked=True)

    def _trickle(self, name: str, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        for index in range(len(data)):
            if self.hub.stopping.wait(self.hub.trickle_interval):
                return
            self.wfile.write(data[index : index + 1])
            self.wfile.flush()

    def _trickle_headers(self, name: str, data: bytes) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        while not self.hub.stopping.wait(self.hub.trickle_interval):
            self.wfile.write(b"X")  # one endless header line, one byte at a time
            self.wfile.flush()

    def _silent(self, name: str, data: bytes) -> None:
        self.hub.stopping.wait(60)

    def _stall_ignore_range(self, name: str, data: bytes) -> None:
        self.send_response(200)  # never 206: the Range header is ignored
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.hub.stopping.wait(60)

    def _redirect(self, name: str, data: bytes) -> None:
        self.close_connection = False
        self._send(302, b"", {"Location": f"{CDN_PREFIX}{name}"})

    def _redirect_loop(self, name: str, data: bytes) -> None:
        self.close_connection = False
        self._send(302, b"", {"Location": self.path})

    def _already_cut(self, name: str) -> bool:
        """True from the second GET of ``name`` on; records the first."""
        with self.hub._lock:
            seen = name in self.hub.cut_files
            self.hub.cut_files.add(name)
        return seen

    def _range_start(self) -> int:
        value = self.headers.get("Range", "")
        if value.startswith("bytes=") and value.endswith("-") and value[6:-1].isdigit():
            return int(value[6:-1])
        return 0

    def _drop(self) -> None:
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


MISBEHAVIOURS = {
    "oversize_unframed": _Handler._oversize_unframed,
    "oversize_chunked": _Handler._oversize_chunked,
    "trickle": _Handler._trickle,
    "trickle_headers": _Handler._trickle_headers,
    "silent": _Handler._silent,
    "stall_ignore_range": _Handler._stall_ignore_range,
    "redirect": _Handler._redirect,
    "redirect_loop": _Handler._redirect_loop,
}
