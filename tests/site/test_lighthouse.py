"""Lighthouse (12.2.3, pinned in tests/site/lighthouse/package-lock.json) on every built page, served as GitHub Pages
serves it (gzip, residlab.build.lighthouse), with its mobile preset (a mid-range phone on slow 4G) in the Debian
Chromium the suite already drives: performance at least 90 (on a machine as fast as the preset assumes, below),
accessibility, best practices and SEO 100.

The goal is 95 and a largest contentful paint within 2.5 s on every page (benchmarks/lighthouse_scores.py prints
them); the floor here is 90 because Lighthouse's simulated phone scales what it observes on this machine, and
a busy machine costs a page a few points. One visit per page, one page at a time, gives all four scores
(``residlab.build.lighthouse``); only the audits that count towards them run."""

from __future__ import annotations

import pytest
from test_browser import PAGES

from residlab.build import lighthouse

pytestmark = pytest.mark.slow
FLOORS = {"performance": 90, "accessibility": 100, "best-practices": 100, "seo": 100}
# The mobile preset slows what it observes 4x, a factor Lighthouse's documentation (docs/throttling.md, "Calibrating
# the CPU slowdown") sets for a high-end desktop, benchmark index 1500 to 2000. On a slower or busier machine (CI's
# two shared cores) the performance score measures the machine more than the page: its floor holds where the
# machine measured itself in that bracket while auditing the page; the other three categories hold everywhere, and
# benchmarks/lighthouse_scores.py prints every score.
CALIBRATED_BENCHMARK_INDEX = 1500


@pytest.fixture(scope="module")
def audits(built_site) -> dict[str, lighthouse.PageAudit]:
    with lighthouse.serve_like_pages(built_site.site) as base_url:
        try:
            found = lighthouse.audit_pages([f"{base_url}/{page}" for page in PAGES], preset="mobile")
        except lighthouse.LighthouseError as error:
            pytest.fail(str(error), pytrace=False)
    return {page: audit for page, audit in zip(PAGES, found)}


@pytest.mark.parametrize("page", PAGES)
def test_page_scores_on_a_phone(page, audits):
    audit = audits[page]
    floors = FLOORS if audit.benchmark_index >= CALIBRATED_BENCHMARK_INDEX else {
        category: floor for category, floor in FLOORS.items() if category != "performance"}
    assert audit.failed(floors) == [], f"{page}: below the floor"
    assert audit.transferred_bytes < 600_000, f"{page}: {audit.transferred_bytes:,} bytes transferred"


def test_pages_are_served_compressed_as_github_pages_serves_them(built_site):
    import gzip
    import urllib.request

    with lighthouse.serve_like_pages(built_site.site) as base_url:
        request = urllib.request.Request(f"{base_url}/index.html", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Encoding"] == "gzip"
            assert gzip.decompress(response.read()) == (built_site.site / "index.html").read_bytes()
        font = next(built_site.site.rglob("*.woff2")).relative_to(built_site.site)
        request = urllib.request.Request(f"{base_url}/{font.as_posix()}", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=10) as response:  # fonts go as they are
            assert response.headers.get("Content-Encoding") is None
            assert response.read() == (built_site.site / font).read_bytes()
