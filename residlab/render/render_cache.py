"""What several pages compute, computed once per render: a cache on disk, on whenever Quarto executes a page of this
project (``quarto render``, ``quarto preview`` and ``residlab site render`` alike: Quarto sets
``QUARTO_PROJECT_ROOT`` for the kernels it starts), off everywhere else (tests, the command line, the runners:
every call computes).

An entry's key is the freeze guard's digest of the execution inputs (``execution_inputs_digest``: the package, the
committed capture, the requirements, ``_quarto.yml`` and the partials; the one digest that also decides whether
frozen pages are current), the value's name and its arguments. Entries live in ``.residlab-render-cache/`` (ignored
by git), which the freeze guard empties with ``_freeze/`` whenever the digest changes. Each entry has one lock file:
the first process to ask for a value takes its lock, computes the value with the very function a runner bundles,
stores it and lets go; another asking meanwhile waits on that lock (at most ``LOCK_WAIT_SECONDS``; a lock dies with
the process that held it), then reads. Every lookup appends one line to ``uses.log`` (name, entry, read or
computed, process id), so a test can show that each value was computed once.

Standard library only: the freeze guard imports the digest from here when Quarto runs it as a script.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import tempfile
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # no POSIX locks (Windows): two pages may compute one value; each stores it whole
    fcntl = None

RENDER_CACHE_DIR = ".residlab-render-cache"
PROJECT_ROOT_ENVIRONMENT = "QUARTO_PROJECT_ROOT"  # set by Quarto for the kernels of a project's pages
USES_LOG = "uses.log"
LOCK_WAIT_SECONDS = 600.0
_POLL_SECONDS = 0.05
# What page cells read besides the page itself, relative to the project root; and the included pages (a change to
# one must re-execute the page that includes it), at the depths the site's pages live.
EXECUTION_INPUTS = ("residlab", "assets/captures", "requirements.txt", "_quarto.yml")
PARTIALS = ("_*.qmd", "*/_*.qmd")
_SKIPPED_PARTS = {"__pycache__"}


def execution_inputs_digest(root: Path) -> str:
    """SHA-256 over every execution input under ``root``: relative path and the SHA-256 of its bytes, bytecode
    left out."""
    digest = hashlib.sha256()
    files = []
    for name in EXECUTION_INPUTS:
        path = root / name
        files += sorted(path.rglob("*")) if path.is_dir() else [path]
    files += sorted(path for pattern in PARTIALS for path in root.glob(pattern))
    for path in files:
        if path.is_file() and not _SKIPPED_PARTS.intersection(path.relative_to(root).parts) and path.suffix != ".pyc":
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@functools.lru_cache(maxsize=4)
def _digest_of(root: str) -> str:
    return execution_inputs_digest(Path(root))


def render_cache_directory() -> Path | None:
    """This render's cache folder, or None when no Quarto render of a project is executing this code."""
    root = os.environ.get(PROJECT_ROOT_ENVIRONMENT)
    if not root or not (Path(root) / "_quarto.yml").is_file():
        return None
    return Path(root) / RENDER_CACHE_DIR


def entry_path(folder: Path, name: str, arguments: tuple) -> Path:
    key = hashlib.sha256(f"{name}\n{arguments!r}".encode()).hexdigest()[:16]
    return folder / _digest_of(str(folder.parent))[:16] / f"{name}-{key}.pickle"


def write_atomically(path: Path, data: bytes) -> None:
    """Whole or absent: a reader never sees half a file (a temporary file in the same folder, then a rename)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
    with os.fdopen(handle, "wb") as file:
        file.write(data)
    os.replace(temporary, path)


def _note_use(folder: Path, name: str, path: Path, how: str) -> None:
    line = json.dumps({"name": name, "entry": path.name, "how": how, "pid": os.getpid()}) + "\n"
    with open(folder / USES_LOG, "a", encoding="utf-8") as log:  # one short append per lookup
        log.write(line)


def read_uses(folder: Path) -> list[dict]:
    log = folder / USES_LOG
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.is_file() else []


def _lock(lock_file, limit: float) -> bool:
    """Take the entry's lock, waiting at most ``limit`` seconds for the process computing it; False if it did not
    come (the caller then computes the value itself)."""
    if fcntl is None:
        return False
    deadline = time.monotonic() + limit
    while True:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)


def render_cached(name: str, arguments: tuple, compute, encode=lambda value: value, decode=lambda stored: stored,
                  wait_limit: float = LOCK_WAIT_SECONDS):
    """``compute()``, or what an earlier page (or the prefetch) of this render stored for the same name, arguments
    and execution inputs. ``encode`` turns the value into what is stored (plain data and tensors), ``decode`` turns
    that back."""
    folder = render_cache_directory()
    if folder is None:
        return compute()
    path = entry_path(folder, name, arguments)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock_file:  # held until the entry is stored: others wait, then read
        _lock(lock_file, wait_limit)
        if path.is_file():
            # Written by this render's own pages or prefetch into the project's ignored cache folder, never elsewhere.
            value = decode(pickle.loads(path.read_bytes()))
            _note_use(folder, name, path, "read")
            return value
        value = compute()
        write_atomically(path, pickle.dumps(encode(value), protocol=pickle.HIGHEST_PROTOCOL))
        _note_use(folder, name, path, "computed")
        return value
