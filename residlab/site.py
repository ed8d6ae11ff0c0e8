"""The site's pages, read the way Quarto reads them: what can be checked without Quarto, and execution.

``residlab site check`` checks everything static: every navbar and sidebar entry exists, every relative
link and image resolves, every ``{{< var >}}`` key is in ``_variables.yml``, every ``@fig-``/``@sec-``/
``@tbl-`` reference has exactly one label on its page, every citation is in the page's bibliography and
every file named in ``resources`` exists.

``residlab site run [PAGE ...]`` executes each page's Python cells in a real Jupyter kernel, in the page's
folder, as Quarto's Jupyter engine does, evaluating each inline ``{python}`` expression where it stands.
A failing cell is reported with its page, cell number, label and line. A page that ran cleanly is stored
in a jupyter-cache and read back, as ``execute: cache: true`` has Quarto do. The executed page is then given
to pandoc (the binary pypandoc ships) with ``--mathml``, so math that would not convert is reported too.
"""

from __future__ import annotations

import argparse
import glob
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from residlab.sync import default_site_root

FENCE_OPEN = re.compile(r"^(?P<ticks>`{3,})\s*\{(?P<lang>[A-Za-z0-9_]+)[^}]*\}\s*$")
INCLUDE = re.compile(r"^\{\{<\s*include\s+(?P<path>\S+)\s*>\}\}\s*$")
VAR_SHORTCODE = re.compile(r"\{\{<\s*var\s+(?P<key>[^\s>]+)\s*>\}\}")
INLINE_PYTHON = re.compile(r"`\{python\}\s+(?P<expr>[^`]+)`")
# Markdown links and images: [text](target "title") and ![alt](target); skips code spans first.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\((?P<target><[^>]+>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")
CROSSREF = re.compile(r"(?<![\w@])@(?P<label>(?:fig|sec|tbl|eq)-[A-Za-z0-9_-]*[A-Za-z0-9_])")
CITATION = re.compile(r"(?<![\w@])\[?-?@(?P<key>[A-Za-z][\w:.#$%&+?<>~/-]*[\w])")
HEADING_ID = re.compile(r"\{[^}]*#(?P<label>(?:sec|fig|tbl|eq)-[A-Za-z0-9_-]+)[^}]*\}")
CELL_OPTION = re.compile(r"^#\|\s*(?P<key>[\w-]+)\s*:\s*(?P<value>.*)$")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.IGNORECASE)


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
    # (expression, number of Python cells before it): Quarto evaluates each where it stands in the page.
    inline_expressions: list[tuple[str, int]] = field(default_factory=list)
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
    expressions_scanned = 0
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
                for prose_line in prose_lines[expressions_scanned:]:
                    page.inline_expressions += [(m.group("expr").strip(), len(page.cells) - 1) for m in INLINE_PYTHON.finditer(prose_line)]
                expressions_scanned = len(prose_lines)
                prose_lines += [option_line for option_line in block if CELL_OPTION.match(option_line)]
            continue
        prose_lines.append(line)
        index += 1
    prose = "\n".join(prose_lines)
    for prose_line in prose_lines[expressions_scanned:]:
        page.inline_expressions += [(m.group("expr").strip(), len(page.cells)) for m in INLINE_PYTHON.finditer(prose_line)]
    page.prose = re.sub(r"`[^`\n]*`", "", prose)
    return page


# ---------------------------------------------------------------- the site's structure


def load_config(root: Path) -> dict:
    return yaml.safe_load((root / "_quarto.yml").read_text(encoding="utf-8"))


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
    pages = {path for pattern in patterns for path in root.glob(pattern) if not path.name.startswith("_")}
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
    for cell in page.cells:
        label = cell.label
        if label.startswith("fig-") and not cell.options.get("fig-alt"):
            problems.append(f"{where}: figure cell {label} has no fig-alt text")
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
        problems += check_page(read_page(path), root, variables)
    return problems


# ---------------------------------------------------------------- execution


@dataclass
class CellFailure:
    page: str
    cell_number: int  # 1-based among the page's Python cells; 0 for the inline expressions
    label: str
    location: str
    message: str

    def __str__(self) -> str:
        label = f" ({self.label})" if self.label else ""
        if not self.cell_number:  # an inline expression, or pandoc's conversion of the whole page
            return f"{self.page}: {self.location}:\n{self.message}"
        return f"{self.page}: cell {self.cell_number}{label} at {self.location} failed:\n{self.message}"


