"""Lighthouse on the built site, served as GitHub Pages serves it: what tests/site/test_lighthouse.py asserts on and
benchmarks/lighthouse_scores.py prints.

- ``serve_like_pages(folder)``: an HTTP server on 127.0.0.1 that answers as GitHub Pages does in what Lighthouse
  measures: text (HTML, CSS, JavaScript, JSON, SVG, XML, plain text) gzip-compressed when the client accepts it,
  fonts and images as they are, ``Cache-Control: max-age=600``.
- ``audit_pages(urls, ...)``: headless Chromium (Debian's) started here, and Lighthouse (the npm package pinned in
  tests/site/lighthouse/package-lock.json, installed by ``npm ci`` from the Makefile) run in it, only the
  categories asked for and only the audits that count towards their scores; one ``PageAudit`` per URL, from one
  visit per page, one page at a time, as Lighthouse's own runs make every category's score.

Every wait is bounded: Chromium must announce its DevTools port within ``CHROMIUM_START_SECONDS``, and the
audits must end within ``PAGE_SECONDS`` per page; Chromium and Node are ended whatever happens.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIGHTHOUSE_DIR = ROOT / "tests" / "site" / "lighthouse"
AUDIT_SCRIPT = LIGHTHOUSE_DIR / "audit_pages.mjs"
CHROMIUM = os.environ.get("RESIDLAB_CHROMIUM", "/usr/bin/chromium")
CATEGORIES = ("performance", "accessibility", "best-practices", "seo")
CHROMIUM_START_SECONDS = 30
PAGE_SECONDS = 90
NOT_INSTALLED = (f"Lighthouse is not installed in {LIGHTHOUSE_DIR.relative_to(ROOT)}/node_modules: run "
                 f"`npm ci --prefix {LIGHTHOUSE_DIR.relative_to(ROOT)}` (make test does)")
# What GitHub Pages compresses: text types. Fonts (woff2 is compressed already) and images go as they are.
COMPRESSED_TYPES = ("text/", "application/javascript", "application/json", "image/svg+xml", "application/xml")


class LighthouseError(RuntimeError):
    pass


@dataclass
class PageAudit:
    url: str
    scores: dict[str, float]  # category -> 0..100
    # from the performance category's run (None when it was not asked for); the bytes always
    largest_paint_ms: float | None
    first_paint_ms: float | None
    blocking_ms: float | None
    layout_shift: float | None
    transferred_bytes: float | None
    failures: dict[str, list[dict]]  # category -> the audits that cost it points
    # Lighthouse's measure of this machine's speed while it ran (Chrome DevTools' calibration puts a low-tier phone,
    # the Moto G Power the mobile preset names, near 264 and a Pixel 5 near 1000). The preset slows what it
    # observes 4x whatever the machine, so a slow or busy machine costs performance points.
    benchmark_index: float

    def failed(self, floors: dict[str, float]) -> list[str]:
        """One line per category below its floor, naming the audits that cost it points."""
        lines = []
        for category, floor in floors.items():
            if self.scores[category] < floor:
                lost = "; ".join(f"{audit['id']} ({audit['shown'] or audit['score']}: {audit['items'][:2]})"
                                 for audit in self.failures[category])
                lines.append(f"{self.url}: {category} {self.scores[category]:.0f} < {floor:.0f} "
                             f"(machine's benchmark index {self.benchmark_index:.0f}): {lost}")
        return lines


class _PagesHandler(http.server.SimpleHTTPRequestHandler):
    """GitHub Pages' answers as far as Lighthouse can tell: gzip for text, a ten-minute cache lifetime."""

    def log_message(self, format, *args):
        pass

    def end_headers(self):
        self.send_header("Cache-Control", "max-age=600")
        super().end_headers()

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            if not self.path.split("?")[0].endswith("/"):
                return super().send_head()  # its redirect to the folder's URL with a slash
            path = path / "index.html"
        content_type = self.guess_type(str(path))
        accepts_gzip = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (path.is_file() and accepts_gzip and content_type.startswith(COMPRESSED_TYPES)):
            return super().send_head()
        body = _gzipped(path, path.stat().st_mtime_ns)
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return _Body(body)


class _Body:
    """What send_head returns for SimpleHTTPRequestHandler to copy to the client: the compressed bytes."""

    def __init__(self, data: bytes):
        self.data = data

    def read(self, size: int = -1) -> bytes:
        data, self.data = self.data, b""
        return data

    def close(self) -> None:
        pass


@functools.lru_cache(maxsize=512)
def _gzipped(path: Path, mtime_ns: int) -> bytes:
    return gzip.compress(path.read_bytes(), compresslevel=6, mtime=0)


