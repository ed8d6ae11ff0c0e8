"""What a build publishes beyond its pages: sitemap.xml for every page at the configured address, the social
preview image and its metadata, and no raw subscript label (H_6, U_0) outside math on any page."""

from __future__ import annotations

import re
import struct
import xml.etree.ElementTree as ElementTree
from html.parser import HTMLParser
from pathlib import Path

import pytest

from residlab.build import site_check

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PREVIEW = "assets/site/social-preview.png"
SITEMAP_NS = {"sm": "http://www.sitemaps.org/schemas/sitemap/0.9"}


def site_url() -> str:
    return site_check.load_config(ROOT)["website"]["site-url"].rstrip("/") + "/"


def test_sitemap_lists_every_page_at_the_configured_address(built_site):
    tree = ElementTree.parse(built_site.site / "sitemap.xml")
    listed = sorted(loc.text for loc in tree.getroot().findall("sm:url/sm:loc", SITEMAP_NS))
    pages = sorted(site_url() + page.relative_to(ROOT).with_suffix(".html").as_posix() for page in site_check.site_pages(ROOT))
    assert listed == pages


def test_social_preview_image_is_built_and_every_page_points_at_it(built_site):
    image = (built_site.site / PREVIEW).read_bytes()
    assert image[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", image[16:24])  # the IHDR chunk
    assert (width, height) == (1200, 630) and len(image) > 20_000
    for page in site_check.site_pages(ROOT):
        html = (built_site.site / page.relative_to(ROOT).with_suffix(".html")).read_text(encoding="utf-8")
        for prefix in ('property="og:image"', 'name="twitter:image"'):
            assert re.search(rf'<meta {prefix} content="{re.escape(site_url() + PREVIEW)}"', html), (page.name, prefix)
        assert 'name="twitter:card" content="summary_large_image"' in html, page.name


class _TextOutsideMath(HTMLParser):
    """The page's visible text outside <math>, code, scripts and styles (attributes are not text)."""

    SKIPPED = {"math", "code", "pre", "script", "style", "svg", "title"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIPPED:
            self.depth += 1

    def handle_endtag(self, tag):
        if tag in self.SKIPPED and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.text.append(data)


SUBSCRIPT_LABEL = re.compile(r"\b[A-Z]_\d+\b")


def test_no_subscript_label_is_left_outside_math(built_site):
    found = {}
    for page in site_check.site_pages(ROOT):
        parser = _TextOutsideMath()
        parser.feed((built_site.site / page.relative_to(ROOT).with_suffix(".html")).read_text(encoding="utf-8"))
        labels = sorted(set(SUBSCRIPT_LABEL.findall(" ".join(parser.text))))
        if labels:
            found[page.name] = labels
    assert found == {}, "labels such as H_6 printed as raw text instead of math"
    # and the places that had them now hold math
    lab = (built_site.site / "labs/05-trace-residual-stream.html").read_text(encoding="utf-8")
    assert re.search(r"<math[^>]*>.{0,200}<msub><mi>H</mi><mn>6</mn></msub>", lab, re.S)


def test_internal_links_stay_internal_wherever_the_site_is_served(built_site, served, browser):
    """site-url names the published address; a copy served elsewhere (here 127.0.0.1) must not mark its own
    pages as external (icon, new tab), while links to other hosts keep both; and the icons are gone before the
    page can paint again (no layout shift): by the time DOMContentLoaded reaches the window, after every handler
    on the document, Quarto's among them, and the microtasks they left."""
    from test_browser import open_page

    recorder = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": (
        "window.addEventListener('DOMContentLoaded', () => { window.ownMarkedExternal = [...document.querySelectorAll("
        "'a.external')].filter(a => a.origin === location.origin).length; });")})
    try:
        open_page(browser, served(built_site.site) + "/labs/04-read-transformer-paper.html")
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": recorder["identifier"]})
    assert browser.execute_script("return window.ownMarkedExternal") == 0
    links = browser.execute_script(
        "return [...document.querySelectorAll('main a[href]')].map(a => [a.href, a.classList.contains('external'), a.target])"
    )
    own = [link for link in links if link[0].startswith("http://127.0.0.1")]
    other = [link for link in links if link[0].startswith("https://arxiv.org/")]
    assert own and other
    assert [link for link in own if link[1] or link[2] == "_blank"] == []
    assert all(external and target == "_blank" for _, external, target in other)
