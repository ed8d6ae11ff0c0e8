"""``residlab site verify DIR``: checks what a render built.

A page for every source page, every resource copied byte for byte (the site's own scripts and stylesheet as esbuild
minifies their sources, page_weight.py), every internal link, image, script and stylesheet resolves inside DIR, every link to a
place on its own page (a citation to its reference, a cross-reference) names an id the page has, no cell output is
an error or stderr, nothing is loaded from another host, and no page shows an answer outside its solution
(``answer_problems``).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from residlab.build import minify
from residlab.build.page_weight import EXPLORER_SCRIPTS, own_files
from residlab.build.site_check import load_config, site_pages

class _References(HTMLParser):
    """Every URL an HTML page references, with the tag and attribute that holds it."""

    ATTRIBUTES = {"a": "href", "img": "src", "script": "src", "link": "href", "source": "src", "iframe": "src"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.references: list[tuple[str, str]] = []
        self.link_rels: list[tuple[str, str]] = []  # (rel, href) of <link> tags
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if attributes.get("id"):
            self.ids.add(attributes["id"])
        name = self.ATTRIBUTES.get(tag)
        if name and attributes.get(name):
            self.references.append((tag, attributes[name]))
        # an explorer's block names the scripts the site's loader fetches (assets/site/explorers.html)
        for script in (attributes.get("data-residlab-scripts") or "").split():
            self.references.append(("script", script))
        if tag == "link" and attributes.get("href"):
            self.link_rels.append((attributes.get("rel") or "", attributes["href"]))


# A question a page asks is marked ``::: {.exercise #exercise-NAME}``; its solution is one of the site's collapsed
# callouts marked ``.solution`` with ``data-answers="exercise-NAME ..."``, naming every question it answers.
EXERCISE_CLASS = "exercise"
SOLUTION_CLASS = "solution"
ANSWER_UNITS = ("p", "li", "tr", "pre")  # the blocks an answer is made of: a sentence, an item, a table row, an output
SHORTEST_ANSWER = 20  # characters: shorter blocks ("Yes.", a lone number) recur on a page by chance
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Answers(HTMLParser):
    """The page's questions and solutions in document order, and the text of every answer-sized block, with the
    solution (if any) it stands in."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.order = 0
        self.open: list[dict] = []  # the elements open at this point, outermost first
        self.exercises: dict[str, int] = {}  # id -> where it opens
        self.solutions: list[dict] = []  # {"answers", "order", "collapsed"}
        self.blocks: list[tuple[str, dict | None]] = []  # (text, the solution it stands in, or None)

    def handle_starttag(self, tag, attrs):
        if tag in VOID_TAGS:
            return
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        self.order += 1
        element = {"tag": tag, "text": [], "header_only": tag == "tr", "solution": None}
        if EXERCISE_CLASS in classes and attributes.get("id"):
            self.exercises[attributes["id"]] = self.order
        if SOLUTION_CLASS in classes:
            element["solution"] = {"answers": (attributes.get("data-answers") or "").split(), "order": self.order,
                                   "collapsed": False}  # fmt: skip
            self.solutions.append(element["solution"])
        if {"callout-collapse", "collapse"} <= set(classes) and "show" not in classes and self.solution is not None:
            self.solution["collapsed"] = True  # Bootstrap's collapse, closed until the reader opens it
        for row in (open_element for open_element in self.open if open_element["tag"] == "tr"):
            if tag in ("td", "th") and "".join(row["text"]).strip():
                row["text"].append(" | ")  # a row reads as its cells, told apart
            row["header_only"] &= tag != "td"
        self.open.append(element)

    @property
    def solution(self) -> dict | None:
        return next((element["solution"] for element in reversed(self.open) if element["solution"]), None)

    def handle_data(self, data):
        for element in self.open:
            if element["tag"] in ANSWER_UNITS:
                element["text"].append(data)

    def handle_endtag(self, tag):
        if not any(element["tag"] == tag for element in self.open):
            return
        while self.open:
            element = self.open[-1]
            solution = self.solution
            self.open.pop()
            if element["tag"] in ANSWER_UNITS and not (element["tag"] == "tr" and element["header_only"]):
                text = " ".join("".join(element["text"]).split())
                if len(text) >= SHORTEST_ANSWER:
                    self.blocks.append((text, solution))
            if element["tag"] == tag:
                return


