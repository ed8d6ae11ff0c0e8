"""Each published runner works alone, with nothing but what a learner installs.

`make test` builds `.venv-runner` from `assets/labs/residual-requirements.txt` only (no residlab, no test
tools) and names its interpreter in RESIDLAB_RUNNER_PYTHON. Here each runner that needs more than the standard
library is copied into an empty folder and run with that interpreter, and its results are compared with what the
package computes in-process. The toy runner needs only the standard library: ``test_toy_runner.py`` runs it with
no site-packages at all. The lesson's, the paper lab's, the induction model's and the audit runner are compared with
the package where the pages run them, in the environment the pages build (tests/site/test_page_commands.py: the same
training, description and packets as the render's; the same printed lines and packets as the package's commands), and
so is the observation runner's fetch and offline run (the same observations, on the fake hub's specimen).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LABS = ROOT / "assets" / "labs"
LEARNER_PYTHON = os.environ.get("RESIDLAB_RUNNER_PYTHON")

IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
MISSING = "RESIDLAB_RUNNER_PYTHON is unset: `make test` builds the learners' environment and sets it"


@pytest.fixture(autouse=True)
def learner_python():
    """Skip outside CI when the learners' environment was not built; in CI (CI=true) that is a failure."""
    if not LEARNER_PYTHON:
        if IN_CI:
            pytest.fail(f"{MISSING}; in CI these tests must run, never skip")
        pytest.skip(MISSING)


def run_alone(runner: str, arguments: list[str], folder: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    script = shutil.copyfile(LABS / runner, folder / runner)
    return subprocess.run(
        [LEARNER_PYTHON, "-I", str(script), *arguments], cwd=folder, env=env, capture_output=True, text=True, timeout=600
    )


def test_learner_environment_has_only_the_pinned_libraries():
    probe = subprocess.run(
        [LEARNER_PYTHON, "-I", "-c", "import importlib.util as u; print([m for m in ('residlab', 'pytest', 'matplotlib') if u.find_spec(m)])"],
        capture_output=True, text=True, check=True,
    )
    assert probe.stdout.strip() == "[]"


def test_lesson_runner_alone_refuses_a_folder_that_is_not_empty_in_one_line(tmp_path):
    kept = tmp_path / "copy-model-audit-packet"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    refused = run_alone("residual_stream_lab.py", ["packet", "copy-model-audit-packet"], tmp_path)
    assert refused.returncode == 1 and "not empty" in refused.stderr and refused.stderr.count("\n") == 1
    assert [path.name for path in kept.iterdir()] == ["notes.txt"]
