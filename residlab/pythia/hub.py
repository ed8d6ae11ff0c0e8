"""The bounded HTTP client of the fetch and the pin, and what the Hub API says of files at a revision.

Every wait is bounded (``FetchLimits``): one deadline for the whole fetch, a stall limit per socket read, bounded
attempts and redirects, and never a byte read past what the caller expects. Connections go through the proxy the
environment names (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``), as urllib and huggingface_hub honour them. When
no connection can be made at all (no network, a name that does not resolve, a refused port, a dead proxy), the
error is ``HubUnreachable``: one message naming the host (or proxy) tried, the variables honoured, and what to do.

Standard library only.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote, urlencode, urljoin, urlsplit
from urllib.request import getproxies, proxy_bypass

from residlab.pythia.lock import FileBytes, UnsafeFileError, read_file_bytes

DEFAULT_ENDPOINT = "https://huggingface.co"
METADATA_MAX_BYTES = 1 << 20  # the Hub's answer about six paths is a few hundred bytes
_CHUNK = 1 << 16


class ArtifactError(RuntimeError):
    """An artifact directory or a download does not match the lock; the message names the file."""


@dataclass(frozen=True)
class FetchLimits:
    """Every wait of a fetch is bounded. The default deadline fits the 30 MB of the six files on a slow line
    (about 17 kB/s); ``--timeout`` changes it."""

    deadline_s: float = 1800.0  # the whole fetch, metadata and every file and retry
    stall_s: float = 60.0  # no byte for this long: the attempt has stalled
    attempts: int = 3  # per file, resuming where the last one stopped
    backoff_s: float = 2.0  # wait before attempt n+1: backoff_s * n (never past the deadline)
    redirects: int = 5


def git_blob_id(data: bytes) -> str:
    """The git blob id the Hub reports for a non-LFS file: sha1 of b"blob <size>\\0" + content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ---- bounded HTTP --------------------------------------------------------------------------------------------


class _Refused(Exception):
    """A download attempt failed; ``retry`` says whether another attempt may help."""

    def __init__(self, message: str, retry: bool = False):
        super().__init__(message)
        self.retry = retry


class _NoConnection(_Refused):
    """No connection could be made; ``host`` says to what (the Hub's host, or the proxy in front of it)."""

    def __init__(self, host: str, error: OSError):
        super().__init__(f"could not connect to {host} ({error.strerror or error or type(error).__name__})", retry=True)


class HubUnreachable(ArtifactError):
    """The Hub (or the proxy the environment names) could not be reached at all: nothing was read from it."""

    def __init__(self, failure: _Refused):
        super().__init__(
            f"{failure}: the Hub could not be reached. Check the network connection; behind a proxy, set HTTPS_PROXY "
            "(or HTTP_PROXY; NO_PROXY lists hosts reached directly), which the download honours as pip does"
        )


@dataclass
class FetchClock:
    limits: FetchLimits
    deadline: float

    @classmethod
    def start(cls, limits: FetchLimits) -> FetchClock:
        return cls(limits, time.monotonic() + limits.deadline_s)

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _Refused(f"the fetch's deadline of {self.limits.deadline_s:g} s passed")
        return left


_HUB_ERRORS = {
    "RepoNotFound": "the Hub has no such repository (or it is private)",
    "RevisionNotFound": "the Hub has no such revision",
    "EntryNotFound": "the Hub has no such file at this revision",
}


def _connection(parts, timeout: float):
    """(connection, request target, what it connects to) for a URL, through the proxy the environment names
    (HTTPS_PROXY, HTTP_PROXY, NO_PROXY), as urllib and huggingface_hub honour them. HTTPS goes through a CONNECT
    tunnel, so the server's certificate is still checked against its own host name."""
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    proxy = getproxies().get(parts.scheme)
    host = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    if not proxy or proxy_bypass(parts.hostname):
        connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return connection_class(parts.hostname, parts.port, timeout=timeout), target, host
    proxied = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    via = f"the proxy {proxied.hostname}:{proxied.port or 80} ({parts.scheme.upper()}_PROXY) for {host}"
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(proxied.hostname, proxied.port or 80, timeout=timeout)
        connection.set_tunnel(parts.hostname, parts.port)
        return connection, target, via
    # A plain-HTTP proxy is sent the whole URL.
    return http.client.HTTPConnection(proxied.hostname, proxied.port or 80, timeout=timeout), parts.geturl(), via


