"""The specimen lock: which repository, which immutable revision, which six files, their sizes and hashes.

One JSON file, ``residlab/locks/pythia-14m.lock.json``, is the single source of these pins; the runner
carries a copy of it (written in by ``residlab sync``). Every value records where it came from. Loading
validates the whole file and names the first problem, so a hand-edited lock fails loudly, not later.

Standard library only: the runner's ``--plan`` must work before anything is installed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

# The only files ever downloaded: no .bin weights, no custom code, no other checkpoints or optimizer states.
ALLOWED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
)
LOCK_SCHEMA = 1
REQUIRED_KEYS = ("schema", "repository", "revision", "synthetic", "total_bytes", "files", "libraries")
OPTIONAL_KEYS = ("revision_source", "total_bytes_source", "libraries_source", "also_tested", "also_tested_source")
FILE_KEYS = ("name", "size", "sha256", "source")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$")
LOCK_MAX_BYTES = 1 << 20  # a lock is a few kB; anything larger is not a lock
_READ_CHUNK = 1 << 20


class LockError(ValueError):
    """The lock file is malformed or inconsistent; the message names the problem."""


class UnsafeFileError(OSError):
    """A file the tools were about to read is not a plain, stable regular file of a plausible size."""


@dataclass(frozen=True)
class FileBytes:
    """The bytes of one file, read once, and the identity of the file they came from."""

    data: bytes
    sha256: str
    identity: tuple  # (device, inode, size, mtime_ns, ctime_ns) of the open descriptor

    @property
    def size(self) -> int:
        return len(self.data)


def _identity(status: os.stat_result) -> tuple:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def path_identity(path: Path) -> tuple | None:
    """The identity of whatever ``path`` names now (a link itself, not its target), or None if nothing."""
    try:
        return _identity(os.lstat(path))
    except FileNotFoundError:
        return None


def read_file_bytes(path: Path, max_bytes: int) -> FileBytes:
    """The one rule for every file read from an artifacts directory, the lock included: opened without
    following a symbolic link (and without blocking on a FIFO), a regular file, at most ``max_bytes`` read
    (a larger file is refused from its size, unread), and the descriptor's identity unchanged from before the
    read to after it, also for the path. The caller hashes and uses ``data``: never the path again.

    Raises ``UnsafeFileError`` (FileNotFoundError when absent) with a message that names the file."""
    path = Path(path)
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if not nofollow and os.path.islink(path):  # platforms without O_NOFOLLOW: check first (best effort)
        raise UnsafeFileError(f"{path.name}: is a symbolic link; only regular files are read")
    flags = os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as error:
        if error.errno == errno.ELOOP or os.path.islink(path):
            raise UnsafeFileError(f"{path.name}: is a symbolic link; only regular files are read") from None
        raise UnsafeFileError(f"{path.name}: cannot be opened ({error.strerror})") from None
    try:
        before = os.fstat(descriptor)
        if not stat.S_ISREG(before.st_mode):
            raise UnsafeFileError(f"{path.name}: not a regular file; only regular files are read")
        if before.st_size > max_bytes:
            raise UnsafeFileError(f"{path.name}: {before.st_size:,} bytes, more than the {max_bytes:,} allowed; not read")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(descriptor, min(_READ_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        after = os.fstat(descriptor)
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if _identity(before) != _identity(after) or len(data) != before.st_size:
        raise UnsafeFileError(f"{path.name}: changed while it was being read; nothing from it was used")
    if path_identity(path) != _identity(after):
        raise UnsafeFileError(f"{path.name}: was replaced while it was being read; nothing from it was used")
    return FileBytes(data=data, sha256=hashlib.sha256(data).hexdigest(), identity=_identity(after))


@dataclass(frozen=True)
class LockedFile:
    name: str
    size: int
    sha256: str | None  # None: no trusted record yet; fetch verifies it against the Hub's metadata instead
    source: str


@dataclass(frozen=True)
class Lock:
    repository: str
    revision: str
    files: tuple[LockedFile, ...]  # sorted by name, exactly ALLOWED_FILES
    total_bytes: int
    synthetic: bool
    libraries: dict
    origin: str  # where this lock was read from (a path, or "the runner's embedded copy")
    data: dict  # the validated JSON, unchanged

    def file(self, name: str) -> LockedFile:
        for entry in self.files:
            if entry.name == name:
                return entry
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.files)

    @property
    def missing_hashes(self) -> tuple[str, ...]:
        """Files whose sha256 the lock does not record (the lock is incomplete while this is non-empty)."""
        return tuple(entry.name for entry in self.files if entry.sha256 is None)


def default_lock_path() -> Path:
    """The pinned lock inside the package (meaningless inside a runner, which embeds its copy)."""
    return Path(__file__).resolve().parent.parent / "locks" / "pythia-14m.lock.json"


def _check_text(data: dict, key: str, origin: str) -> None:
    if key in data and not (isinstance(data[key], str) and data[key].strip()):
        raise LockError(f"{origin}: {key} {data[key]!r} must be a non-empty string")


def parse_lock(data: object, origin: str) -> Lock:
    """Validate lock JSON (already parsed) and return a ``Lock``; raise ``LockError`` naming the problem."""
    if not isinstance(data, dict):
        raise LockError(f"{origin}: the lock must be a JSON object")
    unknown = sorted(set(data) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        raise LockError(f"{origin}: unknown key(s) {', '.join(unknown)}")
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise LockError(f"{origin}: missing key(s) {', '.join(missing)}")
    if type(data["schema"]) is not int or data["schema"] != LOCK_SCHEMA:
        raise LockError(f"{origin}: schema {data['schema']!r} is not the supported schema {LOCK_SCHEMA}")
    if not (isinstance(data["repository"], str) and _REPOSITORY.match(data["repository"])):
        raise LockError(f"{origin}: repository {data['repository']!r} is not of the form owner/name")
    if not (isinstance(data["revision"], str) and _HEX40.match(data["revision"])):
        raise LockError(f"{origin}: revision {data['revision']!r} is not an immutable 40-hex commit id")
    if not isinstance(data["synthetic"], bool):
        raise LockError(f"{origin}: synthetic {data['synthetic']!r} must be true or false")
    for key in ("revision_source", "total_bytes_source", "libraries_source", "also_tested_source"):
        _check_text(data, key, origin)
    for key in ("libraries", "also_tested"):
        if key in data and not (
            isinstance(data[key], dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in data[key].items())
        ):
            raise LockError(f"{origin}: {key} {data[key]!r} must map library names to version strings")

    entries = data["files"]
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise LockError(f"{origin}: files must be a list of objects")
    files = []
    for index, entry in enumerate(entries):
        name = entry.get("name")
        if not isinstance(name, str):
            raise LockError(f"{origin}: files[{index}]: name {name!r} is not a string")
        where = f"{origin}: file {name!r}"
        extra = sorted(set(entry) - set(FILE_KEYS))
        absent = [key for key in FILE_KEYS if key not in entry]
        if extra:
            raise LockError(f"{where}: unknown key(s) {', '.join(extra)}")
        if absent:
            raise LockError(f"{where}: missing key(s) {', '.join(absent)}")
        size = entry["size"]
        if not (isinstance(size, int) and not isinstance(size, bool) and size > 0):
            raise LockError(f"{where}: size {size!r} is not a positive integer")
        digest = entry["sha256"]
        if digest is not None and not (isinstance(digest, str) and _HEX64.match(digest)):
            raise LockError(f"{where}: sha256 {digest!r} is neither 64 lowercase hex digits nor null")
        if not (isinstance(entry["source"], str) and entry["source"].strip()):
            raise LockError(f"{where}: source must say where the size and hash came from (got {entry['source']!r})")
        files.append(LockedFile(name=name, size=size, sha256=digest, source=entry["source"]))

    names = [entry.name for entry in files]
    if sorted(names) != sorted(ALLOWED_FILES) or len(set(names)) != len(names):
        unexpected = sorted(set(names) - set(ALLOWED_FILES))
        absent = sorted(set(ALLOWED_FILES) - set(names))
        duplicated = sorted({name for name in names if names.count(name) > 1})
        details = "; ".join(
            part
            for part in (
                f"not allowed: {', '.join(map(str, unexpected))}" if unexpected else "",
                f"missing: {', '.join(absent)}" if absent else "",
                f"listed twice: {', '.join(duplicated)}" if duplicated else "",
            )
            if part
        )
        raise LockError(f"{origin}: files must be exactly the six allowed names ({details})")

    total = data["total_bytes"]
    if not (isinstance(total, int) and not isinstance(total, bool)):
        raise LockError(f"{origin}: total_bytes {total!r} is not an integer")
    summed = sum(entry.size for entry in files)
    if total != summed:
        raise LockError(
            f"{origin}: the plan and the lock disagree: total_bytes is {total:,} "
            f"but the six file sizes add up to {summed:,}"
        )
    return Lock(
        repository=data["repository"],
        revision=data["revision"],
        files=tuple(sorted(files, key=lambda entry: entry.name)),
        total_bytes=total,
        synthetic=data["synthetic"],
        libraries=dict(data["libraries"]),
        origin=origin,
        data=data,
    )


def embedded_lock_json() -> str | None:
    """The pinned lock a runner carries, or None in the package.

    ``residlab sync`` writes the lock into a runner as its ``EMBEDDED_LOCK_JSON`` data section, near the end of
    the file (see ``residlab/build/runners.py``); the package never defines that name.
    """
    return globals().get("EMBEDDED_LOCK_JSON")


def load_lock(path: Path | str | None = None) -> Lock:
    """Read and validate a lock. ``None`` means the pinned one (in a runner: its embedded copy)."""
    embedded = embedded_lock_json() if path is None else None
    if embedded is not None:
        text, origin = embedded, "the runner's embedded lock"
    else:
        lock_path = default_lock_path() if path is None else Path(path)
        origin = str(lock_path)
        try:
            text = read_file_bytes(lock_path, LOCK_MAX_BYTES).data
        except FileNotFoundError:
            raise LockError(f"{origin}: no such lock file") from None
        except UnsafeFileError as error:
            raise LockError(f"{origin}: {error}") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise LockError(f"{origin}: not valid JSON ({error})") from None
    return parse_lock(data, origin)
