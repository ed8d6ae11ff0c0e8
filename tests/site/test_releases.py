"""Course releases on the site suite's one render (``built_site``): the build's numbers.json lists every page and the
numbers it shows, a release of the build verifies and refuses a tampered file, and after one page of a scratch copy
is rendered again with another seed, ``residlab release diff`` names exactly the numbers that changed; in Chromium,
that page's Releases menu (Quarto's navbar menu, from the release's manifest) reaches the latest build and the
release, and a page of the release names its term and links to the same page in the latest build.

The second build renders one small page (the glossary's Normalisation, whose cell draws its vector from a seed) of a
copy of the rendered project, not a second site."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml

from residlab.build import numbers_list, release, site

ROOT = Path(__file__).resolve().parents[2]
PAGE = "glossary/normalisation.qmd"
SEED = "torch.Generator().manual_seed(0)"


def listed(folder: Path) -> dict[str, dict[str, dict]]:
    data = json.loads((folder / numbers_list.NUMBERS).read_text(encoding="utf-8"))
    return {entry["page"]: {n["id"]: n for n in entry["numbers"]} for entry in data["pages"]}


def test_the_build_lists_every_page_and_the_numbers_it_shows(built_site):
    pages = listed(built_site.site)
    sources = {path.relative_to(built_site.project).as_posix() for path in site.site_pages(built_site.project)}
    assert set(pages) == {page for page in sources if not Path(page).name.startswith("_")}
    # An inline result is listed under its expression, with the value the page shows, classed by the page.
    width = pages[PAGE]["d"]
    set_in_cell = re.search(r"^d = (\d+)$", (built_site.project / PAGE).read_text(encoding="utf-8"), re.MULTILINE)
    assert (width["origin"], width["kind"], width["value"]) == ("inline", "observed", set_in_cell.group(1))
    # Lab 05's toy is exact (the page's declaration); Part 4 and its subsections are an observation (its heading's).
    kinds = {}
    for n in pages["labs/05-trace-residual-stream.qmd"].values():
        kinds.setdefault(n["section"], set()).add(n["kind"])
    assert kinds["the-capture-on-this-page"] == {"observed"} and kinds["sec-part4"] == {"observed"}
    assert kinds["part-1-predict-a-fresh-residual-sequence"] == kinds["checkpoints-and-solutions"] == {"analytic"}
    for path in built_site.site.rglob("*.html"):
        page = path.read_text(encoding="utf-8", errors="replace")
        assert 'class="rl-number"' not in page and "data-number-kind" not in page, path  # read, never written


@pytest.fixture(scope="module")
def scratch(built_site, tmp_path_factory) -> tuple[Path, Path]:
    """A release of the built site (2027-spring) beside a second build: one page rendered again with another seed."""
    folder = tmp_path_factory.mktemp("releases")
    project = folder / "project"
    shutil.copytree(built_site.project, project, symlinks=True, ignore=shutil.ignore_patterns("node_modules", "_site", ".git", release.RELEASES))
    for modules in built_site.project.glob("assets/*/node_modules"):
        (project / modules.relative_to(built_site.project)).symlink_to(modules, target_is_directory=True)
    shutil.copytree(built_site.site, folder / "_site", symlinks=True)
    release.make_release(project, built_site.site, "2027-spring")
    (project / release.RELEASES_FILE).write_text(release.releases_yaml(project), encoding="utf-8")  # as the command does
    source = (project / PAGE).read_text(encoding="utf-8")
    assert source.count(SEED) == 1
    (project / PAGE).write_text(source.replace(SEED, SEED.replace("(0)", "(1)")), encoding="utf-8")
    site.render(project, folder / "_site", [project / PAGE], echo=lambda line: None)
    return project, folder / "_site"


def test_a_release_of_the_build_verifies_and_a_tampered_file_is_refused(scratch):
    project, _ = scratch
    folder = project / "releases" / "2027-spring"
    assert release.verify_release(project, "2027-spring") == len(release.site_files(folder)) - 1  # all but the manifest
    with pytest.raises(release.ReleaseError, match="release 2027-spring exists"):
        release.make_release(project, project / "releases" / "2027-spring", "2027-spring")
    page = folder / numbers_list.page_html(PAGE)
    page.write_bytes(page.read_bytes().replace(b"</body>", b"<p>edited</p></body>"))
    with pytest.raises(release.ReleaseError, match=f"{numbers_list.page_html(PAGE)} differs from the manifest"):
        release.verify_release(project, "2027-spring")


def test_the_diff_names_exactly_the_numbers_the_seed_changed(scratch, capsys):
    project, second = scratch
    old, new = listed(project / "releases" / "2027-spring"), listed(second)
    expected = {(page, i) for page in old for i in old[page] if i in new.get(page, {})
                and old[page][i]["value"] != new[page][i]["value"]}  # fmt: skip
    assert expected and {page for page, _ in expected} == {PAGE}  # the seed moves this page's numbers, no other's
    assert set(old) == set(new) and all(set(old[p]) == set(new[p]) for p in old if p != PAGE)
    assert release.main(["--root", str(project), "diff", "2027-spring", str(second)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(": none")  # same pins
    # "  changed  ID: OLD -> NEW", where an id may hold ": " itself and a value never does
    changed = {line.removeprefix("  changed  ").rsplit(": ", 1)[0] for line in out if line.startswith("  changed  ")}
    assert {(PAGE, i) for i in changed} == expected
    assert [line for line in out[1:] if not line.startswith("  ")] == [PAGE]  # appeared or gone: this page only
    for page, i in expected:
        assert f"  changed  {i}: {old[page][i]['value']} -> {new[page][i]['value']}" in out


def test_a_release_page_names_the_latest_builds_page_as_canonical_in_its_html(built_site, scratch):
    """Quarto's canonical-url: the link is in the HTML a crawler reads (no script), site-url plus the page's path, and
    the release's copy keeps it."""

    _, second = scratch
    site_url = yaml.safe_load((ROOT / "_quarto.yml").read_text(encoding="utf-8"))["website"]["site-url"].rstrip("/")
    wanted = f'<link rel="canonical" href="{site_url}/{numbers_list.page_html(PAGE)}">'
    for page in (second / numbers_list.page_html(PAGE), second / release.RELEASES / "2027-spring" / numbers_list.page_html(PAGE)):
        assert wanted in page.read_text(encoding="utf-8"), page
    for page in built_site.site.glob("labs/*.html"):
        assert f'<link rel="canonical" href="{site_url}/labs/{page.name}">' in page.read_text(encoding="utf-8"), page