class _Response:
    """One HTTP exchange whose every wait is bounded: each socket read by ``stall_s``, and the whole exchange
    by the deadline, enforced by a timer that shuts the socket down (so a server trickling headers or body
    one byte at a time cannot hold the fetch)."""

    def __init__(self, url: str, clock: FetchClock, method: str = "GET", body: bytes | None = None, headers: dict | None = None):
        self.clock = clock
        self.expired = False
        headers = {"User-Agent": "residlab-fetch", "Accept-Encoding": "identity", **(headers or {})}
        for _ in range(clock.limits.redirects + 1):
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise _Refused(f"refusing the address {url!r} (only http and https)")
            self.connection, target, host = _connection(parts, timeout=min(clock.limits.stall_s, clock.remaining()))
            self.timer = threading.Timer(clock.remaining(), self._expire)
            self.timer.daemon = True
            try:
                self.connection.connect()
            except OSError as error:
                self.close()
                raise _NoConnection(host, error) from None
            try:
                self.timer.start()
                self.connection.request(method, target, body=body, headers=headers)
                self.response = self.connection.getresponse()
            except (OSError, http.client.HTTPException) as error:
                self.close()
                raise self._failure(error) from None
            if self.response.status in (301, 302, 303, 307, 308) and self.response.getheader("Location"):
                location = urljoin(url, self.response.getheader("Location"))
                self.close()
                if parts.scheme == "https" and urlsplit(location).scheme != "https":
                    raise _Refused(f"the server redirected from https to {location!r}; refused")
                url = location
                if self.response.status == 303:
                    method, body = "GET", None
                continue
            self.status = self.response.status
            return
        raise _Refused(f"more than {clock.limits.redirects} redirects")

    def _expire(self) -> None:
        self.expired = True
        try:
            self.connection.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass

    def _failure(self, error: BaseException) -> _Refused:
        if self.expired:
            return _Refused(f"the fetch's deadline of {self.clock.limits.deadline_s:g} s passed")
        if isinstance(error, (socket.timeout, TimeoutError)):
            return _Refused(f"no data for {self.clock.limits.stall_s:g} s (stalled)", retry=True)
        return _Refused(f"{type(error).__name__}: {error}".rstrip(": "), retry=True)

    def header(self, name: str) -> str | None:
        return self.response.getheader(name)

    def error_text(self) -> str:
        hint = _HUB_ERRORS.get(self.header("X-Error-Code") or "")
        text = f"HTTP {self.status} {self.response.reason}".strip()
        return f"{hint} ({text})" if hint else text

    def read_some(self, most: int) -> bytes:
        """At most ``most`` bytes of the body, from one socket read (so never a wait longer than ``stall_s``)."""
        self.clock.remaining()
        try:
            chunk = self.response.read1(min(most, _CHUNK))
        except (OSError, http.client.HTTPException) as error:
            raise self._failure(error) from None
        if self.expired:
            raise _Refused(f"the fetch's deadline of {self.clock.limits.deadline_s:g} s passed")
        return chunk

    def read_bounded(self, limit: int) -> bytes:
        chunks, total = [], 0
        while chunk := self.read_some(limit + 1 - total):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _Refused(f"the answer is longer than {limit:,} bytes; stopped reading")
        return b"".join(chunks)

    def close(self) -> None:
        self.timer.cancel()
        self.connection.close()


def hub_endpoint(endpoint: str | None) -> str:
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


class HubFile(NamedTuple):
    """What the Hub API says of one file at one revision."""

    size: int
    blob_id: str  # the git blob id (for an LFS file: of its pointer)
    lfs_sha256: str | None  # None: a plain git file
    lfs_size: int | None


