"""``residlab site check``: what Quarto does not check before it executes a page, read from the sources alone.

Every navbar and sidebar entry exists, every page is listed, every relative link and image in the source
resolves, every ``{{< var >}}`` key is in ``_variables.yml``, every ``@fig-``/``@sec-``/``@tbl-`` reference has
exactly one label, every citation is in the page's bibliography, every figure cell has alt text, every page with
Python cells names their kernel (``jupyter: python3``), every file named in ``resources`` exists, and every
cell a learner-facing page shows runs from a download the registry declares for it or is marked as the site's own
build code (``shown_code_problems``). Seconds,
no kernel. Also the site's own facts other commands read: its pages (``site_pages``), its configuration and the
address it is published at (``site_url_problem``).
"""

from __future__ import annotations

import ast
import glob
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from residlab.course import pages

FENCE_OPEN = re.compile(r"^(?P<ticks>`{3,})\s*\{(?P<lang>[A-Za-z0-9_]+)[^}]*\}\s*$")
INCLUDE = re.compile(r"^\{\{<\s*include\s+(?P<path>\S+)\s*>\}\}\s*$")
VAR_SHORTCODE = re.compile(r"\{\{<\s*var\s+(?P<key>[^\s>]+)\s*>\}\}")
# Markdown links and images: [text](target "title") and ![alt](target); skips code spans first.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\((?P<target><[^>]+>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")
CROSSREF = re.compile(r"(?<![\w@])@(?P<label>(?:fig|sec|tbl|eq)-[A-Za-z0-9_-]*[A-Za-z0-9_])")
CITATION = re.compile(r"(?<![\w@])\[?-?@(?P<key>[A-Za-z][\w:.#$%&+?<>~/-]*[\w])")
HEADING_ID = re.compile(r"\{[^}]*#(?P<label>(?:sec|fig|tbl|eq)-[A-Za-z0-9_-]+)[^}]*\}")
CELL_OPTION = re.compile(r"^#\|\s*(?P<key>[\w-]+)\s*:\s*(?P<value>.*)$")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.IGNORECASE)
# The first line of a cell a page shows that is the site's own build code, written for the page's build with the
# residlab package and shipped in no download: a learner reads it, and runs the downloads.
BUILD_CODE_MARK = "# The site's build code (the residlab package): no download holds it."


@dataclass
class Cell:
    source: str
    options: dict
    line: int  # 1-based line of the opening fence in the file that holds it
    file: Path

    @property
    def label(self) -> str:
        return str(self.options.get("label", ""))


@dataclass
class Page:
    path: Path
    front_matter: dict
    body: str  # includes expanded
    cells: list[Cell] = field(default_factory=list)
    prose: str = ""  # body without fenced code blocks or code spans

    @property
    def folder(self) -> Path:
        return self.path.parent


def _split_front_matter(text: str) -> tuple[dict, str, int]:
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            front = yaml.safe_load(text[4:end]) or {}
            rest_start = text.find("\n", end + 4) + 1
            return front, text[rest_start:], text[:rest_start].count("\n")
    return {}, text, 0


def _expand(path: Path, text: str, first_line: int, seen: tuple[Path, ...]) -> list[tuple[str, Path, int]]:
    """Lines of ``text`` with ``{{< include >}}`` expanded, each tagged with its file and line."""
    lines: list[tuple[str, Path, int]] = []
    for number, line in enumerate(text.splitlines(), start=first_line + 1):
        match = INCLUDE.match(line.strip())
        if match:
            included = (path.parent / match.group("path")).resolve()
            if not included.exists():
                raise FileNotFoundError(f"{path}:{number}: included file {match.group('path')} does not exist")
            if included in seen:
                raise ValueError(f"{path}:{number}: {included.name} includes itself")
            lines += _expand(included, included.read_text(encoding="utf-8"), 0, seen + (included,))
        else:
            lines.append((line, path, number))
    return lines


def read_page(path: Path) -> Page:
    path = path.resolve()
    front, body, offset = _split_front_matter(path.read_text(encoding="utf-8"))
    tagged = _expand(path, body, offset, (path,))
    page = Page(path=path, front_matter=front, body="\n".join(line for line, _, _ in tagged))
    prose_lines: list[str] = []
    index = 0
    while index < len(tagged):
        line, file, number = tagged[index]
        fence = FENCE_OPEN.match(line) or re.match(r"^(?P<ticks>`{3,}|~{3,})(?P<lang>[^`]*)$", line)
        if fence:
            ticks = fence.group("ticks")
            block: list[str] = []
            index += 1
            while index < len(tagged) and tagged[index][0].strip() != ticks:
                block.append(tagged[index][0])
                index += 1
            index += 1  # closing fence
            if FENCE_OPEN.match(line) and fence.group("lang") == "python":
                options = {}
                for option_line in block:
                    option = CELL_OPTION.match(option_line)
                    if not option:
                        break
                    options[option.group("key")] = yaml.safe_load(option.group("value"))
                page.cells.append(Cell(source="\n".join(block), options=options, line=number, file=file))
                prose_lines += [option_line for option_line in block if CELL_OPTION.match(option_line)]
            continue
        prose_lines.append(line)
        index += 1
    page.prose = re.sub(r"`[^`\n]*`", "", "\n".join(prose_lines))
    return page


