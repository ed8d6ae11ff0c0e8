"""Lab 05 Part 3's Python in the page: the interpreter's version, what its first Run downloads and how long the
learner waits for a first result, beside a second Run once the interpreter is up (the ratio: first / warm).

    make render && python benchmarks/python_in_page.py [_site] [--rounds 3] [--against OTHER_SITE]

Each round opens Lab 05 in a fresh headless Chromium (an empty cache), served on 127.0.0.1 as GitHub Pages serves it
(residlab.build.lighthouse: gzip for text, the rest as it is), puts a correct solution in the editor and presses
Run: the time from the press to the printed result, and the bytes the site sent for it (the interpreter's files,
the worker), counted by the server. Then Run again (the interpreter is ready) and Check. Loopback has no network
latency: on a phone's connection the download adds its size divided by the bandwidth.

First, the page's bytes at load (the page opened, not scrolled, until its load event and three seconds more, as
served above), and with ``--against`` another build's (say one from before the editor), side by side, each the
median of the rounds, with the ratio: the editor must not weigh on the page a reader opens.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from residlab.build import lighthouse, pyodide_files  # noqa: E402

LAB = "labs/05-trace-residual-stream.html"


class _Counting:
    def __init__(self, stream, count):
        self.stream, self.count = stream, count

    def write(self, data):
        self.count(len(data))
        return self.stream.write(data)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def serve(folder: Path, sent: list):
    """A Pages-like server recording (path, bytes sent) for every request."""

    class Handler(lighthouse._PagesHandler):
        def setup(self):
            super().setup()
            self.wfile = _Counting(self.wfile, self._count)

        def _count(self, size):
            sent.append((getattr(self, "path", ""), size))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
                 "--disable-background-networking", f"--user-data-dir={tempfile.mkdtemp(prefix='residlab-bench-')}",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(executable_path="/usr/bin/chromedriver"))


def timed_press(driver, label: str, limit_s: float = 300) -> tuple[float, str]:
    # The status line above the output box says when a run has finished ("Ran with ..." or "Stopped: ...").
    driver.execute_script(
        "document.getElementById('toy-editor-output-status').textContent = '';"
        "window.__pressed = performance.now();"
        "[...document.querySelectorAll('#toy-editor button')].find(b => b.textContent === arguments[0]).click()", label)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        status = driver.execute_script("return document.getElementById('toy-editor-output-status').textContent")
        if status.startswith(("Ran with ", "Stopped: ", "Did not run")):
            text = driver.execute_script("return document.getElementById('toy-editor-output').textContent")
            return driver.execute_script("return performance.now() - window.__pressed") / 1000, text
        time.sleep(0.05)
    raise SystemExit(f"python_in_page: {label} gave no result within {limit_s} s")


def bytes_at_load(site: Path) -> int:
    sent: list = []
    server = serve(site, sent)
    driver = browser()
    try:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/{LAB}")
        time.sleep(3)
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    return sum(size for _, size in sent)


def one_round(site: Path, source: str) -> dict:
    sent: list = []
    server = serve(site, sent)
    driver = browser()
    try:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/{LAB}")
        driver.execute_script("document.getElementById('toy-editor').scrollIntoView()")
        deadline = time.monotonic() + 30  # the page fetches the editor's script when the editor nears the screen
        while not driver.execute_script("return !!window.residlabPython"):
            if time.monotonic() > deadline:
                raise SystemExit("python_in_page: the editor never came when it neared the screen")
            time.sleep(0.1)
        driver.execute_script("window.residlabPython.setCode(arguments[0])", source)
        before = len(sent)
        first_s, printed = timed_press(driver, "Run")
        downloaded = sum(size for _, size in sent[before:])
        warm_s, _ = timed_press(driver, "Run")
        check_s, checked = timed_press(driver, "Check")
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    return {"first_s": first_s, "warm_s": warm_s, "check_s": check_s, "bytes": downloaded, "printed": printed,
            "passes": checked.strip().splitlines()[-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", type=Path, default=ROOT / "_site", help="the built site (default: _site)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh browsers, one after another (default 3)")
    parser.add_argument("--against", type=Path, help="another build of Lab 05: its bytes at load beside this one's")
    args = parser.parse_args(argv)
    if not (args.site / LAB).is_file() or not (args.site / pyodide_files.PYODIDE_DIR / "pyodide.asm.wasm").is_file():
        parser.error(f"{args.site} holds no Lab 05 with its interpreter: run `make render` (or `make page PAGE=...`)")
    import toy_solutions

    lock = json.loads((args.site / pyodide_files.PYODIDE_DIR / "pyodide-lock.json").read_text(encoding="utf-8"))
    shipped = {name: (args.site / pyodide_files.PYODIDE_DIR / name).stat().st_size for name in pyodide_files.SHIPPED}
    loads = {site: statistics.median(bytes_at_load(site) for _ in range(args.rounds))
             for site in filter(None, (args.site, args.against))}
    print(f"Lab 05 at load: {loads[args.site]:,.0f} bytes ({args.site})")
    if args.against:
        print(f"Lab 05 at load: {loads[args.against]:,.0f} bytes ({args.against}); ratio "
              f"{loads[args.site] / loads[args.against]:.4f}")
    rounds = [one_round(args.site, toy_solutions.CORRECT) for _ in range(args.rounds)]
    median = {key: statistics.median(r[key] for r in rounds) for key in ("first_s", "warm_s", "check_s", "bytes")}
    print(f"interpreter: Pyodide {pyodide_files.pinned_version(ROOT)}, CPython {lock['info']['python']} "
          f"({rounds[0]['printed'].splitlines()[0].lstrip('# ')})")
    print(f"files the site ships for it: {sum(shipped.values()):,} bytes "
          f"({', '.join(f'{name} {size:,}' for name, size in shipped.items())})")
    print(f"rounds: {args.rounds}, each a fresh headless Chromium (empty cache), medians below")
    print(f"downloaded by the first Run: {median['bytes']:,.0f} bytes (gzip for text, as GitHub Pages serves it)")
    each = ", ".join(f"{r['first_s']:.2f}" for r in rounds)
    print(f"first Run, press to result: {median['first_s']:.2f} s  (rounds: {each})")
    print(f"second Run, interpreter ready: {median['warm_s']:.3f} s; Check (12 functions, 8 held-out inputs): "
          f"{median['check_s']:.3f} s")
    print(f"ratio first / second Run: {median['first_s'] / median['warm_s']:.0f}x; check says: {rounds[0]['passes']}")
    print("load average (1, 5, 15 min): " + ", ".join(f"{load:.1f}" for load in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
