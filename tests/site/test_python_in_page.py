"""Lab 05 Part 3's Python in the page, in headless Chromium with every host but the site's own unreachable: the
editor (CodeMirror, bundled into the site from assets/editor/) passes a correct solution and names each planted
mistake (the same plants tests/unit/course/test_code_check.py runs through the checker in Python), a syntax error
is shown at once with its line, an endless loop in one function is named while the other eleven are still judged,
a runaway program is ended within the time limit while the page stays responsive, the code survives a reload and
downloads as a file that runs with python3, the editor is keyboard-usable and axe-clean in both colour schemes, and
"Run it here" runs the toy runner's download and shows its report, nothing else, in its box. The interpreter
(Pyodide, served by the site from assets/pyodide/) is not requested before the first Run, and nothing is requested
from anywhere else."""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import toy_solutions
from test_browser import axe_violations, requested_urls

from residlab.build import pyodide_files
from residlab.course.lab05 import code_check, toy

pytestmark = pytest.mark.slow
LAB = "labs/05-trace-residual-stream.html"
START_SECONDS = 150  # the interpreter's first start: 13 MB from loopback, then WebAssembly compiled on a busy CPU
RUN_SECONDS = 60


class _RecordingHandler(http.server.SimpleHTTPRequestHandler):
    requested: list[str]

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        self.requested.append(urlsplit(self.path).path)
        super().do_GET()