def test_a_release_pages_search_reads_the_releases_own_index(scratch):
    """Quarto's search finds its index through the page's offset (a relative path to its site's root): a page of a
    release reaches the release's own search.json, which lists the release's pages only, never the latest build's."""
    import posixpath

    _, second = scratch
    root = second / release.RELEASES / "2027-spring"
    page = root / numbers_list.page_html(PAGE)
    offset = re.search(r'<meta name="quarto:offset" content="([^"]*)">', page.read_text(encoding="utf-8"))[1]
    index = Path(posixpath.normpath((page.parent / offset / "search.json").as_posix()))
    assert index == root / "search.json" and index.is_file()
    hrefs = {entry["href"] for entry in json.loads(index.read_text(encoding="utf-8"))}
    assert hrefs and not any(href.startswith(("/", "http", "..")) for href in hrefs)  # relative to the release's root


def test_the_selector_reaches_every_build_and_a_release_page_names_its_term(scratch, served, browser):
    _, second = scratch
    base = served(second)
    menu = '[aria-labelledby="nav-menu-releases"] a'
    browser.get(f"{base}/{numbers_list.page_html(PAGE)}")
    entries = browser.execute_script(f"return [...document.querySelectorAll('{menu}')].map(a => [a.textContent.trim(), a.href])")
    assert [text for text, _ in entries] == ["Latest build", "2027-spring"]
    # Quarto writes a link to a folder's index.html as the folder
    assert [href.removesuffix("index.html") for _, href in entries] == [f"{base}/", f"{base}/releases/2027-spring/"]
    for _, href in entries:
        browser.get(href)
        assert browser.execute_script("return document.querySelector('main h1, main .title') !== null"), href
    browser.get(f"{base}/releases/2027-spring/{numbers_list.page_html(PAGE)}")
    note = browser.execute_script("""
        const note = document.querySelector('.rl-release-note');
        return note && [note.textContent, note.querySelector('a').href];""")
    assert note is not None and "the 2027-spring release" in note[0]
    latest = f"{base}/{numbers_list.page_html(PAGE)}"
    deadline = time.monotonic() + 10
    while "this page in the latest build" not in note[0] and time.monotonic() < deadline:  # after its HEAD request
        time.sleep(0.2)
        note = browser.execute_script("const n = document.querySelector('.rl-release-note'); return [n.textContent, n.querySelector('a').href]")
    assert note[1] == latest and "this page in the latest build" in note[0]
    browser.get(f"{base}/{numbers_list.page_html(PAGE)}")
    assert browser.execute_script("return document.querySelector('.rl-release-note')") is None  # the latest build's page
