"""Build the downloadable runners in ``assets/labs/`` from the package's own modules.

A runner is the download form of the same code: its modules' sources, concatenated, with the package's
internal imports removed and the pinned lock written in. Nothing in a runner is edited by hand;
``residlab sync`` writes them and ``residlab sync --check`` (run by the tests) fails when one has drifted.

Conventions a bundled module follows:

- it opens with a docstring and ``from __future__ import annotations``;
- it imports other residlab modules only on single lines ending in ``# bundled``;
- only the last module of a runner has an ``if __name__ == "__main__":`` block, except a module the runner
  lists as ``borrowed`` (a runner of its own, used here as a library): its block is left out;
- a module does not define a top-level name an earlier module of the same runner defines (``main`` aside, which
  only the last module's block calls), since in one file the later definition would silently replace the first.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
BUNDLED_MARKER = "# bundled"
FUTURE_IMPORT = "from __future__ import annotations"
LOCK_PLACEHOLDER = "EMBEDDED_LOCK_JSON = None  # the runner builder writes the pinned lock here"
DEFAULT_LOCK = PACKAGE_DIR / "locks" / "pythia-14m.lock.json"


@dataclass(frozen=True)
class Runner:
    filename: str
    modules: tuple[str, ...]  # paths relative to the package directory, in order
    purpose: str
    borrowed: tuple[str, ...] = ()  # modules whose own ``if __name__ == "__main__":`` block is left out


RUNNERS = (
    Runner("trace_residual_toy.py", ("course/toy.py",), "Lab 05 Parts 1-3: the toy residual trace (standard library only)"),
    Runner(
        "residual_stream_lab.py",
        ("course/lesson_lab.py",),
        "Lesson 2.1: the copy-model audit and the pre-LN/post-LN gradient profile (needs only torch)",
    ),
    Runner(
        "inspect_residual_stream.py",
        ("capture/blocks.py", "capture/sites.py", "capture/recording.py", "capture/outdir.py", "pythia/lock.py",
         "pythia/artifacts.py", "pythia/load.py", "pythia/observe.py", "pythia/runner.py"),
        "Lab 05 Part 4: pinned Pythia-14M download, verification and residual capture",
    ),
    Runner(
        "read_transformer_paper.py",
        ("course/lesson_lab.py", "course/paper_lab.py"),
        "Lab 04: the sinusoidal encoding, the post-LN block traced and checked, Lesson 2.1's gradient routes "
        "(needs only torch)",
        borrowed=("course/lesson_lab.py",),
    ),
    Runner(
        "audit_residual_writes.py",
        ("audit/core.py", "capture/blocks.py", "capture/recording.py", "audit/cli.py"),
        "Lab 06: the Residual Contribution Audit of a local causal LM or a specimen, as a verifiable packet",
    ),
)


def _is_main_block(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
        and len(node.test.comparators) == 1
        and isinstance(node.test.comparators[0], ast.Constant)
        and node.test.comparators[0].value == "__main__"
    )


def _without_main_block(source: str) -> str:
    """The module's source less its top-level ``if __name__ == "__main__":`` block (and the blank lines before it)."""
    lines = source.splitlines(keepends=True)
    for node in reversed(ast.parse(source).body):
        if _is_main_block(node):
            kept = "".join(lines[: node.lineno - 1]).rstrip("\n") + "\n"
            return kept + "".join(lines[node.end_lineno :])
    return source


def _defined_names(source: str) -> set[str]:
    """Top-level names a module binds by def, class or assignment (imports of the same object are harmless)."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return names


def _split_preamble(source: str, module: str) -> tuple[str, str]:
    """Return (docstring block, body after the __future__ import) of a bundled module."""
    tree = ast.parse(source)
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
        raise ValueError(f"{module}: a bundled module must open with a docstring")
    lines = source.splitlines(keepends=True)
    docstring = "".join(lines[: first.end_lineno])
    rest = lines[first.end_lineno :]
    body = []
    for line in rest:
        if line.strip() == FUTURE_IMPORT:
            continue
        if line.rstrip().endswith(BUNDLED_MARKER):
            continue
        body.append(line)
    return docstring, "".join(body)


def build_runner(runner: Runner, lock_path: Path = DEFAULT_LOCK) -> str:
    """Return the text of one runner, exactly as it is published.

    The runner opens with the docstring of its first module that is not borrowed: that module says what it does.
    """
    opening = next((m for m in runner.modules if m not in runner.borrowed), None)
    if opening is None:
        raise ValueError(f"{runner.filename}: at least one module must be its own, not borrowed")
    bodies: list[str] = []
    defined_by: dict[str, str] = {}
    for index, module in enumerate(runner.modules):
        module_path = PACKAGE_DIR / module
        if not module_path.exists():
            raise FileNotFoundError(f"{runner.filename} is built from residlab/{module}, which does not exist")
        source = module_path.read_text(encoding="utf-8")
        if module in runner.borrowed:
            source = _without_main_block(source)
        for name in sorted(_defined_names(source) - {"main"}):
            if name in defined_by:
                raise ValueError(f"{module} redefines {name}, which {defined_by[name]} defines: rename one of them")
            defined_by[name] = module
        if FUTURE_IMPORT not in source:
            raise ValueError(f"{module}: a bundled module must import {FUTURE_IMPORT!r}")
        is_last = index == len(runner.modules) - 1
        if not is_last and '__name__ == "__main__"' in source:
            raise ValueError(f"{module}: only the last module of {runner.filename} may run as a script")
        docstring, body = _split_preamble(source, module)
        if module == opening:
            opening_docstring = docstring
        if index > 0 or module != opening:
            bodies.append(f"\n\n# ---- from residlab/{module} " + "-" * max(0, 70 - len(module)) + "\n")
        bodies.append(body)
    parts = [opening_docstring + "\n" + FUTURE_IMPORT + "\n", *bodies]
    text = "".join(parts)
    if LOCK_PLACEHOLDER in text:
        lock_json = json.dumps(json.loads(lock_path.read_text(encoding="utf-8")), indent=1, sort_keys=True)
        text = text.replace(LOCK_PLACEHOLDER, f'EMBEDDED_LOCK_JSON = r"""\n{lock_json}\n"""')
    header = (
        "#!/usr/bin/env python3\n"
        f"# {runner.filename}: {runner.purpose}.\n"
        "# Generated by `residlab sync` from the residlab package "
        f"({', '.join('residlab/' + m for m in runner.modules)}); edit those, not this file.\n"
    )
    return header + text


def runner_outputs(assets_dir: Path) -> dict[Path, str]:
    """Every runner file and the text it must hold."""
    return {assets_dir / runner.filename: build_runner(runner) for runner in RUNNERS}
