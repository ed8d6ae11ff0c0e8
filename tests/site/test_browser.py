"""Every built page in headless Chromium, served on 127.0.0.1: no script error, no failed request, nothing
fetched from another host; diagrams (inline SVG), math, search, collapsed solutions and downloads work as a reader sees
them; axe-core finds no accessibility violation. A screenshot of each page is saved under the folder the test
session prints at its end."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from residlab.build import site_check

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PAGES = [str(page.relative_to(ROOT).with_suffix(".html")) for page in site_check.site_pages(ROOT)]
WAIT_SECONDS = 20
# axe-core as Lighthouse's lock pins it (make test installs it with Lighthouse): run on the pages as built, the way
# Quarto's own axe check runs it (the default rules, stylesheets preloaded), without a second render to carry it.
AXE = ROOT / "tests" / "site" / "lighthouse" / "node_modules" / "axe-core" / "axe.min.js"


def wait_for(browser, condition, message: str):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(browser, WAIT_SECONDS).until(condition)
    except TimeoutException:
        pytest.fail(f"{message} (waited {WAIT_SECONDS} s)", pytrace=False)


# Scrolls to each explorer's block in turn, as a reader would, so the site's loader (assets/site/explorers.html)
# fetches its scripts: on to the next block once this one is loading or its scripts have all run (the loader marks
# those data-ran); resolves once every shown block has settled (aria-busy gone), back at the top of the page.
BRING_EXPLORERS = """
const done = arguments[arguments.length - 1];
const frames = () => new Promise((next) => requestAnimationFrame(() => requestAnimationFrame(next)));
const ran = (src) => [...document.querySelectorAll("script[data-ran]")].some((s) => s.src === new URL(src, document.baseURI).href);
(async () => {
  for (const block of document.querySelectorAll("[data-residlab-scripts]")) {
    if (!block.getClientRects().length) continue;  // not shown (print hides some): it loads once shown
    block.scrollIntoView();
    do await frames();
    while (!block.hasAttribute("aria-busy") && !block.dataset.residlabScripts.split(/\\s+/).filter(Boolean).every(ran));
  }
  while (document.querySelector("[data-residlab-scripts][aria-busy]")) await frames();
  window.scrollTo(0, 0);
  await frames();
})().then(() => done(true));
"""


def open_page(browser, url: str, explorers: bool = True) -> dict:
    """Load a page and wait until it has settled, its explorers built unless ``explorers`` is false (they load when
    a reader nears them); returns what it requested and logged meanwhile."""
    browser.get_log("performance"), browser.get_log("browser")  # drop what earlier pages left
    browser.get(url)
    wait_for(browser, lambda b: b.execute_script("return document.readyState") == "complete", f"{url} never loaded")
    # and two frames more: what a ResizeObserver does after layout (accessibility.html's tab stops) is done by then
    browser.execute_async_script("const done = arguments[arguments.length - 1];"
                                 "requestAnimationFrame(() => requestAnimationFrame(() => done(true)))")
    if explorers:
        browser.execute_async_script(BRING_EXPLORERS)
    events = [json.loads(entry["message"])["message"] for entry in browser.get_log("performance")]
    requested = {e["params"]["requestId"]: e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"}
    failed = [f"{requested.get(e['params']['requestId'], '?')}: {e['params']['errorText']}"
              for e in events if e["method"] == "Network.loadingFailed"]
    failed += [f"{e['params']['response']['url']}: HTTP {e['params']['response']['status']}"
               for e in events if e["method"] == "Network.responseReceived" and e["params"]["response"]["status"] >= 400]
    return {"requested": sorted(set(requested.values())), "failed": failed, "console": browser.get_log("browser")}


def requested_urls(browser) -> list[str]:
    """Every URL the page requested since the performance log was last read."""
    events = [json.loads(entry["message"])["message"] for entry in browser.get_log("performance")]
    return [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"]


def search_button(browser):
    """Quarto's search button, once its scripts (loaded after the page) have drawn it."""
    from selenium.webdriver.common.by import By

    return wait_for(browser, lambda b: b.find_element(By.CSS_SELECTOR, "#quarto-search .aa-DetachedSearchButton"),
                    "the search button never appeared")


