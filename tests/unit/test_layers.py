"""The package's floors, read from its own source: imports run one way, no cycle, no module grown too large, no run
of six identical lines written twice, and the pages come in through the one front door (``residlab.course``).

Floors, bottom to top: ``capture`` (block tables, site names, recording, the output rule) and ``render`` (the
per-render cache, standard library only); ``audit`` and ``pythia``, each standing on capture alone; ``course``
(what pages compute and draw) and ``build`` (site checks, sync, pins, runner generation) on top; the ``residlab``
command (``cli.py``, ``__main__.py``) above all. Inside ``course``, page-family rooms import no other room but the
shared ones (``models``, ``ui``); ``ui`` imports no room.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "residlab"
# room -> the rooms it may import (besides itself).
MAY_IMPORT = {
    "capture": set(),
    "render": set(),
    "audit": {"capture"},
    "pythia": {"capture"},
    "course": {"capture", "render", "audit", "pythia"},
    "build": {"capture", "render", "audit", "pythia", "course"},
    "": {"capture", "render", "audit", "pythia", "course", "build"},  # residlab/__init__.py, cli.py, __main__.py
}
FLOORS = ("capture", "render", "audit", "pythia", "course", "build")
# Inside course: the rooms every page family may use; a page-family room imports only these (and itself).
SHARED_ROOMS = {"models": {"ui"}, "ui": set()}
MAX_MODULE_LINES = 520  # "about 500": a module past this is split
SHARED_RUN = 6  # identical lines that may not stand twice in the package
PAGES = sorted(
    path
    for pattern in ("*.qmd", "lessons/*.qmd", "labs/*.qmd", "glossary/*.qmd")
    for path in ROOT.glob(pattern)
)


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every residlab module ``path`` imports, at module level or inside a function (resolved to a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name.startswith("residlab"):
                found.add(name)
    return found


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in MAY_IMPORT) else ""


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported_modules(path, set(known)) - {name} for name, path in known.items()}


def test_the_package_has_its_floors():
    assert {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()} == set(FLOORS)
    for floor in FLOORS:
        assert ast.get_docstring(ast.parse((PACKAGE / floor / "__init__.py").read_text())), f"{floor} has no manual"


def test_imports_only_run_downward():
    upward = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in targets
        if room(target) != room(module) and room(target) not in MAY_IMPORT[room(module)] and target != "residlab"
    ]
    assert upward == []


def course_room(module: str) -> str:
    """The course room a module sits in ("" for the front door and the course-level modules beside it)."""
    parts = module.split(".")
    in_room = len(parts) >= 3 and parts[1] == "course" and (PACKAGE / "course" / parts[2]).is_dir()
    return parts[2] if in_room else ""


def test_every_course_room_has_a_manual():
    for folder in sorted(path for path in (PACKAGE / "course").iterdir() if (path / "__init__.py").is_file()):
        assert ast.get_docstring(ast.parse((folder / "__init__.py").read_text())), f"course/{folder.name} has no manual"


def test_every_manual_names_each_module_beside_it():
    missing = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        manual = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        dotted = ".".join(init.parent.relative_to(ROOT).parts)
        named = [path.stem for path in init.parent.glob("*.py") if path.name != "__init__.py"]
        named += [path.name for path in init.parent.iterdir() if (path / "__init__.py").is_file()]
        for name in sorted(named):
            if not any(f"``{form}" in manual for form in (f"{name}``", f"{name}/``", f"{dotted}.{name}``")):
                missing.append(f"{init.relative_to(ROOT)} does not name {name}")
    assert missing == []


def test_rooms_import_only_the_shared_rooms():
    crossing = []
    for module, targets in import_graph().items():
        if not course_room(module):
            continue
        for target in targets:
            if room(target) != "course" or course_room(target) == course_room(module):
                continue
            if not course_room(target):  # course/shared.py, course/pages.py or the front door: above every room
                crossing.append(f"{module} imports {target}, the course level above the rooms: a page passes a room "
                                "what it needs from there (a shared value, a registry entry) as an argument")
            elif course_room(target) not in SHARED_ROOMS.get(course_room(module), set(SHARED_ROOMS)):
                crossing.append(f"{module} imports {target}, another page family's room: move what both need to "
                                "models/ or ui/")
    assert crossing == []


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    state: dict[str, str] = {}

    def visit(module: str, trail: list[str]) -> list[str] | None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if target == "residlab" or target not in graph:
                continue
            if state.get(target) == "open":
                return trail + [module, target]
            if target not in state:
                cycle = visit(target, trail + [module])
                if cycle:
                    return cycle
        state[module] = "done"
        return None

    cycles = [cycle for module in sorted(graph) if module not in state for cycle in [visit(module, [])] if cycle]
    assert cycles == []


def test_no_module_is_too_long():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def _code_lines(path: Path) -> list[tuple[int, str]]:
    lines = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        # Closing brackets alone and import lines say nothing about the logic (sibling modules import alike).
        if text and not re.fullmatch(r"[\])},:(\[{]*", text) and not re.match(r"(import|from) \S", text):
            lines.append((number, text))
    return lines


def test_no_run_of_six_identical_lines_is_written_twice():
    seen: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for name, path in modules().items():
        lines = _code_lines(path)
        for start in range(len(lines) - SHARED_RUN + 1):
            window = lines[start : start + SHARED_RUN]
            seen[tuple(text for _, text in window)].append(f"{path.relative_to(ROOT)}:{window[0][0]}")
    repeated = sorted(" ~ ".join(places) for places in seen.values() if len(places) > 1)
    assert repeated == [], "the same six lines stand in these places: make one piece of code serve them"


def _page_imports(page: Path) -> list[ast.stmt]:
    """Every import statement in the page's Python cells that names residlab."""
    cells = re.findall(r"^```\{python\}[^\n]*\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    statements = [node for cell in cells for node in ast.walk(ast.parse(cell)) if isinstance(node, (ast.Import, ast.ImportFrom))]
    return [
        node for node in statements
        if any(name.startswith("residlab") for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]))
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_pages_import_only_the_front_door(page):
    from residlab import course

    for node in _page_imports(page):
        assert isinstance(node, ast.ImportFrom) and node.module == "residlab.course", (
            f"{page.name}: {ast.unparse(node)!r}: a page imports from residlab.course only"
        )
        for alias in node.names:
            assert alias.name in course.__all__, f"{page.name}: {alias.name} is not in residlab.course's interface"


def test_no_front_door_name_is_shadowed_by_a_submodule():
    # Importing residlab.course.X binds X on the package, which would hide a door name X that means something else.
    from residlab import course

    course_dir = ROOT / "residlab" / "course"
    submodules = {path.stem for path in course_dir.glob("*.py")} | {path.name for path in course_dir.iterdir() if path.is_dir()}
    for name, (module, attribute) in course._INTERFACE.items():
        if name in submodules:
            assert (module, attribute) == (f"residlab.course.{name}", None), f"{name} is also a course submodule"


def test_the_front_door_names_resolve_and_import_nothing_heavy():
    import subprocess
    import sys

    from residlab import course

    for name in course.__all__:
        assert getattr(course, name) is not None
    # Importing the door (and the toy through it) loads no torch: a page that needs none starts quickly.
    probe = "import sys; from residlab.course import toy; print('torch' in sys.modules)"
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "False"


def test_the_readme_names_every_room():
    from residlab.course import pages

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rooms = sorted({family.room for family in pages.FAMILIES if family.room} | set(SHARED_ROOMS))
    assert [room for room in rooms if f"`{room}/`" not in readme] == [], "README.md's layout does not name these rooms"