@pytest.fixture(scope="module")
def site(request):
    """The built site on 127.0.0.1, every path asked of it recorded in order: the session's render, or the folder
    RESIDLAB_BUILT_SITE names (the pages `make page` rendered, while working on the editor)."""
    built = os.environ.get("RESIDLAB_BUILT_SITE")
    folder = Path(built).resolve() if built else request.getfixturevalue("built_site").site
    requested: list[str] = []
    handler = type("Handler", (_RecordingHandler,), {"requested": requested})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", requested
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def offline_browser(tmp_path_factory):
    """Chromium that can reach 127.0.0.1 and nothing else: every other host name resolves to nothing."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("RESIDLAB_CHROMIUM", "/usr/bin/chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-default-apps", "--disable-dev-shm-usage", "--window-size=1280,900",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    chromedriver = os.environ.get("RESIDLAB_CHROMEDRIVER", "/usr/bin/chromedriver")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
    driver.set_page_load_timeout(60)
    downloads = tmp_path_factory.mktemp("downloads")
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    driver.downloads = downloads
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(condition, seconds: float, message: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"{message} (waited {seconds:.0f} s)", pytrace=False)


def output(browser, box: str = "toy-editor-output") -> str:
    return browser.execute_script("return document.getElementById(arguments[0]).textContent", box)


def status(browser, box: str = "toy-editor-output") -> str:
    """The line above the output box: what ran the code and its exit status, or why it stopped."""
    return output(browser, f"{box}-status")


FINISHED = ("Ran with ", "Stopped: ", "Did not run")


def settled(browser, box: str = "toy-editor-output") -> str:
    """The status line once a run has finished (it no longer says it is starting, running or checking)."""
    text = status(browser, box)
    return text if text.startswith(FINISHED) else ""


def press(browser, label: str, seconds: float = RUN_SECONDS, box: str = "toy-editor-output") -> str:
    """Press the button and return what the output box holds once the run has finished."""
    click(browser, label, box)
    wait_until(lambda: settled(browser, box), seconds, f"{label} never finished")
    return output(browser, box)


def click(browser, label: str, box: str = "toy-editor-output") -> None:
    browser.execute_script(
        "document.getElementById(arguments[1] + '-status').textContent = '';"
        "[...document.querySelectorAll('.residlab-python button')].find(b => b.textContent === arguments[0]).click()",
        label, box)


def code(browser) -> str:
    return browser.execute_script("return window.residlabPython.code()")


def set_code(browser, source: str) -> None:
    browser.execute_script("window.residlabPython.setCode(arguments[0])", source)


@pytest.fixture(scope="module")
def lab(site, offline_browser):
    base, requested = site
    browser = offline_browser
    browser.get_log("performance")
    browser.get(f"{base}/{LAB}")
    wait_until(lambda: browser.execute_script("return document.readyState === 'complete'"), 30, "the page never loaded")
    time.sleep(1)  # anything the page starts after its load event (search) is requested by now
    loaded = list(requested)
    editor_at_load = browser.execute_script("return !!window.residlabPython")
    browser.execute_script("localStorage.clear()")
    browser.execute_script("document.getElementById('toy-editor').scrollIntoView()")
    wait_until(lambda: browser.execute_script("return !!window.residlabPython && window.residlabPython.code()"),
               30, "the editor or its skeleton never came when the editor neared the screen")
    before_run = list(requested)
    started = time.monotonic()
    first = press(browser, "Run", START_SECONDS)
    return {"browser": browser, "base": base, "requested": requested, "loaded": loaded, "before_run": before_run,
            "first": first, "first_seconds": time.monotonic() - started, "editor_at_load": editor_at_load}


def test_the_interpreter_is_requested_only_by_the_first_run_and_only_from_the_site(lab):
    pyodide = [path for path in lab["before_run"] if "/assets/pyodide/" in path or path.endswith("python-worker.js")]
    assert pyodide == []
    # The editor's script and the skeleton are fetched when the editor comes near the screen, not with the page.
    editor = {"/assets/editor/codemirror.js", "/assets/explorers/python-editor.js", "/assets/labs/my_toy.py"}
    assert not lab["editor_at_load"] and not editor & set(lab["loaded"])
    assert editor <= set(lab["before_run"])
    assert lab["browser"].execute_script("return window.residlabPython.codeEditor()") == "codemirror"
    fetched = {Path(path).name for path in lab["requested"] if path.startswith("/assets/pyodide/")}
    assert fetched == set(pyodide_files.SHIPPED)  # only what the site ships, each the first time
    origin = urlsplit(lab["base"]).netloc
    elsewhere = [url for url in requested_urls(lab["browser"])
                 if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).netloc != origin]
    assert elsewhere == []
    assert "not written yet" not in lab["first"] and "NotImplementedError" in lab["first"]  # the skeleton ran


def test_the_skeleton_in_the_editor_is_the_download(lab):
    assert code(lab["browser"]) == (Path(__file__).resolve().parents[2] / "assets" / "labs" / "my_toy.py").read_text(encoding="utf-8")


def test_run_shows_what_the_code_prints_and_names_the_interpreter(lab):
    set_code(lab["browser"], toy_solutions.CORRECT)
    printed = press(lab["browser"], "Run")
    final = toy.sequential_trace(toy.Vector(toy.DEFAULT_INPUT)).final
    assert printed == f"z = {final}\n"
    assert status(lab["browser"]) == f"Ran with {interpreter()}, in this page; exit status 0."


def interpreter() -> str:
    lock = json.loads((Path(__file__).resolve().parents[2] / pyodide_files.INSTALLED / "pyodide-lock.json").read_text())
    version = pyodide_files.pinned_version(Path(__file__).resolve().parents[2])
    return f"CPython {lock['info']['python']} (emscripten), Pyodide {version}"


@pytest.mark.parametrize(("source", "line", "error"), [
    ("def add(a, b):\n    return a +\n", 2, "SyntaxError"),
    ("def add(a, b):\n    total = a\n      return total\n", 3, "IndentationError"),
])
def test_an_error_before_the_program_starts_is_shown_at_once_with_its_line(lab, source, line, error):
    # Once Pyodide is loaded (the module's first Run), Run compiles the code first: the error and its line come
    # back at once, not after the run limit with no line (the page then said only that the program did not finish).
    browser = lab["browser"]
    limit = browser.execute_script("return window.residlabPython.limitSeconds()")
    set_code(browser, source)
    started = time.monotonic()
    click(browser, "Run")
    wait_until(lambda: settled(browser), limit - 1, "the error was not shown before the run limit")
    seconds = time.monotonic() - started
    shown = output(browser)
    assert f'File "my_toy.py", line {line}' in shown and f"\n{error}: " in shown, shown
    assert status(browser).endswith("exit status 1.") and not status(browser).startswith("Stopped")
    print(f"{error} shown {seconds:.2f} s after Run")  # the figure the issue asks for (within 2 s)


def test_check_reports_a_syntax_error_in_the_learners_file_at_once_with_its_line(lab):
    # The checker imports my_toy.py before any function is timed: its one line, with the line number, comes back
    # as the download's does, not a stop after the run limit.
    browser = lab["browser"]
    limit = browser.execute_script("return window.residlabPython.limitSeconds()")
    set_code(browser, toy_solutions.CORRECT.replace("def norm(v):", "def norm(v:"))
    click(browser, "Check")
    wait_until(lambda: settled(browser), limit - 1, "the error was not shown before the run limit")
    line = toy_solutions.CORRECT.splitlines().index("def norm(v):") + 1
    assert output(browser).startswith(f"check_toy.py: error: my_toy.py, line {line}: "), output(browser)
    assert status(browser).endswith("exit status 2.")


def test_check_passes_a_correct_solution(lab):
    set_code(lab["browser"], toy_solutions.CORRECT)
    checked = press(lab["browser"], "Check")
    for name, _ in code_check.CHECKED_FUNCTIONS:
        assert any(line.split() == [name, "passes"] for line in checked.splitlines()), (name, checked)
    assert f"{len(code_check.CHECKED_FUNCTIONS)} of {len(code_check.CHECKED_FUNCTIONS)} functions pass." in checked


@pytest.mark.parametrize("plant", sorted(toy_solutions.PLANTS))
def test_check_names_each_planted_mistake(lab, plant):
    function, said, _, _ = toy_solutions.PLANTS[plant]
    set_code(lab["browser"], toy_solutions.planted(plant))
    checked = press(lab["browser"], "Check")
    line = next(line for line in checked.splitlines() if line.split()[:1] == [function])
    assert line.split(None, 1)[1].startswith(said), checked


def test_an_endless_loop_in_one_function_is_named_and_the_other_eleven_are_judged(lab):
    # Pyodide has no threads: the page gives each function its own limit, ends the interpreter when one runs past
    # it, and checks the others again in a fresh one. readout is in the middle, and no other function calls it: the
    # five after it are judged too, and pass.
    browser = lab["browser"]
    limit = browser.execute_script("return window.residlabPython.functionLimitSeconds()")
    assert limit == code_check.FUNCTION_LIMIT_S
    looping = toy_solutions.CORRECT.replace("def readout(z):\n    return", "def readout(z):\n    while True:\n        pass\n    return")
    assert looping != toy_solutions.CORRECT
    set_code(browser, looping)
    checked = press(browser, "Check", START_SECONDS)
    verdicts = {line.split()[0]: line.split(None, 1)[1] for line in checked.splitlines()[1:-1]}
    assert verdicts["readout"] == f"still running after {limit:g} s: a loop that never ends?", checked
    assert {name: verdict for name, verdict in verdicts.items() if name != "readout"} == \
        {name: "passes" for name, _ in code_check.CHECKED_FUNCTIONS if name != "readout"}, checked
    n = len(code_check.CHECKED_FUNCTIONS)
    assert checked.splitlines()[-1] == f"{n - 1} of {n} functions pass."


def test_a_runaway_loop_is_ended_within_the_limit_and_the_page_stays_responsive(lab):
    browser = lab["browser"]
    limit = browser.execute_script("return window.residlabPython.limitSeconds()")
    set_code(browser, toy_solutions.INFINITE_LOOP)
    click(browser, "Run")
    started = time.monotonic()
    time.sleep(2)
    # While Python spins in its worker, the page answers and scrolls.
    top = browser.execute_script("window.scrollTo(0, 0); return window.scrollY")
    moved = browser.execute_script("window.scrollBy(0, 600); return window.scrollY")
    assert top == 0 and moved >= 600
    stopped = wait_until(lambda: settled(browser), limit + 20, "the loop was never stopped")
    assert stopped.startswith("Stopped: the program did not finish within"), stopped
    assert time.monotonic() - started <= limit + 10
    # The next run starts a fresh interpreter and works.
    set_code(browser, "print(6 * 7)\n")
    assert press(browser, "Run", START_SECONDS) == "42\n"


def test_the_code_survives_a_reload_downloads_and_resets(lab):
    browser = lab["browser"]
    set_code(browser, toy_solutions.CORRECT)
    browser.refresh()
    wait_until(lambda: browser.execute_script("return document.readyState === 'complete'"), 30, "the page never came back")
    browser.execute_script("document.getElementById('toy-editor').scrollIntoView()")
    wait_until(lambda: browser.execute_script("return !!window.residlabPython"), 30, "the editor never came back")
    assert wait_until(lambda: browser.execute_script("return window.residlabPython && window.residlabPython.code()"), 30,
                      "the editor stayed empty") == toy_solutions.CORRECT
    browser.execute_script("[...document.querySelectorAll('#toy-editor button')].find(b => b.textContent === 'Download as .py').click()")
    downloaded = wait_until(lambda: next(browser.downloads.glob("my_toy.py"), None), 30, "nothing was downloaded")
    assert downloaded.read_text(encoding="utf-8") == toy_solutions.CORRECT
    ran = subprocess.run([sys.executable, "-I", str(downloaded)], capture_output=True, text=True, timeout=60, check=False)
    assert (ran.returncode, ran.stdout) == (0, f"z = {toy.sequential_trace(toy.Vector(toy.DEFAULT_INPUT)).final}\n")
    reset = "[...document.querySelectorAll('#toy-editor button')].find(b => b.textContent.startsWith(arguments[0])).click()"
    browser.execute_script(reset, "Reset")
    assert code(browser) == toy_solutions.CORRECT
    browser.execute_script(reset, "Press again")
    skeleton = (Path(__file__).resolve().parents[2] / "assets" / "labs" / "my_toy.py").read_text(encoding="utf-8")
    wait_until(lambda: code(browser) == skeleton, 30, "the skeleton never came back")
    assert browser.execute_script("return localStorage.getItem('residlab.lab05.my_toy.py')") == skeleton


def test_the_editor_is_codemirror_labelled_and_tab_indents_until_escape(lab):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser = lab["browser"]
    set_code(browser, "")
    field = browser.find_element(By.CSS_SELECTOR, "#toy-editor-code .cm-content")
    assert field.get_attribute("role") == "textbox" and field.get_attribute("contenteditable") == "true"
    assert browser.execute_script("return document.getElementById(arguments[0].getAttribute('aria-labelledby')).textContent",
                                  field) == "Your toy (my_toy.py)"
    help_text = browser.find_element(By.ID, field.get_attribute("aria-describedby")).text
    assert "press Esc, then Tab" in help_text
    field.click()
    # Enter indents after a colon (Python's indentation), Tab indents the line further
    field.send_keys("if True:", Keys.ENTER, "x = 1", Keys.TAB)
    assert code(browser) == "if True:\n        x = 1"
    assert browser.find_elements(By.CSS_SELECTOR, "#toy-editor-code .cm-lineNumbers .cm-gutterElement")  # line numbers
    assert browser.find_elements(By.CSS_SELECTOR, "#toy-editor-code .cm-line .tok-keyword")  # Python highlighted
    # Tab stays in the editor until Escape; Escape then Tab moves on to the first button
    assert browser.execute_script("return document.activeElement.classList.contains('cm-content')")
    field.send_keys(Keys.ESCAPE, Keys.TAB)
    assert browser.execute_script("return document.activeElement.textContent") == "Run"


def test_without_the_codemirror_bundle_the_code_is_edited_in_a_textarea(lab):
    # A reader whose copy of the bundle failed to load still gets an editor: the textarea, which indents with Tab
    # until Escape and runs the same way.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser = lab["browser"]
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/assets/editor/codemirror.js"]})
    try:
        browser.refresh()
        browser.execute_script("document.getElementById('toy-editor').scrollIntoView()")
        wait_until(lambda: browser.execute_script("return !!window.residlabPython && window.residlabPython.code() !== ''"),
                   30, "the editor never came without its bundle")
        assert browser.execute_script("return window.residlabPython.codeEditor()") == "textarea"
        set_code(browser, "")
        area = browser.find_element(By.CSS_SELECTOR, "textarea#toy-editor-code")
        area.click()
        area.send_keys("if True:", Keys.ENTER, "x = 1", Keys.TAB)
        assert code(browser) == "if True:\n    x = 1    "
        area.send_keys(Keys.ESCAPE, Keys.TAB)
        assert browser.execute_script("return document.activeElement.textContent") == "Run"
        set_code(browser, "print(6 * 7)\n")
        assert press(browser, "Run", START_SECONDS) == "42\n"
        assert axe_violations(browser, "toy-editor") == []
    finally:
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        browser.refresh()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_on_the_editor_in_either_colour_scheme(lab, scheme):
    # built when it neared the screen, so the whole-page axe checks (test_browser, test_dark_mode) may not see it:
    # here the editor, with CodeMirror holding highlighted code and a run's output below it, is checked in each scheme
    browser = lab["browser"]
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    try:
        browser.refresh()
        browser.execute_script("document.getElementById('toy-editor').scrollIntoView()")
        wait_until(lambda: browser.execute_script("return !!window.residlabPython && !!window.residlabPython.code()"), 30,
                   "the editor never came back")
        assert browser.execute_script("return document.body.classList.contains('quarto-dark')") == (scheme == "dark")
        assert browser.execute_script("return window.residlabPython.codeEditor()") == "codemirror"
        set_code(browser, toy_solutions.planted("index_off"))
        press(browser, "Check", START_SECONDS)
        assert browser.find_elements("css selector", "#toy-editor-code .tok-keyword")
        assert axe_violations(browser, "toy-editor") == [] and axe_violations(browser, "toy-runner") == []
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def test_run_it_here_runs_the_toy_runner_download_and_records_the_interpreter(lab):
    browser = lab["browser"]
    arguments = browser.execute_script("return document.getElementById('toy-runner-arguments').value").split()
    shown = press(browser, "Run it here", START_SECONDS, box="toy-runner-output")  # a fresh page: a fresh start
    report = json.loads(shown)  # the box holds the runner's output exactly: copied whole, it is the JSON to save
    lock = json.loads((Path(__file__).resolve().parents[2] / pyodide_files.INSTALLED / "pyodide-lock.json").read_text())
    assert status(browser, "toy-runner-output") == f"Ran with {interpreter()}, in this page; exit status 0."
    assert report["python"] == {"version": lock["info"]["python"], "implementation": "CPython", "platform": "emscripten"}
    assert report["command"] == ["trace_residual_toy.py", *arguments]
    x = toy.parse_vector_text(arguments[arguments.index("--input") + 1])
    second = toy.parse_vector_text(arguments[arguments.index("--second-position") + 1])
    expected = toy.build_report(x, second, command=report["command"])
    assert {key: value for key, value in report.items() if key != "python"} == \
        json.loads(json.dumps({key: value for key, value in expected.items() if key != "python"}))
    assert "/assets/labs/trace_residual_toy.py" in lab["requested"]


def test_the_licence_is_served_beside_the_interpreter(lab):
    import urllib.request

    with urllib.request.urlopen(f"{lab['base']}/assets/pyodide/LICENSE", timeout=30) as response:
        assert response.read().decode("utf-8").startswith("Mozilla Public License Version 2.0")


def test_the_page_states_the_limits_and_the_keyboard_escape_the_editor_keeps(lab):
    # The paragraph above the editor is generated from the same constants the editor and checker use.
    from residlab.course.lab05 import editor

    browser = lab["browser"]
    text = " ".join(browser.execute_script("return document.getElementById('toy-editor').previousElementSibling.textContent").split())
    assert f"one still running after {code_check.FUNCTION_LIMIT_S} s is named as a loop that never ends" in text, text
    assert f"stops a Run after {editor.RUN_LIMIT_S} s" in text and "press Esc, then Tab" in text, text
    assert "shows a syntax error at once, with its line" in text
    assert browser.execute_script("return window.residlabPython.limitSeconds()") == editor.RUN_LIMIT_S