def axe_violations(browser, within: str | None = None) -> list[str]:
    """axe-core's violations on the loaded page (or inside the element of id ``within``), one line each."""
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: run `npm ci --prefix tests/site/lighthouse` (make test does)", pytrace=False)
    if not browser.execute_script("return Boolean(window.axe)"):
        browser.execute_script(AXE.read_text(encoding="utf-8"))
    found = browser.execute_async_script(
        "const [within, done] = arguments;"
        "window.axe.run(within ? document.getElementById(within) : document, {preload: {assets: ['cssom'], timeout: 50000}})"
        ".then(r => done(r.violations.map(v => `${v.id} (${v.impact}): ${v.help} at ${JSON.stringify(v.nodes.slice(0, 3).map(n => n.target))}`)),"
        " e => done(['axe did not run: ' + e]))", within)  # fmt: skip
    return found


@pytest.fixture(scope="module")
def base_url(built_site, served):
    return served(built_site.site)


@pytest.mark.parametrize("page", PAGES)
def test_page_loads_cleanly_and_only_from_its_own_host(page, base_url, browser, screenshot_dir):
    browser.set_window_size(1280, 900)  # other tests narrow the window to a phone's
    loaded = open_page(browser, f"{base_url}/{page}")
    origin = urlsplit(base_url).netloc
    remote = [url for url in loaded["requested"] if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).netloc != origin]
    assert remote == [], f"{page} requested other hosts"
    assert loaded["failed"] == [], f"{page} had failed requests"
    errors = [entry["message"] for entry in loaded["console"] if entry["level"] == "SEVERE"]
    assert errors == [], f"{page} logged errors"
    scroll_width, window_width = browser.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert scroll_width <= window_width, f"{page} is wider than a 1280-pixel window: it scrolls sideways"
    shot = screenshot_dir / (page.replace("/", "__").removesuffix(".html") + ".png")
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


PHONE_WIDTH = 390
# What may scroll sideways inside its own box: a table's box and a diagram's (assets/site/reading.lua, diagrams.py)
SCROLLING_BOXES = "pre, main table, .rl-table-box, .rl-diagram-box, math[display='block']"


