"""Build tooling for the site: what Quarto does not check, Quarto's render, and what the render built.

Quarto is the one thing that executes pages. This module never re-implements it; it checks around it.

- ``residlab site check``: static checks Quarto does not make before executing: every navbar and sidebar
  entry exists, every page is listed, every relative link and image in the source resolves, every
  ``{{< var >}}`` key is in ``_variables.yml``, every ``@fig-``/``@sec-``/``@tbl-`` reference has exactly one
  label, every citation is in the page's bibliography, every figure cell has alt text, and every file
  named in ``resources`` exists. Seconds, no kernel.
- ``residlab site render [--output-dir DIR] [PAGE ...]``: runs ``quarto render`` with this environment's
  Python as the Jupyter kernel, echoes its output, and fails on a non-zero exit *or* any warning line
  (Quarto's, pandoc's or a kernel's). With pages, only those are rendered (always executed). A whole-site render
  in which every page executes runs the prefetch of the shared values beside Quarto (``residlab/course/render/shared.py``).
- ``residlab site url [--expect URL]``: the address the site is published at (``website: site-url``, the
  publisher's to set); with ``--expect``, fails unless it is that address (the deploy workflow passes Pages').
- ``residlab site verify DIR``: checks what a render built: a page for every source page, every internal
  link, image, script and stylesheet resolves inside DIR, no cell output is an error or stderr, the
  downloads are byte-identical to their sources, and nothing is loaded from another host.
"""

from __future__ import annotations

import argparse
import glob
import re
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml

from residlab.build.freeze_guard import RENDER_CACHE_DIR, guard, nothing_frozen
from residlab.build.sync import default_site_root
from residlab.course.render.render_cache import RENDER_CACHE_ENVIRONMENT

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


# ---------------------------------------------------------------- Quarto's render

# A warning from any layer of a render: Quarto ("WARN", "WARNING:"), pandoc ("[WARNING]"), a kernel's logger
# ("[IPKernelApp] WARNING") or Python's warnings module ("UserWarning: ...").
WARNING_LINE = re.compile(r"\bWARN(?:ING)?\b|\[WARNING\]|\b[A-Z]\w*Warning\b|\bWarning:")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
QUARTO_MISSING = (
    "Quarto is not on PATH (or in $QUARTO). Install Quarto 1.10 or newer from https://quarto.org/docs/get-started/ "
    "(or your package manager), then run the command again."
)


class RenderError(RuntimeError):
    pass


def quarto_command() -> str:
    command = os.environ.get("QUARTO") or shutil.which("quarto")
    if not command:
        raise RenderError(QUARTO_MISSING)
    return command


def render_environment(root: Path) -> dict[str, str]:
    """Quarto's Jupyter engine runs this interpreter's kernel, so pages import the residlab installed here; what
    several pages compute is shared through the project's render cache (``residlab/course/render/render_cache.py``)."""
    environment = dict(os.environ)
    environment["QUARTO_PYTHON"] = sys.executable
    environment[RENDER_CACHE_ENVIRONMENT] = str(Path(root).resolve() / RENDER_CACHE_DIR)
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environment.get("PATH", "")])
    return environment


def warning_lines(output: str) -> list[str]:
    return [line.strip() for line in ANSI_ESCAPE.sub("", output).splitlines() if WARNING_LINE.search(line)]


PREFETCH_COMMAND = (sys.executable, "-m", "residlab.course.render.shared")
PREFETCH_LOG = "prefetch.log"
PREFETCH_STOP_SECONDS = 10
PREFETCH_LOG_TAIL = 4000  # bytes of its output a failure shows