def answer_problems(text: str) -> list[str]:
    """Why a page shows an answer before, or outside, its question's solution: every solution names questions the
    page asks before it and is collapsed, every question has a solution, and no block a solution holds (a sentence,
    an item, a table row, an output) also stands outside every solution."""
    parser = _Answers()
    parser.feed(text)
    problems = []
    answered = set()
    for solution in parser.solutions:
        if not solution["answers"]:
            problems.append("a solution names no question it answers (data-answers)")
        for question in solution["answers"]:
            answered.add(question)
            if question not in parser.exercises:
                problems.append(f"a solution answers #{question}, which is no question on the page")
            elif parser.exercises[question] > solution["order"]:
                problems.append(f"the solution to #{question} comes before its question")
        if not solution["collapsed"]:
            problems.append(f"the solution to #{' #'.join(solution['answers'])} is shown open, not collapsed")
    problems += [f"#{question} has no solution" for question in sorted(set(parser.exercises) - answered)]
    outside = {text for text, solution in parser.blocks if solution is None}
    for text, solution in parser.blocks:
        if solution is not None and text in outside:
            problems.append(f"the answer to #{' #'.join(solution['answers'])} also stands outside its solution: "
                            f"{text[:80]}")
            outside.discard(text)  # named once
    return problems


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


def served_forms(root: Path) -> dict[Path, bytes]:
    """What the site serves for each of its own scripts and stylesheets: the source minified by esbuild
    (page_weight.py); esbuild refuses a source it cannot parse. Every other resource is served as it is."""
    sources = own_files(root / EXPLORER_SCRIPTS)
    smaller = minify.minified(root, {path.name: path.read_text(encoding="utf-8") for path in sources})
    return {path: smaller[path.name].encode("utf-8") for path in sources}


def verify_build(root: Path, site_dir: Path) -> list[str]:
    """Problems with what a render wrote to ``site_dir`` for the project in ``root``."""
    problems = []
    for page in site_pages(root):
        built = site_dir / page.relative_to(root).with_suffix(".html")
        if not built.is_file():
            problems.append(f"{built.relative_to(site_dir)}: not built (source {page.relative_to(root)})")
    try:
        minified = served_forms(root)
    except minify.MinifyError as error:
        minified = {}
        problems.append(str(error))
    for pattern in load_config(root).get("project", {}).get("resources", []):
        for source in sorted(path for path in root.glob(pattern) if path.is_file()):  # "releases/**" names folders too
            built = site_dir / source.relative_to(root)
            if not built.is_file():
                problems.append(f"{built.relative_to(site_dir)}: resource not copied into the site")
            elif built.read_bytes() != minified.get(source, source.read_bytes()):
                problems.append(f"{built.relative_to(site_dir)}: differs from {source.relative_to(root)}")
    for html in sorted(site_dir.rglob("*.html")):
        where = html.relative_to(site_dir)
        text = html.read_text(encoding="utf-8")
        if "cell-output-stderr" in text or "cell-output-error" in text:
            problems.append(f"{where}: a cell wrote to stderr or raised; the page shows it")
        problems += [f"{where}: {problem}" for problem in answer_problems(text)]
        parser = _References()
        parser.feed(text)
        for tag, url in parser.references:
            if _is_remote(url):
                rels = {rel for rel, href in parser.link_rels if href == url}
                if tag in ("script", "img", "iframe", "source") or (tag == "link" and rels - {"canonical", "alternate"}):
                    problems.append(f"{where}: <{tag}> loads {url} from another host")
                continue
            if tag == "a" and url.startswith("#") and len(url) > 1 and unquote(url[1:]) not in parser.ids:
                problems.append(f"{where}: <a> {url} names no id on the page")
            target = _local_target(site_dir, html, url)
            if target is not None and not target.exists():
                problems.append(f"{where}: <{tag}> {url} does not resolve to a file in the site")
    for css in sorted(site_dir.rglob("*.css")):
        if REMOTE_CSS_IMPORT.search(css.read_text(encoding="utf-8", errors="replace")):
            problems.append(f"{css.relative_to(site_dir)}: fetches a stylesheet or font from another host")
    return problems
