"""What the package index offers: the newest release of a library, asked of pip itself.

``pip index versions NAME`` reads the index pip is configured with (or the one given), exactly as an install
would look there, and answers with the newest release for the given Python and this platform, then every
release. Nothing here reads the index's pages directly.

Every question is bounded: pip's own per-request timeout and one retry, and a deadline on the whole pip process.
pip ends with the same "No matching distribution found" whether the index lacks the project or could not be
reached; the log it writes with ``--log`` tells the two apart (``Could not fetch URL ...: connection error ...``),
so an unreachable index is reported as such (``IndexUnreachable``), never as a missing library.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

_NEWEST_LINE = re.compile(r"^(\S+) \((\S+)\)$")
_VERSIONS_LINE = re.compile(r"^Available versions: (.*)$")
_FETCH_FAILURE = re.compile(r"Could not fetch URL (\S+): (.*) - skipping\s*$")
DEFAULT_TIMEOUT_S = 15.0
WORKERS = 4  # pip's start-up dominates each question; a few at once, not one per library


class IndexUnreachable(RuntimeError):
    """The package index did not answer (connection refused, timed out, a server error); the message says which."""


class IndexQueryError(RuntimeError):
    """pip could not be asked (it is missing, or refused the question); the message gives pip's own words."""


@dataclass(frozen=True)
class Release:
    name: str
    newest: str | None  # None: the index offers no release of it for this Python and platform
    versions: tuple[str, ...]  # every release offered, newest first, as pip lists them


def _pip_command(name: str, log: Path, python_version: str | None, index_url: str | None, timeout_s: float) -> list[str]:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "index", "versions", name,
               "--timeout", f"{timeout_s:g}", "--retries", "1", "--log", str(log)]  # fmt: skip
    if python_version:
        command += ["--python-version", python_version]
    if index_url:
        command += ["--index-url", index_url]
    return command


def unreachable_index(log_text: str) -> str | None:
    """The first index page pip could not fetch for a reason other than "no such project" (HTTP 404), as
    ``URL: reason``; None when every page pip asked for was answered."""
    for line in log_text.splitlines():
        match = _FETCH_FAILURE.search(line)
        if match and not match.group(2).startswith("404 "):
            return f"{match.group(1)}: {match.group(2)}"
    return None


def newest_release(name: str, *, python_version: str | None = None, index_url: str | None = None,
                   timeout_s: float = DEFAULT_TIMEOUT_S, env: dict[str, str] | None = None) -> Release:
    """Ask pip for ``name``'s releases on the index. Raises ``IndexUnreachable`` or ``IndexQueryError``."""
    deadline_s = 4 * timeout_s + 30  # two attempts per index page, pip's start-up, and slack for a busy machine
    with tempfile.TemporaryDirectory(prefix="residlab-pip-index-") as folder:
        log = Path(folder) / "pip.log"
        command = _pip_command(name, log, python_version, index_url, timeout_s)
        try:
            completed = subprocess.run(command, capture_output=True, text=True, timeout=deadline_s, env=env)
        except subprocess.TimeoutExpired:
            raise IndexUnreachable(f"pip did not answer about {name} within {deadline_s:g} s") from None
        log_text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    unreachable = unreachable_index(log_text)
    if unreachable:  # even when another index answered: a newest release read from part of the indexes is no answer
        raise IndexUnreachable(f"the package index could not be reached ({unreachable})")
    lines = completed.stdout.splitlines()
    newest = _NEWEST_LINE.match(lines[0]) if lines else None
    if completed.returncode == 0 and newest:
        listed = next((m.group(1) for m in map(_VERSIONS_LINE.match, lines) if m), "")
        return Release(name, newest.group(2), tuple(v.strip() for v in listed.split(",") if v.strip()))
    if completed.returncode != 0 and "No matching distribution found" in completed.stderr:
        return Release(name, None, ())
    said = [line for line in completed.stderr.splitlines() if line.strip() and "experimental command" not in line]
    raise IndexQueryError(f"`pip index versions {name}` failed: {said[-1] if said else f'exit status {completed.returncode}'}")


def newest_releases(names: list[str], **options) -> dict[str, Release]:
    """``newest_release`` for every name (a few pip processes at once), in the order given."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {name: pool.submit(newest_release, name, **options) for name in dict.fromkeys(names)}
        return {name: future.result() for name, future in futures.items()}
