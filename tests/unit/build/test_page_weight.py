"""residlab.build.page_weight, on small inputs: which characters MathML shows, the math font subset keeps them and
its stretchy brackets, the icons the site names are found, the scheme stylesheets are rewritten once, each behind
its own scheme's media query, and the head's scripts are deferred. (tests/site/test_page_weight.py checks the built
site itself, in Chromium: what the scheme script does there, and what the pages draw.)"""

from __future__ import annotations

import re
import string
import unicodedata
from pathlib import Path

import pytest

from residlab.build import page_weight

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("letter", string.ascii_letters + "αβγδεζηθικλμνξοπρστυφχψωΓΔΘΛΞΠΣΦΨΩ")
def test_a_one_letter_identifier_is_drawn_as_the_unicode_italic_letter(letter):
    italic = page_weight.math_italic(letter)
    if letter == "h":
        assert unicodedata.name(italic) == "PLANCK CONSTANT"  # the italic h lives outside the block
    else:
        name = unicodedata.name(letter).replace("LATIN ", "").replace("GREEK ", "").replace(" LETTER", "")
        assert unicodedata.name(italic) == f"MATHEMATICAL ITALIC {name}"


@pytest.mark.parametrize("character", ["1", "+", "(", "∑", " "])
def test_digits_and_operators_have_no_italic_form(character):
    assert page_weight.math_italic(character) is None


def test_mathml_characters_are_the_shown_text_and_the_italic_letters():
    html = ('<p>x outside</p><math><semantics><mrow><mi>x</mi><mo>=</mo><mi>sin</mi><mo>&#x2061;</mo>'
            '<mi mathvariant="normal">Δ</mi><mn>2</mn><mi>W</mi><msub><mi>U</mi><mtext>final</mtext></msub></mrow>'
            '<annotation encoding="application/x-tex">\\zeta</annotation></semantics></math>')
    characters = page_weight.mathml_characters(html)
    assert characters == set("x=sin\u2061Δ2WUfinal") | {"𝑥", "𝑊", "𝑈"}  # no 'o','u','t','\\','z','e','a' from elsewhere


SCHEME_HEAD = """<head>
<link href="hl.css" rel="stylesheet" class="quarto-color-scheme" id="quarto-text-highlighting-styles">
<link href="hl-dark.css" rel="stylesheet" class="quarto-color-scheme quarto-color-alternate" id="quarto-text-highlighting-styles">
<script src="bootstrap.min.js"></script>
<link href="b.css" rel="stylesheet" append-hash="true" class="quarto-color-scheme" id="quarto-bootstrap" data-mode="light">
<link href="b-dark.css" rel="stylesheet" append-hash="true" class="quarto-color-scheme quarto-color-alternate" id="quarto-bootstrap" data-mode="dark">
<link href="b.css" rel="stylesheet" append-hash="true" class="quarto-color-scheme-extra" id="quarto-bootstrap" data-mode="light">
<link href="tippy.css" rel="stylesheet">
</head>"""


def attribute(tag: str, name: str) -> str | None:
    found = re.search(rf'\s{name}="([^"]*)"', tag)
    return found.group(1) if found else None


def test_each_scheme_stylesheet_waits_behind_its_schemes_media_query_and_the_script_follows_them():
    page = page_weight.defer_other_scheme(SCHEME_HEAD)
    head, _, after = page.partition(f'<script id="{page_weight.SCHEME_SCRIPT_ID}">')
    links = [line for line in head.splitlines() if line.startswith("<link") and "data-scheme-media" in line]
    # (address the parser fetches, address kept for the script, media) of each scheme link, in order
    assert [(attribute(tag, "href"), attribute(tag, "data-scheme-href"), attribute(tag, "media")) for tag in links] == [
        ("hl.css", None, page_weight.LIGHT_MEDIA), (None, "hl-dark.css", page_weight.DARK_MEDIA),
        ("b.css", None, page_weight.LIGHT_MEDIA), (None, "b-dark.css", page_weight.DARK_MEDIA),
        ("b.css", None, page_weight.LIGHT_MEDIA),
    ]
    assert head.rstrip().endswith('data-mode="light" media="(prefers-color-scheme: light)" data-scheme-media>')
    assert '<link href="tippy.css" rel="stylesheet">' in after  # not a scheme stylesheet: untouched
    # readers without scripts get the dark stylesheets from <noscript>, behind their media query
    noscript = re.search(r"<noscript>(.*)</noscript>", after).group(1)
    assert re.findall(r'href="([^"]*)" [^>]*media="\(prefers-color-scheme: dark\)"', noscript) == ["hl-dark.css", "b-dark.css"]
    assert page_weight.defer_other_scheme(page) == page  # a page done before is left as it is
    assert page_weight.defer_other_scheme("<head><link href='x.css' rel='stylesheet'></head>") == \
        "<head><link href='x.css' rel='stylesheet'></head>"


