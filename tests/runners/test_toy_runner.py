"""The downloadable toy runner runs alone and prints exactly what residlab.course.lab05_toy.toy computes."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from residlab.course.lab05_toy import toy
from residlab.build.runners import RUNNERS, build_runner

SITE_ROOT = Path(__file__).resolve().parents[2]
RUNNER_NAME = "trace_residual_toy.py"
COMMITTED_RUNNER = SITE_ROOT / "assets" / "labs" / RUNNER_NAME


def without_command(report: dict) -> dict:
    return {key: value for key, value in report.items() if key != "command"}


@pytest.fixture
def runner_copy(tmp_path) -> Path:
    # A lone copy in an empty folder: nothing beside it to import.
    copy = tmp_path / RUNNER_NAME
    shutil.copyfile(COMMITTED_RUNNER, copy)
    return copy


def run_runner(runner: Path, *arguments: str) -> subprocess.CompletedProcess:
    # -I: ignore PYTHON* variables and the script's folder; -S: no site-packages, so no installed residlab.
    return subprocess.run(
        [sys.executable, "-I", "-S", str(runner), *arguments],
        capture_output=True, text=True, cwd=runner.parent, timeout=60,
    )


def test_committed_runner_is_what_sync_builds():
    runner = next(r for r in RUNNERS if r.filename == RUNNER_NAME)
    assert runner.modules == ("course/lab05_toy/exact_vectors.py", "course/lab05_toy/toy.py")
    assert COMMITTED_RUNNER.read_text(encoding="utf-8") == build_runner(runner), "run `residlab sync`"


def test_runner_imports_no_residlab_module():
    tree = ast.parse(COMMITTED_RUNNER.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        assert not any(name.startswith("residlab") for name in names)


def test_runner_default_report_equals_package_report(runner_copy):
    result = run_runner(runner_copy)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    expected = toy.build_report(toy.Vector(toy.DEFAULT_INPUT), toy.Vector(toy.DEFAULT_SECOND_POSITION))
    assert without_command(report) == without_command(expected)
    assert report["command"] == [str(runner_copy)]
    assert report["baseline"]["final"]["exact"] == [4, 0, -1]
    assert report["python"]["version"] == ".".join(map(str, sys.version_info[:3]))


def test_runner_other_input_equals_package_report(runner_copy):
    arguments = ["--input", "-3,1/2,4", "--second-position", "0.5,-1,2", "--indent", "0"]
    result = run_runner(runner_copy, *arguments)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    expected = toy.build_report(toy.Vector.of(-3, Fraction(1, 2), 4), toy.Vector.of(Fraction(1, 2), -1, 2))
    assert without_command(report) == without_command(expected)
    assert report["command"] == [str(runner_copy), *arguments]
    # z = [x2 + 2, 0, x3] for x = [-3, 1/2, 4]
    assert report["baseline"]["final"]["exact"] == ["5/2", 0, 4]


@pytest.mark.parametrize(
    "arguments, fragment",
    [(["--input", "1,2"], "--input 1,2 has 2 entries"), (["--input", "1,nan,2"], "--input 1,nan,2: entry 2 is 'nan'"),
     (["--second-position", "1,two,3"], "--second-position 1,two,3: entry 2 is 'two'")],
)
def test_runner_bad_input_fails_with_message(runner_copy, arguments, fragment):
    result = run_runner(runner_copy, *arguments)
    assert result.returncode == 2
    assert fragment in result.stderr
    assert result.stdout == ""
