"""What a built page's first paint waits for, cut to what the first screen needs: the HTML rewrites of the
Quarto post-render step ``residlab/build/page_weight.py`` (which also subsets the fonts), each idempotent, a page
done before left as it is.

- The stylesheets of the colour scheme the reader is not using no longer block the first paint: each of
  Quarto's scheme stylesheets gets the media query of its scheme (``prefers-color-scheme``), the dark ones lose
  their address (kept in ``data-scheme-href``; a ``<noscript>`` copy serves readers without scripts), and a
  script right after them (``SCHEME_SCRIPT``) writes the reader's scheme's links into the parser so that they
  block the paint (and the page's scripts) as the parser's own do, stops the other's downloads, and hands every
  scheme stylesheet back to Quarto's toggle when it is used or the system setting changes.
- The fonts a page draws with (the icons; the math font where it shows math) are preloaded at the top of its head
  (``preload_fonts``), so a phone fetches them beside the stylesheets, not a round trip after them; stylesheets of
  a few kilobytes (Quarto's tooltip and icon rules, the explorers') are written into the page
  (``inline_small_stylesheets``): each would cost a round trip before the first paint.
- Quarto's search scripts are fetched once the page has loaded (``load_search_after_the_page``; a page opened
  from a search result gets them as before): they do not compete with what the first screen needs. (Figures'
  images load as the reader scrolls near them through the site's Lua filter, ``assets/site/reading.lua``: Quarto's
  own way, so no rewrite here.)
- Quarto's scripts in the head are deferred (``defer_head_scripts``): they no longer hold up the first paint. The
  body's padding for the fixed header, which one of them sets, is set by a script right after the header
  (``reserve_header_height``), so on a phone the page does not jump down once they run.
- AnchorJS (the links Quarto puts beside headings) starts by adding its base rules, an ``@font-face`` among them,
  as a new style element before the head's first stylesheet, once the page has been laid out; a new font face
  makes the browser restyle and lay out the whole page again: on Lab 05 a second full layout, the longest task of
  its load on a phone. The same rules, read from the site's own ``anchor.min.js``, are written where AnchorJS
  would put them (``seed_anchor_styles``); finding them, it adds none.

Quarto 1.10 has no format option, include or filter for these (each changes what Quarto itself writes, where it
writes it: its head, its scripts, its header), so they rewrite its output.
Each is written against the HTML of the Quarto the site is built and tested with (README), and each stops the
build (``PatternMissing``: the rewrite and the page named) when the pattern it rewrites is missing from a page
it has not rewritten before, so a Quarto that writes its pages differently fails the render instead of shipping
pages no longer rewritten. ``tests/unit/build/test_first_paint.py`` runs them on pages that Quarto renders from
a small project.
"""

from __future__ import annotations

import os
import re
from pathlib import Path


class PatternMissing(SystemExit):
    """A rewrite found no trace of what it rewrites: Quarto writes its pages differently than the rewrite expects.
    The message names the rewrite and, once ``rewrite`` has added it, the page."""

    def __init__(self, rewrite: str, missing: str, page: Path | str = "a page"):
        super().__init__(f"page_weight: {rewrite}: {page}: {missing}: Quarto's output changed; update "
                         "residlab/build/first_paint.py")
        self.rewrite, self.missing = rewrite, missing