@dataclass
class ExecutedPage:
    page: Page
    notebook: object  # nbformat.NotebookNode, executed
    inline_values: dict[str, str]
    failures: list[CellFailure]
    cell_outputs: list[list[dict]]  # aligned with page.cells; empty for a cell that is not evaluated
    inline_outputs: list[str]  # aligned with page.inline_expressions


def _error_text(output) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(output.get("traceback", [])) or output.get("evalue", ""))


INLINE_CELL_MARKER = "# residlab: inline expressions"
INLINE_FORMATTER = """\
def _residlab_inline(value):
    if not isinstance(value, str):
        value = get_ipython().display_formatter.format(value)[0]["text/plain"]
    print("\\x1e" + value.replace("\\n", " "))
"""


def _has_error(notebook) -> bool:
    return any(output.get("output_type") == "error" for cell in notebook.cells for output in cell.get("outputs", []))


def _through_jupyter_cache(notebook, unexecuted, uri: str, cache_dir: Path):
    """Store the executed notebook in a jupyter-cache and read it back for the unexecuted one, as Quarto's
    ``cache: true`` does on a later render; returns the notebook with the outputs the cache gave back.
    Caching checks the execution counts run 1, 2, 3, ... without a gap: every cell ran, in order."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(cache_dir))
    cache.cache_notebook_bundle(CacheBundleIn(notebook, uri), check_validity=True, overwrite=True)
    _, merged = cache.merge_match_into_notebook(unexecuted)
    return merged


def execute_page(path: Path, root: Path, timeout: int = 600, cache_dir: Path | None = None) -> ExecutedPage:
    """Execute one page's cells in a fresh python3 kernel whose working folder is the page's folder.

    With ``cache_dir``, a page that ran cleanly goes through a jupyter-cache there, and its outputs are the
    ones the cache returns (what a cached Quarto render would show)."""
    import copy

    import nbformat
    from jupyter_client.kernelspec import get_kernel_spec
    from nbclient import NotebookClient

    page = read_page(path)
    where = str(page.path.relative_to(root.resolve()))
    notebook = nbformat.v4.new_notebook()
    # The installed kernel's own spec, as Quarto writes it: jupyter-cache keys on it, and nbclient would
    # otherwise rewrite it during execution, so the cached notebook would never match again.
    spec = get_kernel_spec("python3")
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": spec.display_name, "language": spec.language}
    # Each notebook cell remembers the page cell it came from (None: an inline-expression cell).
    origins: list[Cell | None] = []
    expressions = list(page.inline_expressions)

    def add_inline_cell(cells_before: int) -> None:
        due = [expression for expression, position in expressions if position == cells_before]
        if due:
            source = [INLINE_CELL_MARKER, INLINE_FORMATTER] + [f"_residlab_inline({expression})" for expression in due]
            notebook.cells.append(nbformat.v4.new_code_cell("\n".join(source)))
            origins.append(None)

    add_inline_cell(0)
    for position, cell in enumerate(page.cells, start=1):
        if cell.options.get("eval", True) is not False:
            notebook.cells.append(nbformat.v4.new_code_cell(cell.source))
            origins.append(cell)
        add_inline_cell(position)
    unexecuted = copy.deepcopy(notebook)
    client = NotebookClient(
        notebook, timeout=timeout, kernel_name="python3", allow_errors=True, record_timing=False,
        resources={"metadata": {"path": str(page.folder)}},
    )
    client.execute()
    if cache_dir is not None and not _has_error(notebook):
        notebook = _through_jupyter_cache(notebook, unexecuted, str(page.path), cache_dir)
    failures = []
    values: list[str] = []
    for cell, executed in zip(origins, notebook.cells):
        number = page.cells.index(cell) + 1 if cell else 0
        allowed_error = cell is not None and cell.options.get("error") is True
        location = f"{cell.file.relative_to(root.resolve())}:{cell.line}" if cell else "inline expressions"
        label = cell.label if cell else ""
        for output in executed.get("outputs", []):
            kind = output.get("output_type")
            if kind == "error" and not allowed_error:
                failures.append(CellFailure(where, number, label, location, _error_text(output)))
            elif kind == "stream" and output.get("name") == "stderr":
                if cell is None or cell.options.get("warning") is not False:
                    failures.append(
                        CellFailure(where, number, label, location, "wrote to stderr:\n" + output.get("text", ""))
                    )
            elif kind == "stream" and cell is None:
                values += [line[1:] for line in output.get("text", "").split("\n") if line.startswith("\x1e")]
    inline_values = dict(zip([expression for expression, _ in expressions], values))
    cell_outputs: list[list[dict]] = [[] for _ in page.cells]
    for cell, executed in zip(origins, notebook.cells):
        if cell is not None:
            cell_outputs[page.cells.index(cell)] = list(executed.get("outputs", []))
    return ExecutedPage(page, notebook, inline_values, failures, cell_outputs, values)


# ---------------------------------------------------------------- what pandoc will parse


def _cell_markdown(cell: Cell, outputs: list[dict]) -> str:
    """The markdown a cell's outputs contribute: text/markdown displays, and stdout of an asis cell."""
    parts = []
    for output in outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stdout" and cell.options.get("output") == "asis":
            parts.append(output.get("text", ""))
        elif output.get("output_type") in ("display_data", "execute_result"):
            parts.append(output.get("data", {}).get("text/markdown", ""))
    return "\n".join(parts)


