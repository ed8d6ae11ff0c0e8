"""Quarto pre-render step: forget frozen page results when anything a page's cells read has changed.

``_quarto.yml`` sets ``execute: freeze: auto``, so Quarto re-executes a page only when that page's own
source changed. A page's numbers also depend on the ``residlab`` package, the pins and the committed
capture, which Quarto cannot see. This script hashes those inputs and, when the hash differs from the one
recorded beside the frozen results, deletes ``_freeze/`` so that every page executes afresh, and with it the
render cache (``.residlab-render-cache/``, what several pages share: ``residlab/course/render/render_cache.py``).

Standard library only: Quarto runs it with whatever Python it found before any page imports residlab.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

# What page cells read besides the page itself, relative to the project root.
EXECUTION_INPUTS = ("residlab", "assets/captures", "requirements.txt", "_quarto.yml")
PARTIALS = "_*.qmd"  # included pages: a change to one must re-execute the page that includes it
FREEZE_DIR = "_freeze"
RENDER_CACHE_DIR = ".residlab-render-cache"
STAMP = "residlab-execution-inputs.sha256"
SKIPPED_PARTS = {"__pycache__"}


def execution_inputs_digest(root: Path) -> str:
    digest = hashlib.sha256()
    files = []
    for name in EXECUTION_INPUTS:
        path = root / name
        files += sorted(path.rglob("*")) if path.is_dir() else [path]
    files += sorted(root.rglob(PARTIALS))
    for path in files:
        if path.is_file() and not SKIPPED_PARTS.intersection(path.relative_to(root).parts) and path.suffix != ".pyc":
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def guard(root: Path) -> str:
    """Delete stale frozen results; returns what was done, for the render log."""
    freeze = root / FREEZE_DIR
    stamp = freeze / STAMP
    current = execution_inputs_digest(root)
    recorded = stamp.read_text(encoding="utf-8").strip() if stamp.is_file() else None
    if recorded == current:
        return "frozen results are current"
    for stale in (freeze, root / RENDER_CACHE_DIR):
        if stale.exists():
            shutil.rmtree(stale)
    freeze.mkdir()
    stamp.write_text(current + "\n", encoding="utf-8")
    return "execution inputs changed: every page executes" if recorded else "no frozen results: every page executes"


def nothing_frozen(root: Path) -> bool:
    """Whether no page has a frozen result (the freeze folder holds at most the stamp): every page will execute."""
    freeze = root / FREEZE_DIR
    return not freeze.is_dir() or all(path.name == STAMP for path in freeze.iterdir())


if __name__ == "__main__":
    root = Path(os.environ.get("QUARTO_PROJECT_DIR") or Path(__file__).resolve().parents[2])
    print(f"residlab freeze guard: {guard(root)}", file=sys.stderr)