def rewrite(html: str, page: Path, site_dir: Path, fonts: dict) -> str:
    """``page`` (of the built site ``site_dir``) with every rewrite below; ``fonts``: the font files to preload
    (file name -> whether a page's body draws with it). A missing pattern stops the build, naming the page."""
    try:
        html = reserve_header_height(defer_head_scripts(defer_other_scheme(html)))
        html = seed_anchor_styles(html, page, site_dir)
        html = preload_fonts(inline_small_stylesheets(html, page, site_dir), page, site_dir, fonts)
        return load_search_after_the_page(html)
    except PatternMissing as error:
        where = page.relative_to(site_dir) if site_dir in page.parents else page
        raise PatternMissing(error.rewrite, error.missing, where) from None


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
    address) and the script after them; unchanged if that was done before."""
    matches = list(SCHEME_LINK.finditer(html))
    if f'id="{SCHEME_SCRIPT_ID}"' in html:
        return html
    if not matches:
        raise PatternMissing("defer_other_scheme", "no colour-scheme stylesheet (class quarto-color-scheme)")
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
    if head_end == -1 or not HEAD_SCRIPT.search(html[:head_end]):
        raise PatternMissing("defer_head_scripts", "no script with a src in the head")

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
    """The page with ``HEADER_OFFSET_SCRIPT`` right after Quarto's fixed header; unchanged if done before."""
    header = FIXED_HEADER.search(html)
    if f'id="{HEADER_OFFSET_ID}"' in html:
        return html
    if not header:
        raise PatternMissing("reserve_header_height", 'no fixed header (<header id="quarto-header" class="fixed-top">)')
    return html[:header.end()] + HEADER_OFFSET_SCRIPT + html[header.end():]


# ---------------------------------------------------------------- AnchorJS's base rules

ANCHOR_SCRIPT = re.compile(r'<script\b[^>]*\bsrc="(?P<src>[^"]*anchor\.min\.js)"[^>]*>')
# AnchorJS's add(): when the head has no <style class="anchorjs">, it makes one and inserts its rules one by one.
ANCHOR_STYLE_CHECK = 'null===document.head.querySelector("style.anchorjs")'
ANCHOR_RULE = re.compile(r"""insertRule\((?P<quote>["'])(?P<rule>.*?)(?P=quote),""")
ANCHOR_STYLE_MARK = "data-residlab-seeded"
# where AnchorJS inserts its style: before the head's first stylesheet or style element
FIRST_STYLE = re.compile(r'<style\b|<link\b[^>]*\brel="stylesheet"')


def _quoted_font(rule: str) -> bool:
    """The one rule that holds quotes: the @font-face, whose format("truetype") is in double quotes within a
    single-quoted string."""
    return rule.startswith("@font-face{") and "'" not in rule and "\\" not in rule and "</" not in rule


def anchor_rules(script: Path) -> str:
    """The rules AnchorJS's ``add()`` inserts into the style it makes, in order, read from ``script``."""
    text = script.read_text(encoding="utf-8")
    start = text.find(ANCHOR_STYLE_CHECK)
    end = text.find("querySelectorAll", start)  # add() goes on to the page's ids once the rules are in
    rules = [match.group("rule") for match in ANCHOR_RULE.finditer(text, start, end)] if start != -1 else []
    # an escape, a string joined with +, or a rule that could end the <style> would need more than copying
    if not rules or any(re.search(r"""[\\"']|</style""", rule, re.I) and not _quoted_font(rule) for rule in rules):
        raise PatternMissing("seed_anchor_styles", f"{script.name} no longer inserts its rules as "
                             f"{ANCHOR_STYLE_CHECK} && insertRule(...)")  # fmt: skip
    return "".join(rules)


def seed_anchor_styles(html: str, page: Path, site_dir: Path) -> str:
    """The page with AnchorJS's base rules (``anchor_rules`` of the ``anchor.min.js`` it loads) in a ``<style
    class="anchorjs">`` before its first stylesheet, where AnchorJS would insert them; unchanged if it loads no
    AnchorJS or was done before."""
    head_end = html.find("</head>")
    script = ANCHOR_SCRIPT.search(html[:max(head_end, 0)])
    if script is None or ANCHOR_STYLE_MARK in html[:head_end]:
        return html
    source = _site_file(page, script.group("src"), site_dir)
    first = FIRST_STYLE.search(html, 0, head_end)
    if source is None or first is None:
        raise PatternMissing("seed_anchor_styles", f"{script.group('src')} is not a file of the site"
                             if source is None else "no stylesheet in the head")  # fmt: skip
    style = f'<style class="anchorjs" {ANCHOR_STYLE_MARK}>{anchor_rules(source)}</style>\n'
    return html[:first.start()] + style + html[first.start():]


# ---------------------------------------------------------------- fonts and small stylesheets

