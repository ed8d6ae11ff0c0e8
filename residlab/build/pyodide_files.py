"""Quarto post-render step: copy Pyodide, the interpreter Lab 05 Part 3's editor runs, into the built site.

Pyodide (CPython compiled to WebAssembly, with its standard library) comes from its npm package at the exact
version ``assets/pyodide/package.json`` pins and ``assets/pyodide/package-lock.json`` locks; ``make pyodide`` (and
``make render``, ``make page``, ``make test``) installs it with ``npm ci`` into ``assets/pyodide/node_modules/``.
This step copies only what the page loads (``SHIPPED``) and the licence (MPL-2.0, ``assets/pyodide/LICENSE``;
the npm package carries none) into ``<site>/assets/pyodide/``: no CDN, nothing fetched from elsewhere. The page
requests these files only when a learner first presses Run, Check or "Run it here"
(``assets/explorers/python-editor.js``).

Quarto runs it in the project root and names the output folder in QUARTO_PROJECT_OUTPUT_DIR. A missing or
different install stops the render with one line saying what to run.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from residlab.course.lab05.editor import SHIPPED  # what the editor loads: the files the site serves

PYODIDE_DIR = Path("assets/pyodide")  # package.json, package-lock.json, LICENSE; node_modules/ once installed
INSTALLED = PYODIDE_DIR / "node_modules" / "pyodide"
LICENSE = "LICENSE"


class PyodideMissing(RuntimeError):
    """Pyodide is not installed, or not at the pinned version; the message says what to run."""


def pinned_version(root: Path) -> str:
    return json.loads((root / PYODIDE_DIR / "package.json").read_text(encoding="utf-8"))["dependencies"]["pyodide"]


def installed_files(root: Path) -> list[Path]:
    """The files to ship, from the install in ``root``, checked against the pin."""
    pinned = pinned_version(root)
    manifest = root / INSTALLED / "package.json"
    if not manifest.is_file():
        raise PyodideMissing(f"Pyodide {pinned} is not installed in {PYODIDE_DIR / 'node_modules'}: run `make pyodide` "
                             f"(npm ci --prefix {PYODIDE_DIR})")
    installed = json.loads(manifest.read_text(encoding="utf-8"))["version"]
    if installed != pinned:
        raise PyodideMissing(f"{INSTALLED} holds Pyodide {installed}, but {PYODIDE_DIR}/package.json pins {pinned}: "
                             "run `make pyodide`")
    missing = [name for name in SHIPPED if not (root / INSTALLED / name).is_file()]
    if missing:
        raise PyodideMissing(f"{INSTALLED} lacks {', '.join(missing)}: run `make pyodide` again")
    return [root / INSTALLED / name for name in SHIPPED] + [root / PYODIDE_DIR / LICENSE]


def copy_into_site(root: Path, output: Path) -> list[Path]:
    target = output / PYODIDE_DIR
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for source in installed_files(root):
        destination = target / source.name
        if not destination.exists() or destination.stat().st_size != source.stat().st_size \
                or destination.read_bytes() != source.read_bytes():
            shutil.copyfile(source, destination)
        copied.append(destination)
    return copied


def main() -> int:
    root = Path.cwd()
    output = Path(os.environ.get("QUARTO_PROJECT_OUTPUT_DIR") or "_site")
    try:
        copied = copy_into_site(root, output if output.is_absolute() else root / output)
    except PyodideMissing as error:
        print(f"pyodide_files: error: {error}", file=sys.stderr)
        return 1
    print(f"pyodide_files: Pyodide {pinned_version(root)}, {len(copied)} files in {PYODIDE_DIR}/ of the site")
    return 0


if __name__ == "__main__":
    sys.exit(main())
