"""The registry of page families (residlab/course/pages.py) against the site it describes: every page it names
exists and every page the site renders is in it, every room and runner it names exists, every script and download
on disk belongs to a family, the home page's learning path follows its order, and the documents name no runner it
lacks. Read from the sources: no render."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from residlab.build import sync
from residlab.build.site_check import load_config, site_pages
from residlab import course
from residlab.course import pages

ROOT = Path(__file__).resolve().parents[3]
SHARED_ROOMS = {"models", "ui"}


def test_the_registry_names_every_page_the_site_renders_once():
    named = pages.pages()
    assert len(named) == len(set(named))
    assert set(named) == {path.relative_to(ROOT).as_posix() for path in site_pages(ROOT)}
    for page in named:
        assert pages.page_title(page)  # each page has its own title; the registry types none
        assert pages.family_of(page).pages[0] in named


def test_every_room_is_a_family_and_every_family_room_exists_with_its_manual():
    rooms = {path.name for path in (ROOT / "residlab/course").iterdir() if (path / "__init__.py").is_file()}
    named = [family.room for family in pages.FAMILIES if family.room]
    assert len(named) == len(set(named))
    assert set(named) == rooms - SHARED_ROOMS


def test_every_runner_module_exists_and_the_downloads_folder_holds_only_the_registry_s_files():
    for runner in pages.runners():
        for module in runner.modules:
            assert (ROOT / "residlab" / module).is_file(), f"{runner.filename}: {module}"
    on_disk = {path.relative_to(ROOT).as_posix() for path in (ROOT / pages.RUNNER_DIR).iterdir()}
    assert on_disk == set(pages.served_downloads())


def test_every_explorer_script_belongs_to_a_family_that_loads_it():
    claimed = {script for family in pages.FAMILIES for script in family.explorers}
    assert claimed == {path.name for path in (ROOT / pages.EXPLORER_DIR).glob("*.js")}
    for family in pages.FAMILIES:
        # the page, its partials, or a module it imports through the front door names each script it loads
        texts = [(ROOT / page).read_text(encoding="utf-8") for page in family.pages]
        texts += [path.read_text(encoding="utf-8") for path in (ROOT / family.page).parent.glob("_*.qmd")]
        names = {name.strip() for text in texts for group in re.findall(r"from residlab\.course import (\([^)]*\)|[^\n]*)", text)
                 for name in group.strip("()").split(",")}  # fmt: skip
        modules = {course._INTERFACE[name][0] for name in names if name in course._INTERFACE}
        texts += [(ROOT / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8") for module in modules
                  if (ROOT / (module.replace(".", "/") + ".py")).is_file()]  # fmt: skip
        for script in family.explorers:
            assert any(script in text for text in texts), f"{family.page} never loads {script}"


def test_the_generated_metadata_drives_the_navbar_the_sidebar_and_the_resources():
    config = load_config(ROOT)
    metadata = yaml.safe_load((ROOT / pages.METADATA_FILE).read_text(encoding="utf-8"))
    assert config["website"]["sidebar"]["contents"] == pages.sidebar() == metadata["website"]["sidebar"]["contents"]
    assert config["website"]["navbar"]["left"] == pages.navbar()
    assert set(pages.resources()) <= set(config["project"]["resources"])
    quarto = yaml.safe_load((ROOT / "_quarto.yml").read_text(encoding="utf-8"))
    assert pages.METADATA_FILE in quarto["metadata-files"] and "sidebar" not in quarto["website"]


def test_the_learning_path_follows_path_step_and_links_each_page():
    steps = pages.learning_path().strip().splitlines()
    on_path = sorted((family for family in pages.FAMILIES if family.path_step), key=lambda family: family.path_step)
    assert [re.match(r"(\d+)\. \*\*[^\[]+\[[^\]]+\]\(([^)]+)\)", step).groups() for step in steps] == [
        (str(number), family.page) for number, family in enumerate(on_path, 1)]
    assert len({family.path_step for family in on_path}) == len(on_path)


def test_the_downloads_table_lists_every_runner_with_what_it_does_and_needs():
    rows = pages.downloads_table().strip().splitlines()[2:]
    assert [re.match(r"\| \[([^\]]+)\]", row)[1] for row in rows] == [runner.filename for runner in pages.runners()]
    assert all(runner.summary and runner.needs for runner in pages.runners())


def test_the_documents_name_no_runner_the_registry_lacks():
    runner_names = {runner.filename for runner in pages.runners()}
    modules = {path.name for folder in ("residlab", "tests", "benchmarks", "assets/site") for path in (ROOT / folder).rglob("*.py")}
    for document in ("README.md", "docs/contributing.qmd", "tests/README.md"):
        text = (ROOT / document).read_text(encoding="utf-8")
        for name in set(re.findall(r"\b[a-z][a-z0-9_]*\.py\b", text)):
            assert name in runner_names or name in modules, f"{document} names {name}, which is no runner or module"


def test_the_readme_and_the_pages_hold_their_generated_blocks():
    for where in sync.GENERATED_BLOCKS:
        text = (ROOT / where).read_text(encoding="utf-8")
        assert sync.with_generated_blocks(text, where) == text, where  # residlab sync --check says the same
    with pytest.raises(ValueError, match="index.qmd must hold the lines <!-- the learning path"):
        sync.with_generated_blocks("no markers", "index.qmd")
    sources = re.findall(r"^\| [^|]+ \| `([^`]+)` \|", pages.readme_table(), flags=re.M)
    assert len(sources) == len(pages.FAMILIES) - 1 and all((ROOT / source).exists() for source in sources)
