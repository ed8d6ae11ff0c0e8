"""Lab 05 Part 3's editor: the words and the block the page shows, with the facts of the interpreter it runs.

The interpreter is Pyodide from its pinned npm install (``assets/pyodide/``; ``make pyodide``), whose files
``residlab/build/pyodide_files.py`` copies into the site (``SHIPPED``); the editor (``assets/explorers/
python-editor.js``) fetches them on the learner's first Run or Check, stops a run after ``RUN_LIMIT_S`` and gives
each function a Check calls ``FUNCTION_LIMIT_S``. The code is edited in CodeMirror 6, bundled into the site by
``residlab/build/editor_bundle.py`` and fetched with the editor's script. The page passes the links of the skeleton,
the checker (the registry's, ``residlab.course.pages.download_href``) and the two scripts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from residlab.course.lab05.code_check import FUNCTION_LIMIT_S

PYODIDE_DIR = Path(__file__).resolve().parents[3] / "assets" / "pyodide"
# The loader (an ES module, run in the editor's Web Worker), the runtime, the standard library and the package
# index the loader reads at start; not the CommonJS loader, type declarations, source maps or console pages.
SHIPPED = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
RUN_LIMIT_S = 10  # the editor's time limit for one run (python-editor.js reads it from data-limit)


@dataclass(frozen=True)
class Interpreter:
    pyodide: str  # the pinned version
    cpython: str  # the CPython it is built from
    shipped_mb: float  # what the site serves of it, before compression


def interpreter(pyodide_dir: Path = PYODIDE_DIR) -> Interpreter:
    """The pinned Pyodide, read from its package.json and its install (``make pyodide``)."""
    pinned = json.loads((pyodide_dir / "package.json").read_text(encoding="utf-8"))["dependencies"]["pyodide"]
    installed = pyodide_dir / "node_modules" / "pyodide"
    cpython = json.loads((installed / "pyodide-lock.json").read_text(encoding="utf-8"))["info"]["python"]
    return Interpreter(pinned, cpython, sum((installed / name).stat().st_size for name in SHIPPED) / 1e6)


def editor_text(held_out_count: int, checker_href: str) -> str:
    """What the editor does, with the interpreter's facts (Markdown)."""
    facts = interpreter()
    return f"""**Run** runs your code as `python3 my_toy.py` would, and shows a syntax error at once, with its
line. **Check** calls each function on {held_out_count} inputs this page never shows and compares the answers with
the exact toy: each function *passes*, or its mistake is named; one still running after {FUNCTION_LIMIT_S} s is
named as a loop that never ends, and the others are still checked. Python here is Pyodide {facts.pyodide} (CPython
{facts.cpython} in WebAssembly), served by this site and downloaded (at most {facts.shipped_mb:.1f} MB) on your first
Run or Check; it runs beside the page and stops a Run after {RUN_LIMIT_S} s. Tab indents in the editor: to move on
with the keyboard, press **Esc**, then **Tab**. Nothing leaves your browser, which keeps your code until you press
**Reset to skeleton** twice. **Download as .py** saves `my_toy.py` for a plain `python3`, where the same checks run
with [check_toy.py]({checker_href}): `python3 check_toy.py my_toy.py` (it gives your file's top-level code and each
function {FUNCTION_LIMIT_S} s)."""


def editor_block(skeleton_href: str, checker_href: str, code_editor_src: str, editor_src: str) -> str:
    """The editor's element, which python-editor.js (``editor_src``) fills in, with CodeMirror from
    ``code_editor_src`` (or a plain text box if that did not load); both are fetched when the element nears the
    screen (``assets/site/explorers.html``), in that order (HTML)."""
    return f"""<div class="residlab-python" id="toy-editor" data-skeleton="{skeleton_href}"
data-checker="{checker_href}" data-limit="{RUN_LIMIT_S}" data-function-limit="{FUNCTION_LIMIT_S}"
data-residlab-scripts="{code_editor_src} {editor_src}">
<p>The editor needs JavaScript; check_toy.py checks your file.</p>
</div>
"""
