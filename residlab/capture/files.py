"""The one rule for reading a file the tools did not write themselves (an artifact, the lock, an audit record):
opened without following a link and without blocking on a FIFO, a regular file, read to a bound fixed before
reading, and unchanged from before the read to after it. The caller uses the bytes returned, never the path again.

Standard library only.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

_READ_CHUNK = 1 << 20


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
