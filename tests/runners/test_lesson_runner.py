"""The downloadable Lesson 2.1 runner runs alone, outside the repository, and prints what residlab prints."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from residlab.course.lesson import lesson_lab
from residlab.build.runners import RUNNERS, build_runner

pytestmark = pytest.mark.slow

SITE_ROOT = Path(__file__).resolve().parents[2]
RUNNER = next(runner for runner in RUNNERS if runner.filename == "residual_stream_lab.py")
RUNNER_PATH = SITE_ROOT / "assets" / "labs" / RUNNER.filename


def test_published_runner_is_current():
    assert RUNNER_PATH.read_text(encoding="utf-8") == build_runner(RUNNER), "run `residlab sync`"


def test_runner_has_no_package_imports():
    text = RUNNER_PATH.read_text(encoding="utf-8")
    # The builder's "# ---- from residlab/<module>" section lines are comments, not imports.
    assert not re.search(r"^\s*(import|from) residlab", text, re.MULTILINE)


def run_alone(tmp_path: Path, *arguments: str) -> str:
    copy = tmp_path / RUNNER.filename
    shutil.copy(RUNNER_PATH, copy)
    # -I: isolated mode, so neither the repository nor the user's site-packages is on sys.path; torch comes
    # from the interpreter's own environment, as it would after `pip install torch`.
    completed = subprocess.run(
        [sys.executable, "-I", str(copy), *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_runner_prints_exactly_what_the_package_computes(tmp_path, capsys):
    standalone = run_alone(tmp_path)
    assert lesson_lab.main([]) == 0
    in_process = capsys.readouterr().out
    assert standalone == in_process
    assert "attention ablated                  p(target)=0.007 top=8" in standalone
    assert "Median gradient profiles" in standalone


def test_runner_rejects_an_unknown_option(tmp_path):
    copy = tmp_path / RUNNER.filename
    shutil.copy(RUNNER_PATH, copy)
    completed = subprocess.run(
        [sys.executable, "-I", str(copy), "--no-such-option"], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 2
    assert "--no-such-option" in completed.stderr
