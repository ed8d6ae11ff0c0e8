"""What a phone downloads before it paints (residlab/build/page_weight.py, checked on the built site in headless
Chromium): the math font subset holds every character the pages' MathML shows, the icon font every icon they
show, each page preloads the fonts it draws with and fetches each once, only the reader's colour scheme's
stylesheets block the first paint, and every page has a description."""

from __future__ import annotations

import html
import re
import unicodedata

import pytest
from test_browser import PAGES, ROOT, open_page, search_button, wait_for

from residlab.build import page_weight, site_check

pytestmark = pytest.mark.slow

# Text of every <math> outside its TeX annotation, and the one-letter identifiers the browser draws in italic.
MATH_TEXT = """
const shown = [], letters = [];
for (const math of document.querySelectorAll('math')) {
  const walker = document.createTreeWalker(math, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    if (!walker.currentNode.parentElement.closest('annotation, annotation-xml')) shown.push(walker.currentNode.data);
  }
  for (const mi of math.querySelectorAll('mi')) {
    const text = mi.textContent.trim();
    if ([...text].length === 1 && !['normal', 'bold', 'bold-italic'].includes(mi.getAttribute('mathvariant'))) letters.push(text);
  }
}
return [shown.join(''), letters];
"""


@pytest.fixture(scope="module")
def base_url(built_site, served):
    return served(built_site.site)


def cmap(path) -> set[str]:
    from fontTools.ttLib import TTFont

    return {chr(code) for code in TTFont(path).getBestCmap()}


def italic(letter: str) -> str | None:
    """The mathematical italic form by its Unicode name (independent of page_weight.math_italic's arithmetic)."""
    if letter == "h":
        return "\u210e"
    name = unicodedata.name(letter, "")
    match = re.fullmatch(r"(?:LATIN|GREEK) (CAPITAL|SMALL) LETTER (\w+)", name)
    if not match:
        return None
    try:
        return unicodedata.lookup(f"MATHEMATICAL ITALIC {match.group(1)} {match.group(2)}")
    except KeyError:
        return None


# Every element that names an icon (a bi-NAME class; a bare "bi", like the colour-scheme toggle's, draws a picture
# of Quarto's instead): its classes, the font of its ::before and the character drawn.
ICON_GLYPHS = """
return [...document.querySelectorAll('[class^="bi-"], [class*=" bi-"]')].map(e => {
  const before = getComputedStyle(e, '::before');
  return [e.className, before.fontFamily, before.content]; }).filter(([, family]) => family.includes('bootstrap-icons'));
"""


# The fonts the page preloads, each font file it fetched (how many times, and who asked first), and the font
# families it has loaded (a face loads only when something is drawn with it).
FONTS = """
const fetched = {};
for (const e of performance.getEntriesByType('resource').filter(e => /\\.woff2?(\\?|$)/.test(e.name))) {
  fetched[e.name] = fetched[e.name] ? [fetched[e.name][0] + 1, fetched[e.name][1]] : [1, e.initiatorType];
}
return {preloaded: [...document.querySelectorAll('link[rel=preload][as=font]')].map(l => l.href), fetched,
        loaded: [...document.fonts].filter(f => f.status === 'loaded').map(f => f.family.replace(/"/g, '')),
        math: document.querySelectorAll('math').length > 0};
"""


# AnchorJS's style elements in the head (whether each is the one the build wrote), whether that one comes before the
# head's first stylesheet (where AnchorJS puts its own), its heading links and their opacity before any hover. The
# editor's CodeMirror mounts its rules in a style of its own at the head's start whenever it is created (style-mod,
# whose generated class names begin with U+037C): not a stylesheet of the page as built.
ANCHORS = """
const styles = [...document.head.querySelectorAll('style.anchorjs')];
const links = document.querySelectorAll('.anchorjs-link');
const built = [...document.head.querySelectorAll('[rel="stylesheet"],style')]
  .filter(s => !(s.tagName === 'STYLE' && s.textContent.includes('.\\u037c')));
return {styles: styles.map(s => s.hasAttribute('data-residlab-seeded')),
        first: styles.length > 0 && built[0] === styles[0],
        anchored: document.querySelectorAll('.anchored').length, links: links.length,
        // a link whose heading the pointer (left wherever an earlier test clicked) is not over
        opacity: [...links].filter(l => !l.parentElement.matches(':hover')).map(l => getComputedStyle(l).opacity)[0] ?? null};
"""


