"""The two runners that need torch, Lesson 2.1's and Lab 04's, copied alone into an empty folder, refuse an option
they do not know. What they print, against the package, is checked in the learners' own environment
(``test_runners_alone.py``); what they say without torch, in ``test_first_contact.py``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LABS = Path(__file__).resolve().parents[2] / "assets" / "labs"


@pytest.mark.parametrize("runner", ["residual_stream_lab.py", "read_transformer_paper.py"])
def test_runner_rejects_an_unknown_option(tmp_path, runner):
    copy = shutil.copyfile(LABS / runner, tmp_path / runner)
    completed = subprocess.run([sys.executable, "-I", str(copy), "--no-such-option"], cwd=tmp_path,
                               capture_output=True, text=True, timeout=300)  # fmt: skip
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.splitlines()[-1].endswith(": error: unrecognized arguments: --no-such-option")
