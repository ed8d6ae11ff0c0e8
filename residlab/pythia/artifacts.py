"""The download plan, the pinned fetch and the offline verification of the six specimen files.

- ``plan_text(lock)``: the six files, their sizes and the total; no network, standard library only.
- ``verify_artifacts(directory, lock)``: offline; refuses an extra, missing, resized, changed or symlinked
  file with a message naming the file and what differs. Every file is read once, under the one rule of
  ``read_file_bytes`` (no symlink, regular file, size-bounded, identity unchanged while read), and the bytes
  it hashed are the bytes it returns: ``observe`` loads the model from those, never from the path again.
- ``fetch_artifacts(directory, lock)``: downloads exactly the missing files of the six, at the pinned revision,
  with the standard library's HTTP client, under ``FetchLimits``: it never reads more than the lock's size plus
  one byte of any file (whatever the headers say), the whole fetch has a deadline, a silent connection counts
  as stalled, attempts per file are bounded, and a resume (``Range``) the server ignores is refused. Each file
  lands in a private staging folder inside ``directory``, is checked for size and sha256 there, and only then
  is moved into place with ``os.replace``. A file the user already has is never overwritten or deleted.

Trust comes from the lock or, at fetch time, from the Hub; never from a file in the directory itself. Where the
lock records no sha256 (the pinned lock lacks one for ``generation_config.json``, which no public record gives),
the fetch checks the file against the Hub's metadata for the immutable revision (size, and the git blob id or
LFS sha256). Offline, such a file is checked for its size only and reported as unpinned; ``observe`` never
reads it (``OBSERVE_READS``), and refuses to run if any file it does read lacks a pinned sha256.
``residlab pythia pin --revision <commit>`` completes the lock.

Standard library only.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote, urlencode, urljoin, urlsplit
from urllib.request import getproxies, proxy_bypass

from residlab.pythia.lock import ALLOWED_FILES, FileBytes, Lock, UnsafeFileError, path_identity, read_file_bytes  # bundled

STAGING_PREFIX = ".residlab-download-"
# Written by earlier releases to vouch for files the lock had no hash for; a directory cannot vouch for itself.
RETIRED_RECORD_FILE = "residlab-verified-hashes.json"
# The files observe loads. generation_config.json only matters for text generation, which nothing here does.
OBSERVE_READS = ("config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json")
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


@dataclass(frozen=True)
class VerifiedArtifacts:
    directory: Path
    lock: Lock
    sha256: dict  # file name -> sha256 of the bytes read, every one of the six
    contents: dict = field(repr=False)  # file name -> FileBytes, for files whose lock entry has a sha256
    unpinned: tuple = ()  # files the lock has no sha256 for: checked for size only offline, never loaded

    def bytes_for(self, name: str) -> bytes:
        """The verified bytes of ``name``, refused if the file on disk changed since it was verified."""
        if name not in self.contents:
            raise ArtifactError(
                f"{name}: the lock ({self.lock.origin}) records no sha256 for it, so its bytes are not verified and "
                f"are never loaded; complete the lock with `residlab pythia pin --revision {self.lock.revision}`"
            )
        held = self.contents[name]
        if path_identity(self.directory / name) != held.identity:
            raise ArtifactError(f"{name}: changed in {self.directory} after it was verified; refused, nothing loaded")
        return held.data


def plan_text(lock: Lock) -> str:
    """What a fetch would download: exactly the six files and their total. Makes no request."""
    width = max(len(name) for name in lock.names)
    lines = [f"Plan: {lock.repository} at revision {lock.revision}" + (" (SYNTHETIC specimen)" if lock.synthetic else "")]
    for entry in lock.files:
        digest = entry.sha256[:12] + "…" if entry.sha256 else "no sha256 in the lock"
        lines.append(f"  {entry.name:<{width}}  {entry.size:>12,} bytes  {digest}")
    lines.append(f"  {len(lock.files)} files, {lock.total_bytes:,} bytes in all; nothing else is downloaded")
    if lock.missing_hashes:
        lines.append(
            f"  The lock records no sha256 for {', '.join(lock.missing_hashes)}: a fetch checks it against the "
            "Hub's metadata for this revision; offline only its size is checked and the observation never reads "
            f"it. Complete the lock with `residlab pythia pin --revision {lock.revision}`."
        )
    lines.append(f"  lock: {lock.origin}")
    return "\n".join(lines)


def git_blob_id(data: bytes) -> str:
    """The git blob id the Hub reports for a non-LFS file: sha1 of b"blob <size>\\0" + content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ---- offline verification ------------------------------------------------------------------------------------


