"""The labs' platform tabs open on the reader's platform where the browser says it (assets/site/reading.html), and
the toy explorer opens on an input that gives none of Lab 05's answers away.

The browser's platform is set through Chromium's user-agent override (the user agent, navigator.platform and
navigator.userAgentData), as a Linux, macOS or Windows browser reports it; with none the browser recognises, the
first tab, Linux, stays open.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_browser import open_page, wait_for

from residlab.course.lab05 import toy

pytestmark = pytest.mark.slow
PAGE = "labs/05-trace-residual-stream.html"
AGENTS = {
    "Linux": ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 Safari/537.36",
              "Linux x86_64", "Linux"),
    "macOS": ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 "
              "Safari/537.36", "MacIntel", "macOS"),
    "Windows": ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 "
                "Safari/537.36", "Win32", "Windows"),
    None: ("Mozilla/5.0 (compatible; SomeReader/1.0)", "Plan 9", "Unknown"),
}  # fmt: skip


@pytest.fixture(scope="module")
def site(request) -> Path:
    built = os.environ.get("RESIDLAB_BUILT_SITE")
    return Path(built).resolve() if built else request.getfixturevalue("built_site").site


@pytest.fixture
def as_platform(browser):
    original = browser.execute_script("return navigator.userAgent")

    def become(platform):
        agent, navigator_platform, brand_platform = AGENTS[platform]
        metadata = {"brands": [{"brand": "Chromium", "version": "130"}], "fullVersion": "130.0", "platform":
                    brand_platform, "platformVersion": "", "architecture": "", "model": "", "mobile": False}  # fmt: skip
        browser.execute_cdp_cmd("Emulation.setUserAgentOverride",
                                {"userAgent": agent, "platform": navigator_platform, "userAgentMetadata": metadata})  # fmt: skip

    yield become
    browser.execute_cdp_cmd("Emulation.setUserAgentOverride", {"userAgent": original})


def open_tabs(browser) -> list[str]:
    """The label of the open tab of each platform tabset on the page."""
    return browser.execute_script("""
        return Array.from(document.querySelectorAll('.panel-tabset > .nav-tabs')).map(function (tabs) {
          var open = tabs.querySelector('a.nav-link.active');
          var pane = open && document.querySelector(open.getAttribute('data-bs-target'));
          return open && pane && pane.classList.contains('active') ? open.textContent.trim() : null;
        });""")


@pytest.mark.parametrize("platform", ["Linux", "macOS", "Windows", None])
def test_platform_tabs_open_on_the_readers_platform(browser, served, site, as_platform, platform):
    as_platform(platform)
    open_page(browser, f"{served(site)}/{PAGE}")
    assert browser.execute_script("return navigator.platform") == AGENTS[platform][1]
    expected = platform or "Linux"
    wait_for(browser, lambda b: open_tabs(b) and all(label == expected for label in open_tabs(b)),
             f"a platform tab other than {expected} is open: {open_tabs(browser)}")


def test_the_toy_explorer_opens_on_an_input_other_than_the_labs(browser, served, site):
    open_page(browser, f"{served(site)}/{PAGE}")
    wait_for(browser, lambda b: b.find_elements("css selector", "#toy-x-1"), "the toy explorer was never built")
    shown = [browser.find_element("id", f"toy-{row}-{i}").get_attribute("value")
             for row in ("x", "second") for i in (1, 2, 3)]  # fmt: skip
    labs = [str(v) for v in (*toy.DEFAULT_INPUT, *toy.DEFAULT_SECOND_POSITION)]
    assert shown[:3] != labs[:3] and shown[3:] != labs[3:], shown
