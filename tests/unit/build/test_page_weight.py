"""residlab.build.page_weight, on small inputs: which characters MathML shows, the math font subset keeps them and
its stretchy brackets, the icons the site names are found, and the site's scripts and stylesheet are minified by esbuild. (test_first_paint.py checks the pages' rewrites;
tests/site/test_page_weight.py the built site itself, in Chromium: what the scheme script does there, and what the
pages draw.)"""

from __future__ import annotations

import shutil
import string
import unicodedata
from pathlib import Path

import pytest

from residlab.build import minify, page_weight, site_verify

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


def test_esbuild_minifies_keeping_a_scripts_top_level_names_and_a_modules_imports():
    smaller = minify.minified(ROOT, {
        "classic.js": "// read by whoever reads the source\nfunction shared(count) {\n  var longName = count * 2;\n"
                      "  return longName;  // after code\n}\nvar alsoShared = `${shared(1)} items`;\n",
        "module.js": 'import { helper } from "./helper.js";\n// a note\nexport const doubled = helper(2) * 2;\n',
        "sheet.css": "/* a note */\n.box {\n  color : red ;\n}\n",
    })  # fmt: skip
    classic = smaller["classic.js"]
    assert "function shared(" in classic and "var alsoShared=" in classic  # other scripts and the page read these
    assert "//" not in classic and "longName" not in classic and "\n" not in classic
    assert smaller["module.js"].startswith('import{helper as') and "export const doubled=" in smaller["module.js"]
    assert smaller["sheet.css"] == ".box{color:red}"


def test_a_text_esbuild_cannot_parse_stops_the_build_naming_it():
    with pytest.raises(minify.MinifyError, match=r"esbuild could not minify broken\.js: .*Unexpected end of file(.|\n)*broken\.js:3:0"):
        minify.minified(ROOT, {"broken.js": "if (ready) {\n  run();\n"})
    with pytest.raises(minify.MinifyError, match=r"cannot minify notes\.txt"):
        minify.minified(ROOT, {"notes.txt": "text"})


def test_inline_scripts_are_minified_other_scripts_and_text_are_not():
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
                 "<script>x();</script>")  # already as esbuild writes it
    page = (f"<head>{untouched}</head><body><script>\n// gone\nrun( 1 );\n</script >"
            '<script type="module">\n// gone too\nimport "./b.js";\n</script></body>')
    other = "<body><script>\n// the same script on another page is minified once\nrun( 1 );\n</script></body>"
    pages = page_weight.minify_inline_scripts(ROOT, {Path("a.html"): page, Path("b.html"): other})
    assert pages[Path("a.html")] == (f"<head>{untouched}</head><body><script>run(1);</script >"
                                     '<script type="module">import"./b.js";</script></body>')  # fmt: skip
    assert pages[Path("b.html")] == "<body><script>run(1);</script></body>"


def test_the_sites_own_files_are_served_as_esbuild_minifies_them_and_the_build_checks_it(tmp_path):
    explorers = tmp_path / page_weight.EXPLORER_SCRIPTS
    shutil.copytree(ROOT / page_weight.EXPLORER_SCRIPTS, explorers)
    before, after = page_weight.minify_own_files(ROOT, tmp_path)
    assert after < before * 0.7  # comments, whitespace and long local names go
    served = site_verify.served_forms(ROOT)
    assert {path.name for path in served} == {path.name for path in page_weight.own_files(explorers)}
    assert all((explorers / path.name).read_bytes() == form for path, form in served.items())
