"""What `quarto render` built: every page and download, links that resolve, nothing remote, and the numbers
the pages promise, read from the HTML Quarto wrote (never from a re-implementation of Quarto)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from built_text import shown

from residlab.build import minify, page_weight, site, site_check, site_verify

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "assets" / "captures" / "synthetic-specimen-seed0"


def test_render_prints_no_warning_and_renders_every_page(built_site):
    # the render already refused any warning line; this checks the log is Quarto's and names every page.
    assert site.warning_lines(built_site.output) == []
    rendered = re.findall(r"\[\s*\d+/\d+\]\s+(\S+)", site.ANSI_ESCAPE.sub("", built_site.output))
    sources = sorted(str(page.relative_to(built_site.project)) for page in site_check.site_pages(built_site.project))
    assert sorted(rendered) == sources


def test_a_clean_copy_renders_with_the_npm_packages_installed_from_their_locks(built_site):
    # The copy is a fresh clone's files (no node_modules): the render's first step installed what the site serves.
    from residlab.build import npm_installs

    output = site.ANSI_ESCAPE.sub("", built_site.output)
    for folder in npm_installs.site_locks(built_site.project):
        where = folder.relative_to(built_site.project).as_posix()
        assert f"npm_installs: {where} installed from its lock (npm ci)" in output
        assert npm_installs.is_current(folder)
    assert (built_site.site / "assets" / "pyodide" / "pyodide-lock.json").is_file()


def test_each_shared_value_was_computed_once_and_prefetched(built_site):
    """The fresh render's freeze guard started the prefetch: it computed every value of its plan, a page's kernel read
    each, and no shared value was computed twice (nor a prefetched one by a page)."""
    from residlab.course import shared
    from residlab.render import render_cache

    folder = built_site.project / render_cache.RENDER_CACHE_DIR
    log = (folder / shared.PREFETCH_LOG).read_text(encoding="utf-8")
    prefetch = int(re.search(r"residlab prefetch: process (\d+), (\d+) values", log).group(1))
    assert "failed" not in log, log
    uses = render_cache.read_uses(folder)
    computed = [use for use in uses if use["how"] == "computed"]
    assert len({use["entry"] for use in computed}) == len(computed)  # each entry computed once in the render
    prefetched = {use["entry"] for use in computed if use["pid"] == prefetch}
    assert {entry.split("-")[0] for entry in prefetched} >= {value.__name__ for value in shared.PREFETCH}
    assert prefetched <= {use["entry"] for use in uses if use["pid"] != prefetch and use["how"] == "read"}
    computed_by_pages = {use["name"] for use in computed if use["pid"] != prefetch}
    assert not computed_by_pages & {value.__name__ for value in shared.PREFETCH}, computed_by_pages


def test_built_site_is_complete_and_self_contained(built_site):
    assert site_verify.verify_build(built_site.project, built_site.site) == []
    from residlab.course import pages

    for path in pages.served_downloads():
        assert (built_site.site / path).read_bytes() == (ROOT / path).read_bytes()


def test_every_inline_script_the_site_serves_is_minified_and_parses(built_site):
    """page_weight.py had esbuild minify every page's inline scripts (the script files are checked byte for byte by
    site verify): none keeps a comment line, and each parses (esbuild refuses one that does not)."""
    scripts = {}
    for page in sorted(built_site.site.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        for number, (start, end) in enumerate(page_weight.inline_scripts(html)):
            scripts[f"{page.relative_to(built_site.site)}-{number}.js"] = html[start:end]
    assert len(scripts) > 50  # every page's inline scripts, Quarto's among them
    assert [name for name, text in scripts.items() if re.search(r"^\s*//", text, re.M)] == []
    assert set(minify.minified(ROOT, scripts)) == set(scripts)


def sidebar_pages(entries) -> list[str]:
    """The pages the sidebar lists; a section with a page of its own (the glossary) counts as that page."""
    pages = []
    for entry in entries:
        if isinstance(entry, str):
            pages.append(entry)
        elif "section" in entry and "href" not in entry:
            pages += sidebar_pages(entry["contents"])
        else:
            pages.append(entry["href"])
    return pages


def test_home_page_links_every_sidebar_page_and_every_runner(built_site):
    from residlab.build.site_check import load_config
    from residlab.course import pages

    config = load_config(built_site.project)
    html = (built_site.site / "index.html").read_text(encoding="utf-8")
    main = html.split("<main", 1)[1]  # the page itself, not the sidebar
    links = {link.removeprefix("./") for link in re.findall(r'<a href="([^"#]+)"', main)}
    expected = {page.replace(".qmd", ".html") for page in sidebar_pages(config["website"]["sidebar"]["contents"])}
    expected -= {"index.html"}
    assert expected == {page.replace(".qmd", ".html") for family in pages.FAMILIES for page in family.pages[:1]} - {"index.html"}
    expected |= {runner.path for runner in pages.runners()}
    assert sorted(expected - links) == []


def test_lessons_audit_packet_is_published_with_its_links_intact(built_site):
    # Written while the lesson page ran, copied beside it by Quarto.
    from residlab import audit

    links = audit.Verification()
    audit.check_links(audit.read_packet(built_site.site / "lessons" / "copy-model-audit-packet"), links)
    assert links.passed, links.failures


def test_verify_build_names_each_kind_of_problem(built_site, tmp_path):
    broken = Path(shutil.copytree(built_site.site, tmp_path / "site"))
    (broken / "glossary" / "mlp.html").unlink()
    (broken / "assets/labs/trace_residual_toy.py").write_text("# edited\n")
    lesson = broken / "lessons" / "04-residual-stream.html"
    lesson.write_text(lesson.read_text(encoding="utf-8").replace(
        "</head>", '<script src="https://cdn.example.org/x.js"></script></head>').replace(
        "</main>", '<div class="cell-output cell-output-stderr">UserWarning</div></main>').replace(
        'id="ref-vaswani2017attention"', 'id="ref-renamed"'), encoding="utf-8")
    (broken / "site_libs" / "extra.css").write_text("@import url('https://fonts.example.org/f.css');\n")
    lab07 = broken / "labs" / "07-patching-methods.html"
    lab07.write_text(lab07.read_text(encoding="utf-8").replace("explorers/patching-explorer.js", "explorers/patching.js"), encoding="utf-8")
    problems = "\n".join(site_verify.verify_build(built_site.project, broken))
    assert "glossary/mlp.html: not built (source glossary/mlp.qmd)" in problems
    assert "assets/labs/trace_residual_toy.py: differs from assets/labs/trace_residual_toy.py" in problems
    assert "lessons/04-residual-stream.html: <script> loads https://cdn.example.org/x.js from another host" in problems
    assert "lessons/04-residual-stream.html: a cell wrote to stderr or raised" in problems
    # a citation whose entry in the references is gone
    assert "lessons/04-residual-stream.html: <a> #ref-vaswani2017attention names no id on the page" in problems
    assert "mlp.html does not resolve to a file in the site" in problems  # the sidebar links to the deleted page
    assert "site_libs/extra.css: fetches a stylesheet or font from another host" in problems
    # a script an explorer's block names for the site's loader
    assert "labs/07-patching-methods.html: <script> ../assets/explorers/patching.js does not resolve" in problems


def test_math_is_mathml_everywhere(built_site):
    for page in built_site.site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "mathjax" not in text.lower() and "katex" not in text.lower(), page.name
    lesson = (built_site.site / "lessons/04-residual-stream.html").read_text(encoding="utf-8")
    assert lesson.count("<math") >= 10


# ---- the numbers each page promises, against references that do not share the page's code path --------


def test_lab05_part3_shows_the_runners_report(built_site):
    # The hand trace from the document: x = [1, 2, -1], F(x) = [-x1, 2, 0], G(y) = [y2, -y2, 2 y1].
    text = shown(built_site.site, "labs/05-trace-residual-stream.html")
    x = [1, 2, -1]
    first_update = [-x[0], 2, 0]
    y = [a + b for a, b in zip(x, first_update)]
    second_update = [y[1], -y[1], 2 * y[0]]
    z = [a + b for a, b in zip(y, second_update)]
    assert (y, z) == ([0, 4, -1], [4, 0, -1])
    for name, vector in (("first_update", first_update), ("intermediate", y), ("second_update", second_update), ("final", z)):
        squares = sum(value * value for value in vector)
        assert f"{name} = [{', '.join(map(str, vector))}] shape (3, 1) norm sqrt({squares})" in text


def test_lab05_part4_shows_the_committed_captures_checks(built_site):
    text = shown(built_site.site, "labs/05-trace-residual-stream.html")
    checks = json.loads((CAPTURE / "observations.json").read_text())["checks"]
    identity = checks["identity"]
    assert f"{identity['max_abs_error']:.3g} (tolerance {identity['blocks'][-1]['tolerance']:.3g})" in text
    hooks = checks["hook_removal"]
    assert f"{hooks['handles_left_after_exit']} of {hooks['handles_registered']}" in text
    assert "Untrained baseline: one random-weight draw, not Pythia-14M" in text
    assert "synthetic specimen\u2019s committed capture" in text  # Quarto typesets the apostrophe
