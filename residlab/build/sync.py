"""``residlab sync``: write (or, with ``--check``, verify) every file derived from the package.

Derived files: the runners in ``assets/labs/``, ``assets/labs/residual-requirements.txt``, ``_variables.yml`` and
``_pages.yml`` (the navbar, the sidebar and the resources, from the registry of page families,
``residlab/course/pages.py``), ``_releases.yml`` (the navbar's Releases menu, from the course releases under
``releases/``, ``release``), and the generated blocks of hand-written files (``GENERATED_BLOCKS``: the README's
table of pages, the home page's learning path and downloads table, the Instructors page's table of pins), each
between its two marker lines. The tests run the check, so a page, a runner and the pins cannot drift apart.

A page whose every value is written here executes no Python when the site renders: each executed page costs a
Jupyter kernel's start and stop, more than these pages' own cells took (``benchmarks/README.md``, "The render").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from residlab.build import pins
from residlab.build import release
from residlab.build import runners
from residlab.course import pages
from residlab.pythia.lock import load_lock


LOCK_NAME = "residlab/locks/pythia-14m.lock.json"
REGISTRY_NAME = "residlab/course/pages.py"

# file -> its generated blocks: (the block's name in its markers, the source its markers name, what writes it)
GENERATED_BLOCKS = {
    "README.md": [("the table of pages", REGISTRY_NAME, pages.readme_table)],
    "index.qmd": [("the learning path", REGISTRY_NAME, pages.learning_path),
                  ("the downloads table", REGISTRY_NAME, pages.downloads_table)],
    "instructors.qmd": [("the table of pins", LOCK_NAME, lambda: pins.pins_table(load_lock()))],
}


def block_markers(name: str, source: str) -> tuple[str, str]:
    """The two lines that enclose a generated block."""
    return f"<!-- {name}: written by `residlab sync` from {source} -->", f"<!-- end of {name} -->"


def with_generated_blocks(text: str, where: str) -> str:
    """``text`` (the file ``where``) with each of its ``GENERATED_BLOCKS`` rewritten between its markers."""
    for name, source, write in GENERATED_BLOCKS[where]:
        start, end = block_markers(name, source)
        if text.count(start) != 1 or text.count(end) != 1:
            raise ValueError(f"{where} must hold the lines {start} and {end} once each")
        before, rest = text.split(start)
        text = f"{before}{start}\n{write()}{end}{rest.split(end)[1]}"
    return text


def default_site_root() -> Path:
    # An editable install (how the project is always installed) keeps the package inside the site.
    return Path(__file__).resolve().parents[2]


def derived_files(site_root: Path) -> dict[Path, str]:
    lock = pins.load_lock_data()
    outputs = runners.runner_outputs(site_root / "assets" / "labs")
    outputs.update(pins.pinned_outputs(site_root, lock))
    outputs[site_root / pages.METADATA_FILE] = pages.metadata_yaml()
    outputs[site_root / release.RELEASES_FILE] = release.releases_yaml(site_root)
    for where in GENERATED_BLOCKS:  # the blocks between their markers; the rest of each file is written by hand
        path = site_root / where
        if path.is_file():
            outputs[path] = with_generated_blocks(path.read_text(encoding="utf-8"), where)
    return outputs


def stale_files(site_root: Path) -> list[str]:
    """Every derived file that is missing or differs from what the package would write."""
    problems = []
    for path, text in derived_files(site_root).items():
        if not path.exists():
            problems.append(f"{path.relative_to(site_root)} is missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{path.relative_to(site_root)} differs from what `residlab sync` writes")
    return problems


def pin_drift(site_root: Path) -> list[str]:
    """requirements.txt against the lock, each disagreement followed by the one file that settles it."""
    drift = pins.requirements_drift(pins.load_lock_data(), (site_root / "requirements.txt").read_text(encoding="utf-8"))
    if drift:
        drift.append(
            f"edit the lock, {LOCK_NAME}: its `libraries` (and `also_tested`) must record the versions requirements.txt "
            "pins; `residlab sync` writes every other file from the lock, but never the lock itself"
        )
    return drift


def write_derived_files(root: Path) -> None:
    for path, text in derived_files(root).items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(root)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="residlab sync", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a derived file is stale")
    parser.add_argument("--root", type=Path, default=default_site_root(), help="the site's root folder")
    args = parser.parse_args(argv)
    if not (args.root / "_quarto.yml").exists():
        parser.error(f"{args.root} has no _quarto.yml: pass the site's root with --root")
    try:
        drift = pin_drift(args.root)
        if args.check:
            stale = stale_files(args.root)
            if stale:
                stale.append("then run `residlab sync` to rewrite the derived files" if drift else
                             "run `residlab sync` to rewrite the derived files")
        else:
            stale = []
            if not drift:  # derived from a lock that requirements.txt contradicts, they would be wrong either way
                write_derived_files(args.root)
    except (ValueError, OSError) as error:  # a module the runner builder refuses; an unreadable lock
        print(f"residlab sync: error: {error}", file=sys.stderr)
        return 1
    for problem in drift + stale:
        print(problem, file=sys.stderr)
    return 1 if drift or stale else 0
