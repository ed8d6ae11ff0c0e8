"""Lab 07's runner, ``assets/labs/patching_methods.py``, copied alone into an empty folder: on a saved model
directory it writes the report the package computes in-process (``residlab.course.lab07.lab.run_lab``) and prints
the package's summary, and it refuses bad input in one line. The model is a random-weight one of the recipe's
shape (seed 4), saved as ``residlab induction train`` saves the trained one: the behaviour is what is compared,
and an untrained model is quick.

In the learners' own environment when ``make test`` built it (RESIDLAB_RUNNER_PYTHON: no residlab, no test tools),
else with this environment's interpreter; ``-I`` either way, the runner alone in its folder. (One interpreter: the
report takes a minute of CPU, and both environments hold the same torch.)"""

from __future__ import annotations

import importlib.util
import json
import os
import re
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


@pytest.fixture(scope="module")
def package_report(model_directory):
    from residlab.course.lab07.lab import run_lab, summary_lines
    from residlab.course.models.induction.recipe import load_induction_model

    report = run_lab(load_induction_model(model_directory))
    return json.loads(json.dumps(report, allow_nan=False)), summary_lines(report)


def run_alone(python: str, folder: Path, arguments: list[str]) -> subprocess.CompletedProcess:
    script = shutil.copyfile(LABS / RUNNER, folder / RUNNER)
    return subprocess.run([python, "-I", str(script), *arguments], cwd=folder, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def test_the_runner_writes_the_report_the_package_computes(tmp_path, model_directory, package_report):
    report, lines = package_report
    completed = run_alone(PYTHON, tmp_path, ["--model", str(model_directory), "--output", "report.json"])
    assert completed.returncode == 0, completed.stderr
    assert json.loads((tmp_path / "report.json").read_text()) == report
    assert completed.stdout.splitlines() == [*lines, "wrote report.json"]


def test_the_runner_refuses_an_existing_output_in_one_line(tmp_path, model_directory):
    (tmp_path / "report.json").write_text("kept")
    completed = run_alone(sys.executable, tmp_path, ["--model", str(model_directory), "--output", "report.json"])
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr == "patching_methods: report.json exists; name a new file\n"
    assert (tmp_path / "report.json").read_text() == "kept"


def test_the_runner_refuses_a_folder_that_is_no_model_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    completed = run_alone(sys.executable, tmp_path, ["--model", "empty"])
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr == "patching_methods: empty holds no config.json: not a model directory\n"


def test_the_runner_rejects_an_unknown_option(tmp_path):
    completed = run_alone(sys.executable, tmp_path, ["--no-such-option"])
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.splitlines()[-1].endswith(": error: unrecognized arguments: --no-such-option")


def load_runner_module():
    """The downloaded runner imported as a module (its ``__main__`` block does not run): the code a learner runs."""
    spec = importlib.util.spec_from_file_location("patching_methods_download", LABS / RUNNER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def test_the_runner_prints_the_verdict_words_the_page_shows_for_each_cell(package_report):
    """Lab 07's sentences name each cell's verdicts (per design, method and head kind, over the pairs) in the words
    of the report's one table; the download prints the same words for the same cells, "not testable" included."""
    from residlab.course.lab07 import head_sentences, sentences

    runner = load_runner_module()
    report = package_report[0]
    assert runner.VERDICT_WORDS == report["verdict_words"]  # the download's table is the package's
    words = set(report["verdict_words"].values())
    printed, design = {}, None
    for line in runner.summary_lines(report):
        header = re.match(r"^(\w+): worked example gap", line)
        cell = re.match(r"^  (\w+), (\w+) heads\b.*?: (.*)$", line)
        if header:
            design = header[1]
        elif cell:
            printed[(design, cell[1], cell[2])] = sorted(word for word in words if word in cell[3])
    page = {(name, method, kind): sorted(word for word in words if word in head_sentences.kind_sentence(report, name, method, kind))
            for name, method, kind in printed}  # fmt: skip
    assert printed and printed == page
    assert [report["verdict_words"]["not_testable"]] in printed.values()  # the cells a design cannot test, too
    # and why not, in the one function's words, on the page and in the download alike
    from residlab.course.lab07.designs import UNTESTABLE, not_testable_reason

    lines = runner.summary_lines(report)
    for name, kinds in UNTESTABLE.items():
        for kind in kinds:
            reason = not_testable_reason(name, kind)
            assert reason and reason in head_sentences.kind_sentence(report, name, "denoising", kind)
            assert any(line.endswith(f"denoising, {kind} heads: not testable: {reason}") for line in lines)