@pytest.mark.parametrize("page", PAGES)
def test_page_fits_a_phone_screen_and_its_scrolling_boxes_take_the_keyboard(page, base_url, browser, screenshot_dir):
    """At 390 px nothing pushes the page sideways: a wide table or a long formula scrolls inside its own box,
    and each box that scrolls is a tab stop, so a keyboard can scroll it too."""
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 1, "mobile": True})  # fmt: skip
    try:
        open_page(browser, f"{base_url}/{page}")
        scroll_width, window_width = browser.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert window_width == PHONE_WIDTH
        wide = browser.execute_script(
            "const w = document.documentElement.clientWidth;"
            "return [...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right > w + 0.5"
            " && ![...document.querySelectorAll(arguments[0])].some(b => b !== e && b.contains(e)))"
            ".slice(0, 5).map(e => e.tagName + ': ' + e.textContent.slice(0, 60))", SCROLLING_BOXES)
        assert scroll_width <= window_width, f"{page} is wider than a {PHONE_WIDTH}-pixel screen; sticking out: {wide}"
        unreachable = browser.execute_script(
            "return [...document.querySelectorAll(arguments[0])]"
            ".filter(b => b.scrollWidth > b.clientWidth && b.getAttribute('tabindex') !== '0')"
            ".map(b => b.tagName + ': ' + b.textContent.slice(0, 60))", SCROLLING_BOXES)
        assert unreachable == [], f"{page}: boxes that scroll sideways but take no keyboard focus"
        cut = browser.execute_script(  # a display formula scrolls sideways only: nothing of it is cut off vertically
            "return [...document.querySelectorAll('math[display=block]')].filter(m => m.scrollHeight > m.clientHeight)"
            ".map(m => m.textContent.slice(0, 60))")
        assert cut == [], f"{page}: display formulas taller than their box"
        shot = screenshot_dir / (page.replace("/", "__").removesuffix(".html") + "-phone.png")
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_diagrams_are_drawn_into_the_page_and_no_diagram_library_is_shipped(built_site, base_url, browser):
    """The lesson's diagrams arrive as inline SVG (residlab.course.ui.diagrams, and the block picture's two blocks):
    visible, with real text, an image role and a title and description; no page loads or links a diagram library,
    and the site ships none."""
    page = "lessons/04-residual-stream.html"
    assert not (built_site.site / "site_libs" / "quarto-diagram").exists() and not list(built_site.site.rglob("mermaid*"))
    for html in built_site.site.rglob("*.html"):  # no diagram left for a library to draw, none loaded
        text = html.read_text(encoding="utf-8")
        assert not re.search(r'class="mermaid|mermaid[\w.-]*\.js', text), html.relative_to(built_site.site)
    loaded = open_page(browser, f"{base_url}/{page}")
    assert not [url for url in loaded["requested"] if "mermaid" in url]
    diagrams = browser.execute_script(
        "return [...document.querySelectorAll('main figure svg.rl-diagram')].map(svg => {"
        "  const box = svg.getBoundingClientRect();"
        "  const named = id => (document.getElementById(id) || {}).textContent || '';"
        "  return {role: svg.getAttribute('role'), title: named(svg.getAttribute('aria-labelledby')),"
        "          description: named(svg.getAttribute('aria-describedby')), width: box.width, height: box.height,"
        "          texts: [...svg.querySelectorAll('text')].filter(t => t.getBBox().width > 0).length,"
        "          caption: svg.closest('figure').querySelector('figcaption').textContent.trim()}; })")
    assert [diagram["title"] for diagram in diagrams] == [
        "Four checks on a residual-stream explanation", "The life of a mechanism claim",
        "A sequential pre-normalised block (PreNormBlock) and its hook sites",
        "A parallel block (GPTNeoXLayer) and its hook sites"]
    for diagram in diagrams:
        assert diagram["role"] == "img" and diagram["width"] > 200 and diagram["height"] > 200, diagram
        assert diagram["description"].startswith(("Flowchart: ", "State diagram: ", "Drawn top to bottom.")), diagram
        assert diagram["texts"] >= 4, diagram
    assert diagrams[0]["caption"].startswith("Four checks on a residual-stream explanation, repeated until")
    assert diagrams[1]["caption"].startswith("The life of a mechanism claim: every test either leaves")
    assert diagrams[2]["caption"] == diagrams[3]["caption"] and diagrams[2]["caption"].startswith("The two blocks")


def test_math_is_mathml_and_visible(base_url, browser):
    open_page(browser, f"{base_url}/lessons/04-residual-stream.html")
    sizes = browser.execute_script(
        "return [...document.querySelectorAll('math')].map(m => { const r = m.getBoundingClientRect();"
        " return [m.namespaceURI, r.width, r.height]; })")
    assert len(sizes) >= 10
    assert {namespace for namespace, _, _ in sizes} == {"http://www.w3.org/1998/Math/MathML"}
    visible = [size for size in sizes if size[1] > 0 and size[2] > 0]
    assert len(visible) == len(sizes)


def test_search_finds_the_glossary_entry(base_url, browser):
    from selenium.webdriver.common.by import By

    open_page(browser, f"{base_url}/index.html")
    search_button(browser).click()
    field = wait_for(browser, lambda b: b.find_element(By.CSS_SELECTOR, ".aa-DetachedOverlay input.aa-Input"), "search overlay did not open")
    field.send_keys("residual stream")
    wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".aa-DetachedOverlay .aa-Item a"), "search found nothing")
    hits = [link.get_attribute("href") for link in browser.find_elements(By.CSS_SELECTOR, ".aa-DetachedOverlay .aa-Item a")]
    assert any(urlsplit(hit).path == "/glossary/residual-stream.html" for hit in hits), hits


