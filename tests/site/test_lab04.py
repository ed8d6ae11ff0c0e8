"""Lab 04's downloadable runner prints exactly what the built page shows."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from residlab.course.lab04 import paper_lab

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "assets" / "labs" / "read_transformer_paper.py"
STDOUT_BLOCK = re.compile(r'<div class="cell-output cell-output-stdout">\s*<pre[^>]*>(?P<text>.*?)</pre>', re.S)


def test_runner_prints_exactly_what_the_built_page_shows(built_site, tmp_path):
    copy = shutil.copy(RUNNER, tmp_path / RUNNER.name)
    completed = subprocess.run([sys.executable, "-I", str(copy)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr
    page = (built_site.site / "labs" / "04-read-transformer-paper.html").read_text(encoding="utf-8")
    shown = [html.unescape(re.sub(r"<[^>]+>", "", match.group("text"))).strip("\n") for match in STDOUT_BLOCK.finditer(page)]
    sections = completed.stdout.rstrip("\n").split("\n\n")
    assert len(sections) == len(paper_lab.REPORT_SECTIONS)
    for section in sections:
        assert section in shown, section.splitlines()[0]
    assert "every line should match" in page  # the page tells the reader how to check; it never runs the runner
    assert "Lesson 2.1's gradient profile" in completed.stdout


def test_the_profile_section_and_solution_cover_the_control(built_site):
    from built_text import shown

    text = shown(built_site.site, "labs/04-read-transformer-paper.html")
    assert "pre-LN + final LN 1-9" in text and "pre-LN + final LN 10-18" in text
    assert "Compare levels only with the control." in text
    assert "The control’s gradient is larger than the post-LN one at none of the 18 depths" in text
