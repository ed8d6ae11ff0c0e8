"""residlab/build/phone_figures.py: a figure drawn for a phone too is offered in both drawings (<picture>), its
phone drawing copied beside it from the render cache, its room kept at both sizes; anything else is left as it
was; a drawing the cache lost stops the build by name."""

from __future__ import annotations

import re

import pytest

from residlab.build import phone_figures
from residlab.course.figure_widths import PHONE_MEDIA


def _site(tmp_path, figure_svg: str):
    site = tmp_path / "_site"
    figures = site / "labs" / "page_files" / "figure-html"
    figures.mkdir(parents=True)
    (figures / "fig-a-output-1.svg").write_text(figure_svg, encoding="utf-8")
    drawings = tmp_path / "cache"
    drawings.mkdir()
    return site, site / "labs" / "page.html", drawings


IMAGE = ('<img src="page_files/figure-html/fig-a-output-1.svg" class="img-fluid figure-img" alt="A" '
         'style="width: 720px; aspect-ratio: 720 / 360" loading="lazy">')
WIDE = '<svg width="540pt" height="270pt" viewBox="0 0 540 270"><g id="residlab-phone-0a1b2c"><text>x</text></g></svg>'


def test_a_figure_drawn_for_a_phone_is_offered_in_both_drawings(tmp_path):
    site, page, drawings = _site(tmp_path, WIDE)
    (drawings / "0a1b2c.svg").write_text('<svg width="270pt" height="405pt" viewBox="0 0 270 405"></svg>', encoding="utf-8")
    html = f"<p>before</p>{IMAGE}<img src='logo.png'>"
    offered = phone_figures.with_phone_figures(html, page, site, drawings)
    assert offered == (
        f'<p>before</p><picture><source media="{PHONE_MEDIA}" srcset="page_files/figure-html/fig-a-output-1-phone.svg" '
        'type="image/svg+xml"><img src="page_files/figure-html/fig-a-output-1.svg" class="img-fluid figure-img" alt="A" '
        'style="width: 720px; aspect-ratio: 720 / 360; --rl-narrow-width: 360px; --rl-narrow-ratio: 360 / 540" '
        "loading=\"lazy\"></picture><img src='logo.png'>")
    copied = page.parent / "page_files" / "figure-html" / "fig-a-output-1-phone.svg"
    assert copied.read_bytes() == (drawings / "0a1b2c.svg").read_bytes()
    assert phone_figures.with_phone_figures(offered, page, site, drawings) == offered  # done once


def test_other_figures_are_left_as_they_were(tmp_path):
    site, page, drawings = _site(tmp_path, '<svg width="540pt" height="270pt"><g id="figure_1"></g></svg>')
    assert phone_figures.with_phone_figures(IMAGE, page, site, drawings) == IMAGE
    gone = IMAGE.replace("fig-a-output-1.svg", "gone.svg")
    assert phone_figures.with_phone_figures(gone, page, site, drawings) == gone


def test_a_phone_drawing_the_cache_lost_stops_the_build_by_name(tmp_path):
    site, page, drawings = _site(tmp_path, WIDE)
    with pytest.raises(SystemExit, match=re.escape("labs/page_files/figure-html/fig-a-output-1.svg was drawn for a phone "
                                                   "too, but its phone drawing")) as stopped:
        phone_figures.with_phone_figures(IMAGE, page, site, drawings)
    assert "render labs/page.qmd again" in str(stopped.value)