# When each of Quarto's search scripts started to download, and when the page's load event began (ms).
SEARCH_FETCHED = """
return [performance.getEntriesByType('navigation')[0].loadEventStart,
        performance.getEntriesByType('resource').filter(e => e.name.includes('/quarto-search/')).map(e => e.startTime)];
"""


def test_search_loads_after_the_page_except_on_a_page_opened_from_a_search_result(base_url, browser):
    """Quarto's search scripts are fetched once a page has loaded (residlab/build/page_weight.py): the search button
    appears then. A page opened from a search result (?q=) gets them as Quarto wrote them: the matches are
    highlighted, the query leaves the address, and no link carries it."""
    open_page(browser, f"{base_url}/glossary/tokenizer.html")
    search_button(browser)
    load_started, fetched = browser.execute_script(SEARCH_FETCHED)
    assert len(fetched) == 3 and min(fetched) >= load_started, (load_started, fetched)
    open_page(browser, f"{base_url}/glossary/logit-lens.html?q=residual")
    search_button(browser)
    load_started, fetched = browser.execute_script(SEARCH_FETCHED)
    assert len(fetched) == 3 and max(fetched) < load_started, (load_started, fetched)
    assert browser.execute_script("return document.querySelectorAll('main mark').length") > 0
    assert "q=" not in browser.current_url
    carrying = "return [...document.querySelectorAll('a[href]')].filter(a => a.href.includes('q=')).length"
    assert browser.execute_script(carrying) == 0


def test_lab_solutions_stay_collapsed_until_clicked(base_url, browser):
    from selenium.webdriver.common.by import By

    open_page(browser, f"{base_url}/labs/05-trace-residual-stream.html")
    collapsible = browser.find_elements(By.CSS_SELECTOR, ".callout .callout-collapse")
    assert collapsible, "Lab 05 has no collapsed callout"
    solutions = collapsible[-1]
    assert not solutions.is_displayed()
    header = solutions.find_element(By.XPATH, "preceding-sibling::*[contains(@class, 'callout-header')]")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", header)
    header.click()
    # Bootstrap animates the opening ("collapsing"); until it ends, text below the growing edge reads as hidden.
    wait_for(browser, lambda b: {"collapse", "show"} <= set(solutions.get_attribute("class").split()),
             "the solutions did not open when clicked")
    assert solutions.is_displayed()
    assert "sqrt(17)" in solutions.text


def test_every_download_link_serves_the_runner(base_url, browser):
    from selenium.webdriver.common.by import By

    from residlab.course import pages

    served = set()
    for page in ["index.html"] + [family.page.replace(".qmd", ".html") for family in pages.FAMILIES if family.runners]:
        open_page(browser, f"{base_url}/{page}")
        for link in browser.find_elements(By.CSS_SELECTOR, "a[href*='assets/labs/']"):
            url = link.get_attribute("href")
            name = urlsplit(url).path.rsplit("/", 1)[-1]
            with urllib.request.urlopen(url, timeout=10) as response:
                assert response.read() == (ROOT / "assets" / "labs" / name).read_bytes(), url
            served.add(name)
    assert served == {path.rsplit("/", 1)[1] for path in pages.served_downloads()}


@pytest.mark.parametrize("page", PAGES)
def test_axe_finds_no_accessibility_violation(page, base_url, browser):
    browser.set_window_size(1280, 900)
    open_page(browser, f"{base_url}/{page}")
    assert axe_violations(browser) == [], f"{page}: axe violations"


def test_axe_reports_a_planted_violation(base_url, browser):
    """The check can fail: an image without a text alternative, added to a page, is named."""
    open_page(browser, f"{base_url}/index.html")
    browser.execute_script("const image = document.createElement('img'); image.id = 'planted'; image.width = 40;"
                           "image.height = 40; document.querySelector('main').append(image)")  # fmt: skip
    found = axe_violations(browser)
    assert len(found) == 1 and found[0].startswith("image-alt (critical)") and "#planted" in found[0], found
