"""The one output rule: results go into a new name or an empty real directory, all of them or none.

``check_output_directory`` is called before any model work and refuses, touching nothing, every output path that
is not a new name or an empty real directory: a file, a non-empty directory, a symbolic link (to anything, or
dangling), a path with a file among its parents, a directory whose nearest existing parent is read-only.
``write_directory`` writes the files into a fresh hidden sibling and renames it into place, so a failure leaves
no half-written result and a run never replaces anything but an empty directory.

Standard library only.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from pathlib import Path


class OutputDirectoryError(RuntimeError):
    """The output directory is unusable; nothing was written. The message says why and what to do."""


def _writable(directory: Path) -> bool:
    """Write permission for this process, and at least one write bit (root passes os.access everywhere)."""
    return os.access(directory, os.W_OK | os.X_OK) and bool(os.stat(directory).st_mode & 0o222)


def check_output_directory(output_dir: Path) -> Path:
    """``output_dir`` if results may be written there, else an ``OutputDirectoryError``; creates nothing."""
    output_dir = Path(output_dir)
    try:
        status = os.lstat(output_dir)
    except (FileNotFoundError, NotADirectoryError):
        parent = Path(os.path.abspath(output_dir)).parent
        existing = next(above for above in (parent, *parent.parents) if os.path.lexists(above))
        if not existing.is_dir():
            raise OutputDirectoryError(f"{output_dir}: {existing} is not a directory") from None
        if not _writable(existing):
            raise OutputDirectoryError(
                f"{output_dir}: {existing} is read-only; choose an output directory where you can write"
            ) from None
        return output_dir
    except OSError as error:
        raise OutputDirectoryError(f"{output_dir}: cannot be inspected ({error.strerror})") from None
    if stat.S_ISLNK(status.st_mode):
        raise OutputDirectoryError(
            f"{output_dir} is a symbolic link (to {os.readlink(output_dir)}); results are written only into a new "
            "name or an empty directory, never through a link: choose a new output directory"
        )
    if not stat.S_ISDIR(status.st_mode):
        raise OutputDirectoryError(f"{output_dir} exists and is not a directory; choose a new output directory")
    with os.scandir(output_dir) as entries:
        if next(entries, None) is not None:
            raise OutputDirectoryError(
                f"{output_dir} is not empty; results are never overwritten: choose a new output directory"
            )
    if not _writable(Path(os.path.abspath(output_dir)).parent):
        raise OutputDirectoryError(
            f"{output_dir}: its parent is read-only; choose an output directory where you can write"
        )
    return output_dir


def _place(staging: Path, output_dir: Path) -> None:
    """Rename the finished staging directory to ``output_dir``: atomic, and it never replaces anything but an
    empty directory. Losing a race to another run is a clear error, never a traceback."""
    try:
        os.rename(staging, output_dir)  # POSIX: replaces an empty directory, fails on anything else
        return
    except OSError as first:
        error = first
    try:  # Windows refuses to rename onto any existing directory: remove an empty one, then rename
        check_output_directory(output_dir)
        if os.path.lexists(output_dir):
            os.rmdir(output_dir)
        os.rename(staging, output_dir)
        return
    except OutputDirectoryError as refused:
        reason = str(refused)
    except OSError as second:
        reason = f"{output_dir}: {second.strerror or error.strerror}"
    raise OutputDirectoryError(reason + DISCARDED)


# The caller checked the output before its work: a refusal at writing time means something wrote there meanwhile.
DISCARDED = " (another run wrote there first?); the results of this run were discarded and nothing there changed"


def write_directory(output_dir: Path, files: dict[str, bytes]) -> Path:
    """Write ``files`` (name -> bytes) as the whole content of ``output_dir``, atomically. Call
    ``check_output_directory`` before the work whose results these are; this checks again before writing."""
    try:
        output_dir = check_output_directory(output_dir)
    except OutputDirectoryError as refused:
        raise OutputDirectoryError(f"{refused}{DISCARDED}") from None
    parent = Path(os.path.abspath(output_dir)).parent
    parent.mkdir(parents=True, exist_ok=True)
    # A fresh hidden sibling (mkdir honours the umask, unlike mkdtemp's private 0700 directory).
    staging = parent / f".{output_dir.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        _place(staging, output_dir)  # refuses, naming the cause, if another run got there meanwhile
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output_dir