def _inspect_entries(directory: Path) -> tuple[list[str], list[str]]:
    """Problems with what the directory holds besides the six files, and the allowed names present."""
    problems, present = [], []
    for entry in sorted(os.scandir(directory), key=lambda item: item.name):
        if entry.is_symlink():
            problems.append(f"{entry.name}: is a symbolic link (to {os.readlink(entry.path)}); artifacts must be regular files")
        elif entry.name.startswith(STAGING_PREFIX):
            problems.append(f"{entry.name}: left by an interrupted fetch; delete it (its contents were never accepted)")
        elif entry.is_dir(follow_symlinks=False):
            problems.append(f"{entry.name}: unexpected directory; the artifact directory holds only the six files")
        elif entry.name == RETIRED_RECORD_FILE:
            problems.append(
                f"{entry.name}: written by an earlier release to vouch for files the lock has no hash for; it is no "
                "longer trusted or used (trust comes from the lock or the Hub): delete it"
            )
        elif entry.name in ALLOWED_FILES:
            present.append(entry.name)
        else:
            problems.append(f"{entry.name}: extra file, not one of the six allowed files")
    return problems, present


def _read_present(directory: Path, name: str, lock: Lock) -> tuple[str | None, FileBytes | None]:
    """(problem, bytes) for one present file: read under the one rule, bounded by the lock's size, then the
    size and, where the lock has one, the sha256."""
    expected = lock.file(name)
    try:
        held = read_file_bytes(directory / name, expected.size)
    except FileNotFoundError:
        return f"{name}: disappeared while the directory was being checked", None
    except UnsafeFileError as error:
        return str(error), None
    if held.size != expected.size:
        return f"{name}: {held.size:,} bytes, the lock says {expected.size:,}", None
    if expected.sha256 is not None and held.sha256 != expected.sha256:
        return f"{name}: sha256 {held.sha256}, the lock says {expected.sha256} (same size, different bytes)", None
    return None, held


def _read_entries(directory: Path, lock: Lock) -> tuple[list[str], list[str], dict[str, FileBytes]]:
    """(problems, the allowed files present, name -> verified bytes of each present file that matched the lock)."""
    problems, present = _inspect_entries(directory)
    held = {}
    for name in present:
        problem, read = _read_present(directory, name, lock)
        if problem:
            problems.append(problem)
        else:
            held[name] = read
    return problems, present, held