@pytest.fixture(scope="module")
def shown(base_url, browser) -> dict:
    """Every page opened once: the characters its MathML shows, the icon glyphs it draws, what it requested."""
    from selenium.webdriver.common.by import By

    facts = {"math": {}, "icons": {}, "requested": {}, "fonts": {}, "anchors": {}}
    browser.set_window_size(1280, 900)
    for page in PAGES:
        facts["requested"][page] = open_page(browser, f"{base_url}/{page}")["requested"]
        text, letters = browser.execute_script(MATH_TEXT)
        facts["math"][page] = (set(text) | {italic(letter) for letter in letters if italic(letter)}) - set("\n\t\r")
        facts["icons"].update({name: content.strip('"') for name, _, content in browser.execute_script(ICON_GLYPHS)})
        facts["fonts"][page] = browser.execute_script(FONTS)
        facts["anchors"][page] = browser.execute_script(ANCHORS)
    # Quarto's search draws one more icon in every result, from a name its script holds
    search_button(browser).click()
    field = wait_for(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".aa-DetachedOverlay input.aa-Input"), "search did not open")
    field.send_keys("residual stream")
    wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".aa-DetachedOverlay .search-result-icon"), "search found nothing")
    facts["icons"].update({name: content.strip('"') for name, _, content in browser.execute_script(ICON_GLYPHS)})
    return facts


def test_every_character_the_pages_mathml_shows_is_in_the_math_font_subset(built_site, shown):
    served_fonts = sorted(built_site.site.rglob(page_weight.MATH_FONT.name))
    assert served_fonts, "the site has no copy of the math font"
    source = cmap(ROOT / page_weight.MATH_FONT)
    for served_font in served_fonts:
        subset = cmap(served_font)
        assert len(subset) < len(source) / 5, f"{served_font} is not a subset ({len(subset)} of {len(source)} characters)"
        assert served_font.stat().st_size < (ROOT / page_weight.MATH_FONT).stat().st_size / 5
        missing = {page: sorted((characters & source) - subset) for page, characters in shown["math"].items()}
        assert {page: lacking for page, lacking in missing.items() if lacking} == {}, "shown by MathML, not in the subset"
    assert len(set().union(*shown["math"].values())) > 50  # the pages do show math


def test_the_icons_the_pages_show_are_in_the_icon_subset_and_the_full_font_is_never_fetched(built_site, shown):
    css = (built_site.site / page_weight.ICONS_CSS).read_text(encoding="utf-8")
    assert len(css) < 10_000 and page_weight.ICONS_SUBSET in css and '.woff"' not in css
    subset = cmap(built_site.site / page_weight.ICONS_CSS.with_name(page_weight.ICONS_SUBSET))
    for page, requested in shown["requested"].items():
        assert not [url for url in requested if url.split("?")[0].endswith("bootstrap-icons.woff")], page
    icons = shown["icons"]
    assert any("bi-chevron-right" in name for name in icons) and any("search-result-icon" in name for name in icons)
    lacking = {name: content for name, content in icons.items() if content in ("", "none") or content not in subset}
    assert lacking == {}, "icons drawn with no glyph in the subset"


def test_each_page_preloads_the_fonts_it_draws_with_and_fetches_each_once(shown):
    """The icon font on every page, the math font on every page with math: preloaded at the very address the
    stylesheets name (so each file is fetched once, by the preload, and no font twice), and drawn with."""
    families = {page_weight.ICONS_SUBSET: "bootstrap-icons", page_weight.MATH_FONT.name: "Noto Sans Math"}
    for page, fonts in shown["fonts"].items():
        expected = {page_weight.ICONS_SUBSET} | ({page_weight.MATH_FONT.name} if fonts["math"] else set())
        assert {url.split("?")[0].rsplit("/", 1)[1] for url in fonts["preloaded"]} == expected, page
        # (a font another page preloaded may be taken from the cache even where nothing draws with it; on a loaded
        # machine the stylesheet's request may be the one Chromium records for the preloaded address, still one fetch)
        assert {url: fonts["fetched"].get(url, [0])[0] for url in fonts["preloaded"]} == dict.fromkeys(fonts["preloaded"], 1), page
        assert {fonts["fetched"][url][1] for url in fonts["preloaded"]} <= {"link", "css"}, page
        assert all(count == 1 for count, _ in fonts["fetched"].values()), page
        assert {families[name] for name in expected} <= set(fonts["loaded"]), page
    assert sum(fonts["math"] for fonts in shown["fonts"].values()) >= 5  # most pages show math


