"""The site as Quarto builds it: one fresh render of a clean copy per test session, served on 127.0.0.1 and
opened in headless Chromium.

- ``built_site``: a clean copy of the project (as a fresh clone has it) rendered by ``quarto render`` into a
  temporary folder; the render must exit 0 and print no warning line. Needs Quarto (``$QUARTO`` or PATH). Once
  per run: under pytest-xdist the workers share one render.
- ``served``: an HTTP server on 127.0.0.1 for a built site folder.
- ``browser``: headless Chromium through WebDriver (Debian's chromium and chromium-driver), logging every
  network event and console message so tests can assert on them.
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import json
import os
import shutil
import tempfile
import threading
import time
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


# Under pytest-xdist (--dist loadfile --no-loadscope-reorder, so files go out in this order) these files, the longest
# after the render, go to workers first: the pages' commands start as soon as the render is done, and the stand-ins'
# publish renders (test_publish_pythia.py, which read the render's cache) beside them.
LONGEST_FIRST = ("test_page_commands.py", "test_publish_pythia.py")
RENDER_WAIT_S = 3600  # how long a worker waits for another worker's render before it gives up


def _render_into(folder: Path) -> Build:
    if not (os.environ.get("QUARTO") or shutil.which("quarto")):
        raise site.RenderError(site.QUARTO_MISSING)
    project = site.clean_copy(ROOT, folder / "project")
    output = site.render(project, folder / "_site", echo=lambda line: None)
    return Build(project, folder / "_site", output)


def _render_once_for_every_worker(shared: Path) -> Build:
    """Under pytest-xdist (``make test`` runs the site suite on several workers) the first worker to take the lock
    renders into the folder the workers share and records the outcome; the others wait for it and read it."""
    record = shared / "render.json"
    deadline = time.monotonic() + RENDER_WAIT_S
    with open(shared / "render.lock", "w") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise site.RenderError(f"another test worker's render did not finish within {RENDER_WAIT_S} s")
                time.sleep(1)
        try:
            if not record.is_file():
                try:
                    build = _render_into(shared / "render")
                    outcome = {"project": str(build.project), "site": str(build.site), "output": build.output}
                except site.RenderError as error:
                    outcome = {"error": str(error)}
                record.write_text(json.dumps(outcome), encoding="utf-8")
            outcome = json.loads(record.read_text(encoding="utf-8"))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    if "error" in outcome:
        raise site.RenderError(outcome["error"])
    return Build(Path(outcome["project"]), Path(outcome["site"]), outcome["output"])


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Build:
    try:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            return _render_once_for_every_worker(tmp_path_factory.getbasetemp().parent)
        return _render_into(tmp_path_factory.mktemp("render"))
    except site.RenderError as error:
        pytest.fail(str(error), pytrace=False)


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: LONGEST_FIRST.index(item.path.name) if item.path.name in LONGEST_FIRST else len(LONGEST_FIRST))


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
