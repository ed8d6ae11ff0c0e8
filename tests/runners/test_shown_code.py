"""Every name a page's shown code imports from a download is in that download.

The registry (``residlab/course/pages.py``, ``ShownCode``) lists, per page, the runner a shown cell imports, the
alias it binds and the names it uses; ``residlab site check`` holds the page's cell to that list. Here each runner
is copied alone into an empty folder and imported there, as a learner's copy of the cell imports it, by the
learners' own environment (RESIDLAB_RUNNER_PYTHON, which ``make test`` builds from what learners install), and
every listed name must be found in it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from residlab.course import downloads, pages

ROOT = Path(__file__).resolve().parents[2]
LEARNER_PYTHON = os.environ.get("RESIDLAB_RUNNER_PYTHON")
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
MISSING = "RESIDLAB_RUNNER_PYTHON is unset: `make test` builds the learners' environment and sets it"
# Imports the module named first from the folder it runs in and prints each following name the module lacks.
PROBE = ("import importlib, sys; sys.path.insert(0, '.'); module = importlib.import_module(sys.argv[1]); "
         "print(' '.join(name for name in sys.argv[2:] if not hasattr(module, name)))")


def missing_names(python: str, folder: Path, shown: pages.ShownCode) -> list[str]:
    """The names ``shown`` lists that its runner, alone in ``folder``, does not define (its import must succeed)."""
    shutil.copyfile(ROOT / downloads.runner_named(shown.runner).path, folder / shown.runner)
    completed = subprocess.run([python, "-I", "-c", PROBE, shown.module, *shown.names], cwd=folder,
                               capture_output=True, text=True, timeout=300)  # fmt: skip
    assert completed.returncode == 0, f"import {shown.module} failed:\n{completed.stderr}"
    return completed.stdout.split()


@pytest.mark.parametrize(("family", "shown"), downloads.shown_code(),
                         ids=lambda value: value.page if isinstance(value, pages.PageFamily) else value.runner)
def test_every_name_a_shown_cell_imports_is_in_its_download(tmp_path, family, shown):
    if not LEARNER_PYTHON:
        if IN_CI:
            pytest.fail(f"{MISSING}; in CI this test must run, never skip")
        pytest.skip(MISSING)
    missing = missing_names(LEARNER_PYTHON, tmp_path, shown)
    assert missing == [], f"{family.page} shows {shown.alias}.{{{', '.join(missing)}}}, which {shown.runner} lacks"


def test_the_registry_lists_shown_code():
    """The check above has something to check: Lab 04 Part 5's and Lab 05's shown cells run from downloads."""
    assert {family.page for family, _ in downloads.shown_code()} >= {"labs/04-read-transformer-paper.qmd",
                                                                 "labs/05-trace-residual-stream.qmd"}
