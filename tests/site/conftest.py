"""The site as Quarto builds it: one fresh render of a clean copy per test session, served on 127.0.0.1 and
opened in headless Chromium.

- ``built_site``: a clean copy of the project (as a fresh clone has it) rendered by ``quarto render`` into a
  temporary folder; the render must exit 0 and print no warning line. Needs Quarto (``$QUARTO`` or PATH).
- ``served``: an HTTP server on 127.0.0.1 for a built site folder.
- ``browser``: headless Chromium through WebDriver (Debian's chromium and chromium-driver), logging every
  network event and console message so tests can assert on them.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from residlab.build import site

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("RESIDLAB_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("RESIDLAB_CHROMEDRIVER", "/usr/bin/chromedriver")
SCREENSHOTS = Path(os.environ.get("RESIDLAB_SCREENSHOTS") or tempfile.mkdtemp(prefix="residlab-screenshots-"))


@dataclass
class Build:
    project: Path  # the clean copy that was rendered
    site: Path  # what quarto render wrote
    output: str  # everything quarto render printed


@pytest.fixture(scope="session")
def rendered_copy(tmp_path_factory) -> Path:
    if not (os.environ.get("QUARTO") or shutil.which("quarto")):
        pytest.fail(site.QUARTO_MISSING, pytrace=False)
    return site.clean_copy(ROOT, tmp_path_factory.mktemp("render") / "project")


def _render(project: Path, output_dir: Path) -> Build:
    try:
        output = site.render(project, output_dir, echo=lambda line: None)
    except site.RenderError as error:
        pytest.fail(str(error), pytrace=False)
    return Build(project, output_dir, output)


@pytest.fixture(scope="session")
def built_site(rendered_copy) -> Build:
    return _render(rendered_copy, rendered_copy.parent / "_site")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # the tests read the browser's log, not the server's
        pass


@functools.lru_cache(maxsize=None)
def _server_for(folder: Path) -> str:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _servers.append(server)
    return f"http://127.0.0.1:{server.server_address[1]}"


_servers: list = []


@pytest.fixture(scope="session")
def served():
    """served(folder) -> base URL of a loopback server for that folder (one per folder, stopped at the end)."""
    yield _server_for
    for server in _servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(path).exists():
            pytest.fail(f"{path} is missing: install Debian's {package} (apt-get install -y {package})", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # No background traffic of Chromium's own (updates, sync, field trials): every request logged is the page's.
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-default-apps", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


def pytest_terminal_summary(terminalreporter):
    if SCREENSHOTS.exists() and any(SCREENSHOTS.iterdir()):
        terminalreporter.write_line(f"page screenshots: {SCREENSHOTS}")
