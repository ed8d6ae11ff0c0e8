"""residlab.build.release on small synthetic builds: a release is a copy with its pins and a sha256 manifest, never
overwritten; verify refuses a tampered, missing or added file; diff names the pins and exactly the numbers that
differ, page by page; bad input is one line."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from residlab.build import release

ROOT = Path(__file__).resolve().parents[3]


def build(folder: Path, torch: str, numbers: dict[str, dict[str, str]]) -> Path:
    (folder / "labs").mkdir(parents=True)
    (folder / "index.html").write_text("<p>home</p>", encoding="utf-8")
    (folder / "labs" / "a.html").write_text("<p>lab</p>", encoding="utf-8")
    pages = [{"page": page, "numbers": [{"id": i, "value": v} for i, v in values.items()]} for page, values in numbers.items()]
    listed = {"schema": 1, "pins": {"requirements.txt torch": torch, "lock revision": "abc"}, "pages": pages}
    (folder / "numbers.json").write_text(json.dumps(listed), encoding="utf-8")
    return folder


@pytest.fixture
def root(tmp_path) -> Path:
    project = tmp_path / "project"
    (project / "residlab" / "locks").mkdir(parents=True)
    shutil.copyfile(ROOT / "requirements.txt", project / "requirements.txt")
    shutil.copyfile(ROOT / "residlab" / "locks" / "pythia-14m.lock.json", project / "residlab" / "locks" / "pythia-14m.lock.json")
    build(project / "_site", "2.13.0", {"labs/a.qmd": {"n": "0.93", "cell:t / 0 / norm": "2.25", "gone": "4"}})
    return project


def test_a_release_is_a_verified_copy_never_overwritten(root, capsys):
    assert release.main(["--root", str(root), "2027-spring"]) == 0
    folder = root / "releases" / "2027-spring"
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["term"] == "2027-spring" and manifest["pins"]["requirements.txt torch"] == "2.13.0"
    assert set(manifest["files"]) == {"index.html", "labs/a.html", "numbers.json", "pins/requirements.txt",
                                      "pins/pythia-14m.lock.json"}  # fmt: skip
    assert (folder / "labs" / "a.html").read_text(encoding="utf-8") == "<p>lab</p>"
    assert release.main(["--root", str(root), "verify", "2027-spring"]) == 0
    assert "5 files match the manifest" in capsys.readouterr().out
    (root / "_site" / "index.html").write_text("<p>rebuilt</p>", encoding="utf-8")
    assert release.main(["--root", str(root), "2027-spring"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "release 2027-spring exists" in error and "never rebuilt or overwritten" in error
    assert (folder / "index.html").read_text(encoding="utf-8") == "<p>home</p>"


@pytest.mark.parametrize("tamper, named", [
    (lambda f: (f / "labs" / "a.html").write_text("<p>lab!</p>", encoding="utf-8"), "labs/a.html differs"),
    (lambda f: (f / "index.html").unlink(), "index.html is missing"),
    (lambda f: (f / "extra.html").write_text("", encoding="utf-8"), "extra.html is not in the manifest"),
])
def test_verify_refuses_a_tampered_release_naming_the_file(root, capsys, tamper, named):
    release.make_release(root, root / "_site", "2027-fall")
    tamper(root / "releases" / "2027-fall")
    assert release.main(["--root", str(root), "verify", "2027-fall"]) == 2
    error = capsys.readouterr().err
    assert named in error and error.count("\n") == 1


@pytest.mark.parametrize("argv, message", [
    (["2027-sprung"], "'2027-sprung' is not a release name"),
    (["../2027-spring"], "is not a release name"),
    (["verify", "2030-winter"], "no release 2030-winter"),
    (["diff", "latest", "nowhere"], "'nowhere' is neither 'latest'"),
])
def test_bad_input_is_one_line(root, capsys, argv, message):
    assert release.main(["--root", str(root), *argv]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1 and "Traceback" not in error


def test_a_folder_that_is_no_build_is_refused(root, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert release.main(["--root", str(root), "--site", str(tmp_path / "empty"), "2027-summer"]) == 2
    assert "holds no numbers.json" in capsys.readouterr().err
    assert not (root / "releases" / "2027-summer").exists()


def test_diff_names_the_pins_and_exactly_the_numbers_that_differ(root, tmp_path, capsys):
    release.make_release(root, root / "_site", "2027-spring")
    new = build(tmp_path / "new", "2.14.0", {"labs/a.qmd": {"n": "0.91", "cell:t / 0 / norm": "2.25", "added": "7"},
                                             "index.qmd": {"n": "3"}})  # fmt: skip
    assert release.main(["--root", str(root), "diff", "2027-spring", str(new)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == ["pins that differ (2027-spring -> " + str(new) + "): 1", "  requirements.txt torch: 2.13.0 -> 2.14.0",
                   "index.qmd", "  appeared n: 3",
                   "labs/a.qmd", "  changed  n: 0.93 -> 0.91", "  appeared added: 7", "  gone     gone: 4"]
    assert release.main(["--root", str(root), "diff", "2027-spring", "latest"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "numbers: the same on every page"


def test_the_navbar_menu_lists_every_release_newest_first(root):
    assert release.releases_yaml(root).endswith("website: {}\n")  # no release: no menu, nothing copied
    for term in ("2026-fall", "2027-spring", "2026-spring", "2026-spring-b"):
        (root / "releases" / term).mkdir(parents=True)
        (root / "releases" / term / "manifest.json").write_text("{}", encoding="utf-8")
    (root / "releases" / "2027-fall").mkdir()  # no manifest: not a release
    (root / "releases" / "notes").mkdir()
    text = release.releases_yaml(root)
    assert '"releases/**"' in text and 'text: "Latest build"\n            href: "index.qmd"' in text
    assert re.findall(r'href: "releases/([^/]+)/index.html"', text) == ["2027-spring", "2026-fall", "2026-spring-b", "2026-spring"]


def test_verify_all_checks_every_release(root, capsys):
    assert release.main(["--root", str(root), "verify", "--all"]) == 0  # none yet: nothing to check
    release.make_release(root, root / "_site", "2026-fall")
    release.make_release(root, root / "_site", "2027-spring")
    (root / "releases" / "2026-fall" / "index.html").write_text("<p>edited</p>", encoding="utf-8")
    assert release.main(["--root", str(root), "verify", "--all"]) == 2
    captured = capsys.readouterr()
    assert "release 2027-spring: 5 files match" in captured.out and "release 2026-fall: index.html differs" in captured.err


def test_a_release_is_listed_in_the_menu_it_writes(root, capsys):
    assert release.main(["--root", str(root), "2027-winter"]) == 0
    assert 'href: "releases/2027-winter/index.html"' in (root / release.RELEASES_FILE).read_text(encoding="utf-8")
    assert "_releases.yml lists it in the navbar" in capsys.readouterr().out