def start_prefetch(root: Path, environment: dict[str, str]) -> subprocess.Popen:
    """``python -m residlab.course.render.shared`` in the project root, its output in the render cache's prefetch.log."""
    folder = Path(environment[RENDER_CACHE_ENVIRONMENT])
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / PREFETCH_LOG, "wb") as log:  # the child holds its own descriptor
        return subprocess.Popen(list(PREFETCH_COMMAND), cwd=root, env=environment,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip


def stop_prefetch(process: subprocess.Popen, folder: Path) -> str | None:
    """End the prefetch (what it has not computed yet, no page asked for); its failure, or None."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=PREFETCH_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return None
    if process.returncode == 0:
        return None
    with open(folder / PREFETCH_LOG, "rb") as log_file:  # its last 4000 bytes: the error is at the end
        log_file.seek(max(0, log_file.seek(0, os.SEEK_END) - PREFETCH_LOG_TAIL))
        log = log_file.read().decode("utf-8", errors="replace")
    return f"the render's prefetch (python -m residlab.course.render.shared) exited with code {process.returncode}:\n{log}"


def render(root: Path, output_dir: Path | None = None, pages: list[Path] = (), profile: str | None = None,
           echo=sys.stdout.write, timeout: float = 3600, execute: bool = True) -> str:
    """Run ``quarto render`` in ``root`` (``--no-execute`` unless ``execute``); return its combined output.
    Raises RenderError on a failed render or on any warning line, naming the lines.

    A whole-site render in which every page executes (no frozen results once the freeze guard has run) starts
    the prefetch beside Quarto (``residlab/course/render/shared.py``) and ends it when Quarto is done; a prefetch that
    failed fails the render too, after Quarto's own errors."""
    command = [quarto_command(), "render", *[str(page) for page in pages], *([] if execute else ["--no-execute"])]
    if output_dir is not None:
        command += ["--output-dir", str(output_dir)]
    if profile:
        command += ["--profile", profile]
    environment = render_environment(root)
    prefetch = None
    if execute and not pages:
        # Quarto's pre-render step, run first so that it never empties the cache under the prefetch.
        echo(f"residlab freeze guard: {guard(Path(root))}\n")
        if nothing_frozen(Path(root)):
            prefetch = start_prefetch(root, environment)
    lines = []
    try:
        process = subprocess.Popen(command, cwd=root, env=environment, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace")  # fmt: skip
        try:
            for line in process.stdout:
                lines.append(line)
                echo(line)
            process.wait(timeout=timeout)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    finally:
        prefetch_failure = prefetch and stop_prefetch(prefetch, Path(environment[RENDER_CACHE_ENVIRONMENT]))
    output = "".join(lines)
    if process.returncode != 0:
        raise RenderError(f"quarto render exited with code {process.returncode}")
    warnings = warning_lines(output)
    if warnings:
        raise RenderError("quarto render printed warnings:\n" + "\n".join(f"  {line}" for line in warnings))
    if prefetch_failure:
        raise RenderError(prefetch_failure)
    return output


def clean_copy(root: Path, destination: Path) -> Path:
    """Copy the project as a fresh clone would have it (tracked files and untracked ones git does not
    ignore, as they are in the working tree), so a render there starts with no _freeze/, _site/ or .quarto/."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True, timeout=60,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = root / name
        if source.is_file():  # a tracked file deleted in the working tree is not copied
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


# ---------------------------------------------------------------- what the render built


class _References(HTMLParser):
    """Every URL an HTML page references, with the tag and attribute that holds it."""

    ATTRIBUTES = {"a": "href", "img": "src", "script": "src", "link": "href", "source": "src", "iframe": "src"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.references: list[tuple[str, str]] = []
        self.link_rels: list[tuple[str, str]] = []  # (rel, href) of <link> tags

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        name = self.ATTRIBUTES.get(tag)
        if name and attributes.get(name):
            self.references.append((tag, attributes[name]))
        if tag == "link" and attributes.get("href"):
            self.link_rels.append((attributes.get("rel") or "", attributes["href"]))


def _is_remote(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.netloc) or parts.scheme in ("http", "https")


def _local_target(site_dir: Path, html: Path, url: str) -> Path | None:
    """The file a relative or root-relative URL points at inside the site, or None for one to skip."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not parts.path:
        return None  # remote, mailto:, data:, javascript:, or a fragment on the same page
    path = unquote(parts.path)
    target = (site_dir / path.lstrip("/")) if path.startswith("/") else (html.parent / path)
    return target / "index.html" if path.endswith("/") else target


REMOTE_CSS_IMPORT = re.compile(r"@import\s+(?:url\()?\s*[\"']?(?:https?:)?//|url\(\s*[\"']?(?:https?:)?//")


def verify_build(root: Path, site_dir: Path) -> list[str]:
    """Problems with what a render wrote to ``site_dir`` for the project in ``root``."""
    problems = []
    for page in site_pages(root):
        built = site_dir / page.relative_to(root).with_suffix(".html")
        if not built.is_file():
            problems.append(f"{built.relative_to(site_dir)}: not built (source {page.relative_to(root)})")
    for pattern in load_config(root).get("project", {}).get("resources", []):
        for source in sorted(root.glob(pattern)):
            built = site_dir / source.relative_to(root)
            if not built.is_file():
                problems.append(f"{built.relative_to(site_dir)}: resource not copied into the site")
            elif built.read_bytes() != source.read_bytes():
                problems.append(f"{built.relative_to(site_dir)}: differs from {source.relative_to(root)}")
    for html in sorted(site_dir.rglob("*.html")):
        where = html.relative_to(site_dir)
        text = html.read_text(encoding="utf-8")
        if "cell-output-stderr" in text or "cell-output-error" in text:
            problems.append(f"{where}: a cell wrote to stderr or raised; the page shows it")
        parser = _References()
        parser.feed(text)
        for tag, url in parser.references:
            if _is_remote(url):
                rels = {rel for rel, href in parser.link_rels if href == url}
                if tag in ("script", "img", "iframe", "source") or (tag == "link" and rels - {"canonical", "alternate"}):
                    problems.append(f"{where}: <{tag}> loads {url} from another host")
                continue
            target = _local_target(site_dir, html, url)
            if target is not None and not target.exists():
                problems.append(f"{where}: <{tag}> {url} does not resolve to a file in the site")
    for css in sorted(site_dir.rglob("*.css")):
        if REMOTE_CSS_IMPORT.search(css.read_text(encoding="utf-8", errors="replace")):
            problems.append(f"{css.relative_to(site_dir)}: fetches a stylesheet or font from another host")
    return problems


def site_url_problem(root: Path, expected: str) -> str | None:
    """Why ``website: site-url`` is not ``expected`` (trailing slashes aside), or None when it is."""
    configured = str(load_config(root).get("website", {}).get("site-url") or "")
    if configured.rstrip("/") == expected.rstrip("/"):
        return None
    return (f"_quarto.yml sets website: site-url to {configured or 'nothing'!r}, but the site is published at "
            f"{expected!r}: set site-url to that address (README, \"Publish\")")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="residlab site", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["check", "render", "verify", "list", "url"])
    parser.add_argument("paths", nargs="*", type=Path,
                        help="render: pages to render (default: the whole site); verify: the built site folder")
    parser.add_argument("--root", type=Path, default=default_site_root(), help="the site's root folder")
    parser.add_argument("--output-dir", type=Path, help="render: write the site here instead of _site/")
    parser.add_argument("--profile", help="render: a Quarto profile to add (for example `axe`)")
    parser.add_argument("--expect", metavar="URL", help="url: fail unless site-url is this address")
    args = parser.parse_intermixed_args(argv)  # options may come before or after the pages
    root = args.root.resolve()
    if not (root / "_quarto.yml").exists():
        parser.error(f"{root} has no _quarto.yml: pass the site's root with --root")
    if args.action == "list":
        for path in site_pages(root):
            print(path.relative_to(root))
        return 0
    if args.action == "url":
        problem = args.expect is not None and site_url_problem(root, args.expect)
        print(f"residlab site url: {problem}" if problem else load_config(root).get("website", {}).get("site-url", ""),
              file=sys.stderr if problem else sys.stdout)
        return 1 if problem else 0
    if args.action == "check":
        problems = check_site(root)
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{len(site_pages(root))} pages checked, {len(problems)} problems")
        return 1 if problems else 0
    if args.action == "verify":
        if len(args.paths) != 1 or not args.paths[0].is_dir():
            parser.error("verify takes one argument: the folder a render wrote (for example _site)")
        problems = verify_build(root, args.paths[0].resolve())
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{args.paths[0]}: {len(problems)} problems")
        return 1 if problems else 0
    try:
        render(root, args.output_dir and args.output_dir.resolve(), [path.resolve() for path in args.paths], args.profile)
    except RenderError as error:
        print(f"residlab site render: {error}", file=sys.stderr)
        return 3 if str(error) == QUARTO_MISSING else 1
    return 0
