"""Typesetting in headless Chromium at 1280 px: the site's own math font stretches a column vector's brackets,
identifiers in tables break only after "_", "." or "-", and no copy button covers code."""

from __future__ import annotations

import pytest
from test_browser import PAGES, open_page

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base_url(built_site, served):
    return served(built_site.site)


def test_the_math_font_is_served_and_column_brackets_are_as_tall_as_the_vector(base_url, browser):
    browser.set_window_size(1280, 900)
    loaded = open_page(browser, f"{base_url}/labs/05-trace-residual-stream.html")
    assert any(url.endswith("noto-sans-math-400.woff2") for url in loaded["requested"])
    assert browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "document.fonts.load('16px \"Noto Sans Math\"').then(f => done(f.length > 0 && document.fonts.check('16px \"Noto Sans Math\"')))")
    # x = [1; 2; -1] in Part 1: the first display formula's first column vector (mtable inside brackets)
    sizes = browser.execute_script(
        "const table = document.querySelector('main math[display=block] mtable');"
        "const row = table.parentElement; const fences = [...row.children].filter(e => e.tagName.toLowerCase() === 'mo');"
        "return [table.getBoundingClientRect().height, fences.map(f => f.getBoundingClientRect().height)]")
    vector_height, bracket_heights = sizes
    assert len(bracket_heights) == 2 and vector_height > 40
    assert all(height >= 0.9 * vector_height for height in bracket_heights), sizes


# Every place a line wraps inside a table cell's code: the character before the break.
BREAKS = """
const found = [];
for (const code of document.querySelectorAll('main td code')) {
  const text = code.textContent, range = document.createRange();
  let lastTop = null, before = '';
  const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    for (let i = 0; i < node.data.length; i++) {
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getBoundingClientRect();
      if (!rect.width) { before = node.data[i]; continue; }
      if (lastTop !== null && rect.top > lastTop + 2) found.push([text.slice(0, 60), before]);
      lastTop = rect.top; before = node.data[i];
    }
  }
}
return found;
"""


@pytest.mark.parametrize("page", PAGES)
def test_table_identifiers_break_only_after_separators_and_copy_buttons_cover_no_code(page, base_url, browser):
    browser.set_window_size(1280, 900)
    open_page(browser, f"{base_url}/{page}")
    bad = [(text, before) for text, before in browser.execute_script(BREAKS) if before not in "_.-/ "]
    assert bad == [], f"{page}: identifiers broken mid-word (text, character before the break)"
    covered = browser.execute_script(
        "const out = [];"
        "for (const button of document.querySelectorAll('.code-copy-button')) {"
        "  const b = button.getBoundingClientRect(); if (!b.width) continue;"
        "  const pre = button.closest('.code-copy-outer-scaffold, div.sourceCode').querySelector('pre');"
        "  const range = document.createRange(); range.selectNodeContents(pre);"
        "  for (const r of range.getClientRects()) {"
        "    if (r.width && r.left < b.right && r.right > b.left && r.top < b.bottom && r.bottom > b.top) { out.push(pre.textContent.slice(0, 60)); break; }"
        "  }"
        "}"
        "return out;")
    assert covered == [], f"{page}: a copy button covers code"
