"""Lab 07's runner, ``assets/labs/patching_methods.py``, copied alone into an empty folder: on a saved model
directory it writes the report the package computes in-process (``residlab.course.lab07.lab.run_lab``) and prints
the package's summary, and it refuses bad input in one line. The model is a random-weight one of the recipe's
shape (seed 4), saved as ``residlab induction train`` saves the trained one: the behaviour is what is compared,
and an untrained model is quick.

With the interpreter of this environment (``-I``, the runner alone in its folder), and with the learners' own
environment when ``make test`` built it (RESIDLAB_RUNNER_PYTHON: no residlab, no test tools)."""

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
PYTHONS = [pytest.param(sys.executable, id="this-environment"),
           pytest.param(LEARNER_PYTHON, id="learner-environment",
                        marks=pytest.mark.skipif(not LEARNER_PYTHON, reason="RESIDLAB_RUNNER_PYTHON is unset"))]  # fmt: skip


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


@pytest.mark.parametrize("python", PYTHONS)
def test_the_runner_writes_the_report_the_package_computes(tmp_path, python, model_directory, package_report):
    report, lines = package_report
    completed = run_alone(python, tmp_path, ["--model", str(model_directory), "--output", "report.json"])
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


def printed_verdicts(lines: list[str]) -> dict[tuple[str, str, str], str]:
    """(design, method, head kind) -> the word a runner line ends with, from its printed summary."""
    words, design = {}, None
    for line in lines:
        header = re.match(r"^(\w+): M\(clean\)", line)
        cell = re.match(r"^  (\w+), (\w+) heads \(block ", line)
        if header:
            design = header[1]
        elif cell:
            words[(design, cell[1], cell[2])] = line.rsplit("): ", 1)[1]
    return words


def every_outcome(report: dict) -> list[dict]:
    """Copies of ``report`` whose verdicts, between them, reach every word of ``VERDICT_WORDS``: each design read
    with its cells cycling through the four outcomes (the copied-token design's previous-token cells are the ones
    it cannot test), and every design unread."""
    from residlab.course.lab07.lab import HEAD_METHODS, head_verdict

    rows = [([0.1, 0.8, 0.2, 0.0], [1]), ([0.1, 0.80, 0.78, 0.0], [1]), ([0.9, 0.1, 0.2, 0.0], [1]),
            ([0.005, 0.001, 0.0, 0.0], [1])]  # found, tied, other, nothing (test_lab07's head verdicts)
    read = json.loads(json.dumps(report))
    turn = 0
    for name in read["designs"]:
        read["verdicts"][name] = {}
        for method in HEAD_METHODS:
            kinds = ["previous_token"] if method == "path_keys" else list(read["heads"]["found"])
            read["verdicts"][name][method] = {}
            for kind in kinds:
                row, known = rows[turn % len(rows)]
                read["verdicts"][name][method][kind] = head_verdict(row, known, 0.01)
                turn += 1
    unread = json.loads(json.dumps(report))
    unread["verdicts"] = {name: None for name in unread["designs"]}
    return [read, unread]


def test_the_runner_prints_the_verdict_word_the_page_shows_for_each_cell(package_report):
    """Lab 07's Part 6 table shows ``verdict_cells``'s word for each cell; the download must print the same word
    for the same (design, method, head kind), the untestable and unread cells included."""
    from residlab.course import patching_methods

    runner = load_runner_module()
    reports = [package_report[0], *every_outcome(package_report[0])]
    seen = set()
    for report in reports:
        page = {(name, method, kind): word for name, method, kind, _, word in patching_methods.verdict_cells(report)}
        assert printed_verdicts(runner.summary_lines(report)) == page
        seen |= set(page.values())
    assert seen == set(patching_methods.VERDICT_WORDS.values())  # every word was compared at least once