def page_markdown(executed: ExecutedPage, variables: dict) -> str:
    """The page as pandoc sees it after execution: cells replaced by their markdown output, inline
    expressions by their values, ``{{< var >}}`` by the value. Mermaid and other code blocks are dropped:
    their text is not markdown. Callouts and cross-references stay as written (pandoc ignores them)."""
    outputs = iter(zip(executed.page.cells, executed.cell_outputs))
    lines = executed.page.body.split("\n")
    kept: list[str] = []
    index = 0
    while index < len(lines):
        fence = re.match(r"^(`{3,}|~{3,})", lines[index])
        if fence:
            is_python = bool(FENCE_OPEN.match(lines[index])) and FENCE_OPEN.match(lines[index]).group("lang") == "python"
            index += 1
            while index < len(lines) and lines[index].strip() != fence.group(1):
                index += 1
            index += 1
            if is_python:
                kept.append(_cell_markdown(*next(outputs)))
            continue
        kept.append(lines[index])
        index += 1
    values = iter(executed.inline_outputs)
    text = INLINE_PYTHON.sub(lambda match: next(values, ""), "\n".join(kept))

    def variable(match: re.Match) -> str:
        value = variables
        for key in match.group("key").split("."):
            value = value[key]
        return str(value)

    return VAR_SHORTCODE.sub(variable, text)


def pandoc_warnings(markdown: str) -> list[str]:
    """Pandoc's warnings for the HTML-with-MathML conversion Quarto performs (math it cannot convert, ...)."""
    import subprocess

    import pypandoc

    completed = subprocess.run(
        [pypandoc.get_pandoc_path(), "--from", "markdown", "--to", "html", "--mathml"],
        input=markdown, capture_output=True, text=True, check=True,
    )
    return [block.strip() for block in re.split(r"(?=\[WARNING\])", completed.stderr) if block.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="residlab site", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["check", "run", "list"])
    parser.add_argument("pages", nargs="*", type=Path, help="pages to run (default: every page of the site)")
    parser.add_argument("--root", type=Path, default=default_site_root(), help="the site's root folder")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if not (root / "_quarto.yml").exists():
        parser.error(f"{root} has no _quarto.yml: pass the site's root with --root")
    if args.action == "list":
        for path in site_pages(root):
            print(path.relative_to(root))
        return 0
    if args.action == "check":
        problems = check_site(root)
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{len(site_pages(root))} pages checked, {len(problems)} problems")
        return 1 if problems else 0
    pages = [page.resolve() for page in args.pages] or site_pages(root)
    variables = yaml.safe_load((root / "_variables.yml").read_text(encoding="utf-8")) or {}
    failed = 0
    cache_root = Path(tempfile.mkdtemp(prefix="residlab-jupyter-cache-"))
    for path in pages:
        result = execute_page(path, root, cache_dir=cache_root / path.stem)
        if not result.failures:
            result.failures += [
                CellFailure(str(path.relative_to(root)), 0, "", "pandoc", warning)
                for warning in pandoc_warnings(page_markdown(result, variables))
            ]
        status = "ok" if not result.failures else f"{len(result.failures)} problem(s)"
        print(f"{path.relative_to(root)}: {len(result.page.cells)} cells, "
              f"{len(result.inline_values)} inline values: {status}")
        for failure in result.failures:
            print(failure, file=sys.stderr)
        failed += bool(result.failures)
    shutil.rmtree(cache_root, ignore_errors=True)
    return 1 if failed else 0
