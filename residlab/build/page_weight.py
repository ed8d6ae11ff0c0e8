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
- The stylesheets of the colour scheme the reader is not using no longer block the first paint: each of
  Quarto's scheme stylesheets gets the media query of its scheme (``prefers-color-scheme``), the dark ones lose
  their address (kept in ``data-scheme-href``; a ``<noscript>`` copy serves readers without scripts), and a
  script right after them (``SCHEME_SCRIPT``) writes the reader's scheme's links into the parser so that they
  block the paint (and the page's scripts) as the parser's own do, stops the other's downloads, and hands every
  scheme stylesheet back to Quarto's toggle when it is used or the system setting changes.
- Quarto's scripts in the head are deferred (``defer_head_scripts``): they no longer hold up the first paint. The
  body's padding for the fixed header, which one of them sets, is set by a script right after the header
  (``reserve_header_height``), so on a phone the page does not jump down once they run.

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


def _html_files(site_dir: Path) -> list[Path]:
    return sorted(path for path in site_dir.rglob("*.html") if "site_libs" not in path.parts)


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


# ---------------------------------------------------------------- the colour schemes' stylesheets

SCHEME_LINK = re.compile(r'<link\b[^>]*\bclass="quarto-color-scheme(?P<rest>[^"]*)"[^>]*>')
SCHEME_SCRIPT_ID = "residlab-color-scheme"
LIGHT_MEDIA, DARK_MEDIA = "(prefers-color-scheme: light)", "(prefers-color-scheme: dark)"
# Right after the scheme stylesheets; Quarto's own script (at the start of the body) then enables and disables them
# as before. The dark scheme's links come without their address (the browser would fetch them, if at low priority,
# for every light reader), and a <noscript> copy with their media query serves readers without scripts. With
# scripts, the reader's scheme is the one the navbar toggle stored, else the system's, and:
# - a link the parser fetched as blocking (its media query matches the system) is left to Quarto's script;
# - the reader's links the parser did not fetch as blocking (the dark scheme's; a stored choice that differs from
#   the system's) are written into the parser with document.write, so that, like the parser's own, they hold up
#   the first paint and every later script until they have arrived (a link a script inserts holds up neither,
#   and the page's scripts would measure it unstyled);
# - every other link (the other scheme's, Quarto's extra copies) loses its address, so its low-priority download
#   stops: Chromium applies a stylesheet that was still downloading when Quarto disabled it once it arrives;
# - links rewritten follow those left in place, in their order, so dark still comes after light;
# - before Quarto's toggle runs, and when the system setting changes, every scheme link gets its address back
#   and applies whatever the system's setting, so Quarto's toggle governs them all again.
SCHEME_SCRIPT = """<script id="%(id)s">
(function () {
  var DARK = "%(dark)s", LIGHT = "%(light)s";
  var stored = null;
  try { stored = window.localStorage.getItem("quarto-color-scheme"); } catch (error) {}
  var systemDark = window.matchMedia(DARK).matches;
  var chosen = (stored === null ? systemDark : stored === "alternate") ? DARK : LIGHT;
  var links = function () { return document.querySelectorAll("link[data-scheme-media]"); };
  // Rewritten links follow the ones left in place (always light ones), in their own order: dark after light, as
  // Quarto layers them.
  links().forEach(function (link) {
    var address = link.getAttribute("href") || link.getAttribute("data-scheme-href");
    if (link.hasAttribute("href") && window.matchMedia(link.media).matches) return;  // fetched blocking
    var copy = link.cloneNode();
    copy.removeAttribute("href");
    copy.removeAttribute("data-scheme-href");
    if (link.media === chosen && !link.classList.contains("quarto-color-scheme-extra")) {
      copy.setAttribute("href", address);
      copy.media = "all";
    } else {
      copy.setAttribute("data-scheme-href", address);
    }
    link.remove();
    document.write(copy.outerHTML);
  });
  var wake = function () {
    links().forEach(function (link) {
      link.media = "all";
      if (link.hasAttribute("data-scheme-href")) {
        link.setAttribute("href", link.getAttribute("data-scheme-href"));
        link.removeAttribute("data-scheme-href");
      }
    });
  };
  window.matchMedia(DARK).addEventListener("change", wake);  // registered before Quarto's own listener
  var toggle;
  Object.defineProperty(window, "quartoToggleColorScheme", {
    configurable: true,
    get: function () { return toggle; },
    set: function (quartos) { toggle = function () { wake(); return quartos.apply(this, arguments); }; }
  });
})();
</script>"""
HREF = re.compile(r'\bhref="')


def defer_other_scheme(html: str) -> str:
    """The page with its scheme stylesheets behind their schemes' media queries (the dark ones without their
    address) and the script after them; unchanged if that was done before or the page has no scheme stylesheets."""
    matches = list(SCHEME_LINK.finditer(html))
    if f'id="{SCHEME_SCRIPT_ID}"' in html or not matches:
        return html
    pieces, at, without_scripts = [], 0, []
    for match in matches:
        tag = match.group(0)
        if " media=" in tag:
            raise SystemExit(f"page_weight: Quarto now writes a media query on a scheme stylesheet: {tag}")
        dark = "quarto-color-alternate" in match.group("rest")
        tag = tag[:-1] + f' media="{DARK_MEDIA if dark else LIGHT_MEDIA}" data-scheme-media>'
        if dark:
            without_scripts.append(tag.replace(" data-scheme-media", ""))
            tag = HREF.sub('data-scheme-href="', tag, count=1)
        pieces += [html[at:match.start()], tag]
        at = match.end()
    script = SCHEME_SCRIPT % {"id": SCHEME_SCRIPT_ID, "dark": DARK_MEDIA, "light": LIGHT_MEDIA}
    return "".join(pieces) + "\n" + script + "\n<noscript>" + "".join(without_scripts) + "</noscript>" + html[at:]


HEAD_SCRIPT = re.compile(r"<script\b(?P<attributes>[^>]*)\bsrc=\"[^\"]*\"[^>]*>")


def defer_head_scripts(html: str) -> str:
    """Quarto's scripts in the head (navigation, search, Bootstrap, tooltips) run after the page is parsed instead
    of holding up its first paint: ``defer`` keeps their order, and each only registers handlers that wait for
    DOMContentLoaded, which deferred scripts run before. Module scripts are deferred already."""
    head_end = html.find("</head>")
    if head_end == -1:
        return html

    def deferred(match: re.Match) -> str:
        tag = match.group(0)
        names = re.sub(r'"[^"]*"', '""', tag)  # the attributes without their values: "async" in a path is not one
        if re.search(r"\s(defer|async)[\s=>]", names) or re.search(r'\stype="module"', tag):
            return tag
        return tag[:-1] + " defer>"

    return HEAD_SCRIPT.sub(deferred, html[:head_end]) + html[head_end:]


HEADER_OFFSET_ID = "residlab-header-offset"
# Quarto's CSS pads the body 64 px for its fixed navbar; on a phone the fixed header also holds the page path, and
# quarto-nav.js pads the body by the header's real height at DOMContentLoaded. With the head's scripts deferred
# that comes after the first paint, and the page jumps down (Lighthouse: cumulative layout shift). This script,
# right after the header, sets the same padding before anything below it is laid out (a parser-inserted script
# runs after the stylesheets before it have arrived, so the height is the styled one); quarto-nav.js keeps
# setting it later, to the same value.
HEADER_OFFSET_SCRIPT = (f'<script id="{HEADER_OFFSET_ID}">document.body.style.paddingTop = '
                        'document.getElementById("quarto-header").clientHeight + "px";</script>')
FIXED_HEADER = re.compile(r'<header id="quarto-header" class="[^"]*\bfixed-top\b[^"]*">.*?</header>', re.S)


def reserve_header_height(html: str) -> str:
    """The page with ``HEADER_OFFSET_SCRIPT`` right after Quarto's fixed header; unchanged if done before or the
    page has no fixed header."""
    header = FIXED_HEADER.search(html)
    if f'id="{HEADER_OFFSET_ID}"' in html or not header:
        return html
    return html[:header.end()] + HEADER_OFFSET_SCRIPT + html[header.end():]


# ---------------------------------------------------------------- the step


def lighten(root: Path, site_dir: Path, echo=print) -> None:
    source_bytes, subset_bytes, characters = subset_math_font(root / MATH_FONT, site_dir)
    echo(f"page_weight: {MATH_FONT.name} subset to {len(characters)} characters: {subset_bytes:,} of {source_bytes:,} bytes")
    source_bytes, subset_bytes, icons = subset_icons(site_dir)
    echo(f"page_weight: icon font subset to {len(icons)} icons: {subset_bytes:,} bytes ({ICONS_FONT.name}: {source_bytes:,})")
    changed = 0
    for page in _html_files(site_dir):
        html = page.read_text(encoding="utf-8")
        lighter = reserve_header_height(defer_head_scripts(defer_other_scheme(html)))
        if lighter != html:
            page.write_text(lighter, encoding="utf-8")
            changed += 1
    echo(f"page_weight: the other colour scheme's stylesheets and the head's scripts no longer block the paint "
         f"on {changed} pages")


def main() -> int:
    root = Path.cwd()
    output = Path(os.environ.get("QUARTO_PROJECT_OUTPUT_DIR") or "_site")
    lighten(root, output if output.is_absolute() else root / output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
