"""The pre-render step that installs the site's npm packages from their locks (residlab/build/npm_installs.py), with
a stand-in npm on PATH: what it installs, when it leaves an install alone, and the one line it stops with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from residlab.build import npm_installs

ROOT = Path(__file__).resolve().parents[3]
STEP = ROOT / "residlab" / "build" / "npm_installs.py"
# A stand-in for npm: records its arguments, and for `ci --prefix DIR` makes DIR/node_modules (or fails on demand).
FAKE_NPM = """#!/bin/sh
echo "$@" >> "$NPM_LOG"
if [ -n "$NPM_FAIL" ]; then echo "npm error code E404" >&2; exit 1; fi
mkdir -p "$3/node_modules/pkg"
"""


def project(tmp_path: Path, *folders: str) -> Path:
    root = tmp_path / "project"
    for folder in folders:
        (root / folder).mkdir(parents=True)
        (root / folder / "package.json").write_text("{}")
        (root / folder / "package-lock.json").write_text("{}")
    (root / "assets" / "site").mkdir(parents=True, exist_ok=True)  # no lock: not an install
    return root


def run_step(root: Path, tmp_path: Path, npm: bool = True, fail: bool = False) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if npm:
        (bin_dir / "npm").write_text(FAKE_NPM)
        (bin_dir / "npm").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "NPM_LOG": str(tmp_path / "npm.log")}
    if not npm:
        env["PATH"] = str(bin_dir)  # nowhere an npm could be
    if fail:
        env["NPM_FAIL"] = "1"
    return subprocess.run([sys.executable, str(STEP)], cwd=root, env=env, capture_output=True, text=True, timeout=60)


def test_the_site_serves_pyodide_from_a_lock_the_step_finds():
    assert ROOT / "assets" / "pyodide" in npm_installs.site_locks(ROOT)


def test_a_missing_install_is_made_from_its_lock_and_stamped_then_left_alone(tmp_path):
    root = project(tmp_path, "assets/pyodide", "assets/other")
    first = run_step(root, tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["npm_installs: assets/other installed from its lock (npm ci)",
                                         "npm_installs: assets/pyodide installed from its lock (npm ci)"]  # fmt: skip
    assert all((root / folder / "node_modules" / ".installed").is_file() for folder in ("assets/pyodide", "assets/other"))
    calls = (tmp_path / "npm.log").read_text().splitlines()
    assert calls[0].split()[:3] == ["ci", "--prefix", str(root / "assets" / "other")] and "--prefer-offline" in calls[0]
    again = run_step(root, tmp_path)
    assert again.returncode == 0 and again.stdout == ""
    assert len((tmp_path / "npm.log").read_text().splitlines()) == 2  # nothing installed twice


def test_a_lock_newer_than_its_install_is_installed_again(tmp_path):
    root = project(tmp_path, "assets/pyodide")
    assert run_step(root, tmp_path).returncode == 0
    stamp = root / "assets" / "pyodide" / "node_modules" / ".installed"
    os.utime(stamp, (1, 1))
    assert not npm_installs.is_current(root / "assets" / "pyodide")
    assert run_step(root, tmp_path).stdout == "npm_installs: assets/pyodide installed from its lock (npm ci)\n"


@pytest.mark.parametrize("npm, fail, message", [
    (False, False, "npm_installs: error: npm is not on PATH, and assets/pyodide is not installed: install Node.js "
                   "and npm, then render again (or run `npm ci --prefix assets/pyodide` yourself)"),
    (True, True, "npm_installs: error: `npm ci --prefix assets/pyodide` failed: npm error code E404"),
])  # fmt: skip
def test_an_install_that_cannot_run_stops_the_render_in_one_line(tmp_path, npm, fail, message):
    root = project(tmp_path, "assets/pyodide")
    completed = run_step(root, tmp_path, npm=npm, fail=fail)
    assert completed.returncode == 1 and completed.stderr == message + "\n"
    assert not (root / "assets" / "pyodide" / "node_modules" / ".installed").exists()
