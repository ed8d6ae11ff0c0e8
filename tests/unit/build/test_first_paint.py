"""residlab.build.first_paint, on small inputs: the scheme stylesheets are rewritten once, each behind its own
scheme's media query, the head's scripts are deferred, the fixed header's height reserved, small stylesheets
written in, the fonts a page draws with preloaded, search loaded after the page and figures lazily.
(tests/site/test_page_weight.py checks the built site itself, in Chromium.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from residlab.build import first_paint, page_weight

FONTS = page_weight.FIRST_PAINT_FONTS


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
    page = first_paint.defer_other_scheme(SCHEME_HEAD)
    head, _, after = page.partition(f'<script id="{first_paint.SCHEME_SCRIPT_ID}">')
    links = [line for line in head.splitlines() if line.startswith("<link") and "data-scheme-media" in line]
    # (address the parser fetches, address kept for the script, media) of each scheme link, in order
    assert [(attribute(tag, "href"), attribute(tag, "data-scheme-href"), attribute(tag, "media")) for tag in links] == [
        ("hl.css", None, first_paint.LIGHT_MEDIA), (None, "hl-dark.css", first_paint.DARK_MEDIA),
        ("b.css", None, first_paint.LIGHT_MEDIA), (None, "b-dark.css", first_paint.DARK_MEDIA),
        ("b.css", None, first_paint.LIGHT_MEDIA),
    ]
    assert head.rstrip().endswith('data-mode="light" media="(prefers-color-scheme: light)" data-scheme-media>')
    assert '<link href="tippy.css" rel="stylesheet">' in after  # not a scheme stylesheet: untouched
    # readers without scripts get the dark stylesheets from <noscript>, behind their media query
    noscript = re.search(r"<noscript>(.*)</noscript>", after).group(1)
    assert re.findall(r'href="([^"]*)" [^>]*media="\(prefers-color-scheme: dark\)"', noscript) == ["hl-dark.css", "b-dark.css"]
    assert first_paint.defer_other_scheme(page) == page  # a page done before is left as it is
    assert first_paint.defer_other_scheme("<head><link href='x.css' rel='stylesheet'></head>") == \
        "<head><link href='x.css' rel='stylesheet'></head>"


def test_head_scripts_are_deferred_in_order_and_body_scripts_and_modules_are_not():
    page = ('<head><script src="a.js"></script><script src="m.js" type="module"></script>'
            '<script src="b.js" defer></script><script id="inline">x()</script><script src="c.js"></script>'
            '<script src="lib/async-defer.js"></script><script async src="d.js"></script></head>'
            '<body><script src="body.js"></script></body>')
    deferred = first_paint.defer_head_scripts(page)
    assert re.findall(r"<script[^>]*>", deferred) == [
        '<script src="a.js" defer>', '<script src="m.js" type="module">', '<script src="b.js" defer>',
        '<script id="inline">', '<script src="c.js" defer>',
        '<script src="lib/async-defer.js" defer>',  # the words in its address are not attributes
        '<script async src="d.js">', '<script src="body.js">']
    assert first_paint.defer_head_scripts(deferred) == deferred


def test_a_media_query_quarto_wrote_itself_stops_the_build():
    with pytest.raises(SystemExit, match="media query on a scheme stylesheet"):
        first_paint.defer_other_scheme('<link href="b.css" rel="stylesheet" class="quarto-color-scheme" media="screen">')


def test_the_fixed_headers_height_is_reserved_right_after_it_once_and_only_where_quarto_fixes_a_header():
    page = ('<body class="nav-fixed"><header id="quarto-header" class="headroom fixed-top"><nav>menu</nav></header>'
            '<div id="quarto-content"><header id="title-block-header"><h1>T</h1></header></div></body>')
    reserved = first_paint.reserve_header_height(page)
    # right after the fixed header (before the content it would push down), not after the title's header
    assert reserved.index(first_paint.HEADER_OFFSET_SCRIPT) == page.index("</header>") + len("</header>")
    assert reserved.count("<script") == 1 and 'getElementById("quarto-header").clientHeight' in reserved
    assert first_paint.reserve_header_height(reserved) == reserved
    unfixed = page.replace("headroom fixed-top", "headroom")
    assert first_paint.reserve_header_height(unfixed) == unfixed


def small_site(tmp_path: Path) -> tuple[Path, Path]:
    """A site with a page in a folder, Quarto's small icon stylesheet (naming the subset with its digest), a large
    stylesheet naming the math font, and a colour-scheme stylesheet."""
    site = tmp_path / "_site"
    (site / "site_libs" / "bootstrap").mkdir(parents=True)
    (site / "labs").mkdir()
    (site / page_weight.ICONS_CSS).write_text(
        '@font-face { font-family: "bootstrap-icons"; src: url("./bootstrap-icons.woff2?abc123") format("woff2"); }\n'
        '.x { background: url("data:image/svg+xml,<svg/>"); } .y { background: url(/abs.png); }', encoding="utf-8")
    (site / "site_libs" / "bootstrap" / "big.css").write_text(
        '@font-face { src: url("assets/site/fonts/noto-sans-math-400.woff2"); }' + "/* padding */" * 1000, encoding="utf-8")
    (site / "site_libs" / "bootstrap" / "scheme.css").write_text("body { color: black; }", encoding="utf-8")
    page = site / "labs" / "page.html"
    return site, page


HEAD = ('<html><head><title>T</title>'
        '<link href="../site_libs/bootstrap/bootstrap-icons.css" rel="stylesheet">'
        '<link href="../site_libs/bootstrap/big.css" rel="stylesheet">'
        '<link href="../site_libs/bootstrap/scheme.css" rel="stylesheet" class="quarto-color-scheme">'
        '<link rel="stylesheet" href="https://example.org/remote.css">'
        '</head><body>%s</body></html>')


def test_small_stylesheets_are_written_into_the_page_with_their_addresses_made_the_pages(tmp_path):
    site, page = small_site(tmp_path)
    html = HEAD % '<i class="bi bi-github"></i>'
    inlined = first_paint.inline_small_stylesheets(html, page, site)
    style = re.search(r'<style data-residlab-inlined="../site_libs/bootstrap/bootstrap-icons.css">(.*?)</style>',
                      inlined, re.DOTALL).group(1)
    # relative addresses now from the page's folder; data: and root-relative addresses untouched
    assert 'url("../site_libs/bootstrap/bootstrap-icons.woff2?abc123")' in style
    assert 'url("data:image/svg+xml,<svg/>")' in style and "url(/abs.png)" in style
    assert "bootstrap-icons.css\" rel=" not in inlined
    # the large one, the scheme's (Quarto's toggle switches it) and another host's stay links
    for kept in ("big.css", "scheme.css", "remote.css"):
        assert re.search(rf'<link [^>]*{kept}', inlined), kept
    assert first_paint.inline_small_stylesheets(inlined, page, site) == inlined


def test_the_fonts_a_page_draws_with_are_preloaded_at_the_address_its_stylesheets_name(tmp_path):
    site, page = small_site(tmp_path)
    icons_only = first_paint.preload_fonts(
        first_paint.inline_small_stylesheets(HEAD % '<i class="bi bi-github"></i>', page, site), page, site, FONTS)
    preloads = re.findall(r'<link rel="preload" href="([^"]+)" as="font" type="font/woff2" crossorigin', icons_only)
    assert preloads == ["../site_libs/bootstrap/bootstrap-icons.woff2?abc123"]  # from the inlined rules
    assert icons_only.index("</title>") < icons_only.index('rel="preload"') < icons_only.index("<link href")
    with_math = first_paint.preload_fonts(HEAD % '<i class="bi-x"></i><math><mi>x</mi></math>', page, site, FONTS)
    assert re.findall(r'<link rel="preload" href="([^"]+)"', with_math) == [
        "../site_libs/bootstrap/bootstrap-icons.woff2?abc123",  # from the linked stylesheet, its query kept
        "../site_libs/bootstrap/assets/site/fonts/noto-sans-math-400.woff2"]
    assert first_paint.preload_fonts(with_math, page, site, FONTS) == with_math
    plain = HEAD % "<p>no icons, no math</p>"
    assert first_paint.preload_fonts(plain, page, site, FONTS) == plain
    (site / "site_libs" / "bootstrap" / "big.css").write_text("/* no font */", encoding="utf-8")
    with pytest.raises(SystemExit, match="labs/page.html draws with noto-sans-math-400.woff2, but none of its"):
        first_paint.preload_fonts(HEAD % "<math><mi>x</mi></math>", page, site, FONTS)


SEARCH_HEAD = ('<head><script src="../site_libs/quarto-nav/quarto-nav.js" defer></script>\n'
               '<script src="../site_libs/quarto-search/autocomplete.umd.js" defer></script>\n'
               '<script src="../site_libs/quarto-search/fuse.min.js" defer></script>\n'
               '<script src="../site_libs/quarto-search/quarto-search.js" defer></script>\n'
               '<script src="../site_libs/quarto-html/quarto.js" type="module"></script>\n</head><body></body>')


def test_the_search_scripts_give_way_to_one_loader_in_their_place_and_order():
    page = first_paint.load_search_after_the_page(SEARCH_HEAD)
    assert "quarto-search/" not in page.replace(re.search(r'data-scripts="[^"]*"', page).group(0), "")
    assert re.search(r'data-scripts="([^"]*)"', page).group(1).split() == [
        "../site_libs/quarto-search/autocomplete.umd.js", "../site_libs/quarto-search/fuse.min.js",
        "../site_libs/quarto-search/quarto-search.js"]
    # where the first search script stood: after the navigation's script, before Quarto's module
    assert page.index("quarto-nav.js") < page.index(first_paint.SEARCH_LOADER_ID) < page.index("quarto.js")
    assert first_paint.load_search_after_the_page(page) == page
    assert first_paint.load_search_after_the_page("<head></head><body>x</body>") == "<head></head><body>x</body>"


def test_quartos_search_is_made_to_start_after_load_once_and_a_changed_search_stops_the_build(tmp_path):
    script = tmp_path / first_paint.SEARCH_JS
    script.parent.mkdir(parents=True)
    script.write_text("const kQuery = 1;\n" + first_paint.SEARCH_START + "\n  build();\n});\n", encoding="utf-8")
    first_paint.start_search_after_load(tmp_path)
    patched = script.read_text(encoding="utf-8")
    assert first_paint.SEARCH_START not in patched and patched.count("window.residlabSearchAfterLoad") == 1
    assert patched.endswith("  build();\n});\n")
    first_paint.start_search_after_load(tmp_path)
    assert script.read_text(encoding="utf-8") == patched
    script.write_text('document.addEventListener("DOMContentLoaded", () => build());', encoding="utf-8")
    with pytest.raises(SystemExit, match="quarto-search.js no longer starts with"):
        first_paint.start_search_after_load(tmp_path)


def test_figure_images_load_lazily_at_the_size_their_svg_declares_and_other_images_as_before(tmp_path):
    site = tmp_path / "_site"
    figures = site / "labs" / "page_files"
    figures.mkdir(parents=True)
    (figures / "a.svg").write_text('<?xml version="1.0"?>\n<svg xmlns:xlink="x" width="460.8pt" height="345.6pt" '
                                   'viewBox="0 0 460.8 345.6">', encoding="utf-8")
    (figures / "b.svg").write_text('<svg width="300" height="150">', encoding="utf-8")
    (figures / "unsized.svg").write_text('<svg viewBox="0 0 3 2">', encoding="utf-8")
    page = site / "labs" / "page.html"
    html = ('<img src="page_files/a.svg" class="img-fluid figure-img" alt="A"><img src="logo.png" alt="logo">'
            '<img class="figure-img" src="page_files/b.svg" /><img src="page_files/unsized.svg" class="figure-img">'
            '<img loading="eager" src="page_files/a.svg" class="figure-img">'
            '<img src="page_files/gone.svg" class="figure-img">')
    lazy = first_paint.lazy_figures(html, page, site)
    assert re.findall(r"<img[^>]*>", lazy) == [
        # 460.8 pt and 345.6 pt are 614.4 and 460.8 CSS pixels
        '<img src="page_files/a.svg" class="img-fluid figure-img" alt="A" '
        'style="width: 614.4px; aspect-ratio: 614.4 / 460.8" loading="lazy">',
        '<img src="logo.png" alt="logo">',
        '<img class="figure-img" src="page_files/b.svg" style="width: 300px; aspect-ratio: 300 / 150" loading="lazy" />',
        # no size to keep room with, a choice made before, a file not in the site: as they were
        '<img src="page_files/unsized.svg" class="figure-img">',
        '<img loading="eager" src="page_files/a.svg" class="figure-img">',
        '<img src="page_files/gone.svg" class="figure-img">']
    assert first_paint.lazy_figures(lazy, page, site) == lazy