def verify_artifacts(directory: Path, lock: Lock) -> VerifiedArtifacts:
    """Check an artifact directory against the lock without any network access; hold the verified bytes."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ArtifactError(f"{directory}: no such artifact directory")
    problems, present, held = _read_entries(directory, lock)
    problems += [f"{name}: missing" for name in lock.names if name not in present]
    if problems:
        raise ArtifactError(f"{directory} does not match the lock ({lock.origin}):\n  " + "\n  ".join(problems))
    return VerifiedArtifacts(
        directory=directory,
        lock=lock,
        sha256={name: read.sha256 for name, read in held.items()},
        contents={name: read for name, read in held.items() if lock.file(name).sha256 is not None},
        unpinned=lock.missing_hashes,
    )


# ---- bounded HTTP --------------------------------------------------------------------------------------------


class _Refused(Exception):
    """A download attempt failed; ``retry`` says whether another attempt may help."""

    def __init__(self, message: str, retry: bool = False):
        super().__init__(message)
        self.retry = retry


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
    """(connection, request target) for a URL, through the proxy the environment names (HTTPS_PROXY,
    HTTP_PROXY, NO_PROXY), as urllib and huggingface_hub honour them. HTTPS goes through a CONNECT tunnel,
    so the server's certificate is still checked against its own host name."""
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    proxy = getproxies().get(parts.scheme)
    if not proxy or proxy_bypass(parts.hostname):
        connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return connection_class(parts.hostname, parts.port, timeout=timeout), target
    proxied = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(proxied.hostname, proxied.port or 80, timeout=timeout)
        connection.set_tunnel(parts.hostname, parts.port)
        return connection, target
    # A plain-HTTP proxy is sent the whole URL.
    return http.client.HTTPConnection(proxied.hostname, proxied.port or 80, timeout=timeout), parts.geturl()


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
            self.connection, target = _connection(parts, timeout=min(clock.limits.stall_s, clock.remaining()))
            self.timer = threading.Timer(clock.remaining(), self._expire)
            self.timer.daemon = True
            try:
                self.connection.connect()
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
    except _Refused as error:
        raise ArtifactError(f"could not read {where}: {error}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ArtifactError(f"could not read {where}: the answer is not the expected JSON ({error})") from None
    absent = [name for name in names if name not in found]
    if absent:
        raise ArtifactError(f"the Hub lists no {', '.join(absent)} at revision {revision}")
    return found


def _hub_problem(name: str, data: bytes, metadata: HubFile) -> str | None:
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


def fetch_artifacts(
    directory: Path,
    lock: Lock,
    *,
    endpoint: str | None = None,
    report=print,
    limits: FetchLimits = FetchLimits(),
) -> VerifiedArtifacts:
    """Download the missing ones of the six files into ``directory`` and verify all six."""
    directory = Path(directory)
    if os.path.islink(directory) or (directory.exists() and not directory.is_dir()):
        raise ArtifactError(f"{directory}: exists and is not a directory (a symbolic link is refused too)")
    directory.mkdir(parents=True, exist_ok=True)
    problems, present, held = _read_entries(directory, lock)
    if problems:
        raise ArtifactError(
            f"{directory} already holds files that do not match the lock; nothing was downloaded, and the fetch never "
            "overwrites or deletes a file you have (move them away first):\n  " + "\n  ".join(problems)
        )
    missing = [name for name in lock.names if name not in present]
    unpinned = [name for name in lock.missing_hashes]
    if not missing and not unpinned:
        report(f"{directory}: all six files already present and verified; nothing downloaded")
        return verify_artifacts(directory, lock)

    clock = FetchClock.start(limits)
    endpoint = hub_endpoint(endpoint)
    metadata = hub_metadata(lock.repository, lock.revision, unpinned, endpoint, clock) if unpinned else {}
    for name in unpinned:
        if metadata[name].size != lock.file(name).size:
            raise ArtifactError(
                f"{name}: the Hub's metadata says {metadata[name].size:,} bytes at revision {lock.revision}, "
                f"the lock says {lock.file(name).size:,}: the plan and the lock disagree with the Hub"
            )
        if name in held:
            problem = _hub_problem(name, held[name].data, metadata[name])
            if problem:
                raise ArtifactError(f"{directory}: {problem}; nothing was downloaded and the file was left as it is")

    if missing:
        report(
            f"Fetching {len(missing)} of 6 files from {lock.repository} at revision {lock.revision} "
            f"(deadline {limits.deadline_s:g} s)"
        )
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=directory))
    try:
        for name in missing:
            expected = lock.file(name)
            staged = download_file(lock.repository, lock.revision, name, expected.size, staging, endpoint, clock)
            if expected.sha256 is None:
                problem = _hub_problem(name, staged.data, metadata[name])
            elif staged.sha256 != expected.sha256:
                problem = f"{name}: sha256 {staged.sha256}, the lock says {expected.sha256}"
            else:
                problem = None
            if problem:
                raise ArtifactError(f"downloaded {problem}; the file was discarded, nothing from it was kept")
            target = directory / name
            if os.path.lexists(target):
                raise ArtifactError(f"{name}: appeared in {directory} during the fetch; left it untouched")
            os.replace(staging / name, target)
            report(f"  {name}: {expected.size:,} bytes, verified")
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    if unpinned:
        report(
            f"The lock is incomplete: it records no sha256 for {', '.join(unpinned)}. Checked against the Hub's "
            f"metadata for revision {lock.revision}; offline runs check only its size, and the observation never "
            f"reads it. An instructor completes the lock with `residlab pythia pin --revision {lock.revision}`."
        )
    verified = verify_artifacts(directory, lock)
    report(f"{directory}: six files verified ({lock.total_bytes:,} bytes)")
    return verified
