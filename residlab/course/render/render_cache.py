"""What several pages compute, computed once per render: a content-addressed cache on disk, active only while
``residlab site render`` renders (it sets ``RESIDLAB_RENDER_CACHE`` to the project's ``.residlab-render-cache/``,
which the freeze guard empties with ``_freeze/`` whenever the execution inputs change, and ``make render`` and
every clean copy start without).

Each entry's key is the SHA-256 of everything its value depends on: every file of the ``residlab`` package
(code, lock, data), the Python version, the installed versions of the numeric libraries, the value's name and
its arguments. A change to any of them gives a new key, so an entry is never reused across a source change. The
value is computed by the very function a runner bundles; the cache only spares the next page computing it again.
Without the variable (tests, the command line, ``quarto render`` run by hand) every call computes. No bundled
module imports this one: the runners compute, they never cache (``residlab/course/render/shared.py`` is the layer
pages call).

A fresh render also *prefetches*: ``residlab site render`` starts ``python -m residlab.course.render.shared`` beside
Quarto, which computes the shared values in the order pages first need them while Quarto renders the pages
before. Its progress is ``prefetch.json`` in the cache folder (its process id, the names it will compute, those
it has finished or failed). A page that asks for a value the prefetch has planned but not yet finished waits for
it, polling, while that process lives, at most ``PREFETCH_WAIT_SECONDS``; then it reads the entry, or computes
the value itself if there is none. Every lookup appends a line to ``uses.log`` (name, key, hit or computed,
process id), so a test can show that each prefetched value was read and none computed twice.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import pickle
import platform
import tempfile
import time
from pathlib import Path

RENDER_CACHE_ENVIRONMENT = "RESIDLAB_RENDER_CACHE"
PREFETCH_STATUS = "prefetch.json"
USES_LOG = "uses.log"
PREFETCH_WAIT_SECONDS = 300.0
_POLL_SECONDS = 0.05
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_DIGESTED_LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors", "numpy")


@functools.lru_cache(maxsize=1)
def render_source_digest() -> str:
    """SHA-256 over every file of the residlab package (relative path and bytes; bytecode left out), the Python
    version and the installed versions of ``_DIGESTED_LIBRARIES``."""
    digest = hashlib.sha256(f"python {platform.python_version()}\n".encode())
    for name in _DIGESTED_LIBRARIES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name} {version}\n".encode())
    for path in sorted(_PACKAGE_ROOT.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(f"{path.relative_to(_PACKAGE_ROOT).as_posix()}\n{path.stat().st_size}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def render_cache_directory() -> Path | None:
    """The render's cache folder, or None when not rendering."""
    folder = os.environ.get(RENDER_CACHE_ENVIRONMENT)
    return Path(folder) if folder else None


def entry_path(folder: Path, name: str, arguments: tuple) -> Path:
    key = hashlib.sha256(f"{render_source_digest()}\n{name}\n{arguments!r}".encode()).hexdigest()[:32]
    return folder / f"{render_source_digest()[:16]}-{name}-{key}.pickle"


def write_atomically(path: Path, data: bytes) -> None:
    """Whole or absent: a reader never sees half a file (a temporary file in the same folder, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temporary, path)


def read_prefetch_status(folder: Path) -> dict | None:
    """The prefetch's progress for this render's sources, or None (no prefetch, or one of other sources)."""
    try:
        status = json.loads((folder / PREFETCH_STATUS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return status if status.get("source") == render_source_digest() else None


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def prefetch_pending(folder: Path, name: str) -> bool:
    """Whether a live prefetch of this render has planned ``name`` and not yet finished (or failed) it."""
    status = read_prefetch_status(folder)
    if status is None or name not in status["planned"]:
        return False
    if name in status["finished"] or name in status["failed"] or status.get("exited"):
        return False
    pid = int(status["pid"])
    return pid != os.getpid() and _process_alive(pid)  # the prefetch itself computes what it has planned


def _wait_for_prefetch(folder: Path, name: str, path: Path, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not path.is_file() and prefetch_pending(folder, name) and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)


def _note_use(folder: Path, name: str, path: Path, how: str) -> None:
    line = json.dumps({"name": name, "entry": path.name, "how": how, "pid": os.getpid()}) + "\n"
    with open(folder / USES_LOG, "a", encoding="utf-8") as log:  # one short append per lookup
        log.write(line)


def read_uses(folder: Path) -> list[dict]:
    log = folder / USES_LOG
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.is_file() else []


def render_cached(name: str, arguments: tuple, compute, encode=lambda value: value, decode=lambda stored: stored,
                  wait_limit: float = PREFETCH_WAIT_SECONDS):
    """``compute()``, or what an earlier page (or the prefetch) of this render stored for the same name, arguments
    and sources. ``encode`` turns the value into what is stored (plain data and tensors), ``decode`` turns that
    back."""
    folder = render_cache_directory()
    if folder is None:
        return compute()
    path = entry_path(folder, name, arguments)
    if not path.is_file():
        _wait_for_prefetch(folder, name, path, wait_limit)
    if path.is_file():
        # Written by this render's own pages or prefetch into the project's ignored cache folder, never elsewhere.
        value = decode(pickle.loads(path.read_bytes()))
        _note_use(folder, name, path, "read")
        return value
    value = compute()
    write_atomically(path, pickle.dumps(encode(value), protocol=pickle.HIGHEST_PROTOCOL))
    _note_use(folder, name, path, "computed")
    return value
