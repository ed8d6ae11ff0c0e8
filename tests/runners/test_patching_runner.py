"""Lab 07's runner, ``assets/labs/patching_methods.py``, copied alone into an empty folder, refuses bad input in one
line before it computes anything. The model is a random-weight one of the recipe's shape (seed 4), saved as
``residlab induction train`` saves the trained one. That the runner writes the report the page shows is checked
where a learner runs it: tests/site/test_page_commands.py runs Lab 07's command as written and compares the report
with the one the render computed; its printed verdict words are checked against the page's in
tests/site/test_lab07.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LABS = Path(__file__).resolve().parents[2] / "assets" / "labs"
RUNNER = "patching_methods.py"
LEARNER_PYTHON = os.environ.get("RESIDLAB_RUNNER_PYTHON")
PYTHON = LEARNER_PYTHON or sys.executable


@pytest.fixture(scope="module")
def model_directory(tmp_path_factory):
    from residlab.course.models.induction.recipe import saved_model_files, new_model

    directory = tmp_path_factory.mktemp("model") / "induction-model"
    directory.mkdir()
    for name, data in saved_model_files(new_model(4).eval()).items():
        (directory / name).write_bytes(data)
    return directory


def run_alone(python: str, folder: Path, arguments: list[str]) -> subprocess.CompletedProcess:
    script = shutil.copyfile(LABS / RUNNER, folder / RUNNER)
    return subprocess.run([python, "-I", str(script), *arguments], cwd=folder, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def test_the_runner_refuses_an_existing_output_in_one_line(tmp_path, model_directory):
    (tmp_path / "report.json").write_text("kept")
    completed = run_alone(PYTHON, tmp_path, ["--model", str(model_directory), "--output", "report.json"])
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr == "patching_methods: report.json exists; name a new file\n"
    assert (tmp_path / "report.json").read_text() == "kept"


def test_the_runner_refuses_a_folder_that_is_no_model_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    completed = run_alone(PYTHON, tmp_path, ["--model", "empty"])
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr == "patching_methods: empty holds no config.json: not a model directory\n"


def test_the_runner_rejects_an_unknown_option(tmp_path):
    completed = run_alone(PYTHON, tmp_path, ["--no-such-option"])
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.splitlines()[-1].endswith(": error: unrecognized arguments: --no-such-option")
