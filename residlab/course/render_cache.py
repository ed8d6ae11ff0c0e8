"""What several pages compute, computed once per render: a content-addressed cache on disk, active only while
``residlab site render`` renders (it sets ``RESIDLAB_RENDER_CACHE`` to the project's ``.residlab-render-cache/``,
which the freeze guard empties with ``_freeze/`` whenever the execution inputs change, and ``make render`` and
every clean copy start without).

Each entry's key is the SHA-256 of everything its value depends on: every file of the ``residlab`` package
(code, lock, data), the Python version, the installed versions of the numeric libraries, the function's name and
its arguments. A change to any of them gives a new key, so an entry is never reused across a source change. The
value is computed by the very function a page would call; the cache only spares the next page computing it again.
Without the variable (tests, the command line, ``quarto render`` run by hand), and inside a bundled runner,
every call computes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import pickle
import platform
import tempfile
from pathlib import Path

RENDER_CACHE_ENVIRONMENT = "RESIDLAB_RENDER_CACHE"
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent
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
    """The render's cache folder, or None: not rendering, or running as a bundled runner (``__main__``)."""
    folder = os.environ.get(RENDER_CACHE_ENVIRONMENT)
    if not folder or __name__ != "residlab.course.render_cache":
        return None
    return Path(folder)


def _entry_prefix() -> str:
    return render_source_digest()[:16] + "-"


def render_cached(name: str, arguments: tuple, compute, encode=lambda value: value, decode=lambda stored: stored):
    """``compute()``, or what an earlier page of this render stored for the same name, arguments and sources.
    ``encode`` turns the value into what is stored (plain data and tensors), ``decode`` turns that back."""
    folder = render_cache_directory()
    if folder is None:
        return compute()
    key = hashlib.sha256(f"{render_source_digest()}\n{name}\n{arguments!r}".encode()).hexdigest()[:32]
    path = folder / f"{_entry_prefix()}{name}-{key}.pickle"
    if path.is_file():
        # Written by this render's own pages into the project's ignored cache folder, never read from elsewhere.
        return decode(pickle.loads(path.read_bytes()))
    value = compute()
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".partial-")
    with os.fdopen(handle, "wb") as file:  # whole or absent: a page never reads half an entry
        pickle.dump(encode(value), file, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(temporary, path)
    return value

