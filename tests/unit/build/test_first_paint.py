"""residlab.build.first_paint, on the pages the pinned Quarto renders from a small project (``conftest.py``): the
scheme stylesheets are rewritten once, each behind its own scheme's media query, the head's scripts are deferred,
the fixed header's height reserved, AnchorJS's base rules and small stylesheets written in, the fonts a page draws
with preloaded, search loaded after the page and figures lazily; and every rewrite stops the build, naming itself
and the page, when the pattern it rewrites is missing. (tests/site/test_page_weight.py checks the built site itself, in Chromium.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from residlab.build import first_paint, page_weight

FONTS = page_weight.FIRST_PAINT_FONTS


def attribute(tag: str, name: str) -> str | None:
    found = re.search(rf'\s{name}="([^"]*)"', tag)
    return found.group(1) if found else None


def page_text(site: Path, name: str = "index.html") -> str:
    return (site / name).read_text(encoding="utf-8")


def test_each_scheme_stylesheet_waits_behind_its_schemes_media_query_and_the_script_follows_them(quarto_site):
    html = page_text(quarto_site)
    quartos = first_paint.SCHEME_LINK.findall(html)
    written = [tag for tag in re.findall(r"<link\b[^>]*>", html) if "quarto-color-scheme" in tag]
    assert len(written) >= 4 and any("quarto-color-alternate" in tag for tag in written)  # light and dark, as Quarto writes
    page = first_paint.defer_other_scheme(html)
    head, _, after = page.partition(f'<script id="{first_paint.SCHEME_SCRIPT_ID}">')
    links = [tag for tag in re.findall(r"<link\b[^>]*>", head) if "data-scheme-media" in tag]
    assert len(links) == len(quartos) == len(written)
    for before, tag in zip(written, links):
        dark = "quarto-color-alternate" in before
        assert attribute(tag, "media") == (first_paint.DARK_MEDIA if dark else first_paint.LIGHT_MEDIA)
        # the dark ones keep their address for the script only; the light ones are fetched by the parser
        assert (attribute(tag, "href"), attribute(tag, "data-scheme-href")) == (
            (None, attribute(before, "href")) if dark else (attribute(before, "href"), None))
    # readers without scripts get the dark stylesheets from <noscript>, behind their media query
    noscript = re.search(r"<noscript>(.*?)</noscript>", after, re.S).group(1)
    assert re.findall(r'href="([^"]*)"', noscript) == [attribute(tag, "href") for tag in written
                                                       if "quarto-color-alternate" in tag]  # fmt: skip
    assert first_paint.defer_other_scheme(page) == page  # a page done before is left as it is


def test_head_scripts_are_deferred_in_order_and_body_scripts_and_modules_are_not(quarto_site):
    html = page_text(quarto_site)
    head_end = html.index("</head>")
    deferred = first_paint.defer_head_scripts(html)
    before = re.findall(r"<script\b[^>]*\bsrc=[^>]*>", html[:head_end])
    after = re.findall(r"<script\b[^>]*\bsrc=[^>]*>", deferred[:deferred.index("</head>")])
    assert len(before) == len(after) >= 5  # Quarto's navigation, search, Bootstrap, clipboard, tooltips
    for tag, rewritten in zip(before, after):
        if 'type="module"' in tag or re.search(r"\s(defer|async)[\s=>]", re.sub(r'"[^"]*"', '""', tag)):
            assert rewritten == tag
        else:
            assert rewritten == tag[:-1] + " defer>"
    assert deferred[deferred.index("</head>"):] == html[head_end:]  # the body's scripts as they were
    assert first_paint.defer_head_scripts(deferred) == deferred


def test_a_media_query_quarto_wrote_itself_stops_the_build(quarto_site):
    html = page_text(quarto_site).replace('class="quarto-color-scheme"', 'class="quarto-color-scheme" media="screen"', 1)
    with pytest.raises(SystemExit, match="media query on a scheme stylesheet"):
        first_paint.defer_other_scheme(html)


def test_the_fixed_headers_height_is_reserved_right_after_it_once(quarto_site):
    html = page_text(quarto_site)
    reserved = first_paint.reserve_header_height(html)
    header_end = first_paint.FIXED_HEADER.search(html).end()
    # right after the fixed header (before the content it would push down), not after the title's header
    assert reserved.index(first_paint.HEADER_OFFSET_SCRIPT) == header_end
    assert reserved.count(first_paint.HEADER_OFFSET_SCRIPT) == 1 and "title-block-header" in reserved[header_end:]
    assert first_paint.reserve_header_height(reserved) == reserved


def test_the_search_scripts_give_way_to_one_loader_in_their_place_and_order(quarto_site):
    html = page_text(quarto_site)
    scripts = [match.group("src") for match in first_paint.SEARCH_SCRIPT.finditer(html[:html.index("</head>")])]
    assert [src.rsplit("/", 1)[1] for src in scripts] == ["autocomplete.umd.js", "fuse.min.js", "quarto-search.js"]
    page = first_paint.load_search_after_the_page(html)
    assert re.search(r'data-scripts="([^"]*)"', page).group(1).split() == scripts
    assert "quarto-search/" not in page.replace(re.search(r'data-scripts="[^"]*"', page).group(0), "")[:page.index("</head>")]
    # where the first search script stood: the scripts before and after it keep their order
    assert page.index(f'<script id="{first_paint.SEARCH_LOADER_ID}"') == html.index(f'<script src="{scripts[0]}"')
    assert first_paint.load_search_after_the_page(page) == page


def test_quartos_search_is_made_to_start_after_load_once_and_a_changed_search_stops_the_build(built_copy):
    script = built_copy / first_paint.SEARCH_JS
    original = script.read_text(encoding="utf-8")
    first_paint.start_search_after_load(built_copy)
    patched = script.read_text(encoding="utf-8")
    assert first_paint.SEARCH_START not in patched and patched.count("window.residlabSearchAfterLoad") == 1
    assert patched.replace(first_paint.SEARCH_START_AFTER_LOAD, first_paint.SEARCH_START) == original
    first_paint.start_search_after_load(built_copy)
    assert script.read_text(encoding="utf-8") == patched
    script.write_text('document.addEventListener("DOMContentLoaded", () => build());', encoding="utf-8")
    with pytest.raises(SystemExit, match="quarto-search.js no longer starts with"):
        first_paint.start_search_after_load(built_copy)


def test_anchorjs_base_rules_are_written_where_it_would_insert_them_once(quarto_site):
    page = quarto_site / "index.html"
    html = page_text(quarto_site)
    script = re.search(r'<script src="([^"]*anchor\.min\.js)"', html)
    assert script and '<style class="anchorjs"' not in html  # Quarto's page loads AnchorJS, which adds the style
    seeded = first_paint.seed_anchor_styles(html, page, quarto_site)
    style = re.search(r'<style class="anchorjs" data-residlab-seeded>(.*?)</style>\n', seeded).group(0)
    # the page as it was, the style before its first stylesheet or style, as AnchorJS's add() would insert it
    first = re.search(r'<style\b|<link\b[^>]*\brel="stylesheet"', html).start()
    assert seeded == html[:first] + style + html[first:]
    rules = style.split(">", 1)[1].rsplit("</style>", 1)[0]
    assert rules.startswith(".anchorjs-link{opacity:0;") and "@font-face{font-family:anchorjs-icons;" in rules
    library = (quarto_site / "site_libs" / "quarto-html" / "anchor.min.js").read_text(encoding="utf-8")
    assert all(rule in library for rule in re.findall(r"[^{}]+\{[^{}]*\}", rules))  # each rule, as the library has it
    assert first_paint.seed_anchor_styles(seeded, page, quarto_site) == seeded  # a page done before is left as it is
    without = html.replace(script.group(0), "<script")  # a page that loads no AnchorJS
    assert first_paint.seed_anchor_styles(without, page, quarto_site) == without


def test_an_anchorjs_that_adds_its_rules_otherwise_stops_the_build(built_copy):
    library = built_copy / "site_libs" / "quarto-html" / "anchor.min.js"
    library.write_text(library.read_text(encoding="utf-8").replace("insertRule(", "addRule("), encoding="utf-8")
    stops("seed_anchor_styles", page_text(built_copy), built_copy)


def test_the_sites_filter_loads_svg_figures_lazily_at_their_declared_size_and_other_images_as_before(quarto_site):
    # assets/site/reading.lua, in the fixture's render as in the site's: Quarto's own mechanism, no rewrite of its output
    images = re.findall(r"<img\b[^>]*>", (quarto_site / "figures" / "page.html").read_text(encoding="utf-8"))
    svg = next(tag for tag in images if "figure.svg" in tag)
    # 460.8 pt and 345.6 pt are 614.4 and 460.8 CSS pixels
    assert 'style="width: 614.4px; aspect-ratio: 614.4 / 460.8"' in svg and 'loading="lazy"' in svg
    assert "figure-img" in svg  # still Quarto's figure
    png = next(tag for tag in images if "picture.png" in tag)
    assert "loading=" not in png and "style=" not in png  # not an SVG: as Quarto wrote it


def test_the_rewrites_of_a_whole_page_change_it_once(quarto_site):
    page = quarto_site / "figures" / "page.html"
    html = page.read_text(encoding="utf-8")
    once = first_paint.rewrite(html, page, quarto_site, {})  # (the font preloads: below, on the subset's names)
    assert once != html and first_paint.rewrite(once, page, quarto_site, {}) == once
    assert once.count('<style class="anchorjs" data-residlab-seeded>') == 1  # after the head's scripts were deferred


# ---------------------------------------------------------------- a missing pattern stops the build, one per rewrite


def stops(rewrite: str, html: str, site: Path, name: str = "index.html"):
    """``first_paint.rewrite`` of ``html`` as the page ``name`` stops the build, naming the rewrite and the page."""
    with pytest.raises(SystemExit) as stopped:
        first_paint.rewrite(html, site / name, site, {})
    assert f"page_weight: {rewrite}: {name}: " in str(stopped.value), stopped.value


def test_a_page_without_scheme_stylesheets_stops_the_build(quarto_site):
    stops("defer_other_scheme", page_text(quarto_site).replace("quarto-color-scheme", "quarto-scheme"), quarto_site)


def test_a_head_without_scripts_stops_the_build(quarto_site):
    html = page_text(quarto_site)
    head_end = html.index("</head>")
    stops("defer_head_scripts", re.sub(r"<script\b[^>]*\bsrc=[^>]*></script>", "", html[:head_end]) + html[head_end:],
          quarto_site)  # fmt: skip


def test_a_page_without_the_fixed_header_stops_the_build(quarto_site):
    stops("reserve_header_height", page_text(quarto_site).replace("headroom fixed-top", "headroom"), quarto_site)


def test_a_page_without_stylesheet_links_stops_the_build(quarto_site):
    html = page_text(quarto_site)
    without = re.sub(r'<link\b[^>]*\brel="stylesheet"[^>]*>', "", html)
    with pytest.raises(SystemExit, match=r"inline_small_stylesheets: "):
        first_paint.inline_small_stylesheets(without, quarto_site / "index.html", quarto_site)
    stops("defer_other_scheme", without, quarto_site)  # the scheme stylesheets go first in a whole rewrite


def test_a_page_without_a_head_stops_the_preload(quarto_site):
    with pytest.raises(SystemExit, match="preload_fonts: "):
        first_paint.preload_fonts("<body>x</body>", quarto_site / "index.html", quarto_site, FONTS)


def test_a_page_without_search_scripts_stops_the_build(quarto_site):
    stops("load_search_after_the_page", page_text(quarto_site).replace("quarto-search/", "quarto-find/"), quarto_site)


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
