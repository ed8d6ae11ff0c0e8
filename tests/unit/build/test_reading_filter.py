"""assets/site/reading.lua, run by Quarto's pandoc on a page of its own: identifiers break only after ".", "_", "-"
and "/"; every table sits in its scrolling box, its caption above it, a table read row by row marked for cards
with its column names on its cells; formulas keep their TeX out of the page's text (data-tex, no annotation)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FILTER = ROOT / "assets" / "site" / "reading.lua"
PAGE = """---
title: "Sites such as blocks.0.resid_pre"
---

Prose with `blocks.0.resid_pre`, trace_residual_toy.py, `x<y`, 3.25, e.g. and $r_{L,t} \\in \\mathbb{R}^d$.

| block | one block | a sublayer reads | writes are added |
| --- | --- | --- | --- |
| Paper (post-LN) | $u = x$, normalised after the addition | the boundary itself, which is a LayerNorm output | to the sublayer's own input |

: The arrangements.

| file | bytes |
| --- | --- |
| `model.safetensors` | 1,234 |

![A figure of gpt_neox.layers.0.attention](figure.svg)
"""


@pytest.fixture(scope="module")
def page() -> str:
    quarto = os.environ.get("QUARTO") or shutil.which("quarto")
    if not quarto:
        pytest.fail("Quarto is not on PATH: the filter runs in Quarto's pandoc", pytrace=False)
    done = subprocess.run([quarto, "pandoc", "-f", "markdown", "-t", "html5", "--mathml", "--lua-filter", str(FILTER)],
                          input=PAGE, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "WARNING" not in done.stderr, done.stderr
    return re.sub(r"\s+", " ", done.stdout)  # pandoc's line wrapping aside


def test_identifiers_break_only_after_their_separators(page):
    assert "<code>blocks.<wbr>0.<wbr>resid_<wbr>pre</code>" in page
    assert "trace_<wbr>residual_<wbr>toy.<wbr>py" in page
    assert "<code>x&lt;y</code>" in page and " 3.25," in page and " e.g. " in page  # no separator, a number, short
    assert "<code>model.<wbr>safetensors</code>" in page
    assert 'alt="A figure of gpt_neox.layers.0.attention"' in page  # an image's text alternative stays plain text


def test_tables_sit_in_scrolling_boxes_with_their_captions_above(page):
    assert page.count('<div class="rl-table-box') == 2 and "<colgroup>" not in page
    caption = page.index('<div id="rl-table-caption-1" class="rl-table-caption">')
    assert caption < page.index('<div class="rl-table-box rl-records">') < page.index("The arrangements.", caption) + 200
    assert '<table aria-labelledby="rl-table-caption-1">' in page and "<caption>" not in page
    assert '<td class="rl-prose" data-label="a sublayer reads">' in page  # 40 characters or more: running text
    assert '<td data-label="writes are added">' in page
    assert page.count("data-label=") == 4  # only the record table's cells
    assert '<div class="rl-table-box">' in page  # the two-column table scrolls, no cards


def test_formulas_keep_their_tex_out_of_the_text(page):
    assert '<math data-tex="r_{L,t} \\in \\mathbb{R}^d" display="inline"' in page
    assert "<annotation" not in page and "mathbb{R}^d</" not in page


def _pandoc(markdown: str, folder: Path) -> subprocess.CompletedProcess:
    quarto = os.environ.get("QUARTO") or shutil.which("quarto")
    return subprocess.run([quarto, "pandoc", "-f", "markdown", "-t", "html5", "--lua-filter", str(FILTER)], cwd=folder,
                          input=markdown, capture_output=True, text=True, timeout=120)  # fmt: skip


def test_an_svg_figure_loads_lazily_at_its_declared_size_and_an_unsized_one_stops_the_render(tmp_path):
    (tmp_path / "drawn.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="460.8pt" height="345.6pt"/>')
    (tmp_path / "unsized.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 3 2"/>')
    done = _pandoc("![A figure](drawn.svg)\n\n![A picture](picture.png)\n\n![Sized by hand](drawn.svg){width=50%}\n", tmp_path)
    assert done.returncode == 0, done.stderr
    images = re.findall(r"<img\b[^>]*>", re.sub(r"\s+", " ", done.stdout))  # pandoc's line wrapping aside
    # 460.8 pt and 345.6 pt are 614.4 and 460.8 CSS pixels
    assert 'style="width: 614.4px; aspect-ratio: 614.4 / 460.8" loading="lazy"' in images[0]
    assert "loading" not in images[1] and "loading" not in images[2]  # not an SVG; a size the author chose
    failed = _pandoc("![A figure](unsized.svg)\n", tmp_path)
    assert failed.returncode != 0 and "reading.lua: the figure unsized.svg declares no width and height" in failed.stderr