def test_anchorjs_finds_its_rules_written_in_and_adds_no_stylesheet(shown):
    """A stylesheet added after the page is laid out makes the browser restyle and lay out all of it again: the build
    writes AnchorJS's rules in (first_paint.seed_anchor_styles), so it adds none and still puts its heading links."""
    for page, anchors in shown["anchors"].items():
        assert anchors["styles"] == [True] and anchors["first"], (page, anchors)
        assert anchors["links"] == anchors["anchored"], (page, anchors)  # (the glossary's index has no section)
        assert anchors["opacity"] == ("0" if anchors["links"] else None), (page, anchors)
    assert sum(anchors["links"] for anchors in shown["anchors"].values()) > 0


# Each Bootstrap scheme stylesheet fetched: its scheme, whether the parser's fetch blocked rendering, and whether it
# had arrived by the first contentful paint.
RENDER_BLOCKING = """
const paint = performance.getEntriesByName('first-contentful-paint')[0].startTime;
return performance.getEntriesByType('resource').filter(e => e.initiatorType === 'link' && /bootstrap-(dark-)?[0-9a-f]+\\.min\\.css$/.test(e.name))
  .map(e => [/-dark-/.test(e.name) ? 'dark' : 'light', e.renderBlockingStatus, e.responseEnd <= paint]);
"""
BACKGROUND = "return getComputedStyle(document.body).backgroundColor"
# Run before the page's own scripts: the scheme the body's background shows when the parser has finished (before
# DOMContentLoaded and the deferred scripts), "none" if no stylesheet had arrived.
WHEN_PARSED = """
document.addEventListener('readystatechange', () => {
  if (document.readyState !== 'interactive') return;
  const [r, g, b, a] = (getComputedStyle(document.body).backgroundColor.match(/[\\d.]+/g) || []).map(Number);
  window.schemeWhenParsed = a === 0 ? 'none' : Math.max(r, g, b) < 60 ? 'dark' : 'light';
});
"""


def shows(browser, mode: str) -> bool:
    """The body says ``mode`` (Quarto's class) and its background is that scheme's (no stylesheet of the other)."""
    red, green, blue = (int(part) for part in re.findall(r"\d+", browser.execute_script(BACKGROUND))[:3])
    dark_background = max(red, green, blue) < 60
    return browser.execute_script("return document.body.className").split().count(f"quarto-{mode}") == 1 and \
        dark_background == (mode == "dark")


STYLESHEET_DELAY_SECONDS = 1.0


