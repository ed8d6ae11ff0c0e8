"""Part of the Quarto post-render step ``residlab/build/page_weight.py``: each figure that was drawn for a phone
too (``residlab/course/figure_widths.py``) gets that drawing beside its own in the site, chosen by the browser on
a narrow screen.

A figure's SVG names its phone drawing in the id of its figure group (``residlab-phone-<name>``); the drawing
waits in the render cache (``.residlab-render-cache/phone-figures/<name>.svg``), written by the page's kernel.
Its ``<img>`` becomes ``<picture><source media=... srcset="<figure>-phone.svg"><img ...></picture>``, and the
image's style gains the phone drawing's size (``--rl-narrow-width``, ``--rl-narrow-ratio``; reading.scss uses them
below the same width), so a lazily loaded figure keeps its room on a phone too. A figure that names a drawing the
cache does not hold stops the build (its page was restored from ``_freeze/`` after the cache was emptied). Idempotent.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from residlab.build.first_paint import _site_file
from residlab.course.ui.figure_widths import PHONE_FIGURES, PHONE_ID_PREFIX, PHONE_MEDIA
from residlab.render.render_cache import RENDER_CACHE_DIR

SOURCE_END = 'type="image/svg+xml">'  # the end of the <source> written before an image already offered so
FIGURE_IMAGE = re.compile(r'(?<!' + re.escape(SOURCE_END) + r')<img\b(?=[^>]*\bclass="[^"]*\bfigure-img\b)[^>]*>')
PHONE_ID = re.compile(re.escape(PHONE_ID_PREFIX) + r'(?P<name>[0-9a-f]+)"')
STYLE = re.compile(r'\bstyle="(?P<style>[^"]*)"')
IMAGE_SOURCE = re.compile(r'\bsrc="(?P<src>[^":]+\.svg)"')
SVG_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="(?P<width>[\d.]+)(?P<wunit>pt|px)?"'
                      r'[^>]*?\bheight="(?P<height>[\d.]+)(?P<hunit>pt|px)?"')
CSS_PIXELS = {"pt": 4 / 3, "px": 1.0, None: 1.0}
PHONE_SUFFIX = "-phone.svg"


def svg_size(path: Path) -> tuple[float, float] | None:
    """The width and height, in CSS pixels, that an SVG file's root element declares, or None."""
    with open(path, encoding="utf-8", errors="replace") as svg:
        size = SVG_SIZE.search(svg.read(4096))
    if not size:
        return None
    return (float(size.group("width")) * CSS_PIXELS[size.group("wunit")],
            float(size.group("height")) * CSS_PIXELS[size.group("hunit")])


def _pixels(value: float) -> str:  # as reading.lua writes the wide drawing's size
    return f"{value:.3f}".rstrip("0").rstrip(".")


def phone_drawings(root: Path) -> Path:
    return root / RENDER_CACHE_DIR / PHONE_FIGURES


def with_phone_figures(html: str, page: Path, site_dir: Path, drawings: Path) -> str:
    """``page`` (of the built site ``site_dir``) with every figure drawn for a phone too offered in both drawings;
    ``drawings``: the folder of phone drawings (``phone_drawings(root)``)."""

    def offered(image: re.Match) -> str:
        tag = image.group(0)
        source = IMAGE_SOURCE.search(tag)
        path = _site_file(page, source.group("src"), site_dir) if source else None
        if path is None or path.name.endswith(PHONE_SUFFIX):
            return tag
        with open(path, encoding="utf-8", errors="replace") as svg:
            named = PHONE_ID.search(svg.read(16384))
        if not named:
            return tag
        drawing = drawings / f"{named.group('name')}.svg"
        if not drawing.is_file():
            raise SystemExit(f"page_weight: {path.relative_to(site_dir)} was drawn for a phone too, but its phone "
                             f"drawing {drawing} is gone: render {page.relative_to(site_dir).with_suffix('.qmd')} again")
        phone = path.with_name(path.stem + PHONE_SUFFIX)
        shutil.copyfile(drawing, phone)
        width, height = map(_pixels, svg_size(phone))
        sizes = f"--rl-narrow-width: {width}px; --rl-narrow-ratio: {width} / {height}"
        style = STYLE.search(tag)
        if style:
            tag = tag[:style.start("style")] + style.group("style").rstrip("; ") + "; " + sizes + tag[style.end("style"):]
        else:
            tag = tag[:4] + f' style="{sizes}"' + tag[4:]
        srcset = source.group("src")[:-len(".svg")] + PHONE_SUFFIX
        return f'<picture><source media="{PHONE_MEDIA}" srcset="{srcset}" {SOURCE_END}{tag}</picture>'

    return FIGURE_IMAGE.sub(offered, html)
