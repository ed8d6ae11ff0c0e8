"""Build the downloadable runners in ``assets/labs/`` from the package's own modules.

A runner is the download form of the same code: one file holding the sources of an entry module and of every
module it imports, with the package's internal imports removed and its data (the pinned lock) written in.
Nothing in a runner is edited by hand; ``residlab sync`` writes them and ``residlab sync --check`` (run by the
tests) fails when one has drifted.

A runner is declared (``RUNNERS``) by its file name, its entry module, its purpose, what a learner is asked to
check first (``ReadFirst``: a section, i.e. a module path, and top-level names in it) and its data sections. Which
modules it holds, and in which order, is never written down: it follows the entry module's imports.

Conventions a bundled module follows (the builder refuses, naming the module, any module that breaks one):

- it opens with a docstring, then ``from __future__ import annotations``;
- it imports another residlab module only on a single line ``from residlab.a.b import X, Y  # bundled``: a module
  (``residlab/a/b.py``), never a package ``__init__``, names listed without ``as`` or ``*``. Such a line may sit
  inside a function (a lazy import); any residlab import without the marker is refused, since the runner could
  not resolve it. The builder follows these lines: dependencies come first (depth-first, in import order), the
  entry module last; an import cycle is refused;
- only the entry module has an ``if __name__ == "__main__":`` block; the entry must have one;
- no top-level name is bound by two bundled modules (nor by a module and a data section): in one file the later
  definition would silently replace the first.

The generated file opens with the shebang, one generated-file note (the source modules, and the command that
writes it), the entry module's docstring (purpose and usage) and a table of contents: the "read this first"
pointers and every section with the line where its ``# ---- `` marker starts, all computed. Then each module
follows under its marker, its docstring kept, its ``# bundled`` lines and ``__future__`` import removed.

Data sections: a ``DataSection`` names a JSON file in the package and the module-level name that holds its text
in the runner, written as ``NAME = r\"\"\"...\"\"\"`` just before the entry module's ``__main__`` block, after all
code. The package itself never defines that name, so code reads it through a small accessor that returns the
runner's text, or None in the package::

    def embedded_lock_json() -> str | None:
        return globals().get("EMBEDDED_LOCK_JSON")

A data section whose name no bundled module mentions as a string is refused (nothing would read it).
"""

from __future__ import annotations

import ast
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
PACKAGE_NAME = "residlab"
BUNDLED_MARKER = "# bundled"
FUTURE_IMPORT = "from __future__ import annotations"
SYNC_COMMAND = "residlab sync"
MARKER_PREFIX = "# ---- "
MARKER_WIDTH = 100


@dataclass(frozen=True)
class DataSection:
    name: str  # the module-level name the runner binds to the text
    source: str  # a JSON file, relative to the package directory
    what: str  # what it is, for the table of contents


@dataclass(frozen=True)
class ReadFirst:
    section: str  # a bundled module, relative to the package directory
    names: tuple[str, ...] = ()  # top-level names defined in it, each listed with its line


@dataclass(frozen=True)
class Runner:
    filename: str
    entry: str  # the entry module, relative to the package directory; its imports decide the rest
    purpose: str
    check: str  # what a learner is asked to check first
    read_first: tuple[ReadFirst, ...]
    data: tuple[DataSection, ...] = ()

    @property
    def modules(self) -> tuple[str, ...]:
        """The bundled modules in bundle order (dependencies first, the entry last)."""
        return bundle_order(self.entry)


PINNED_LOCK = DataSection("EMBEDDED_LOCK_JSON", "locks/pythia-14m.lock.json", "the pinned lock")