def test_head_scripts_are_deferred_in_order_and_body_scripts_and_modules_are_not():
    page = ('<head><script src="a.js"></script><script src="m.js" type="module"></script>'
            '<script src="b.js" defer></script><script id="inline">x()</script><script src="c.js"></script>'
            '<script src="lib/async-defer.js"></script><script async src="d.js"></script></head>'
            '<body><script src="body.js"></script></body>')
    deferred = page_weight.defer_head_scripts(page)
    assert re.findall(r"<script[^>]*>", deferred) == [
        '<script src="a.js" defer>', '<script src="m.js" type="module">', '<script src="b.js" defer>',
        '<script id="inline">', '<script src="c.js" defer>',
        '<script src="lib/async-defer.js" defer>',  # the words in its address are not attributes
        '<script async src="d.js">', '<script src="body.js">']
    assert page_weight.defer_head_scripts(deferred) == deferred


def test_a_media_query_quarto_wrote_itself_stops_the_build():
    with pytest.raises(SystemExit, match="media query on a scheme stylesheet"):
        page_weight.defer_other_scheme('<link href="b.css" rel="stylesheet" class="quarto-color-scheme" media="screen">')


def test_the_math_font_subset_keeps_the_characters_and_the_brackets_stretch_parts(tmp_path):
    from fontTools.ttLib import TTFont

    site = tmp_path / "_site"
    (site / "lessons").mkdir(parents=True)
    (site / "lessons" / "page.html").write_text("<math><mrow><mo>[</mo><mtable><mtr><mtd><mi>x</mi></mtd></mtr>"
                                                "</mtable><mo>]</mo><mo>∑</mo></mrow></math>", encoding="utf-8")
    copy = site / "site_libs" / "bootstrap" / page_weight.MATH_FONT
    copy.parent.mkdir(parents=True)
    copy.write_bytes(b"quarto's copy")
    source = ROOT / page_weight.MATH_FONT
    source_bytes, subset_bytes, characters = page_weight.subset_math_font(source, site)
    assert characters == set(" []x∑𝑥")
    assert subset_bytes == copy.stat().st_size < source_bytes / 10
    full, subset = TTFont(source), TTFont(copy)
    assert set(map(chr, subset.getBestCmap())) == characters
    # The bracket's taller variants and the pieces of its assembly are kept, as in the full font.
    def variants(font, character):
        glyph = font.getBestCmap()[ord(character)]
        table = font["MATH"].table.MathVariants
        construction = table.VertGlyphConstruction[table.VertGlyphCoverage.glyphs.index(glyph)]
        sizes = [record.VariantGlyph for record in construction.MathGlyphVariantRecord]
        parts = [part.glyph for part in construction.GlyphAssembly.PartRecords] if construction.GlyphAssembly else []
        return len(sizes), len(parts)
    for bracket in "[]∑":
        assert variants(subset, bracket) == variants(full, bracket) and variants(subset, bracket)[0] > 1


def test_a_site_without_the_math_font_stops_the_build(tmp_path):
    (tmp_path / "page.html").write_text("<math><mi>x</mi></math>", encoding="utf-8")
    with pytest.raises(SystemExit, match="no copy of noto-sans-math-400.woff2"):
        page_weight.subset_math_font(ROOT / page_weight.MATH_FONT, tmp_path)


def test_the_icons_named_in_pages_stylesheets_and_class_building_scripts_are_found_and_no_others(tmp_path):
    known = {"github", "search", "chevron-right", "x", "moon", "sun", "list"}
    (tmp_path / "site_libs" / "bootstrap").mkdir(parents=True)
    (tmp_path / "index.html").write_text('<i class="bi bi-github"></i> <a class="bi-nonesuch">', encoding="utf-8")
    (tmp_path / "site_libs" / "nav.css").write_text(".menu::after { content: ''; } .bi-chevron-right {}", encoding="utf-8")
    # a script that builds the class from a name: every string in it that is an icon's name counts
    (tmp_path / "site_libs" / "search.js").write_text('const icon = hit ? "search" : "x"; el.className = `bi-${icon}`;',
                                                     encoding="utf-8")
    # one that does not: its strings are not icons ("list" here is a word, not a class)
    (tmp_path / "site_libs" / "other.js").write_text('mode = "list"; theme = "moon";', encoding="utf-8")
    # the icon stylesheet itself declares every icon: reading it would keep them all
    (tmp_path / page_weight.ICONS_CSS).write_text(".bi-sun::before { content: '\\f1d2'; }", encoding="utf-8")
    assert page_weight.used_icons(tmp_path, known) == {"github", "chevron-right", "search", "x"}


def test_the_fixed_headers_height_is_reserved_right_after_it_once_and_only_where_quarto_fixes_a_header():
    page = ('<body class="nav-fixed"><header id="quarto-header" class="headroom fixed-top"><nav>menu</nav></header>'
            '<div id="quarto-content"><header id="title-block-header"><h1>T</h1></header></div></body>')
    reserved = page_weight.reserve_header_height(page)
    # right after the fixed header (before the content it would push down), not after the title's header
    assert reserved.index(page_weight.HEADER_OFFSET_SCRIPT) == page.index("</header>") + len("</header>")
    assert reserved.count("<script") == 1 and 'getElementById("quarto-header").clientHeight' in reserved
    assert page_weight.reserve_header_height(reserved) == reserved
    unfixed = page.replace("headroom fixed-top", "headroom")
    assert page_weight.reserve_header_height(unfixed) == unfixed
