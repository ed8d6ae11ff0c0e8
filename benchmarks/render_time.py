"""Wall time of a fresh `quarto render` of the whole site against a render without execution, each page's
share, each executed page's kernel-and-import floor, and a second render after a one-word prose edit of one page.

    python benchmarks/render_time.py [--edit PAGE] [--seed 0]

The fresh render and the render without execution (`quarto render --no-execute`: the same pages, templates and
search index, no kernel) each run in their own clean copy of the project (as a fresh clone has it), in a seeded
random order (``measure.side_by_side``, one round, no warm-up: a render is its own warm-up of the file cache). It
prints both and their ratio. Then, in the fresh render's copy, which keeps its frozen results, one word of
``--edit``'s prose changes and the site renders again: only that page executes. The floor of an executed page is
a Jupyter kernel of this interpreter started, made to run the page's import lines (what every execution of it
pays before its own work), and shut down, timed apart from the render. Needs Quarto on PATH (or $QUARTO).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

from measure import side_by_side, timed
from residlab.build import site

ROOT = Path(__file__).resolve().parent.parent
PAGE_LINE = re.compile(r"^\[\s*\d+/\d+\]\s+(?P<page>\S+)")
CELL = re.compile(r"^```\{python\}\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)
IMPORT_LINE = re.compile(r"^(?:import \S+|from \S+ import [^(\n]+)$", re.MULTILINE)


def timed_render(project: Path, output_dir: Path, execute: bool = True) -> tuple[float, dict[str, float]]:
    """Total wall seconds and seconds per page (from one page's progress line to the next's)."""
    marks: list[tuple[str, float]] = []

    def note(line: str) -> None:
        match = PAGE_LINE.match(site.ANSI_ESCAPE.sub("", line))
        if match:
            marks.append((match.group("page"), time.perf_counter()))

    start = time.perf_counter()
    try:
        site.render(project, output_dir, echo=note, execute=execute)
    except site.RenderError as error:
        # Without execution, cross-references to figures that cells make cannot resolve: Quarto warns, and the
        # render is complete otherwise. With execution, any warning fails the benchmark as it fails the build.
        if execute or not str(error).startswith("quarto render printed warnings"):
            raise
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


def page_imports(page: Path) -> str:
    """The import lines of a page's Python cells and of the partials it includes, in order."""
    text = page.read_text(encoding="utf-8")
    for included in re.findall(r"\{\{< include (\S+) >\}\}", text):
        text += (page.parent / included).read_text(encoding="utf-8")
    return "\n".join(IMPORT_LINE.findall("\n".join(m.group("body") for m in CELL.finditer(text))))


def kernel_floor(code: str) -> float:
    """Seconds to start this interpreter's Jupyter kernel, run ``code`` in it and shut it down."""
    from jupyter_client.manager import start_new_kernel

    def run() -> None:
        manager, client = start_new_kernel(kernel_name="python3")
        try:
            reply = client.execute_interactive(code, timeout=300, output_hook=lambda message: None)
            if reply["content"]["status"] != "ok":
                raise SystemExit(f"the kernel could not run {code!r}")
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=True)

    return timed(run)


def report(title: str, total: float, per_page: dict[str, float], floors: dict[str, float] | None = None) -> None:
    print(f"{title}: {total:.1f} s")
    for page, seconds in sorted(per_page.items(), key=lambda item: -item[1]):
        floor = f"  (kernel + imports {floors[page]:4.1f} s)" if floors and page in floors else ""
        print(f"  {seconds:6.1f} s  {100 * seconds / total:5.1f}%  {page}{floor}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edit", default="lessons/04-residual-stream.qmd", help="page to edit between renders")
    parser.add_argument("--seed", type=int, default=0, help="seed of the two renders' random order")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="residlab-render-bench-") as temporary:
        base = Path(temporary)
        projects = {kind: site.clean_copy(ROOT, base / kind) for kind in ("fresh", "no-execute")}
        results = {}
        side_by_side({
            "fresh": lambda: results.__setitem__("fresh", timed_render(projects["fresh"], base / "site-fresh")),
            "no-execute": lambda: results.__setitem__("no-execute", timed_render(
                projects["no-execute"], base / "site-no-execute", execute=False)),
        }, rounds=1, warmup=0, seed=args.seed)  # fmt: skip
        edit_one_word(projects["fresh"] / args.edit)
        again, again_pages = timed_render(projects["fresh"], base / "site-again")
    executed = sorted(page for page in results["fresh"][1] if CELL.search((ROOT / page).read_text(encoding="utf-8")))
    floors = {page: kernel_floor(page_imports(ROOT / page) or "pass") for page in executed}
    bare = kernel_floor("pass")
    fresh, no_execute = results["fresh"][0], results["no-execute"][0]
    report("fresh render (no _freeze/, no render cache)", fresh, results["fresh"][1], floors)
    report("render without execution (--no-execute)", no_execute, results["no-execute"][1])
    print(f"ratio fresh / no-execute: {fresh / no_execute:.2f}")
    print(f"kernel floors: a bare kernel {bare:.1f} s; the {len(floors)} executed pages' kernels with their imports "
          f"{sum(floors.values()):.1f} s in all, {sum(floors.values()) / fresh:.0%} of the fresh render")  # fmt: skip
    report(f"render after a one-word edit of {args.edit}", again, again_pages)
    print(f"ratio second / fresh: {again / fresh:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
