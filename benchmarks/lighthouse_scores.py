"""Lighthouse's scores, largest contentful paint and transferred bytes for every page of a built site, served as
GitHub Pages serves it (gzip; ``residlab.build.lighthouse``), in Debian's Chromium.

    make render && python benchmarks/lighthouse_scores.py [_site] [--preset mobile|desktop] [--against OTHER_SITE]

The goal (issue 30): on the mobile preset every page scores at least 95 in performance, paints its largest
content within 2.5 s, and scores 100 in accessibility, best practices and SEO (tests/site/test_lighthouse.py
asserts those three, which do not depend on timing; performance is measured here only). With ``--against`` (another build, say one of the main branch) both
sites are measured in turn and each page's LCP and bytes are printed beside the other's, with their ratio.
Lighthouse simulates the phone from what it observes here: on a busy machine, performance and LCP come out
worse. The BI column is Lighthouse's benchmark index of the machine during that page's run (Chrome DevTools'
calibration puts the low-tier phone the mobile preset names near 264 and a Pixel 5 near 1000; the preset slows
what it observes 4x whatever the machine). Needs ``npm ci --prefix tests/site/lighthouse`` (make test runs it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from residlab.build import lighthouse, site_check

ROOT = Path(__file__).resolve().parent.parent
GOALS = {"performance": 95, "accessibility": 100, "best-practices": 100, "seo": 100}
LARGEST_PAINT_GOAL_MS = 2500


def measure(site_dir: Path, pages: list[str], preset: str) -> tuple[dict[str, lighthouse.PageAudit], float]:
    started = time.perf_counter()
    with lighthouse.serve_like_pages(site_dir) as base_url:
        audits = lighthouse.audit_pages([f"{base_url}/{page}" for page in pages], preset=preset)
    return dict(zip(pages, audits)), time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", type=Path, default=ROOT / "_site", help="the built site (default: _site)")
    parser.add_argument("--preset", choices=["mobile", "desktop"], default="mobile")
    parser.add_argument("--against", type=Path, help="another built site, measured the same way and shown beside")
    parser.add_argument("--page", action="append", metavar="PATH",
                        help="only this page (repeatable), e.g. labs/05-trace-residual-stream.html: a build of one page")
    args = parser.parse_args(argv)
    for folder in filter(None, (args.site, args.against)):
        if not (folder / "index.html").is_file():
            parser.error(f"{folder} holds no built site (no index.html): run `make render` first")
    pages = args.page or [str(page.relative_to(ROOT).with_suffix(".html")) for page in site_check.site_pages(ROOT)]
    try:
        audits, seconds = measure(args.site, pages, args.preset)
        # pages the other build does not have (an older one, say) are shown without a comparison
        other, other_seconds = measure(args.against, [page for page in pages if (args.against / page).is_file()],
                                       args.preset) if args.against else ({}, 0.0)
    except lighthouse.LighthouseError as error:
        print(f"lighthouse_scores: {error}", file=sys.stderr)
        return 1
    header = f"{'page':42} {'perf':>5} {'a11y':>5} {'b-p':>5} {'seo':>5} {'LCP s':>6} {'FCP s':>6} {'TBT ms':>7} {'CLS':>6} {'KiB':>7} {'BI':>5}"
    if other:
        header += f" | {'LCP s':>6} {'KiB':>7} {'LCP x':>6} {'KiB x':>6} (against {args.against})"
    print(f"Lighthouse 12.2.3, {args.preset} preset, {args.site}")
    print(header)
    short = []
    for page, audit in audits.items():
        scores = [audit.scores[category] for category in GOALS]
        line = (f"{page:42} " + " ".join(f"{score:5.0f}" for score in scores) +
                f" {audit.largest_paint_ms / 1000:6.2f} {audit.first_paint_ms / 1000:6.2f} {audit.blocking_ms:7.0f}"
                f" {audit.layout_shift:6.3f} {audit.transferred_bytes / 1024:7.0f} {audit.benchmark_index:5.0f}")
        if page in other:
            before = other[page]
            line += (f" | {before.largest_paint_ms / 1000:6.2f} {before.transferred_bytes / 1024:7.0f}"
                     f" {audit.largest_paint_ms / before.largest_paint_ms:6.2f} {audit.transferred_bytes / before.transferred_bytes:6.3f}")
        print(line)
        if args.preset == "mobile":
            short += audit.failed(GOALS)
            if audit.largest_paint_ms > LARGEST_PAINT_GOAL_MS:
                short.append(f"{page}: largest contentful paint {audit.largest_paint_ms / 1000:.2f} s > 2.5 s")
    print(f"{len(pages)} pages in {seconds:.0f} s" + (f" (against: {other_seconds:.0f} s)" if other else ""))
    for line in short:
        print(f"short of the goal: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