RUNNERS = (
    Runner(
        "trace_residual_toy.py", "course/lab05_toy/toy.py",
        "Lab 05 Parts 1-3: the toy residual trace (standard library only)",
        "the exact arithmetic and the update rules",
        (
            ReadFirst("course/lab05_toy/exact_vectors.py", ("Vector",)),
            ReadFirst("course/lab05_toy/toy.py", ("first_update", "second_update", "readout")),
        ),
    ),
    Runner(
        "residual_stream_lab.py", "course/lesson/lesson_lab.py",
        "Lesson 2.1: the copy-model audit and the pre-LN/post-LN gradient profile (needs only torch)",
        "the audit of the copy model",
        (
            ReadFirst("course/lesson/copy_model.py", ("PreNormBlock",)),
            ReadFirst("course/lesson/lesson_lab.py", ("run_traced", "audit_model")),
        ),
    ),
    Runner(
        "inspect_residual_stream.py", "pythia/runner.py",
        "Lab 05 Part 4: pinned Pythia-14M download, verification and residual capture",
        "the capture: the site table, record_sites and the checks",
        (
            ReadFirst("capture/blocks.py", ("BLOCK_TYPES",)),
            ReadFirst("capture/sites.py", ("site_name", "resolve_sites")),
            ReadFirst("capture/recording.py", ("record_sites",)),
            ReadFirst("pythia/observe.py", ("capture_residuals", "run_checks")),
        ),
        data=(PINNED_LOCK,),
    ),
    Runner(
        "read_transformer_paper.py", "course/lab04_paper/paper_lab.py",
        "Lab 04: the sinusoidal encoding, the post-LN block traced and checked, Lesson 2.1's gradient routes "
        "(needs only torch)",
        "the traced block",
        (ReadFirst("course/lab04_paper/traced_block.py", ("capture_block", "check_post_ln", "check_pre_ln")),),
    ),
    Runner(
        "audit_residual_writes.py", "audit/cli.py",
        "Lab 06: the Residual Contribution Audit of a local causal LM or a specimen, as a verifiable packet",
        "the measures: the records and the measurement",
        (ReadFirst("audit/packet.py", ("model_record", "input_record", "intervention_record", "measurement_record")),),
    ),
)


# ---- reading one module ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Module:
    path: str  # relative to the package directory
    source: str
    tree: ast.Module
    imports: tuple[tuple[str, tuple[str, ...]], ...]  # (module path, names), in source order
    bundled_lines: frozenset[int]  # 1-based lines of the ``# bundled`` imports
    main_block: ast.If | None


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


def _module_file(dotted: str, package_dir: Path, importer: str) -> str:
    """``residlab.a.b`` -> ``a/b.py``, refusing a package ``__init__`` and a missing module."""
    parts = dotted.split(".")[1:]
    target = package_dir.joinpath(*parts) if parts else package_dir
    if not parts or target.is_dir():
        raise ValueError(f"{importer}: `from {dotted} import ...  {BUNDLED_MARKER}` imports a package (its __init__); "
                         "import from the module that defines the names")
    if not target.with_suffix(".py").is_file():
        raise ValueError(f"{importer}: `from {dotted} import ...  {BUNDLED_MARKER}` names a module that does not exist "
                         f"({PACKAGE_NAME}/{'/'.join(parts)}.py)")
    return "/".join(parts) + ".py"


def _is_package_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] == PACKAGE_NAME
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == PACKAGE_NAME for alias in node.names)
    return False


def read_module(path: str, package_dir: Path) -> Module:
    """Parse one bundled module and check the conventions that concern it alone."""
    file = package_dir / path
    if not file.is_file():
        raise ValueError(f"{path}: no such module in {package_dir}")
    source = file.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=path)
    body = tree.body
    if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        raise ValueError(f"{path}: a bundled module must open with a docstring")
    second = body[1] if len(body) > 1 else None
    if not (isinstance(second, ast.ImportFrom) and second.module == "__future__"
            and [alias.name for alias in second.names] == ["annotations"]):
        raise ValueError(f"{path}: a bundled module must follow its docstring with {FUTURE_IMPORT!r}")
    lines = source.splitlines()
    imports_by_line = {}
    for node in ast.walk(tree):
        if not _is_package_import(node):
            continue
        line = lines[node.lineno - 1]
        if not (isinstance(node, ast.ImportFrom) and node.lineno == node.end_lineno
                and line.rstrip().endswith(BUNDLED_MARKER)):
            raise ValueError(f"{path}, line {node.lineno}: a residlab import must be one line "
                             f"`from {PACKAGE_NAME}.a.b import X, Y  {BUNDLED_MARKER}` (the runner cannot resolve "
                             f"any other): {line.strip()}")
        if any(alias.name == "*" or alias.asname for alias in node.names):
            raise ValueError(f"{path}, line {node.lineno}: a bundled import lists its names, without `*` or `as`")
        imports_by_line[node.lineno] = (_module_file(node.module, package_dir, path),
                                        tuple(alias.name for alias in node.names))
    for number, line in enumerate(lines, start=1):
        if line.rstrip().endswith(BUNDLED_MARKER) and number not in imports_by_line:
            raise ValueError(f"{path}, line {number}: only a one-line `from {PACKAGE_NAME}... import` may be marked "
                             f"{BUNDLED_MARKER!r}: {line.strip()}")
    main_blocks = [node for node in body if _is_main_block(node)]
    return Module(path, source, tree, tuple(imports_by_line[n] for n in sorted(imports_by_line)),
                  frozenset(imports_by_line), main_blocks[-1] if main_blocks else None)


