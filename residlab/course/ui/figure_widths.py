"""Every matplotlib figure of the site drawn twice when a page is built: for the column a wide screen shows it in,
and for a phone's (panels stacked, the same data), so its smallest text reads at 11 CSS px or more on both.

    from residlab.course.ui.figure_widths import both_widths

    def plot_something(data):
        def draw(narrow: bool):
            figure, axes = plt.subplots(figsize=(3.8, 3.0) if narrow else (6.4, 3.4), layout="constrained")
            ...
            return figure
        return both_widths(draw)  # the wide figure, which the page's cell shows

``both_widths`` raises every text of both drawings to ``SMALLEST_TEXT_PT`` (a tick label at fontsize 7 becomes
9 pt), checks that neither drawing is wider than its column, so the browser never shrinks it below that size, and
during a Quarto render (``QUARTO_PROJECT_ROOT`` set) writes the narrow drawing as an SVG into the render cache,
named by its content, and tags the wide one with that name (the SVG id of its figure group).
``residlab/build/phone_figures.py``, a post-render step, puts the narrow file beside the wide one in the site and
lets the browser choose it on a phone (``<picture>``). Outside a render the narrow drawing is only checked.

``layout_problems(figure)`` names what of a drawing would not read as saved (text past its edges, tick labels on
top of each other); the tests hold the phone drawings to it (tests/unit/course/test_phone_figure_layout.py).

Figures keep their text as SVG text (``svg.fonttype: none``): crisp at any zoom, and what the browser tests measure.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Callable

# The browser picks the narrow drawing below this width: the media query of residlab/build/phone_figures.py's
# <source> and of reading.scss's sizes for it.
PHONE_MEDIA = "(max-width: 767.98px)"
# Room for a figure (CSS px) in the content column: at 1280 px (Quarto's docked sidebar and table of contents beside
# it) and at 412 px less the dark scheme's white card round the figure (reading.scss, theme-dark.scss).
WIDE_COLUMN_PX = 750
NARROW_COLUMN_PX = 360
SMALLEST_TEXT_PT = 9  # 12 CSS px at the drawn size: 11 px or more even on a slightly narrower phone
PX_PER_INCH = 96  # CSS pixels per inch; an SVG declares its size in points (72 per inch)
PHONE_FIGURES = "phone-figures"  # the render cache's folder of narrow drawings
PHONE_ID_PREFIX = "residlab-phone-"


class FigureTooWide(ValueError):
    """A drawing wider than the column it is shown in: the browser would shrink its text below 11 px."""


def _raise_small_text(figure) -> None:
    from matplotlib.text import Text

    for text in figure.findobj(Text):
        if text.get_text() and text.get_fontsize() < SMALLEST_TEXT_PT:
            text.set_fontsize(SMALLEST_TEXT_PT)


def _check_width(figure, column_px: float, name: str) -> None:
    width_px = figure.get_figwidth() * PX_PER_INCH
    if width_px > column_px + 0.5:
        raise FigureTooWide(f"the {name} drawing is {width_px:.0f} px wide, its column {column_px} px: drawn there "
                            f"its {SMALLEST_TEXT_PT} pt text would read below 11 px")


def layout_problems(figure, edges: bool = True) -> list[str]:
    """What of a drawing's text would not read as saved, one line each: a text that reaches past the figure's edges
    (the phone's SVG, saved at the figure's size, cuts it off there; ``edges=False`` for a wide drawing, which
    Quarto saves with a tight bounding box grown round all its text), and two tick labels of one axis that overlap
    each other. The figure is drawn first (its layout done), so the extents are the saved file's."""
    from matplotlib.text import Text

    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    bounds = figure.bbox
    # An axis keeps labels for ticks past its view limits that it does not draw: those are left out, and only the
    # drawn ones of each axis compared with each other.
    drawn, undrawn = {}, set()
    for axes in figure.axes:
        for name, axis in (("x", axes.xaxis), ("y", axes.yaxis)):
            low, high = sorted(axis.get_view_interval())
            margin = (high - low) * 1e-9
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                labels = (tick.label1, tick.label2)
                if low - margin <= tick.get_loc() <= high + margin:
                    drawn.setdefault((id(axes), name), []).extend(label for label in labels if label.get_visible())
                else:
                    undrawn.update(id(label) for label in labels)
    problems = []
    for text in figure.findobj(Text):
        if not text.get_text().strip() or not text.get_visible() or id(text) in undrawn:
            continue
        box = text.get_window_extent(renderer)
        outside = min(box.x0 - bounds.x0, box.y0 - bounds.y0, bounds.x1 - box.x1, bounds.y1 - box.y1) < -0.5
        if edges and outside:
            problems.append(f"text {text.get_text()!r} reaches past the figure's edges ({box.x0:.0f}..{box.x1:.0f} "
                            f"x {box.y0:.0f}..{box.y1:.0f} px; the figure 0..{bounds.x1:.0f} x 0..{bounds.y1:.0f})")
    for (_, name), labels in drawn.items():
        boxes = [(label.get_text(), label.get_window_extent(renderer)) for label in labels if label.get_text().strip()]
        for i, (first, one) in enumerate(boxes):
            for second, other in boxes[i + 1:]:
                if one.overlaps(other):
                    problems.append(f"{name} tick labels {first!r} and {second!r} overlap")
    return problems


def _svg(figure) -> bytes:
    import matplotlib

    buffer = io.BytesIO()
    # No date, and ids hashed with a fixed salt: the same drawing, the same bytes (and the same name).
    with matplotlib.rc_context({"svg.hashsalt": "residlab"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def both_widths(draw: Callable[[bool], object]):
    """``draw(narrow)`` -> a matplotlib Figure; returns the wide one (``draw(False)``). See the module's manual."""
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.fonttype"] = "none"  # read when the figure is saved: by Quarto, after this returns
    wide, narrow = draw(False), draw(True)
    try:
        for figure, column, name in ((wide, WIDE_COLUMN_PX, "wide"), (narrow, NARROW_COLUMN_PX, "narrow")):
            _raise_small_text(figure)
            _check_width(figure, column, name)
        root = os.environ.get("QUARTO_PROJECT_ROOT")
        if root:
            from residlab.render.render_cache import RENDER_CACHE_DIR

            svg = _svg(narrow)
            name = hashlib.sha256(svg).hexdigest()[:20]
            folder = Path(root) / RENDER_CACHE_DIR / PHONE_FIGURES
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.svg").write_bytes(svg)
            wide.set_gid(PHONE_ID_PREFIX + name)
    finally:
        plt.close(narrow)  # never shown by the page: only its file is
    return wide
