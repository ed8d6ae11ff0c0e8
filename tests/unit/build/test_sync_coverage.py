"""`residlab sync` covers every derived file: a runner, pin file or generated page input left out of it fails
here, not only one that drifts.

The runners are the registry's (``residlab/course/pages.py``); the other derived files are named here, each with
what it is for, and the downloads folder on disk is checked against both.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from residlab.build import release
from residlab.build import runners
from residlab.build import sync
from residlab.course import pages

ROOT = Path(__file__).resolve().parents[3]

EXPECTED_DERIVED = {
    *(runner.path for runner in pages.runners()),  # the downloads
    pages.RUNNER_REQUIREMENTS, pages.TORCH_REQUIREMENTS,  # what learners install
    f"{pages.RUNNER_DIR}/{pages.TOY_SKELETON[0]}",  # Lab 05 Part 3's skeleton, the editor's starting point
    "_variables.yml",  # what the pages show through {{< var >}}
    pages.METADATA_FILE,  # the navbar, sidebar and resources, from the registry
    release.RELEASES_FILE,  # the navbar's Releases menu, from the course releases' manifests
    "tests/compat-requirements.txt",  # the second test environment
}


def relative(paths) -> set[str]:
    return {path.relative_to(ROOT).as_posix() for path in paths}


def test_sync_derives_exactly_the_expected_files():
    # and, where they exist (the repository's; not a bare site), the hand-written files' generated blocks: the
    # README's table of pages, the home page's path and downloads, the Instructors page's table of pins
    assert relative(sync.derived_files(ROOT)) == EXPECTED_DERIVED | {"README.md", "index.qmd", "instructors.qmd"}
    assert set(sync.GENERATED_BLOCKS) == {"README.md", "index.qmd", "instructors.qmd"}


def test_every_published_runner_is_built_by_sync():
    assert runners.RUNNERS == pages.runners() and len({runner.filename for runner in runners.RUNNERS}) == len(runners.RUNNERS)
    # Nothing in the downloads folder is hand-made: every file there is one sync writes.
    on_disk = {path.relative_to(ROOT).as_posix() for path in (ROOT / "assets" / "labs").iterdir()}
    assert on_disk == {name for name in EXPECTED_DERIVED if name.startswith("assets/labs/")}


def test_sync_into_an_empty_site_writes_every_derived_file(tmp_path):
    # A bare site root: only what sync reads. Running the real command must create every expected file,
    # each byte for byte what the repository holds.
    shutil.copyfile(ROOT / "_quarto.yml", tmp_path / "_quarto.yml")
    shutil.copyfile(ROOT / "requirements.txt", tmp_path / "requirements.txt")
    completed = subprocess.run(
        [sys.executable, "-m", "residlab", "sync", "--root", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    written = {path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*") if path.is_file()}
    assert written - {"_quarto.yml", "requirements.txt"} == EXPECTED_DERIVED
    for name in EXPECTED_DERIVED:
        assert (tmp_path / name).read_bytes() == (ROOT / name).read_bytes(), name
        assert f"wrote {name}" in completed.stdout


def test_check_names_each_missing_derived_file(tmp_path):
    shutil.copyfile(ROOT / "_quarto.yml", tmp_path / "_quarto.yml")
    shutil.copyfile(ROOT / "requirements.txt", tmp_path / "requirements.txt")
    completed = subprocess.run(
        [sys.executable, "-m", "residlab", "sync", "--check", "--root", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 1
    for name in EXPECTED_DERIVED:
        assert f"{name} is missing" in completed.stderr
