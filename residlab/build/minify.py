"""esbuild, the one JavaScript and CSS tool of the build: it minifies the site's own scripts and stylesheets
(``page_weight.py``) and bundles Lab 05's code editor (``editor_bundle.py``).

esbuild comes from npm at the exact version ``assets/editor/package-lock.json`` locks (beside CodeMirror, which it
bundles), installed by ``make editor`` or by the render's pre-render step (``npm_installs.py``). ``minified`` runs it
once for any number of texts: a classic script keeps its top-level names (other scripts and the page read them), a
module (one with ``import`` or ``export``) stays a module, and a text esbuild cannot parse stops the build with its
message. What esbuild writes is a function of its input and version alone, so ``site verify`` minifies a source
again to check what the site serves.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

ESBUILD = Path("assets/editor/node_modules/esbuild/bin/esbuild")  # relative to the project's root
ESBUILD_TIMEOUT_S = 120
LOADERS = {".js": "js", ".css": "css"}


class MinifyError(RuntimeError):
    """esbuild is missing or refused a text; the message names the text and what to run."""


def esbuild_path(root: Path) -> Path:
    path = root / ESBUILD
    if not path.is_file():
        raise MinifyError(f"{ESBUILD} is not installed: run `make editor` (npm ci --prefix assets/editor)")
    return path


def run_esbuild(root: Path, arguments: list[str], what: str) -> subprocess.CompletedProcess:
    """esbuild with ``arguments``, in ``root``; a failure or any message on stderr raises, naming ``what``."""
    try:
        completed = subprocess.run([str(esbuild_path(root)), *arguments, "--log-level=warning"], cwd=root,
                                   capture_output=True, text=True, timeout=ESBUILD_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise MinifyError(f"esbuild did not finish {what} within {ESBUILD_TIMEOUT_S} s") from None
    if completed.returncode != 0 or completed.stderr.strip():
        raise MinifyError(f"esbuild could not {what}: {(completed.stderr or completed.stdout).strip()}")
    return completed


def minified(root: Path, texts: dict[str, str]) -> dict[str, str]:
    """Each text minified, by name; a name ends in ``.js`` or ``.css``, which says what the text is. One esbuild
    process for them all."""
    if not texts:
        return {}
    unknown = [name for name in texts if Path(name).suffix not in LOADERS]
    if unknown:
        raise MinifyError(f"cannot minify {unknown[0]}: only {', '.join(LOADERS)} files")
    with tempfile.TemporaryDirectory(prefix="residlab-minify-") as scratch:
        sources, output = Path(scratch) / "in", Path(scratch) / "out"
        sources.mkdir()
        entries = []
        for number, (name, text) in enumerate(texts.items()):
            entry = sources / f"{number}{Path(name).suffix}"  # names of our own: a page's path may hold anything
            entry.write_text(text, encoding="utf-8")
            entries.append(str(entry))
        try:
            run_esbuild(root, [*entries, "--minify", "--legal-comments=none", "--charset=utf8", f"--outdir={output}"],
                        f"minify {', '.join(list(texts)[:3])}{' ...' if len(texts) > 3 else ''}")  # fmt: skip
        except MinifyError as error:  # esbuild names our scratch files: say the texts' own names instead
            message = str(error)
            for name, entry in zip(texts, entries):
                message = re.sub(rf"\S*/in/{re.escape(Path(entry).name)}\b", lambda _: name, message)
            raise MinifyError(message) from None
        return {name: (output / Path(entry).name).read_text(encoding="utf-8").rstrip("\n")
                for name, entry in zip(texts, entries)}  # fmt: skip