@pytest.fixture(scope="module")
def slow_styles_url(built_site):
    """The built site served with every Bootstrap stylesheet a second late, as on a slow network: a stylesheet
    that does not hold up the page's scripts then visibly arrives after they ran."""
    import functools
    import http.server
    import threading
    import time

    class SlowStyles(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format, *args):
            pass

        def do_GET(self):
            if re.search(r"/bootstrap-(dark-)?[0-9a-f]+\.min\.css$", self.path.split("?")[0]):
                time.sleep(STYLESHEET_DELAY_SECONDS)
            try:
                super().do_GET()
            except (BrokenPipeError, ConnectionResetError):  # a download the page's script stopped
                pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SlowStyles, directory=str(built_site.site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("system", "stored", "reader"), [
    ("light", None, "light"), ("dark", None, "dark"), ("light", "alternate", "dark"), ("dark", "default", "light"),
])
def test_only_the_readers_scheme_blocks_the_first_paint_and_the_toggle_still_switches(system, stored, reader, slow_styles_url,
                                                                                      browser):
    """The reader's scheme (the one they chose with the toggle, which Quarto stores, else their system's) blocks
    the first paint; the other's stylesheet does not (unless it is the system's: the parser fetches that one before
    any script can read a stored choice), and never applies until the toggle asks for it."""
    from selenium.webdriver.common.by import By

    other = "light" if reader == "dark" else "dark"
    page = f"{slow_styles_url}/labs/05-trace-residual-stream.html"
    open_page(browser, page)
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": system}]})
    browser.execute_script("localStorage.clear(); if (arguments[0]) localStorage.setItem('quarto-color-scheme', arguments[0])", stored)
    browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    recorder = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WHEN_PARSED})
    try:
        open_page(browser, page)
        fetched = browser.execute_script(RENDER_BLOCKING)
        assert [before_paint for scheme, _, before_paint in fetched if scheme == reader] == [True], fetched
        if reader == system:  # (otherwise the parser fetches the system's blocking before any script can read
            # the stored choice)
            assert [status for scheme, status, _ in fetched if scheme == other] in ([], ["non-blocking"]), fetched
        # The page's own scripts (the end of the body, Quarto's handlers) measure the page in the reader's scheme:
        # its stylesheet had arrived when the parser finished.
        assert browser.execute_script("return window.schemeWhenParsed") == ("dark" if reader == "dark" else "light")
        browser.execute_script("return new Promise(done => setTimeout(done, 1000))")  # a late stylesheet would apply by now
        assert shows(browser, reader), (system, stored, browser.execute_script(BACKGROUND))
        toggle = next(t for t in browser.find_elements(By.CSS_SELECTOR, ".quarto-color-scheme-toggle") if t.is_displayed())
        toggle.click()
        wait_for(browser, lambda b: shows(b, other), f"the toggle did not switch to {other}")
        open_page(browser, page)  # the choice holds on the next load, its stylesheet blocking the paint
        assert shows(browser, other)
        assert [before for scheme, _, before in browser.execute_script(RENDER_BLOCKING) if scheme == other] == [True]
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": recorder["identifier"]})
        browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        browser.execute_script("localStorage.clear()")


def plain(text: str) -> str:
    """Text as typed: Quarto sets straight quotes curly and a no-break space after "et al."."""
    return " ".join(text.translate(str.maketrans("\u2018\u2019\u201c\u201d", "''\"\"")).split())


def test_every_page_has_its_description_in_the_built_page(built_site):
    for source in site_check.site_pages(ROOT):
        description = site_check.read_page(source).front_matter.get("description", "")
        assert len(description) > 40, f"{source.relative_to(ROOT)} has no description: in its front matter"
        built = (built_site.site / source.relative_to(ROOT).with_suffix(".html")).read_text(encoding="utf-8")
        meta = re.search(r'<meta name="description" content="([^"]*)"', built)
        assert meta and plain(html.unescape(meta.group(1))) == plain(description), source.relative_to(ROOT)


def test_every_figure_loads_lazily_at_the_size_its_svg_declares(built_site):
    # assets/site/reading.lua sizes and defers every SVG figure, so the page keeps its room before the figure arrives
    from residlab.build.phone_figures import IMAGE_SOURCE, svg_size

    seen = 0
    for page in PAGES:
        path = built_site.site / page
        for tag in re.findall(r"<img\b[^>]*>", path.read_text(encoding="utf-8")):
            source = IMAGE_SOURCE.search(tag)
            if not source or "figure-img" not in tag:
                continue
            seen += 1
            width, height = svg_size((path.parent / html.unescape(source.group("src"))).resolve())
            style = re.search(r'\bstyle="width: (?P<w>[\d.]+)px; aspect-ratio: (?P<aw>[\d.]+) / (?P<ah>[\d.]+)', tag)
            assert style and 'loading="lazy"' in tag, f"{page}: {tag}"
            assert abs(float(style["w"]) - width) < 1e-3 and abs(float(style["ah"]) - height) < 1e-3, f"{page}: {tag}"
    assert seen >= 5  # the lesson's, Lab 04's, Lab 05's, Lab 06's and the glossary's figures at least
