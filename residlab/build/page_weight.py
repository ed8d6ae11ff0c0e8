"""Quarto post-render step: what a phone downloads before it can paint, cut to what the built site uses.

- The math font (Noto Sans Math, assets/site/fonts/) is subset to the characters the site's MathML shows: the
  text of every ``<math>`` outside its TeX ``<annotation>``, and for a one-letter ``<mi>`` also the mathematical
  italic letter the browser draws in its place (MathML Core's ``text-transform: math-auto``). The OpenType
  MATH table stays, with the size variants and pieces its brackets stretch with. The subset replaces Quarto's
  copy in the site; the committed font is always the source, so a later render can add characters.
- Bootstrap's icon font (from Quarto, about 176 KB) is cut to the icons the site's pages, scripts and
  stylesheets name (``bi-NAME`` classes, and names the scripts build such classes from), as a woff2 beside it;
  ``bootstrap-icons.css`` is rewritten to declare only those. Quarto's full font stays in site_libs as the
  source (its glyphs are named after the icons), unreferenced, so no reader downloads it.
- The site's own scripts and stylesheet (``assets/explorers/``) and every page's inline scripts (Quarto's among
  them) are minified by esbuild (``minify.py``): the comments and the whitespace written for whoever reads the
  source go, and a script's local names shorten. The sources keep them.
- Each page is then rewritten so that its first paint waits for as little as it can
  (``residlab/build/first_paint.py``: the colour schemes' stylesheets, the head's scripts, the fixed header's
  height, preloaded fonts, small stylesheets written in, search and figures after the first screen), and its
  figures drawn for a phone too get that drawing beside them (``residlab/build/phone_figures.py``).

Runs offline (fontTools, pinned in requirements.txt). Every change is idempotent: a page already processed is
left as it is, so a render of one page may run it over the whole site again. Quarto runs it in the project root
and names the output folder in QUARTO_PROJECT_OUTPUT_DIR.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

if __name__ == "__main__":  # run by Quarto as a script: the residlab beside it, whatever Python Quarto found
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from residlab.build import first_paint, minify, phone_figures  # noqa: E402

MATH_FONT = Path("assets/site/fonts/noto-sans-math-400.woff2")
ICONS_CSS = Path("site_libs/bootstrap/bootstrap-icons.css")
ICONS_FONT = Path("site_libs/bootstrap/bootstrap-icons.woff")  # Quarto's; stays as the source
ICONS_SUBSET = "bootstrap-icons.woff2"
ALWAYS_IN_MATH = " "  # MathML's whitespace between tokens is laid out as nothing, but costs one glyph to keep


# ---------------------------------------------------------------- MathML's characters


def math_italic(character: str) -> str | None:
    """The mathematical italic letter a browser draws for a one-letter ``<mi>`` (MathML Core, ``math-auto``),
    or None when the character has none (digits, symbols)."""
    special = {"h": "\u210e", "\u0131": "\U0001d6a4", "\u0237": "\U0001d6a5", "\u2207": "\U0001d6fb",
               "\u2202": "\U0001d715", "\u03f5": "\U0001d716", "\u03d1": "\U0001d717", "\u03f0": "\U0001d718",
               "\u03d5": "\U0001d719", "\u03f1": "\U0001d71a", "\u03d6": "\U0001d71b", "\u03f4": "\U0001d6f3"}
    if character in special:
        return special[character]
    code = ord(character)
    for first, last, italic_first in ((0x41, 0x5A, 0x1D434), (0x61, 0x7A, 0x1D44E), (0x391, 0x3A9, 0x1D6E2),
                                      (0x3B1, 0x3C9, 0x1D6FC)):
        if first <= code <= last and unicodedata.name(character, ""):
            return chr(italic_first + code - first)
    return None


class _MathText(HTMLParser):
    """Characters inside ``<math>`` outside ``<annotation>``, and the italic forms of one-letter ``<mi>``."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0  # inside how many <math>
        self.annotation = 0
        self.identifier: list[str] | None = None  # text of the <mi> being read, when it may be auto-italic
        self.characters: set[str] = set()

    def handle_starttag(self, tag, attrs):
        if tag == "math":
            self.depth += 1
        elif self.depth and tag in ("annotation", "annotation-xml"):
            self.annotation += 1
        elif self.depth and tag == "mi" and dict(attrs).get("mathvariant") in (None, "italic"):
            self.identifier = []

    def handle_endtag(self, tag):
        if tag == "math" and self.depth:
            self.depth -= 1
        elif tag in ("annotation", "annotation-xml") and self.annotation:
            self.annotation -= 1
        elif tag == "mi" and self.identifier is not None:
            text = "".join(self.identifier).strip()
            if len(text) == 1 and math_italic(text):
                self.characters.add(math_italic(text))
            self.identifier = None

    def handle_data(self, data):
        if self.depth and not self.annotation:
            self.characters |= set(data)
            if self.identifier is not None:
                self.identifier.append(data)