def hub_metadata(repository: str, revision: str, names: list[str], endpoint: str, clock: FetchClock) -> dict[str, HubFile]:
    """name -> HubFile from the Hub API at ``revision``, in one bounded request; an error naming any it lacks."""
    url = f"{endpoint}/api/models/{quote(repository)}/paths-info/{revision}"
    body = urlencode([("paths", name) for name in names] + [("expand", "false")]).encode()
    where = f"the Hub's metadata for {', '.join(names)} at revision {revision}"
    try:
        response = _Response(url, clock, "POST", body, {"Content-Type": "application/x-www-form-urlencoded"})
        try:
            if response.status != 200:
                raise _Refused(response.error_text())
            answer = json.loads(response.read_bounded(METADATA_MAX_BYTES))
        finally:
            response.close()
        found = {}
        for entry in answer:
            if isinstance(entry, dict) and entry.get("type", "file") == "file":
                lfs = entry.get("lfs") or {}
                found[entry["path"]] = HubFile(entry["size"], entry["oid"], lfs.get("oid"), lfs.get("size"))
    except _NoConnection as error:
        raise HubUnreachable(error) from None
    except _Refused as error:
        raise ArtifactError(f"could not read {where}: {error}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ArtifactError(f"could not read {where}: the answer is not the expected JSON ({error})") from None
    absent = [name for name in names if name not in found]
    if absent:
        raise ArtifactError(f"the Hub lists no {', '.join(absent)} at revision {revision}")
    return found


def hub_problem(name: str, data: bytes, metadata: HubFile) -> str | None:
    """For a file the lock has no hash for: does it match the Hub's size and blob id / LFS sha256?"""
    size, blob_id, lfs_sha256, _ = metadata
    if len(data) != size:
        return f"{name}: {len(data):,} bytes, the Hub's metadata says {size:,}"
    if lfs_sha256 is not None and hashlib.sha256(data).hexdigest() != lfs_sha256:
        return f"{name}: sha256 {hashlib.sha256(data).hexdigest()}, the Hub's LFS metadata says {lfs_sha256}"
    if lfs_sha256 is None and git_blob_id(data) != blob_id:
        return f"{name}: git blob id {git_blob_id(data)}, the Hub's metadata says {blob_id}"
    return None


def _download_attempt(url: str, handle, offset: int, size: int, clock: FetchClock, size_from: str) -> int:
    """Append the rest of the file (from ``offset``) to ``handle``; return the new length. Never reads past
    ``size + 1`` bytes in all, whatever Content-Length or chunking the server uses."""
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    response = _Response(url, clock, headers=headers)
    try:
        if offset and response.status == 200:
            raise _Refused(
                f"the server ignored the request to resume from byte {offset:,} (Range) and began the file again"
            )
        if offset and response.status == 206:
            announced = (response.header("Content-Range") or "").split(" ")[-1].split("-")[0]
            if announced != str(offset):
                raise _Refused(f"asked to resume from byte {offset:,}, the server sent {response.header('Content-Range')!r}")
        elif response.status != 200:
            raise _Refused(response.error_text(), retry=response.status >= 500 or response.status == 429)
        length = response.header("Content-Length")
        if length is not None and length.strip().isdigit() and offset + int(length) != size:
            raise _Refused(f"the server announces {offset + int(length):,} bytes (Content-Length), {size_from} says {size:,}")
        written = offset
        while chunk := response.read_some(size + 1 - written):
            if written + len(chunk) > size:  # the byte past the expected size is read, never written
                raise _Refused(
                    f"the server sent more than {size_from}'s {size:,} bytes; stopped reading at byte {written + len(chunk):,}"
                )
            handle.write(chunk)
            written += len(chunk)
        if written < size:
            raise _Refused(f"the connection ended after {written:,} of {size:,} bytes", retry=True)
        return written
    finally:
        response.close()


def download_file(repository: str, revision: str, name: str, size: int, staging: Path, endpoint: str,
                  clock: FetchClock, size_from: str = "the lock") -> FileBytes:
    """Download one file of ``size`` bytes into ``staging`` (bounded attempts, resuming, never a byte past
    ``size``) and read it back under the one rule. ``size_from`` names who gave the size, for the errors."""
    url = f"{endpoint}/{quote(repository)}/resolve/{revision}/{quote(name)}"
    path = staging / name
    failures = []
    with open(path, "wb") as handle:
        written = 0
        for attempt in range(1, clock.limits.attempts + 1):
            try:
                written = _download_attempt(url, handle, written, size, clock, size_from)
                break
            except _Refused as error:
                handle.flush()
                written = handle.tell()
                failures.append(f"attempt {attempt}: {error}")
                if isinstance(error, _NoConnection) and attempt == clock.limits.attempts:
                    raise HubUnreachable(error) from None  # no file is at fault
                if not error.retry or attempt == clock.limits.attempts:
                    raise ArtifactError(
                        f"{name}: download from {repository} at revision {revision} failed after "
                        f"{written:,} of {size:,} bytes ({'; '.join(failures)}); nothing from it was kept"
                    ) from None
                pause = min(clock.limits.backoff_s * attempt, max(0.0, clock.deadline - time.monotonic()))
                time.sleep(pause)
    try:
        return read_file_bytes(path, size)
    except (OSError, UnsafeFileError) as error:
        raise ArtifactError(f"{name}: the staged download could not be read back ({error}); nothing kept") from None
