"""The downloadable toy runner runs alone and prints exactly what residlab.course.lab05.toy computes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from residlab.course.lab05 import toy

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