def _merged(base, extra):
    """Quarto's merge of a metadata file into the project's: mappings merged key by key, lists concatenated."""
    if isinstance(base, dict) and isinstance(extra, dict):
        return {**base, **{key: _merged(base.get(key), value) for key, value in extra.items()}}
    if isinstance(base, list) and isinstance(extra, list):
        return base + extra
    return extra


def load_config(root: Path) -> dict:
    """``_quarto.yml`` with its ``metadata-files`` merged in, as Quarto reads the project."""
    config = yaml.safe_load((root / "_quarto.yml").read_text(encoding="utf-8"))
    for name in config.get("metadata-files", []):
        path = root / name
        if not path.is_file():
            raise ValueError(f"_quarto.yml includes {name} (metadata-files), which does not exist: run `residlab sync`")
        config = _merged(config, yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    return config


def _entries(contents) -> list[str]:
    """Every href in a navbar/sidebar contents tree."""
    found: list[str] = []
    for item in contents or []:
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            if "href" in item:
                found.append(item["href"])
            found += _entries(item.get("contents"))
            found += _entries(item.get("left"))
            found += _entries(item.get("right"))
    return found


def navigation_entries(config: dict) -> list[str]:
    website = config.get("website", {})
    navbar = website.get("navbar", {})
    entries = _entries(navbar.get("left")) + _entries(navbar.get("right"))
    sidebars = website.get("sidebar", {})
    for sidebar in sidebars if isinstance(sidebars, list) else [sidebars]:
        entries += _entries(sidebar.get("contents"))
    return entries


def site_pages(root: Path) -> list[Path]:
    """Every page Quarto renders: the files matching ``project.render`` in _quarto.yml, less partials
    (a name starting with ``_``), which Quarto only includes into other pages."""
    patterns = load_config(root).get("project", {}).get("render")
    if not patterns:
        raise ValueError(f"{root / '_quarto.yml'} lists no project.render patterns; the site's pages are unknown")
    excluded = [root / pattern[1:] for pattern in patterns if pattern.startswith("!")]
    pages = {path for pattern in patterns if not pattern.startswith("!") for path in root.glob(pattern)
             if not path.name.startswith("_") and not any(path.is_relative_to(folder) for folder in excluded)}
    return sorted(pages)


def _flatten(mapping: dict, prefix: str = "") -> set[str]:
    keys = set()
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        keys.add(dotted)
        if isinstance(value, dict):
            keys |= _flatten(value, dotted + ".")
    return keys


def _bibliography_keys(page: Page) -> set[str]:
    bibliographies = page.front_matter.get("bibliography", [])
    keys: set[str] = set()
    for name in [bibliographies] if isinstance(bibliographies, str) else bibliographies:
        text = (page.folder / name).read_text(encoding="utf-8")
        keys |= set(re.findall(r"@\w+\s*\{\s*([^,\s]+)\s*,", text))
    return keys


def check_page(page: Page, root: Path, variables: set[str]) -> list[str]:
    """Static problems on one page."""
    where = page.path.relative_to(root)
    problems = []
    for match in LINK.finditer(page.prose):
        target = match.group("target").strip("<>")
        if EXTERNAL.match(target):
            continue
        target_path = (page.folder / target.split("#")[0].split("?")[0]).resolve()
        candidates = [target_path]
        if target_path.suffix == ".html":
            candidates.append(target_path.with_suffix(".qmd"))
        if not any(candidate.exists() for candidate in candidates):
            problems.append(f"{where}: link target {target} does not exist")
        elif root.resolve() not in target_path.parents:
            problems.append(f"{where}: link target {target} lies outside the site")
    for match in VAR_SHORTCODE.finditer(page.body):
        if match.group("key") not in variables:
            problems.append(f"{where}: {{{{< var {match.group('key')} >}}}} is not in _variables.yml")
    labels = [cell.label for cell in page.cells if cell.label]
    labels += [match.group("label") for match in HEADING_ID.finditer(page.prose)]
    for reference in sorted({match.group("label") for match in CROSSREF.finditer(page.prose)}):
        count = labels.count(reference)
        if count != 1:
            problems.append(f"{where}: @{reference} has {count} labels, needs exactly one")
    for label in sorted({label for label in labels if labels.count(label) > 1}):
        problems.append(f"{where}: label {label} is defined {labels.count(label)} times")
    citations = {
        match.group("key")
        for match in CITATION.finditer(page.prose)
        if not re.match(r"(fig|sec|tbl|eq)-", match.group("key"))
    }
    if citations:
        known = _bibliography_keys(page)
        for key in sorted(citations - known):
            problems.append(f"{where}: citation @{key} is not in the page's bibliography")
    if page.cells and page.front_matter.get("jupyter") != "python3":
        problems.append(f"{where}: has Python cells but does not name their kernel (jupyter: python3)")
    for cell in page.cells:
        label = cell.label
        if label.startswith("fig-") and not cell.options.get("fig-alt"):
            problems.append(f"{where}: figure cell {label} has no fig-alt text")
    return problems


def _shown(cell: Cell) -> bool:
    return cell.options.get("echo", True) is not False and cell.options.get("include", True) is not False


def shown_code_problems(page: Page, root: Path) -> list[str]:
    """On a learner-facing page (a family with a room), every shown cell, which the site gives a copy button, opens
    either with the import of a download its family declares (``pages.ShownCode``), using only the names declared
    for it, or with ``BUILD_CODE_MARK``; every declared cell is on the page."""
    root = root.resolve()
    try:
        family = pages.family_of(page.path.relative_to(root).as_posix())
    except LookupError:
        return []
    if family.room is None:
        return []
    declared = {(shown.module, shown.alias): shown for shown in family.shown_code}
    offered = ", ".join(f"import {shown.module} as {shown.alias}" for shown in family.shown_code) or "none"
    problems, used = [], set()
    for cell in filter(_shown, page.cells):
        where = f"{cell.file.relative_to(root)}:{cell.line}"
        code = [line for line in cell.source.splitlines() if not CELL_OPTION.match(line)]
        if code and code[0].strip() == BUILD_CODE_MARK:
            continue
        tree = ast.parse("\n".join(code))
        first = tree.body[0] if tree.body else None
        shown = None
        if isinstance(first, ast.Import) and len(first.names) == 1:
            shown = declared.get((first.names[0].name, first.names[0].asname))
        if shown is None:
            problems.append(f"{where}: a shown cell must open with the import of a download its family declares "
                            f"(residlab/course/pages.py, shown_code: {offered}) or with the line {BUILD_CODE_MARK!r}")
            continue
        used.add(shown)
        imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
        for node in imports:
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(module.split(".")[0] == "residlab" for module in modules):
                problems.append(f"{where}: a cell that runs from {shown.runner} imports {ast.unparse(node)!r}, which "
                                "no download holds")
        called = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                  and isinstance(node.value, ast.Name) and node.value.id == shown.alias}  # fmt: skip
        for name in sorted(called - set(shown.names)):
            problems.append(f"{where}: {shown.alias}.{name} is not among the names the registry declares for "
                            f"{shown.runner} (residlab/course/pages.py), which tests/runners/test_shown_code.py checks")
    if page.path == root / family.page:
        runners = {runner.filename for runner in family.runners}
        for shown in family.shown_code:
            if shown.runner not in runners:
                problems.append(f"{family.page}: its shown code names {shown.runner}, none of its family's runners")
            if shown not in used:
                problems.append(f"{family.page}: no shown cell opens with import {shown.module} as {shown.alias}, "
                                "which the registry declares for it")
    return problems


