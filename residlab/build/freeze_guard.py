"""Quarto pre-render step: forget frozen page results when anything a page's cells read has changed, and on a
whole-site render in which every page executes, start the prefetch of the values several pages share.

``_quarto.yml`` sets ``execute: freeze: auto``, so Quarto re-executes a page only when that page's own
source changed. A page's numbers also depend on the ``residlab`` package, the pins and the committed
capture, which Quarto cannot see. This script hashes those inputs (``execution_inputs_digest``, the render cache's
key too) and, when the hash differs from the one recorded beside the frozen results, deletes ``_freeze/`` so that
every page executes afresh, and with it the render cache (``.residlab-render-cache/``, what several pages share:
``residlab/render/render_cache.py``).

Quarto runs it with whatever Python it found, before any page imports residlab, for ``quarto render`` and
``residlab site render`` alike; it reads the project's own ``residlab`` (standard library modules only).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

if __name__ == "__main__":  # run by Quarto as a script: the residlab beside it, whatever Python Quarto found
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from residlab.render.render_cache import RENDER_CACHE_DIR, execution_inputs_digest  # noqa: E402

FREEZE_DIR = "_freeze"
STAMP = "residlab-execution-inputs.sha256"


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


def prefetch_wanted(root: Path, environ) -> bool:
    """Whether to prefetch: a whole-site render (Quarto sets ``QUARTO_PROJECT_RENDER_ALL`` for its pre-render
    step) in which every page executes."""
    return bool(environ.get("QUARTO_PROJECT_RENDER_ALL")) and nothing_frozen(root)


if __name__ == "__main__":
    root = Path(os.environ.get("QUARTO_PROJECT_DIR") or Path(__file__).resolve().parents[2])
    print(f"residlab freeze guard: {guard(root)}", file=sys.stderr)
    if prefetch_wanted(root, os.environ):
        from residlab.course.shared import start_prefetch

        start_prefetch(root, render=os.getppid())  # Quarto, which runs this script