def mathml_characters(html: str) -> set[str]:
    parser = _MathText()
    parser.feed(html)
    parser.close()
    return parser.characters


# ---------------------------------------------------------------- the site's own scripts and stylesheets, minified

EXPLORER_SCRIPTS = Path("assets/explorers")  # the site's own scripts and stylesheet (site_libs: libraries, shipped minified)
OWN_SUFFIXES = (".js", ".css")
JAVASCRIPT_TYPES = {"", "text/javascript", "application/javascript", "module"}


# Elements whose content is text, or foreign (SVG, MathML, where entities in a script are decoded), to a browser:
# a <script> inside one is not a script the page runs as written.
NOT_RUN_INSIDE = {"textarea", "title", "xmp", "iframe", "noembed", "noframes", "plaintext", "noscript", "svg", "math"}


class _Scripts(HTMLParser):
    """The character ranges of a page's inline scripts' bodies, with each script's attributes (the first of each
    name, as a browser reads them), leaving out scripts inside NOT_RUN_INSIDE."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=False)
        self.line_starts = [0] + [match.end() for match in re.finditer("\n", html)]
        self.found, self._open, self._containers = [], None, []
        self.feed(html)
        self.close()

    def _index(self) -> int:
        line, offset = self.getpos()
        return self.line_starts[line - 1] + offset

    def handle_starttag(self, tag, attrs):
        if tag in NOT_RUN_INSIDE:
            self._containers.append(tag)
        elif tag == "script" and not self._containers:
            first = {}
            for name, value in attrs:
                first.setdefault(name, value)
            self._open = (self._index() + len(self.get_starttag_text()), first)

    def handle_endtag(self, tag):
        if tag in self._containers:
            del self._containers[len(self._containers) - 1 - self._containers[::-1].index(tag):]
        elif tag == "script" and self._open:
            start, attributes = self._open
            self.found.append((start, self._index(), attributes))
            self._open = None


def inline_scripts(html: str) -> list[tuple[int, int]]:
    """Where each inline JavaScript of ``html`` starts and ends: not JSON or another type, not a script with a
    ``src`` or a ``language`` other than JavaScript, not one whose end Python's parser may have read past (its
    body holds ``</script``)."""
    return [(start, end) for start, end, attributes in _Scripts(html).found
            if "src" not in attributes and (attributes.get("type") or "").lower() in JAVASCRIPT_TYPES
            and (attributes.get("language") or "javascript").lower().startswith("javascript")
            and "</script" not in html[start:end].lower()]


def own_files(folder: Path) -> list[Path]:
    """The site's own scripts and stylesheets in ``folder`` (the explorers' folder of the project or of a site)."""
    return sorted(path for path in folder.iterdir() if path.suffix in OWN_SUFFIXES) if folder.is_dir() else []


def minify_own_files(root: Path, site_dir: Path) -> tuple[int, int]:
    """Each of the site's own scripts and stylesheets that the render copied, written as esbuild minifies its source
    in the project (so a second run writes the same bytes); their bytes before and after."""
    served = [path for path in own_files(site_dir / EXPLORER_SCRIPTS) if (root / EXPLORER_SCRIPTS / path.name).is_file()]
    texts = {path.name: (root / EXPLORER_SCRIPTS / path.name).read_text(encoding="utf-8") for path in served}
    smaller = minify.minified(root, texts)
    for path in served:
        path.write_text(smaller[path.name], encoding="utf-8")
    return sum(len(text.encode()) for text in texts.values()), sum(len(text.encode()) for text in smaller.values())


def minify_inline_scripts(root: Path, pages: dict[Path, str]) -> dict[Path, str]:
    """Each page's inline JavaScript (``inline_scripts``) minified by esbuild: one run for every distinct script of
    every page (Quarto writes the same few into each)."""
    found = {page: inline_scripts(html) for page, html in pages.items()}
    distinct = {html[start:end] for page, html in pages.items() for start, end in found[page]}
    names = {text: f"inline-{number}.js" for number, text in enumerate(sorted(distinct))}
    smaller = minify.minified(root, {name: text for text, name in names.items()})
    rewritten = {}
    for page, html in pages.items():
        for start, end in reversed(found[page]):
            html = html[:start] + smaller[names[html[start:end]]] + html[end:]
        rewritten[page] = html
    return rewritten


REDIRECT = 'http-equiv="refresh"'  # the page Quarto writes as index.html when a render leaves the home page out


def _html_files(site_dir: Path) -> list[Path]:
    """The site's pages: not Quarto's site_libs, nor its redirect page (a few lines), which no rewrite is for."""
    return sorted(path for path in site_dir.rglob("*.html")
                  if "site_libs" not in path.parts and REDIRECT not in path.read_text(encoding="utf-8"))


def _subset_woff2(source: Path, codepoints: set[int], layout_features: list[str]) -> bytes:
    """``source`` cut to the glyphs of ``codepoints`` (and what they need: alternates, MATH variants), as woff2;
    every name record stays (copyright and licence: the math font's OFL asks for them)."""
    from fontTools import subset

    options = subset.Options()
    options.flavor = "woff2"
    options.layout_features = layout_features
    options.name_IDs = ["*"]
    options.notdef_outline = True
    options.hinting = False  # browsers on phones do not use TrueType hinting
    font = subset.load_font(str(source), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(codepoints))
    subsetter.subset(font)
    data = io.BytesIO()
    subset.save_font(font, data, options)
    return data.getvalue()


def subset_math_font(source: Path, site_dir: Path) -> tuple[int, int, set[str]]:
    """Replace every copy of the math font in the site with the subset; (source bytes, subset bytes, characters)."""
    characters = set(ALWAYS_IN_MATH)
    for page in _html_files(site_dir):
        characters |= mathml_characters(page.read_text(encoding="utf-8"))
    # every layout feature: script-size (ssty) and other alternates the renderer may ask for
    data = _subset_woff2(source, {ord(character) for character in characters}, layout_features=["*"])
    copies = sorted(site_dir.rglob(source.name))
    if not copies:
        raise SystemExit(f"page_weight: no copy of {source.name} in {site_dir}: does reading.scss still declare it?")
    for copy in copies:
        copy.write_bytes(data)
    return source.stat().st_size, len(data), characters


# ---------------------------------------------------------------- the icon font

ICON_CLASS = re.compile(r"\bbi-([a-z0-9]+(?:-[a-z0-9]+)*)")
STRING_LITERAL = re.compile(r"""["'`]([a-z0-9]+(?:-[a-z0-9]+)*)["'`]""")
BUILDS_ICON_CLASS = re.compile(r"""bi-\$\{|["']bi-["']\s*\+""")  # `bi-${icon}`, "bi-" + name
# Bootstrap Icons 1.13.1's own rules for every icon (bootstrap-icons.css, MIT licence), less the per-icon lines.
ICONS_PREAMBLE = """/*!
 * Bootstrap Icons v1.13.1 (https://icons.getbootstrap.com/)
 * Copyright 2019-2024 The Bootstrap Authors
 * Licensed under MIT (https://github.com/twbs/icons/blob/main/LICENSE)
 * Generated by residlab/build/page_weight.py from Quarto's bootstrap-icons.woff: only the icons this site uses.
 */

@font-face {
  font-display: block;
  font-family: "bootstrap-icons";
  src: url("./%s?%s") format("woff2");
}

.bi::before,
[class^="bi-"]::before,
[class*=" bi-"]::before {
  display: inline-block;
  font-family: bootstrap-icons !important;
  font-style: normal;
  font-weight: normal !important;
  font-variant: normal;
  text-transform: none;
  line-height: 1;
  vertical-align: -.125em;
  -webkit-font-smoothing: antialiased;
  -moz-osx-font-smoothing: grayscale;
}
"""


def used_icons(site_dir: Path, known: set[str]) -> set[str]:
    """Icons the site names: ``bi-NAME`` anywhere in its pages, scripts and stylesheets, and in a script that builds
    such classes from a name (Quarto's search: ``bi-${icon}``) every string that is an icon's name."""
    used: set[str] = set()
    for path in sorted(site_dir.rglob("*")):
        if path.suffix not in (".html", ".js", ".css") or path == site_dir / ICONS_CSS:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        used |= {name for name in ICON_CLASS.findall(text) if name in known}
        if path.suffix == ".js" and BUILDS_ICON_CLASS.search(text):
            used |= {name for name in STRING_LITERAL.findall(text) if name in known}
    return used


def subset_icons(site_dir: Path) -> tuple[int, int, set[str]]:
    """Write the icon subset and its stylesheet; (Quarto's font bytes, subset bytes, icons kept)."""
    import hashlib

    from fontTools.ttLib import TTFont

    source = site_dir / ICONS_FONT
    if not source.is_file():
        raise SystemExit(f"page_weight: {ICONS_FONT} is not in {site_dir}: Quarto no longer ships Bootstrap's icon font "
                         "there; update residlab/build/page_weight.py")
    # Quarto's copy has two stray bytes after its glyph names, which fontTools reports and reads past: not news.
    logging.getLogger("fontTools.ttLib.tables._p_o_s_t").setLevel(logging.ERROR)
    codepoints = {name: code for code, name in TTFont(source).getBestCmap().items()}
    used = used_icons(site_dir, set(codepoints))
    data = _subset_woff2(source, {codepoints[name] for name in used}, layout_features=[])
    (site_dir / ICONS_CSS).with_name(ICONS_SUBSET).write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()[:16]  # a new subset is a new URL: no stale cache
    rules = "".join(f'.bi-{name}::before {{ content: "\\{codepoints[name]:x}"; }}\n' for name in sorted(used))
    (site_dir / ICONS_CSS).write_text(ICONS_PREAMBLE % (ICONS_SUBSET, digest) + "\n" + rules, encoding="utf-8")
    return source.stat().st_size, len(data), used


# The fonts a page draws with from its first paint, and how to tell from its body that it does: preloaded.
FIRST_PAINT_FONTS = {ICONS_SUBSET: ICON_CLASS.search, MATH_FONT.name: lambda body: "<math" in body}


# ---------------------------------------------------------------- the step


def lighten(root: Path, site_dir: Path, echo=print) -> None:
    source_bytes, subset_bytes, characters = subset_math_font(root / MATH_FONT, site_dir)
    echo(f"page_weight: {MATH_FONT.name} subset to {len(characters)} characters: {subset_bytes:,} of {source_bytes:,} bytes")
    source_bytes, subset_bytes, icons = subset_icons(site_dir)
    echo(f"page_weight: icon font subset to {len(icons)} icons: {subset_bytes:,} bytes ({ICONS_FONT.name}: {source_bytes:,})")
    before, after = minify_own_files(root, site_dir)
    echo(f"page_weight: the site's own scripts and stylesheet minified by esbuild: {after:,} of {before:,} bytes")
    first_paint.start_search_after_load(site_dir)
    built = {page: page.read_text(encoding="utf-8") for page in _html_files(site_dir)}
    rewritten = {page: phone_figures.with_phone_figures(first_paint.rewrite(html, page, site_dir, FIRST_PAINT_FONTS),
                                                         page, site_dir, phone_figures.phone_drawings(root))
                 for page, html in built.items()}  # fmt: skip
    # A page the rewrites left as it was is one an earlier run processed (a render of one page runs this over the
    # whole site): its scripts are minified already, and esbuild would only rename their names again.
    changed = {page: html for page, html in rewritten.items() if html != built[page]}
    for page, html in minify_inline_scripts(root, changed).items():
        page.write_text(html, encoding="utf-8")
    echo(f"page_weight: {len(changed)} pages rewritten (first_paint.py, phone figures, their inline scripts minified)")


def main() -> int:
    root = Path.cwd()
    output = Path(os.environ.get("QUARTO_PROJECT_OUTPUT_DIR") or "_site")
    try:
        lighten(root, output if output.is_absolute() else root / output)
    except minify.MinifyError as error:
        print(f"page_weight: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
