"""Quarto pre-render step: install the npm packages the site serves (``assets/*/package-lock.json``) from their
locks when they are missing or older than their lock, so a plain ``quarto render`` of a fresh clone builds.

Each folder under ``assets/`` with a ``package.json`` and a ``package-lock.json`` is one install (Pyodide for Lab 05
Part 3's editor, ``assets/pyodide/``, and any other the pages serve); ``npm ci --prefix FOLDER`` installs exactly
what the lock pins, and ``FOLDER/node_modules/.installed`` records it, the stamp the Makefile's targets (``make
pyodide``) write too, so ``make`` and this step never install twice. ``--prefer-offline`` takes what npm's cache
holds without asking the registry (a test's render, after ``make test`` installed the same locks, asks nothing).
npm missing, or an install that fails or outlasts ``NPM_TIMEOUT_S``, stops the render with one line saying what to
run. Standard library only: Quarto runs it with whatever Python it found.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

NPM_TIMEOUT_S = 600  # one install; a first install of Pyodide downloads about 10 MB
STAMP = Path("node_modules") / ".installed"


class InstallFailed(RuntimeError):
    """An install could not run or did not finish; the message says what to run instead."""


def site_locks(root: Path) -> list[Path]:
    """The folders under ``assets/`` whose npm packages the site serves, in name order."""
    return sorted(lock.parent for lock in root.glob("assets/*/package-lock.json") if (lock.parent / "package.json").is_file())


def is_current(folder: Path) -> bool:
    """Installed, and not older than its package.json or lock (as ``make`` compares the stamp)."""
    stamp = folder / STAMP
    if not stamp.is_file():
        return False
    return all(stamp.stat().st_mtime >= (folder / name).stat().st_mtime for name in ("package.json", "package-lock.json"))


def install(folder: Path, root: Path) -> None:
    npm = shutil.which("npm")
    where = folder.relative_to(root).as_posix()
    if npm is None:
        raise InstallFailed(f"npm is not on PATH, and {where} is not installed: install Node.js and npm, then render "
                            f"again (or run `npm ci --prefix {where}` yourself)")
    command = [npm, "ci", "--prefix", str(folder), "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        completed = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise InstallFailed(f"`npm ci --prefix {where}` did not finish within {NPM_TIMEOUT_S} s") from None
    if completed.returncode != 0:
        last = (completed.stderr.strip().splitlines() or [f"exit status {completed.returncode}"])[-1]
        raise InstallFailed(f"`npm ci --prefix {where}` failed: {last}")
    (folder / STAMP).touch()


def main() -> int:
    root = Path.cwd()
    try:
        for folder in site_locks(root):
            where = folder.relative_to(root).as_posix()
            if is_current(folder):
                continue
            install(folder, root)
            print(f"npm_installs: {where} installed from its lock (npm ci)")
    except InstallFailed as error:
        print(f"npm_installs: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
