"""residlab.build.page_weight, on small inputs: which characters MathML shows, the math font subset keeps them and
its stretchy brackets, the icons the site names are found, and the site's scripts lose only their comment lines. (test_first_paint.py checks the pages' rewrites;
tests/site/test_page_weight.py the built site itself, in Chromium: what the scheme script does there, and what the
pages draw.)"""

from __future__ import annotations

import shutil
import string
import unicodedata
from pathlib import Path

import pytest

from node_syntax import node_parses

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


SCRIPT = """(function () {
  // a comment line, dropped
  var url = "https://example.org/a";  // a comment after code stays
  //no space either
  var half = total / 2, pattern = /[/]\\//g;
  // dropped after a division and a regular expression too
  return `${url}`;
})();"""


def test_a_script_loses_its_comment_lines_and_nothing_else():
    assert page_weight.without_comment_lines(SCRIPT) == (
        '(function () {\n  var url = "https://example.org/a";  // a comment after code stays\n'
        '  var half = total / 2, pattern = /[/]\\//g;\n  return `${url}`;\n})();')
    lighter = page_weight.without_comment_lines(SCRIPT)
    assert page_weight.without_comment_lines(lighter) == lighter


@pytest.mark.parametrize("before", [
    "var re = /[/`]/;",  # a slash and a backtick inside a regular expression's class
    "var re = /'/;",  # a quote inside a regular expression
    'var half = total / 2, slash = "/";',  # a division, then a slash in a string
    'var text = `${ "`" }`;',  # a backtick in a string inside a substitution
    "if (ready) { run(); }",
])
def test_a_comment_line_after_code_that_looks_like_something_else_is_dropped(before):
    assert page_weight.without_comment_lines(f"{before}\n// gone\nrun();") == f"{before}\nrun();"


@pytest.mark.parametrize("inside", [
    "var text = `first line\n// inside a template literal\nlast line`;",
    "var text = `a\\`\n// inside, after an escaped backtick\nb\\``;",
    'var q = "`", text = `start\n// inside, a backtick in a string before it\nend`, r = "`";',
    "var re = /`/, text = `start\n// inside, a backtick in a regular expression before it\nend`;",
    "var text = `${ {a: 1}.a }\n// inside, after a substitution holding braces\n`;",
    'var text = "continued \\\n// inside a string";',
    "/* a block comment\n// inside it */",
    # where a "/" could start a regular expression or divide, a misread could open or close a template literal
    "if (x) /`/.test(s);\nvar t = `\n// inside a template literal\n`;\nif (x) /`/.test(s);",
    "var y = i++ / 2, u = `/`, t;\nt = `\n// inside a template literal\n`;\nvar s2 = 1; // closing `",
    "var e\u0301 = 4, y = e\u0301 / 2, u = `/`, t = `\n// inside a template literal\n`; // `",
])
def test_a_comment_line_inside_something_else_stays(inside):
    assert page_weight.without_comment_lines(inside) == inside


@pytest.mark.parametrize("line_end", ["\r", "\u2028", "\u2029"])
def test_a_line_end_javascript_reads_and_the_lines_do_not_is_left_whole(line_end):
    script = f"var t = 1;\n// a comment{line_end}t = 2;"  # JavaScript's comment ends at line_end: t = 2 is code
    assert page_weight.without_comment_lines(script) == script


@pytest.mark.parametrize("unreadable", [
    "var text = 'never closed;\n// a comment", "if (x) {\n// a comment",
    "<!-- `\nvar t = `\n// an HTML-like comment opens the line\n`;", "#!/usr/bin/env node --title=`\n// a comment",
])
def test_a_script_the_tokenizer_cannot_read_through_is_left_whole(unreadable):
    assert page_weight.comment_only_lines(unreadable) is None
    assert page_weight.without_comment_lines(unreadable) == unreadable


def test_inline_scripts_lose_their_comment_lines_other_scripts_and_text_do_not():
    untouched = ('<script type="application/json" id="data">{"a": "x\n// y"}</script>'
                 '<script src="a.js">\n// kept\n</script>'
                 "<script type='text/x-template'>\n// kept\n</script>"
                 '<script data-type="module" type="text/x-python">\n// kept\n</script>'
                 "<!-- an old <script> tag -->\n<pre><code>\n// shown as text\n</code></pre>"
                 "<script-note>\n// a custom element's text\n</script-note>"
                 "<textarea><script>\n// text in a text area\n</script></textarea>"
                 "<noscript><script>\n// text to a browser that runs scripts\n</script></noscript>"
                 "<svg><script>var t = &#96;\n// inside a template once SVG decodes the entity\n&#96;;</script></svg>"
                 '<script type="text/x-template" type="module">\n// the first type counts\n</script>'
                 '<script language="text">\n// not JavaScript\n</script>'
                 "<script>run();</script/><pre>\n// a browser ends the script at its slash: this is page text\n</pre>"
                 "<script>x();</script>")
    page = (f"<head>{untouched}</head><body><script>\n// gone\nrun();\n</script >"
            '<script type="module">\n// gone too\nimport "./b.js";\n</script></body>')
    assert page_weight.without_inline_comment_lines(page) == (
        f"<head>{untouched}</head><body><script>\nrun();\n</script >"
        '<script type="module">\nimport "./b.js";\n</script></body>')


def test_the_sites_own_scripts_without_comment_lines_still_parse(tmp_path):
    explorers = tmp_path / page_weight.EXPLORER_SCRIPTS
    shutil.copytree(ROOT / page_weight.EXPLORER_SCRIPTS, explorers)
    before, after = page_weight.lighten_scripts(tmp_path)
    assert after < before  # the sources have comment lines, and lose them
    served = {script.name: script.read_text(encoding="utf-8") for script in sorted(explorers.glob("*.js"))}
    assert [name for name, text in served.items() if page_weight.comment_only_lines(text) != set()] == []
    assert dict(zip(served, node_parses(list(served.values())))) == dict.fromkeys(served, True)


def test_each_line_dropped_from_the_sites_scripts_is_one_javascript_reads_as_a_comment():
    """Node's own parser as the judge: a dropped line put back as code that cannot parse anywhere but in a
    comment, a string or a template (`@@@ ) ] }`) breaks the script, so it was not inside one."""
    sources, planted, where = [], [], []
    for script in sorted((ROOT / page_weight.EXPLORER_SCRIPTS).glob("*.js")):
        text = script.read_text(encoding="utf-8")
        lines = text.split("\n")
        sources.append(text)
        for number in sorted(page_weight.comment_only_lines(text) or ()):
            assert lines[number].lstrip().startswith("//"), f"{script.name}:{number + 1}"
            planted.append("\n".join(lines[:number] + ["@@@ ) ] }"] + lines[number + 1:]))
            where.append(f"{script.name}:{number + 1}")
    assert len(planted) > 100
    assert all(node_parses(sources))
    assert [place for place, parses in zip(where, node_parses(planted)) if parses] == []