def check_site(root: Path) -> list[str]:
    config = load_config(root)
    problems = []
    for entry in navigation_entries(config):
        if not (root / entry).exists():
            problems.append(f"_quarto.yml: navigation entry {entry} does not exist")
    for pattern in config.get("project", {}).get("resources", []):
        if not glob.glob(str(root / pattern)):
            problems.append(f"_quarto.yml: resource {pattern} matches no file")
    variables = _flatten(yaml.safe_load((root / "_variables.yml").read_text(encoding="utf-8")) or {})
    listed = {(root / entry).resolve() for entry in navigation_entries(config)}
    for path in site_pages(root):
        if path.resolve() not in listed:
            problems.append(f"{path.relative_to(root)} is not in the navbar or sidebar")
        page = read_page(path)
        problems += check_page(page, root, variables) + shown_code_problems(page, root)
    return problems


def site_url_problem(root: Path, expected: str) -> str | None:
    """Why ``website: site-url`` is not ``expected`` (trailing slashes aside), or None when it is."""
    configured = str(load_config(root).get("website", {}).get("site-url") or "")
    if configured.rstrip("/") == expected.rstrip("/"):
        return None
    return (f"_quarto.yml sets website: site-url to {configured or 'nothing'!r}, but the site is published at "
            f"{expected!r}: set site-url to that address (docs/contributing.qmd, \"Publish\")")