# A stylesheet this small costs a phone more in its round trip than in its bytes: it is written into the page.
SMALL_STYLESHEET_BYTES = 8192
STYLESHEET_LINK = re.compile(r'<link\b[^>]*\brel="stylesheet"[^>]*>')
LINK_HREF = re.compile(r'(?<![\w-])href="(?P<href>[^"]+)"')  # not data-scheme-href
RELATIVE_CSS_URL = re.compile(r"""url\((?P<quote>["']?)(?![a-z][a-z0-9+.-]*:|/|#)(?P<path>[^"')]+)(?P=quote)\)""")
INLINED_FROM = "data-residlab-inlined"
PRELOAD_MARK = "data-residlab-preload"


def _relative(target: Path, page: Path) -> str:
    return Path(os.path.relpath(target, page.parent)).as_posix()


def _site_file(page: Path, address: str, site_dir: Path) -> Path | None:
    """The file of the site that ``address``, relative to ``page``, names; None if it names none."""
    path = Path(os.path.normpath(page.parent / address))
    return path if path.is_file() and site_dir in path.parents else None


def inline_small_stylesheets(html: str, page: Path, site_dir: Path) -> str:
    """The page with each stylesheet of the site it links that has at most ``SMALL_STYLESHEET_BYTES`` (Quarto's
    tooltip and icon rules, the explorers') written into a ``<style>`` in its place, its relative ``url()``s
    rewritten for the page. The colour schemes' stylesheets stay links: Quarto's toggle switches them."""

    def inlined(match: re.Match) -> str:
        tag = match.group(0)
        href = LINK_HREF.search(tag)
        if "quarto-color-scheme" in tag or not href or ":" in href.group("href"):
            return tag
        sheet = _site_file(page, href.group("href"), site_dir)
        if sheet is None or sheet.stat().st_size > SMALL_STYLESHEET_BYTES:
            return tag
        css = RELATIVE_CSS_URL.sub(lambda url: f'url("{_relative(sheet.parent / url.group("path"), page)}")',
                                   sheet.read_text(encoding="utf-8"))
        media = re.search(r'\bmedia="[^"]*"', tag)
        return f'<style {INLINED_FROM}="{href.group("href")}"{" " + media.group(0) if media else ""}>{css}</style>'

    if not STYLESHEET_LINK.search(html):
        raise PatternMissing("inline_small_stylesheets", 'no <link rel="stylesheet">')
    return STYLESHEET_LINK.sub(inlined, html)


def _font_address(name: str, inlined_css: str, sheets: list[Path], page: Path, site_dir: Path) -> str:
    """The address of the font file ``name`` relative to ``page``, with its query, as the page's own CSS (written
    into it, already relative to the page) or one of its stylesheets of the site names it."""
    for css, base in [(inlined_css, None)] + [(sheet.read_text(encoding="utf-8"), sheet.parent) for sheet in sheets]:
        for url in RELATIVE_CSS_URL.finditer(css):
            path, mark, query = url.group("path").partition("?")
            if Path(path).name == name:
                if base is None:
                    return url.group("path")
                return _relative(Path(os.path.normpath(base / path)), page) + mark + query
    raise SystemExit(f"page_weight: {page.relative_to(site_dir)} draws with {name}, but none of its stylesheets "
                     "names it")


def preload_fonts(html: str, page: Path, site_dir: Path, fonts: dict) -> str:
    """The page with a ``<link rel="preload">`` at the top of its head for each font of ``fonts`` (file name ->
    whether a page's body draws with it) it draws with, at the address its stylesheets name (the same URL, so it is
    fetched once): the browser fetches it beside the stylesheets instead of after them, one round trip sooner.
    Unchanged if done before."""
    head_end = html.find("</head>")
    if head_end == -1:
        raise PatternMissing("preload_fonts", "no </head>")
    if PRELOAD_MARK in html:
        return html
    head = html[:head_end]
    sheets = [sheet for href in map(LINK_HREF.search, STYLESHEET_LINK.findall(head))
              if href and (sheet := _site_file(page, href.group("href"), site_dir))]
    inlined_css = "".join(re.findall(r"<style\b[^>]*>(.*?)</style>", head, flags=re.DOTALL))
    links = []
    for name, draws_with in fonts.items():
        if draws_with(html[head_end:]):  # the body: the head's rules name every icon
            address = _font_address(name, inlined_css, sheets, page, site_dir)
            links.append(f'<link rel="preload" href="{address}" as="font" type="font/woff2" crossorigin '
                         f'{PRELOAD_MARK}>')
    if not links:
        return html
    title_end = html.find("</title>")
    at = title_end + len("</title>") if -1 < title_end < head_end else head_end
    return html[:at] + "\n" + "\n".join(links) + html[at:]


