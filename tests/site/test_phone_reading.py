"""Every page of the built site read at a phone's width (412 px) in the dark scheme and at a desktop's (1280 px) in the
light one (``SCREENS``), in headless Chromium: nothing wider than the screen outside a box that scrolls; every table fits or
scrolls in its own box with a visible cue (the shaded edge, the first column kept in view, a tab stop); no cell of
running text squeezed to a word a line; every figure's smallest text at least 11 CSS px on screen (an image's SVG
is laid out at the size the page shows it and measured, as inline SVG is); identifiers in tables broken only after
".", "_", "-" or "/" (or at a space), never between two letters or digits.

The pages are the ones the built site lists in its sitemap.xml, not a list kept here."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from test_browser import open_page, wait_for

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
WIDTHS = {"phone": 412, "desktop": 1280}
SCHEMES = ("light", "dark")
SMALLEST_TEXT_PX = 11
SQUEEZED_PX = 9 * 16  # a cell of 40 characters or more narrower than this reads a word or two a line

# Elements drawn past the screen's edges, outside any box that scrolls or clips them sideways.
OVERFLOWING = """
const width = document.documentElement.clientWidth, out = [];
const clipped = element => {
  for (let box = element.parentElement; box && box !== document.body; box = box.parentElement) {
    if (['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(box).overflowX)) return true;
  }
  return false;
};
for (const element of document.querySelectorAll('body *')) {
  const box = element.getBoundingClientRect();
  if (!box.width || !box.height || getComputedStyle(element).position === 'fixed') continue;
  if ((box.right > width + 0.5 || box.left < -0.5) && !clipped(element))
    out.push(element.tagName + '.' + element.className + ': ' + (element.textContent || '').trim().slice(0, 50));
}
return [document.documentElement.scrollWidth, width, out.slice(0, 8)];
"""

# Each table of the page that does not fit the screen, and what it lacks of its scrolling box and cue.
TABLES = """
const width = document.documentElement.clientWidth, out = [];
for (const table of document.querySelectorAll('main table')) {
  const box = table.getBoundingClientRect();
  if (!box.width) continue;
  const name = (table.querySelector('th, td') || table).textContent.trim().slice(0, 40);
  for (const cell of table.querySelectorAll('td')) {
    const text = cell.textContent.trim();
    if (text.length >= 40 && cell.getBoundingClientRect().width < arguments[0])
      out.push(`${name}: a cell of running text squeezed to ${Math.round(cell.getBoundingClientRect().width)} px: ${text.slice(0, 40)}`);
  }
  if (box.right <= width + 0.5 && box.left >= -0.5) continue;
  const scroller = table.closest('.rl-table-box, .rl-table-scroll, [style*=overflow]');
  if (!scroller || !['auto', 'scroll'].includes(getComputedStyle(scroller).overflowX)) {
    out.push(`${name}: wider than the screen and in no box that scrolls`); continue;
  }
  if (scroller.getBoundingClientRect().right > width + 0.5) out.push(`${name}: its scrolling box is wider than the screen`);
  if (!getComputedStyle(scroller).backgroundImage.includes('gradient')) out.push(`${name}: no shaded edge on its box`);
  if (scroller.getAttribute('tabindex') !== '0') out.push(`${name}: its box takes no keyboard focus`);
  const first = table.querySelector('tbody tr > :first-child');
  if (first && getComputedStyle(first).position !== 'sticky') out.push(`${name}: its first column scrolls away`);
}
return out;
"""

# Every line break inside a table cell's text, outside formulas: the characters on either side of it.
BREAKS = """
const found = [];
for (const cell of document.querySelectorAll('main td, main th')) {
  const range = document.createRange();
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT,
    {acceptNode: node => node.parentElement.closest('math') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  let lastTop = null, before = '';
  while (walker.nextNode()) {
    const node = walker.currentNode;
    for (let i = 0; i < node.data.length; i++) {
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getBoundingClientRect();
      if (!rect.width) { before = node.data[i]; continue; }
      if (lastTop !== null && rect.top > lastTop + 2) found.push([cell.textContent.trim().slice(0, 50), before, node.data[i]]);
      lastTop = rect.top; before = node.data[i];
    }
  }
}
return found;
"""

# The smallest on-screen size (CSS px) of the text of each figure: inline SVG as it stands; an SVG image laid out
# by itself at the width the page shows it, then measured the same way (font size times the scale the screen
# applies to it). Images are loaded first (figures load lazily, and a phone may be given its own drawing).
FIGURE_TEXT = """
const done = arguments[arguments.length - 1];
const measure = svg => {
  let smallest = Infinity, count = 0;
  for (const text of svg.querySelectorAll('text')) {
    if (!text.textContent.trim() || !text.getBBox().width) continue;
    const m = text.getScreenCTM();
    const size = parseFloat(getComputedStyle(text).fontSize) * Math.hypot(m.a, m.b);
    smallest = Math.min(smallest, size); count++;
  }
  return [smallest, count];
};
(async () => {
  const out = [];
  for (const svg of document.querySelectorAll('main svg')) {
    if (!svg.getBoundingClientRect().width || svg.closest('button, .bi')) continue;
    const [smallest, count] = measure(svg);
    if (count) out.push(['inline svg: ' + (svg.getAttribute('aria-label') || svg.id || svg.className.baseVal || '?'), smallest, count, '']);
  }
  for (const image of document.querySelectorAll('main img')) {
    image.loading = 'eager';
    if (!image.complete) await new Promise(resolve => { image.onload = image.onerror = resolve; });
    if (!/\\.svg(\\?|$)/.test(image.currentSrc)) continue;
    const style = getComputedStyle(image);
    const shown = image.getBoundingClientRect().width - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)
      - parseFloat(style.borderLeftWidth) - parseFloat(style.borderRightWidth);
    const source = await (await fetch(image.currentSrc)).text();
    const svg = new DOMParser().parseFromString(source, 'image/svg+xml').documentElement;
    const holder = document.createElement('div');
    holder.style.cssText = 'position: absolute; left: 0; top: 0; visibility: hidden; width: ' + shown + 'px';
    svg.style.width = shown + 'px'; svg.style.height = 'auto';
    holder.appendChild(document.importNode(svg, true));
    document.body.appendChild(holder);
    const [smallest, count] = measure(holder.firstChild);
    holder.remove();
    out.push([image.currentSrc.split('/').pop(), smallest, count, image.getAttribute('alt') || '']);
  }
  done(out);
})().catch(error => done([['script error', 0, 0, String(error)]]));
"""


def site_pages(site) -> list[str]:
    """The pages the built site's sitemap lists, as paths relative to the site (site-url's folder taken off)."""
    tree = ElementTree.parse(site / "sitemap.xml")
    paths = [urlsplit(element.text).path for element in tree.iter() if element.tag.endswith("loc")]
    base = paths[0].rsplit("/", 1)[0] + "/"
    while not all(path.startswith(base) for path in paths):
        base = base[:-1].rsplit("/", 1)[0] + "/"
    pages = [path[len(base):] or "index.html" for path in paths]
    assert pages and all((site / page).is_file() for page in pages), pages
    return pages


@pytest.fixture(scope="module")
def base_url(built_site, served):
    return served(built_site.site)


def show(browser, width: int, scheme: str) -> None:
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 800})  # fmt: skip
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})


@pytest.fixture
def reset_screen(browser):
    yield
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def page_problems(browser) -> list[str]:
    """What the loaded page shows badly at the current width, one line each."""
    problems = []
    scroll_width, width, sticking_out = browser.execute_script(OVERFLOWING)
    if scroll_width > width:
        problems.append(f"the page is {scroll_width} px wide on a {width} px screen")
    problems += [f"wider than the screen, outside a scrolling box: {element}" for element in sticking_out]
    problems += browser.execute_script(TABLES, SQUEEZED_PX)
    problems += [f"identifier broken inside a word ({before!r}|{after!r}): {text}"
                 for text, before, after in browser.execute_script(BREAKS) if before.isalnum() and after.isalnum()]
    for figure, smallest, count, alt in browser.execute_async_script(FIGURE_TEXT):
        if count == 0:  # text drawn as paths, or none: nothing a reader could enlarge, nothing to measure
            problems.append(f"figure {figure}: no SVG text to measure {alt[:40]}")
        elif smallest < SMALLEST_TEXT_PX:
            problems.append(f"figure {figure}: smallest text {smallest:.1f} px ({count} texts) {alt[:40]}")
    return problems


# Each width once and each scheme once. The dark theme changes colours, and its one layout rule gives a figure a card
# of padding (theme-dark.scss): so the phone, the narrow screen, is read in the dark scheme, where a figure is widest,
# and the desktop in the light one.
SCREENS = (("phone", "dark"), ("desktop", "light"))
DARK_LAYOUT = {"padding: 0.25rem", "box-sizing: content-box", "max-width: calc(100% - 0.5rem)"}  # the figure's card


def test_the_dark_theme_adds_no_layout_but_the_figure_card():
    rules = (ROOT / "assets/site/theme-dark.scss").read_text(encoding="utf-8")
    layout = {match.strip().rstrip(";") for match in re.findall(
        r"^\s*(?:[\w-]*(?:font-size|width|height|padding|margin|spacing|line-height|box-sizing|display|position)"
        r"[\w-]*\s*:[^;{]*;)", rules, re.M)}  # fmt: skip
    assert layout == DARK_LAYOUT, f"theme-dark.scss lays out more than the figure card: read every width in both schemes ({layout - DARK_LAYOUT})"
    assert {scheme for _, scheme in SCREENS} == set(SCHEMES) and {screen for screen, _ in SCREENS} == set(WIDTHS)


@pytest.mark.parametrize("screen, scheme", SCREENS)
def test_every_page_reads_at_this_width(screen, scheme, built_site, base_url, browser, reset_screen):
    show(browser, WIDTHS[screen], scheme)
    found = {}
    for page in site_pages(built_site.site):
        open_page(browser, f"{base_url}/{page}")
        wait_for(browser, lambda b: b.execute_script("return document.body.classList.contains('quarto-%s')" % scheme),
                 f"{page} never took the {scheme} scheme")
        problems = page_problems(browser)
        if problems:
            found[page] = problems
    assert found == {}, f"at {WIDTHS[screen]} px, {scheme}: pages that read badly"


def test_a_phone_is_given_the_figures_drawn_for_it(built_site, base_url, browser, reset_screen):
    """Where a figure was drawn for a phone too, a phone loads that drawing and a desktop the other."""
    page = "labs/04-read-transformer-paper.html"
    chosen = {}
    for screen, width in WIDTHS.items():
        show(browser, width, "light")
        open_page(browser, f"{base_url}/{page}")
        chosen[screen] = browser.execute_async_script(
            "const done = arguments[0], image = document.querySelector('main picture img');"
            "if (!image) return done(null); image.loading = 'eager';"
            "image.complete ? done(image.currentSrc) : (image.onload = () => done(image.currentSrc));")
    assert chosen["phone"] and chosen["phone"].endswith("-phone.svg"), chosen
    assert chosen["desktop"].endswith(".svg") and not chosen["desktop"].endswith("-phone.svg"), chosen


def test_the_checks_name_what_reads_badly(base_url, browser, reset_screen):
    """The checks can fail: a planted wide block, a squeezed table, a mid-word break and a figure with 6 px text
    on the home page are each named."""
    show(browser, WIDTHS["phone"], "light")
    open_page(browser, f"{base_url}/index.html")
    browser.execute_script(
        "const main = document.querySelector('main');"
        "main.insertAdjacentHTML('beforeend', '<div id=planted-wide style=\"width: 900px\">wide</div>"
        "<table id=planted-table style=\"display: table; width: 900px; max-width: none\"><tbody><tr><td>a</td><td>b</td></tr></tbody></table>"
        "<table style=\"width: 200px\"><tbody><tr><td><code style=\"word-break: break-all\">blocks_resid_pre_abcdefghij</code></td>"
        "<td>a sentence of running text that is squeezed into a narrow cell</td><td style=\"width: 150px\">x</td></tr></tbody></table>"
        "<svg width=200 height=50><text x=0 y=20 font-size=6>tiny</text></svg>')")  # fmt: skip
    problems = "\n".join(page_problems(browser))
    assert "outside a scrolling box: DIV." in problems, problems
    assert "a: wider than the screen and in no box that scrolls" in problems, problems
    assert "a cell of running text squeezed" in problems, problems
    assert "identifier broken inside a word" in problems, problems
    assert "figure inline svg" in problems and "smallest text 6.0 px" in problems, problems