@contextlib.contextmanager
def serve_like_pages(folder: Path):
    """Yields the base URL of a loopback server for ``folder`` that compresses as GitHub Pages does."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_PagesHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


DEVTOOLS_LINE = re.compile(rb"DevTools listening on ws://127\.0\.0\.1:(\d+)/")


@contextlib.contextmanager
def _chromium(chromium: str):
    """Headless Chromium with a throwaway profile; yields its DevTools port."""
    if not Path(chromium).exists():
        raise LighthouseError(f"{chromium} is missing: install Debian's chromium (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="residlab-lighthouse-") as profile:
        process = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
             "--disable-extensions", "--mute-audio", f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            yield _devtools_port(process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stderr.close()


def _devtools_port(process: subprocess.Popen) -> int:
    found: list[int] = []

    def read() -> None:  # the port line comes first; the rest of stderr is drained so Chromium never blocks on it
        for line in process.stderr:
            match = DEVTOOLS_LINE.search(line)
            if match and not found:
                found.append(int(match.group(1)))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + CHROMIUM_START_SECONDS
    while not found and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    if not found:
        raise LighthouseError(f"Chromium did not open its DevTools port within {CHROMIUM_START_SECONDS} s")
    return found[0]


def audit_pages(urls: list[str], preset: str = "mobile", categories=CATEGORIES, chromium: str = CHROMIUM) -> list[PageAudit]:
    """Lighthouse's ``preset`` ("mobile" or "desktop") on each URL: one ``PageAudit`` per URL, in their order. Every
    category comes from one visit per page, the pages one after another in one Chromium: the performance score
    scales the work Lighthouse sees the page do, so nothing else of ours runs beside it."""
    node = shutil.which("node")
    if not node:
        raise LighthouseError("node is not on PATH: install Node.js 18.16 or newer (Debian: apt-get install -y npm)")
    if not (LIGHTHOUSE_DIR / "node_modules" / "lighthouse" / "package.json").is_file():
        raise LighthouseError(NOT_INSTALLED)
    return [_page_audit(report) for report in _run(node, chromium, urls, preset, list(categories))]


def _run(node: str, chromium: str, urls: list[str], preset: str, categories: list[str]) -> list[dict]:
    """One Chromium, and Lighthouse in it on each URL in turn: its report of each, in order. A page Lighthouse
    could not audit (on a busy machine, a DevTools call it waits for can time out) is audited once more, alone,
    in a fresh Chromium; a second failure is reported."""
    reports = _run_once(node, chromium, urls, preset, categories)
    failed = [report["url"] for report in reports if report["runtimeError"]]
    if failed:
        again = {report["url"]: report for report in _run_once(node, chromium, failed, preset, categories)}
        reports = [again.get(report["url"], report) for report in reports]
    return reports


def _run_once(node: str, chromium: str, urls: list[str], preset: str, categories: list[str]) -> list[dict]:
    with _chromium(chromium) as port:
        command = [node, str(AUDIT_SCRIPT), "--port", str(port), "--preset", preset,
                   "--categories", ",".join(categories), *urls]
        try:
            done = subprocess.run(command, cwd=LIGHTHOUSE_DIR, capture_output=True, text=True,
                                  timeout=PAGE_SECONDS * len(urls))
        except subprocess.TimeoutExpired:
            raise LighthouseError(f"Lighthouse did not finish {len(urls)} pages within {PAGE_SECONDS * len(urls)} s") from None
    if done.returncode != 0:
        raise LighthouseError(f"Lighthouse exited with code {done.returncode}: {done.stderr.strip()[-2000:]}")
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if [report["url"] for report in reports] != list(urls):
        raise LighthouseError(f"Lighthouse reported {len(reports)} of {len(urls)} pages: {done.stderr.strip()[-2000:]}")
    return reports


def _page_audit(report: dict) -> PageAudit:
    if report["runtimeError"]:
        raise LighthouseError(f"{report['url']}: Lighthouse could not audit the page: {report['runtimeError']}")
    metrics = report["metrics"]
    return PageAudit(
        url=report["url"],
        scores={category: round(100 * score, 1) for category, score in report["scores"].items()},
        largest_paint_ms=metrics["largestContentfulPaintMs"],
        first_paint_ms=metrics["firstContentfulPaintMs"],
        blocking_ms=metrics["totalBlockingTimeMs"],
        layout_shift=metrics["cumulativeLayoutShift"],
        transferred_bytes=metrics["transferredBytes"],
        failures=report["failures"],
        benchmark_index=report["benchmarkIndex"],
    )
