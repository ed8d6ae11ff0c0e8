"""Wall time of a fresh render of the whole site, through `residlab site render` and through a plain `quarto render`,
against a render without execution; each page's share, each executed page's kernel-and-import floor, and a second
render after a one-word prose edit of one page.

    python benchmarks/render_time.py [--edit PAGE] [--seed 0] [--rounds 1]

The two fresh renders and the render without execution (`quarto render --no-execute`: the same pages, templates and
search index, no kernel) each run in their own clean copy of the project (as a fresh clone has it), in a seeded
random order (``measure.side_by_side``, no warm-up: a render is its own warm-up of the file cache). The plain
`quarto render` is what a Quarto user runs with this environment active: this interpreter's folder first on PATH,
no QUARTO_PYTHON, none of `residlab site render`'s checks. It prints each render and both ratios to the one without
execution (the median over ``--rounds``). Then, in a fresh render's copy, which keeps its frozen results, one word of
``--edit``'s prose changes and the site renders again: only that page executes. The floor of an executed page is
a Jupyter kernel of this interpreter started, made to run the page's import lines (what every execution of it
pays before its own work), and shut down, timed apart from the render. Needs Quarto on PATH (or $QUARTO).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
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


RENDERS = ("residlab site render", "quarto render", "no-execute")


def plain_quarto_render(project: Path, output_dir: Path, echo) -> None:
    """`quarto render` as a Quarto user runs it with this environment active (its bin folder first on PATH)."""
    environment = {key: value for key, value in os.environ.items() if key != "QUARTO_PYTHON"}
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environment.get("PATH", "")])
    quarto = os.environ.get("QUARTO") or shutil.which("quarto") or "quarto"
    process = subprocess.Popen([quarto, "render", "--output-dir", str(output_dir)], cwd=project, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")  # fmt: skip
    output = []
    for line in process.stdout:
        output.append(line)
        echo(line)
    if process.wait() != 0:
        raise SystemExit(f"quarto render exited with code {process.returncode}:\n{''.join(output[-40:])}")


def timed_render(project: Path, output_dir: Path, how: str = "residlab site render") -> tuple[float, dict[str, float]]:
    """Total wall seconds and seconds per page (from one page's progress line to the next's); ``how``: one of
    ``RENDERS``."""
    marks: list[tuple[str, float]] = []

    def note(line: str) -> None:
        match = PAGE_LINE.match(site.ANSI_ESCAPE.sub("", line))
        if match:
            marks.append((match.group("page"), time.perf_counter()))

    start = time.perf_counter()
    try:
        if how == "quarto render":
            plain_quarto_render(project, output_dir, note)
        else:
            site.render(project, output_dir, echo=note, execute=how != "no-execute")
    except site.RenderError as error:
        # Without execution, cross-references to figures that cells make cannot resolve: Quarto warns, and the
        # render is complete otherwise. With execution, any warning fails the benchmark as it fails the build.
        if how != "no-execute" or not str(error).startswith("quarto render printed warnings"):
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
    parser.add_argument("--seed", type=int, default=0, help="seed of the renders' random order")
    parser.add_argument("--rounds", type=int, default=1, help="renders of each kind (each in a fresh clean copy)")
    args = parser.parse_args(argv)
    # As `make render` runs it (the Makefile unexports it): with it set, every kernel compiles what it imports again.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="residlab-render-bench-") as temporary:
        base = Path(temporary)
        results: dict[str, list] = {how: [] for how in RENDERS}
        counter = iter(range(10**6))

        def render(how: str) -> None:  # a fresh clean copy every time: no _freeze/, no render cache
            copy = site.clean_copy(ROOT, base / f"copy-{next(counter)}")
            results[how].append((copy, *timed_render(copy, copy / "_site-bench", how)))

        side_by_side({how: (lambda how=how: render(how)) for how in RENDERS}, rounds=args.rounds, warmup=0,
                     seed=args.seed)  # fmt: skip
        edited = results["residlab site render"][-1][0]
        edit_one_word(edited / args.edit)
        again, again_pages = timed_render(edited, base / "site-again")
    last = {how: results[how][-1] for how in RENDERS}
    executed = sorted(page for page in last[RENDERS[0]][2] if CELL.search((ROOT / page).read_text(encoding="utf-8")))
    floors = {page: kernel_floor(page_imports(ROOT / page) or "pass") for page in executed}
    bare = kernel_floor("pass")
    for how, title in zip(RENDERS, ("fresh render through residlab site render", "fresh render through a plain quarto render",
                                    "render without execution (--no-execute)")):  # fmt: skip
        report(f"{title} (last of {args.rounds})", last[how][1], last[how][2], floors if how != "no-execute" else None)
    ratios = {how: statistics.median(run[1] / bare_run[1] for run, bare_run in zip(results[how], results["no-execute"]))
              for how in RENDERS[:2]}  # fmt: skip
    for how, ratio in ratios.items():
        print(f"ratio {how} / no-execute: {ratio:.2f} (median of {args.rounds} round(s); goal at most 3)")
    fresh = last[RENDERS[0]][1]
    print(f"kernel floors: a bare kernel {bare:.1f} s; the {len(floors)} executed pages' kernels with their imports "
          f"{sum(floors.values()):.1f} s in all, {sum(floors.values()) / fresh:.0%} of the fresh render")  # fmt: skip
    report(f"render after a one-word edit of {args.edit}", again, again_pages)
    print(f"ratio second / fresh: {again / fresh:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