# ---------------------------------------------------------------- search and figures, after the first screen

SEARCH_SCRIPT = re.compile(r'<script src="(?P<src>[^"]*quarto-search/[^"/]+\.js)"[^>]*></script>\n?')
SEARCH_LOADER_ID = "residlab-search-loader"
SEARCH_JS = Path("site_libs/quarto-search/quarto-search.js")
# Quarto's search builds its button and reads its options when the document is parsed; loaded after the page's
# load event, it starts at once instead (the flag is set only by SEARCH_LOADER, just before it loads the scripts).
SEARCH_START = 'window.document.addEventListener("DOMContentLoaded", function (_event) {'
SEARCH_START_AFTER_LOAD = ('(window.residlabSearchAfterLoad ? (start) => start() : (start) =>\n'
                           '  window.document.addEventListener("DOMContentLoaded", start))(function (_event) {')
# In place of Quarto's three search scripts (about 42 KB compressed, fetched beside the stylesheets and run before
# the page's first full paint): a page opened from a search result (?q=, whose matches Quarto highlights while the
# page loads) gets them as Quarto wrote them; any other page loads them in order once it has loaded, and the
# search button appears then.
SEARCH_LOADER = """<script id="%(id)s" data-scripts="%(scripts)s">
(function () {
  var scripts = document.currentScript.dataset.scripts.split(" ");
  if (new URLSearchParams(window.location.search).has("q")) {
    scripts.forEach(function (src) { document.write('<script src="' + src + '" defer><\\/script>'); });
    return;
  }
  window.addEventListener("load", function () {
    window.residlabSearchAfterLoad = true;
    scripts.forEach(function (src) {
      var script = document.createElement("script");
      script.src = src;
      script.async = false;  // in order: quarto-search.js uses the other two
      document.head.appendChild(script);
    });
  });
})();
</script>
"""


def load_search_after_the_page(html: str) -> str:
    """The page with Quarto's search scripts in its head replaced by ``SEARCH_LOADER``; unchanged if done before."""
    head_end = html.find("</head>")
    found = list(SEARCH_SCRIPT.finditer(html[:max(head_end, 0)]))
    if f'id="{SEARCH_LOADER_ID}"' in html:
        return html
    if not found:
        raise PatternMissing("load_search_after_the_page", "no search script (quarto-search/*.js) in the head")
    loader = SEARCH_LOADER % {"id": SEARCH_LOADER_ID, "scripts": " ".join(match.group("src") for match in found)}
    head = SEARCH_SCRIPT.sub("", html[:head_end])
    at = found[0].start()  # where the first of them stood: the scripts before and after it keep their order
    return head[:at] + loader + head[at:] + html[head_end:]


def start_search_after_load(site_dir: Path) -> None:
    """Quarto's quarto-search.js made to start at once when ``SEARCH_LOADER`` loads it after the page has loaded."""
    script = site_dir / SEARCH_JS
    text = script.read_text(encoding="utf-8")
    if SEARCH_START_AFTER_LOAD in text:
        return
    if text.count(SEARCH_START) != 1:
        raise SystemExit(f"page_weight: {SEARCH_JS} no longer starts with {SEARCH_START!r} once: Quarto's search "
                         "changed; update residlab/build/first_paint.py")
    script.write_text(text.replace(SEARCH_START, SEARCH_START_AFTER_LOAD), encoding="utf-8")
