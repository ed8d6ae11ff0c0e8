"""Read the modules a runner lists and check the list against their code (``residlab/build/runners.py`` builds
the runner from what this returns).

A runner's modules are listed in ``RUNNERS`` in the order a learner reads them, the entry module last. The checks,
each refused with a ``ValueError`` naming the module:

- every ``from residlab.a.b import X, Y`` in a listed module names a listed module that binds X and Y at top
  level; every listed module but the entry (and ``TORCH_CHECK``) is imported by another listed module;
- a name a module uses while the file runs (outside function bodies: a base class, a decorator, a default, a
  module-level value) comes from a module listed before it. Code inside a function runs only once the whole
  file has been read, so the order is free there: a runner can put the capture first and the download after;
- a runner any of whose modules imports torch at top level lists ``TORCH_CHECK`` first, so that a learner whose
  Python lacks torch gets one line, not a traceback; no other runner lists it;
- the entry module ends with an ``if __name__ == "__main__":`` block; another module's such block (it is
  another runner's entry) ends that module and is left out of this runner;
- no top-level name is bound by two listed modules: in one file the later definition would silently replace the
  first.

Conventions a listed module follows:

- it opens with a docstring, then ``from __future__ import annotations``;
- it imports another residlab module with an ordinary ``from residlab.a.b import X, Y`` statement (one line, or
  parenthesised over several), at the top or inside a function: a module (``residlab/a/b.py``), never a package
  ``__init__``, names listed without ``as`` or ``*``; ``import residlab.a.b`` is refused. The runner drops these
  statements: every name is already defined in the same file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from residlab.course.pages import TORCH_CHECK  # stops a runner that needs torch, in one line (the registry names it)

PACKAGE_NAME = "residlab"
FUTURE_IMPORT = "from __future__ import annotations"


@dataclass(frozen=True)
class Import:
    target: str  # the imported module, relative to the package directory
    names: tuple[str, ...]
    line: int  # 1-based line where the statement starts
    at_top: bool  # a top-level statement (not inside a function or class)


@dataclass(frozen=True)
class Module:
    path: str  # relative to the package directory
    source: str
    tree: ast.Module
    imports: tuple[Import, ...]  # its residlab imports, in source order
    dropped_lines: frozenset[int]  # 1-based lines of those import statements, which the runner leaves out
    main_block: ast.If | None


def is_main_block(node: ast.stmt) -> bool:
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
        raise ValueError(f"{importer}: `from {dotted} import ...` imports a package (its __init__); "
                         "import from the module that defines the names")
    if not target.with_suffix(".py").is_file():
        raise ValueError(f"{importer}: `from {dotted} import ...` names a module that does not exist "
                         f"({PACKAGE_NAME}/{'/'.join(parts)}.py)")
    return "/".join(parts) + ".py"


def _is_package_import(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] == PACKAGE_NAME
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == PACKAGE_NAME for alias in node.names)
    return False


def _read_import(node: ast.stmt, lines: list[str], path: str, package_dir: Path, at_top: bool) -> Import:
    where = f"{path}, line {node.lineno}"
    if not isinstance(node, ast.ImportFrom):
        raise ValueError(f"{where}: import residlab code as `from {PACKAGE_NAME}.a.b import X, Y` (a runner defines "
                         f"the names, not the module): {lines[node.lineno - 1].strip()}")
    if any(alias.name == "*" or alias.asname for alias in node.names):
        raise ValueError(f"{where}: a residlab import lists its names, without `*` or `as`")
    before = lines[node.lineno - 1][: node.col_offset]
    after = lines[node.end_lineno - 1][node.end_col_offset:].strip()
    if before.strip() or (after and not after.startswith("#")):
        raise ValueError(f"{where}: a residlab import must have its lines to itself (the runner drops them)")
    return Import(_module_file(node.module, package_dir, path), tuple(alias.name for alias in node.names),
                  node.lineno, at_top)


def read_module(path: str, package_dir: Path) -> Module:
    """Parse one listed module and check the conventions that concern it alone."""
    file = package_dir / path
    if not file.is_file():
        raise ValueError(f"{path}: no such module in {package_dir}")
    source = file.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=path)
    body = tree.body
    if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        raise ValueError(f"{path}: a runner's module must open with a docstring")
    second = body[1] if len(body) > 1 else None
    if not (isinstance(second, ast.ImportFrom) and second.module == "__future__"
            and [alias.name for alias in second.names] == ["annotations"]):
        raise ValueError(f"{path}: a runner's module must follow its docstring with {FUTURE_IMPORT!r}")
    lines = source.splitlines()
    top = {id(node) for node in body}
    imports = [_read_import(node, lines, path, package_dir, id(node) in top)
               for node in ast.walk(tree) if _is_package_import(node)]
    dropped = {line for node in ast.walk(tree) if _is_package_import(node)
               for line in range(node.lineno, node.end_lineno + 1)}
    main_blocks = [node for node in body if is_main_block(node)]
    return Module(path, source, tree, tuple(sorted(imports, key=lambda item: item.line)), frozenset(dropped),
                  main_blocks[-1] if main_blocks else None)


def bound_names(statements: list[ast.stmt]) -> set[str]:
    names = set()
    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {name.id for name in ast.walk(target) if isinstance(name, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)) and not is_main_block(node):
            inner = [*getattr(node, "body", []), *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                inner += handler.body
            names |= bound_names(inner)
    return names


def defined_names(module: Module) -> set[str]:
    """Top-level names a module binds by def, class or assignment (imports of the same object are harmless)."""
    return bound_names(module.tree.body)


def _imported_names(module: Module) -> set[str]:
    names = set()
    for node in module.tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _names_used_on_import(module: Module) -> dict[str, int]:
    """The names a module reads while it is being imported (its first line for each), i.e. outside function and
    lambda bodies: module-level code, class bodies, base classes, decorators and default values. Annotations are
    left out: ``from __future__ import annotations`` keeps them unevaluated."""
    used: dict[str, int] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = node.args
            deferred = [*arguments.defaults, *filter(None, arguments.kw_defaults)]
            for child in [*getattr(node, "decorator_list", []), *deferred]:
                visit(child)
            return
        if isinstance(node, ast.AnnAssign):
            for child in filter(None, (node.target, node.value)):
                visit(child)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            used.setdefault(node.id, node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in module.tree.body:
        if not is_main_block(statement):  # the entry's __main__ block runs after every section
            visit(statement)
    return used


# ---- the bundle -----------------------------------------------------------------------------------------------


def _torch_at_top(module: Module) -> bool:
    return any(
        (isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "torch" for alias in node.names))
        or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch")
        for node in module.tree.body
    )


def _check_torch_check(runner: str, modules: list[Module]) -> None:
    needing = [module.path for module in modules if _torch_at_top(module)]
    if needing and modules[0].path != TORCH_CHECK:
        raise ValueError(f"{runner}: {needing[0]} imports torch at top level, so the runner's modules must "
                         f"start with {TORCH_CHECK} (one line, not a traceback, for a learner without torch)")
    if not needing and any(module.path == TORCH_CHECK for module in modules):
        raise ValueError(f"{runner}: lists {TORCH_CHECK}, but none of its modules imports torch at top level")


def read_bundle(runner: str, paths: tuple[str, ...], package_dir: Path) -> tuple[Module, ...]:
    """The modules ``paths`` (relative to ``package_dir``) of the runner named ``runner``, in that order, checked
    against their imports (the rules in this module's docstring)."""
    if not paths:
        raise ValueError(f"{runner}: lists no modules")
    repeated = sorted({path for path in paths if paths.count(path) > 1})
    if repeated:
        raise ValueError(f"{runner}: lists {', '.join(repeated)} twice")
    modules = [read_module(path, package_dir) for path in paths]
    by_path = {module.path: module for module in modules}
    position = {path: index for index, path in enumerate(paths)}
    imported = set()
    for module in modules:
        early = _names_used_on_import(module)
        for item in module.imports:
            if item.target not in by_path:
                raise ValueError(f"{module.path}, line {item.line}: imports from {item.target}, which "
                                 f"{runner} does not list: add it to the runner's modules in RUNNERS")
            source = by_path[item.target]
            missing = [name for name in item.names if name not in defined_names(source) | _imported_names(source)]
            if missing:
                raise ValueError(f"{module.path} imports {', '.join(missing)} from {item.target}, which does not "
                                 "define it at top level")
            imported.add(item.target)
            for name in item.names:
                origin = _origin(name, source, by_path)
                if item.at_top and name in early and position[origin] > position[module.path]:
                    raise ValueError(
                        f"{runner}: {module.path} uses {name} (line {early[name]}) while the file runs, "
                        f"outside any function, so {origin}, which defines it, must come before it in the modules")
    unused = [path for path in paths[:-1] if path not in imported and path != TORCH_CHECK]
    if unused:
        raise ValueError(f"{runner}: lists {unused[0]}, which none of its other modules imports")
    _check_torch_check(runner, modules)
    for module in modules[:-1]:  # another runner's entry, say: its __main__ block is left out of this runner
        if module.main_block is not None and module.main_block is not module.tree.body[-1]:
            raise ValueError(f"{module.path}: its `if __name__ == \"__main__\":` block must end the module, so that a "
                             f"runner it is not the entry of ({paths[-1]}) can leave the block out")
    if modules[-1].main_block is None or modules[-1].main_block is not modules[-1].tree.body[-1]:
        raise ValueError(f"{paths[-1]}: an entry module must end with an `if __name__ == \"__main__\":` block")
    defined_by: dict[str, str] = {}
    for module in modules:
        for name in sorted(defined_names(module)):
            if name in defined_by:
                raise ValueError(f"{module.path} redefines {name}, which {defined_by[name]} defines: rename one of them")
            defined_by[name] = module.path
    return tuple(modules)


def _origin(name: str, module: Module, by_path: dict[str, Module]) -> str:
    """The listed module that binds ``name``, following residlab imports from ``module`` (which provides it)."""
    seen = set()
    while name not in defined_names(module) and module.path not in seen:
        seen.add(module.path)
        sources = [item.target for item in module.imports if item.at_top and name in item.names]
        if not sources:
            break  # bound by an ordinary import (a library's name), so there as soon as the module runs
        module = by_path[sources[0]]
    return module.path
