"""Quarto post-render step: every number the pages show, in one machine-readable list, ``numbers.json`` of the site.

While Quarto renders a page, the site's Lua filter ``assets/site/numbers.lua`` lists each number the page shows
(its stable id, the value as displayed, where it came from, analytic or observed and the model) into
``.residlab-numbers/`` of the project, one file per page. This step gathers the lists of the pages the built site
holds, in page order, with the pins the build ran with (``requirements.txt`` and the Pythia lock), into
``numbers.json`` at the site's root; a render of one page keeps the other pages' lists. ``residlab release`` and
``residlab release diff`` read it (``residlab.build.release``).

Quarto runs it with the project's Python in the project root and names the output folder in
QUARTO_PROJECT_OUTPUT_DIR.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from residlab.build import pins

NUMBERS = "numbers.json"
LOCK = Path("residlab") / "locks" / "pythia-14m.lock.json"
PAGE_LISTS = ".residlab-numbers"
SCHEMA = 1
MAX_LIST_BYTES = 16 * 1024 * 1024  # one page's list, or the site's, read at most


class NumbersError(Exception):
    """A list of numbers that cannot be read: one line naming the file."""


def read_json(path: Path, what: str) -> dict:
    """A JSON object of at most MAX_LIST_BYTES, or NumbersError naming the file."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_LIST_BYTES + 1)
    except OSError as error:
        raise NumbersError(f"cannot read {what} {path}: {error.strerror or error}") from None
    if len(raw) > MAX_LIST_BYTES:
        raise NumbersError(f"{what} {path} is larger than {MAX_LIST_BYTES} bytes")
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise NumbersError(f"{what} {path} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise NumbersError(f"{what} {path} is not a JSON object")
    return value


def build_pins(root: Path) -> dict:
    """What the build's numbers came from: every pin of requirements.txt and the specimen's lock."""
    requirements = (root / "requirements.txt").read_text(encoding="utf-8")
    lock = pins.load_lock_data(root / LOCK)
    found = {f"requirements.txt {name}": version for name, version in pins.requirement_pins(requirements).items()}
    found["lock repository"] = lock["repository"]
    found["lock revision"] = lock["revision"]
    for name, version in sorted(lock["libraries"].items()):
        found[f"lock {name}"] = version
    return found


def page_html(page: str) -> str:
    """The built file of a page: ``labs/x.qmd`` -> ``labs/x.html``."""
    return page[: -len(".qmd")] + ".html" if page.endswith(".qmd") else page


def gather(root: Path, site: Path) -> dict:
    """The site's list: the previous list's pages, updated by every page list a render wrote, kept only for pages
    the site holds."""
    pages: dict[str, list] = {}
    previous = site / NUMBERS
    if previous.is_file():
        pages = {entry["page"]: entry["numbers"] for entry in read_json(previous, "the list of numbers")["pages"]}
    folder = root / PAGE_LISTS
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        entry = read_json(path, "the page's list of numbers")
        pages[entry["page"]] = entry["numbers"] if isinstance(entry.get("numbers"), list) else []
    kept = [{"page": page, "numbers": pages[page]} for page in sorted(pages) if (site / page_html(page)).is_file()]
    return {"schema": SCHEMA, "pins": build_pins(root), "pages": kept}


def write(root: Path, site: Path) -> Path:
    listed = gather(root, site)
    target = site / NUMBERS
    partial = target.with_name(NUMBERS + ".partial")
    partial.write_text(json.dumps(listed, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(target)  # whole or not at all
    return target


def main() -> int:
    root = Path.cwd()
    output = Path(os.environ.get("QUARTO_PROJECT_OUTPUT_DIR") or "_site")
    try:
        write(root, output if output.is_absolute() else root / output)
    except NumbersError as error:
        print(f"numbers_list: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