def _bound_names(statements: list[ast.stmt]) -> set[str]:
    names = set()
    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {name.id for name in ast.walk(target) if isinstance(name, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)) and not _is_main_block(node):
            inner = [*getattr(node, "body", []), *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                inner += handler.body
            names |= _bound_names(inner)
    return names


def defined_names(module: Module) -> set[str]:
    """Top-level names a module binds by def, class or assignment (imports of the same object are harmless)."""
    return _bound_names(module.tree.body)


def _imported_names(module: Module) -> set[str]:
    names = set()
    for node in module.tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


# ---- the bundle -----------------------------------------------------------------------------------------------


def read_bundle(entry: str, package_dir: Path = PACKAGE_DIR) -> tuple[Module, ...]:
    """The entry module and everything it imports ``# bundled``: dependencies first (depth-first post-order, ties in
    import order), the entry last."""
    modules: dict[str, Module] = {}
    order: list[Module] = []
    stack: list[str] = []

    def visit(path: str) -> None:
        if path in stack:
            cycle = " -> ".join([*stack[stack.index(path):], path])
            raise ValueError(f"{path}: import cycle among bundled modules ({cycle})")
        if path in modules:
            return
        module = read_module(path, package_dir)
        stack.append(path)
        for target, names in module.imports:
            visit(target)
            provided = defined_names(modules[target]) | _imported_names(modules[target])
            missing = [name for name in names if name not in provided]
            if missing:
                raise ValueError(f"{path} imports {', '.join(missing)} from {target}, which does not define it at top level")
        stack.pop()
        modules[path] = module
        order.append(module)

    visit(entry)
    for module in order[:-1]:
        if module.main_block is not None:
            raise ValueError(f"{module.path} has an `if __name__ == \"__main__\":` block, but only the entry module "
                             f"({entry}) may run as a script; move what the bundle needs into a module of its own")
    if order[-1].main_block is not order[-1].tree.body[-1]:
        raise ValueError(f"{entry}: an entry module must end with an `if __name__ == \"__main__\":` block")
    defined_by: dict[str, str] = {}
    for module in order:
        for name in sorted(defined_names(module)):
            if name in defined_by:
                raise ValueError(f"{module.path} redefines {name}, which {defined_by[name]} defines: rename one of them")
            defined_by[name] = module.path
    return tuple(order)


def bundle_order(entry: str, package_dir: Path = PACKAGE_DIR) -> tuple[str, ...]:
    return tuple(module.path for module in read_bundle(entry, package_dir))


def _marker(title: str) -> str:
    return MARKER_PREFIX + title + " " + "-" * max(3, MARKER_WIDTH - len(MARKER_PREFIX) - len(title) - 1) + "\n"


def module_marker(path: str) -> str:
    return _marker(f"{PACKAGE_NAME}/{path}")


def data_marker(data: DataSection) -> str:
    return _marker(f"data: {data.name}, {data.what} ({PACKAGE_NAME}/{data.source})")


def _kept_lines(module: Module, start: int = 0, stop: int | None = None) -> str:
    """The module's lines ``start..stop-1`` (0-based) less the ``__future__`` import and the ``# bundled`` lines."""
    lines = module.source.splitlines(keepends=True)
    future = module.tree.body[1]
    drop = {number - 1 for number in module.bundled_lines} | set(range(future.lineno - 1, future.end_lineno))
    if future.end_lineno < len(lines) and not lines[future.end_lineno].strip():
        drop.add(future.end_lineno)  # and the blank line after it
    return "".join(lines[index] for index in range(start, len(lines) if stop is None else stop) if index not in drop)


@dataclass(frozen=True)
class Section:
    key: str  # a module path, or the name of a data section
    label: str  # its line in the table of contents
    text: str  # its marker line, then its text


def _section(key: str, label: str, marker: str, text: str) -> Section:
    return Section(key, label, marker + "\n" + text.strip("\n") + "\n")


def _data_text(data: DataSection, package_dir: Path, bundle: tuple[Module, ...]) -> str:
    mentioned = any(isinstance(node, ast.Constant) and node.value == data.name
                    for module in bundle for node in ast.walk(module.tree))
    if not mentioned:
        raise ValueError(f"data section {data.name}: no bundled module reads it (as globals().get({data.name!r}))")
    for module in bundle:
        if data.name in defined_names(module):
            raise ValueError(f"{module.path} defines {data.name}, which the data section {data.name} defines")
    text = json.dumps(json.loads((package_dir / data.source).read_text(encoding="utf-8")), indent=1, sort_keys=True)
    if '"""' in text or text.endswith("\\"):
        raise ValueError(f"data section {data.name}: {data.source} cannot be written as a raw triple-quoted string")
    return f'{data.name} = r"""\n{text}\n"""\n'


def _sections(runner: Runner, bundle: tuple[Module, ...], package_dir: Path) -> list[Section]:
    """One section per bundled module (the entry's code without its docstring and ``__main__`` block), then the
    data sections."""
    entry = bundle[-1]
    sections = [
        _section(module.path, f"{PACKAGE_NAME}/{module.path}", module_marker(module.path), _kept_lines(module))
        for module in bundle[:-1]
    ]
    code = _kept_lines(entry, entry.tree.body[0].end_lineno, entry.main_block.lineno - 1)
    sections.append(_section(entry.path, f"{PACKAGE_NAME}/{entry.path} (the entry)", module_marker(entry.path), code))
    names = [data.name for data in runner.data]
    for data in runner.data:
        if names.count(data.name) > 1:
            raise ValueError(f"{runner.filename}: two data sections are named {data.name}")
        text = _data_text(data, package_dir, bundle)
        sections.append(_section(data.name, f"data: {data.name}, {data.what}", data_marker(data), text))
    return sections


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _locate(text: str, runner: Runner, sections: list[Section]) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """Line numbers in ``text``: each section's marker, and each read-first name's definition in its section."""
    starts = {section.key: _line_of(text, text.index("\n" + section.text) + 1) for section in sections}
    tree = ast.parse(text)
    named = {}
    for pointer in runner.read_first:
        first = starts[pointer.section]
        last = min([line for line in starts.values() if line > first], default=text.count("\n") + 2)
        for name in pointer.names:
            lines = [node.lineno for node in tree.body if first < node.lineno < last and name in _bound_names([node])]
            if not lines:
                raise ValueError(f"{runner.filename}: {pointer.section} defines no top-level {name} to read first")
            named[(pointer.section, name)] = lines[0]
    return starts, named


class _Zeros(dict):
    def __missing__(self, key):
        return 0


def _contents(runner: Runner, sections: list[Section], starts: dict, named: dict) -> str:
    lines = [f"Read this first: {runner.check}."]
    for pointer in runner.read_first:
        lines.append(f"  line {starts[pointer.section]:>4}  {PACKAGE_NAME}/{pointer.section}")
        lines += [f"  line {named[(pointer.section, name)]:>4}    {name}" for name in pointer.names]
    lines += ["", "Contents (the line where each section's marker starts):"]
    lines += [f"  line {starts[section.key]:>4}  {section.label}" for section in sections]
    lines.append("  then the entry's __main__ block: what runs when the file runs as a script")
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


def build_runner(runner: Runner, package_dir: Path = PACKAGE_DIR) -> str:
    """Return the text of one runner, exactly as it is published."""
    bundle = read_bundle(runner.entry, package_dir)
    entry = bundle[-1]
    if not runner.read_first:
        raise ValueError(f"{runner.filename}: say what a learner reads first (read_first)")
    paths = [module.path for module in bundle]
    for pointer in runner.read_first:
        if pointer.section not in paths:
            raise ValueError(f"{runner.filename}: its read-first section {pointer.section} is not bundled "
                             f"(the bundle is {', '.join(paths)})")
    sections = _sections(runner, bundle, package_dir)
    sources = [f"{PACKAGE_NAME}/{path}" for path in paths] + [f"{PACKAGE_NAME}/{data.source}" for data in runner.data]
    note = textwrap.wrap(
        f"{runner.filename}: {runner.purpose}. Generated by `{SYNC_COMMAND}` from the package's {', '.join(sources)}; "
        "edit those, not this file.", width=110, break_on_hyphens=False, break_long_words=False,
    )
    docstring = "".join(entry.source.splitlines(keepends=True)[: entry.tree.body[0].end_lineno])
    main_block = _kept_lines(entry, entry.main_block.lineno - 1)

    def assemble(contents: str) -> str:
        return (
            "#!/usr/bin/env python3\n" + "".join(f"# {line}\n" for line in note) + docstring + "\n" + contents
            + "\n" + FUTURE_IMPORT + "\n\n\n" + "\n\n".join(section.text for section in sections) + "\n\n"
            + main_block
        )

    draft = assemble(_contents(runner, sections, _Zeros(), _Zeros()))
    text = assemble(_contents(runner, sections, *_locate(draft, runner, sections)))
    compile(text, runner.filename, "exec")  # a bundling mistake (an emptied block) fails here, not at a learner's
    return text


def runner_outputs(assets_dir: Path) -> dict[Path, str]:
    """Every runner file and the text it must hold."""
    return {assets_dir / runner.filename: build_runner(runner) for runner in RUNNERS}
