"""Wall time of a fresh `quarto render` of the whole site, each page's share, and a second render after a
one-word prose edit of one page, with the ratio of the two.

Both renders run in one clean copy of the project (as a fresh clone has it), one after the other, so the
second finds the first's frozen results. Needs Quarto on PATH (or $QUARTO).

    python benchmarks/render_time.py [--edit PAGE]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

from residlab.build import site

ROOT = Path(__file__).resolve().parent.parent
PAGE_LINE = re.compile(r"^\[\s*\d+/\d+\]\s+(?P<page>\S+)")


def timed_render(project: Path, output_dir: Path) -> tuple[float, dict[str, float]]:
    """Total wall seconds and seconds per page (from one page's progress line to the next's)."""
    marks: list[tuple[str, float]] = []

    def note(line: str) -> None:
        match = PAGE_LINE.match(site.ANSI_ESCAPE.sub("", line))
        if match:
            marks.append((match.group("page"), time.perf_counter()))

    start = time.perf_counter()
    site.render(project, output_dir, echo=note)
    end = time.perf_counter()
    per_page = {page: (marks[i + 1][1] if i + 1 < len(marks) else end) - at for i, (page, at) in enumerate(marks)}
    return end - start, per_page


def edit_one_word(page: Path) -> None:
    """Change one word of prose: the first line after the front matter that starts with a letter."""
    lines = page.read_text(encoding="utf-8").split("\n")
    body_start = lines.index("---", 1) + 1
    for index in range(body_start, len(lines)):
        if re.match(r"[A-Za-z]", lines[index]) and " the " in lines[index]:
            lines[index] = lines[index].replace(" the ", " this ", 1)
            page.write_text("\n".join(lines), encoding="utf-8")
            return
    raise SystemExit(f"{page}: no prose line with the word 'the' to edit")


def report(title: str, total: float, per_page: dict[str, float]) -> None:
    print(f"{title}: {total:.1f} s")
    for page, seconds in sorted(per_page.items(), key=lambda item: -item[1]):
        print(f"  {seconds:6.1f} s  {100 * seconds / total:5.1f}%  {page}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edit", default="lessons/04-residual-stream.qmd", help="page to edit between renders")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="residlab-render-bench-") as temporary:
        project = site.clean_copy(ROOT, Path(temporary) / "project")
        fresh, fresh_pages = timed_render(project, Path(temporary) / "site-fresh")
        edit_one_word(project / args.edit)
        again, again_pages = timed_render(project, Path(temporary) / "site-again")
    report("fresh render (no _freeze/)", fresh, fresh_pages)
    report(f"render after a one-word edit of {args.edit}", again, again_pages)
    print(f"ratio second / fresh: {again / fresh:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
