"""Light and dark mode in headless Chromium: every page follows the reader's prefers-color-scheme until the
navbar toggle chooses, a screenshot of each page is saved in both modes, and axe finds no violation in the dark
mode either (test_browser.py runs it in the light one)."""

from __future__ import annotations

import pytest
from test_browser import PAGES, axe_violations, open_page

pytestmark = pytest.mark.slow


def prefer(browser, scheme: str) -> None:
    """The reader's system setting, as the next page loaded sees it. No toggle choice is stored: the one test that
    clicks the toggle forgets its choice when it ends (``reset_scheme``), so each page loads once per scheme."""
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})


def page_mode(browser) -> tuple[str, float]:
    """('dark' or 'light' from the body's class, the body background's relative luminance)."""
    mode, colour = browser.execute_script(
        "const b = document.body; return [b.classList.contains('quarto-dark') ? 'dark' : b.classList.contains('quarto-light') ? 'light' : '',"
        " getComputedStyle(b).backgroundColor]")
    red, green, blue = (int(part) / 255 for part in colour[colour.index("(") + 1:colour.index(")")].split(",")[:3])
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (red, green, blue)]
    return mode, 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


@pytest.fixture(scope="module")
def base_url(built_site, served):
    return served(built_site.site)


@pytest.fixture
def reset_scheme(browser):
    yield
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    browser.execute_script("try { localStorage.removeItem('quarto-color-scheme'); } catch (e) {}")


@pytest.mark.parametrize("page", PAGES)
def test_page_follows_the_system_setting_in_both_modes(page, base_url, browser, screenshot_dir, reset_scheme):
    browser.set_window_size(1280, 900)
    for scheme in ("light", "dark"):
        prefer(browser, scheme)
        loaded = open_page(browser, f"{base_url}/{page}")
        assert [e["message"] for e in loaded["console"] if e["level"] == "SEVERE"] == []
        mode, luminance = page_mode(browser)
        assert mode == scheme, f"{page}: the reader prefers {scheme}, the page shows {mode or 'no mode'}"
        assert (luminance < 0.05) if scheme == "dark" else (luminance > 0.9), (page, scheme, luminance)
        shot = screenshot_dir / (page.replace("/", "__").removesuffix(".html") + f"-{scheme}.png")
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_the_toggle_overrides_the_system_setting_and_is_remembered(base_url, browser, reset_scheme):
    from selenium.webdriver.common.by import By

    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(1280, 900)  # the toggle in the navbar, not in a collapsed menu
    prefer(browser, "dark")
    open_page(browser, f"{base_url}/labs/05-trace-residual-stream.html")
    assert page_mode(browser)[0] == "dark"

    def shown_toggle(driver):  # laid out once the page's styles apply: waited for, a busy machine is slower
        return next((t for t in driver.find_elements(By.CSS_SELECTOR, ".quarto-color-scheme-toggle") if t.is_displayed()), None)

    toggle = WebDriverWait(browser, 10).until(shown_toggle, "no colour-scheme toggle is shown in the navbar")
    assert toggle.get_attribute("title") or toggle.get_attribute("aria-label") or toggle.text  # it has a name
    toggle.click()
    assert page_mode(browser)[0] == "light"
    open_page(browser, f"{base_url}/glossary/index.html")  # the choice holds on the next page
    assert page_mode(browser)[0] == "light"


@pytest.mark.parametrize("page", PAGES)
def test_axe_finds_no_violation_in_dark_mode(page, base_url, browser, reset_scheme):
    browser.set_window_size(1280, 900)
    prefer(browser, "dark")
    open_page(browser, f"{base_url}/{page}")
    assert page_mode(browser)[0] == "dark"
    assert axe_violations(browser) == [], f"{page}: axe violations in dark mode"
