"""A built page as text a test can search: scripts and styles dropped, each MathML formula replaced by its TeX
source between dollars (reading.lua keeps it in the formula's data-tex), table rows as `| a | b |`, an identifier's
break opportunities (<wbr>) dropped, whitespace collapsed. What is left is what the page shows, in the notation its
source was written in."""

from __future__ import annotations

import html
import re
from pathlib import Path

MATH = re.compile(r"<math\b.*?</math>", re.S)
TEX = re.compile(r'<math\b[^>]*\bdata-tex="([^"]*)"', re.S)  # the formula's source (assets/site/reading.lua)


def _math_as_tex(match: re.Match) -> str:
    tex = TEX.search(match.group(0))
    return f"${html.unescape(tex.group(1)).strip()}$" if tex else " "


def shown(site_dir: Path, page: str) -> str:
    text = (site_dir / page).read_text(encoding="utf-8")
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S)
    text = text.replace("<wbr>", "")  # a break opportunity in an identifier (assets/site/reading.lua), not a space
    text = MATH.sub(_math_as_tex, text)
    text = re.sub(r"<tr\b[^>]*>", " | ", text)
    text = re.sub(r"</t[dh]>", " | ", text)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = re.sub(r"\s+", " ", text)
    return re.sub(r"\|( \|)+", "|", text)  # a row's closing and the next cell's opening bars meet
