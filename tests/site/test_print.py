"""Lab 05 printed to PDF by headless Chromium (DevTools Page.printToPDF), read back with pypdf: the content
alone, the solutions collapsed with a note, no code line or formula cut off."""

from __future__ import annotations

import base64
import io

import pytest
from test_browser import open_page

pytestmark = pytest.mark.slow
LAB = "labs/05-trace-residual-stream.html"


@pytest.fixture(scope="module")
def printed(built_site, served, browser, screenshot_dir):
    from pypdf import PdfReader

    browser.set_window_size(1280, 900)
    open_page(browser, f"{served(built_site.site)}/{LAB}")
    pdf = base64.b64decode(browser.execute_cdp_cmd("Page.printToPDF", {"printBackground": True, "paperWidth": 8.27, "paperHeight": 11.69})["data"])
    (screenshot_dir / "labs__05-trace-residual-stream.pdf").write_bytes(pdf)
    reader = PdfReader(io.BytesIO(pdf))
    return [page.extract_text() for page in reader.pages]


def test_print_has_the_content_and_no_site_chrome(printed, browser):
    text = "\n".join(printed)
    assert "Trace a Residual Stream" in text and "Part 1" in text and "Submit an explanation" in text
    for chrome in ("Instructors", "On this page", "Overview", "Copy to clipboard", "Search"):
        assert chrome not in text, f"the printout shows site chrome: {chrome!r}"
    # the explorers' and the checker's controls are not printed
    for control in ("z, first branch suppressed", "Nothing is checked or shown until you ask", "x (position 1)"):
        assert control not in text, control


def test_solutions_print_collapsed_with_a_note(printed):
    text = " ".join(" ".join(printed).split())
    assert "Analytically checked answers" in text
    assert "Not printed: open the solutions on the page" in text
    assert "Suppressing the first branch makes" not in text  # a sentence inside the solutions


def test_code_and_formulas_are_not_cut(built_site, served, browser):
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        open_page(browser, f"{served(built_site.site)}/{LAB}")
        cut = browser.execute_script(
            "return [...document.querySelectorAll('main pre, main math[display=block]')]"
            ".filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 60))")
        assert cut == [], "code or formulas wider than the printed page"
        hidden = browser.execute_script(
            "return ['#quarto-header', '#quarto-sidebar', '#quarto-margin-sidebar', '.code-copy-button']"
            ".filter(s => [...document.querySelectorAll(s)].some(e => getComputedStyle(e).display !== 'none'))")
        assert hidden == []
        unbreakable = browser.execute_script(
            "return [...document.querySelectorAll('main pre, main math[display=block]')].map(e => getComputedStyle(e).breakInside)")
        assert unbreakable and set(unbreakable) == {"avoid"}
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
