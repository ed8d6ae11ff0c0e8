"""`residlab pins outdated`, `try-latest` and `write` against a package index on 127.0.0.1 (tests/fakeindex.py).

The index holds a newer release of a tiny library that still works (tinyanswer 1.1), and one that breaks a test
on purpose (tinyshape 2.0), plus pytest and what it needs, packed from this environment. A small project beside it
pins both (its requirements.txt and a lock), and its pyproject.toml holds its own try-latest plan: an environment
built with pip from the index, its tests run with pytest, a script standing in for `residlab sync`. The real command
runs on it, as a separate process under a pip that reads no configuration and reaches no other host.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

import fakeindex
from residlab.build import pins as pins_module
from residlab.build import try_latest
from residlab.pythia.lock import default_lock_path

ROOT = Path(__file__).resolve().parents[3]
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
RELEASES = {  # name -> version -> the module's source
    "tinyanswer": {version: "def answer():\n    return 42\n" for version in ("0.9", "1.0", "1.1")},
    "tinyshape": {"1.0": "def shape():\n    return (2, 3)\n", "2.0": "def shape():\n    return (3, 2)\n"},
}
PLAN = """
[tool.residlab.try-latest]
libraries = {libraries}
prepare = [["{{python}}", "-m", "venv", "--without-pip", ".venv"],
           ["{{python}}", "-m", "pip", "--python", "{{root}}/.venv/bin/python", "install", "-q", "--no-compile", "-r", "requirements.txt"]]
after-write = [["{{python}}", "{after_write}"]]

[[tool.residlab.try-latest.checks]]
name = "project's tests"
command = [".venv/bin/python", "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider", "tests"]
timeout-minutes = 5

[[tool.residlab.try-latest.checks]]
name = "render"
command = [".venv/bin/python", "render.py"]
timeout-minutes = 1
"""
# The project's stand-in for `residlab sync`: a file derived from the lock, which its tests check.
DERIVE = """import json, pathlib
lock = json.loads(pathlib.Path("residlab/locks/pythia-14m.lock.json").read_text())
pathlib.Path("derived.txt").write_text("".join(f"{n}=={v}\\n" for n, v in lock["libraries"].items() if n != "python"))
"""
# The project's stand-in for the site's render: the list of every number its pages show, here the versions it ran.
RENDER = """import json, pathlib
from importlib import metadata
versions = {name: metadata.version(name) for name in ("tinyanswer", "tinyshape")}
pages = [{"page": "index.qmd", "numbers": [{"id": name, "value": version} for name, version in versions.items()]}]
pathlib.Path("_site").mkdir(exist_ok=True)
pathlib.Path("_site/numbers.json").write_text(json.dumps({"pins": versions, "pages": pages}))
"""
PROJECT_TESTS = {
    "tests/test_libraries.py": """
        import tinyanswer, tinyshape

        def test_answer():
            assert tinyanswer.answer() == 42

        def test_shape():
            assert tinyshape.shape() == (2, 3)
        """,
    "tests/test_pins.py": """
        import json
        from importlib import metadata
        from pathlib import Path

        ROOT = Path(__file__).resolve().parent.parent

        def test_the_environment_holds_what_the_lock_pins_and_derived_txt_follows_it():
            libraries = json.loads((ROOT / "residlab/locks/pythia-14m.lock.json").read_text())["libraries"]
            pinned = {name: version for name, version in libraries.items() if name != "python"}
            assert {name: metadata.version(name) for name in pinned} == pinned
            assert (ROOT / "derived.txt").read_text() == "".join(f"{n}=={v}\\n" for n, v in pinned.items())
        """,
}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("index")
    served = fakeindex.PackageIndex(folder / "served")
    for name, versions in RELEASES.items():
        for version, source in versions.items():
            served.add(fakeindex.build_wheel(folder, name, version, {f"{name}/__init__.py": source}))
    for name in fakeindex.installed_with_requirements("pytest"):
        served.add(fakeindex.wheel_of_installed(folder, name))
    served.url = served.start()
    served.env = fakeindex.isolated_pip_env(folder, served.url)
    yield served
    served.stop()


def make_project(folder: Path, libraries: list[str] = ("tinyanswer", "tinyshape"), tests: dict = PROJECT_TESTS,
                 after_write: str = "derive.py") -> Path:
    """The small project, pinned at tinyanswer 1.0 and tinyshape 1.0, as a git work tree (nothing committed)."""
    lock = json.loads(default_lock_path().read_text(encoding="utf-8"))
    lock["libraries"] = {"python": PYTHON, "tinyanswer": "1.0", "tinyshape": "1.0"}
    lock["also_tested"] = {"tinyanswer": "0.9"}
    files = {
        "residlab/locks/pythia-14m.lock.json": json.dumps(lock, indent=2) + "\n",
        "requirements.txt": f"# the project's pins\ntinyanswer==1.0\ntinyshape==1.0  # the shape the tests expect\n"
                            f"pytest=={metadata.version('pytest')}\n",
        "pyproject.toml": PLAN.format(libraries=json.dumps(list(libraries)), after_write=after_write),
        "derive.py": DERIVE, "render.py": RENDER, ".gitignore": ".venv/\n_site/\n",
        "derive_only_the_old.py": "import pathlib, sys\nif 'tinyanswer==1.0' not in pathlib.Path('requirements.txt')"
                                  ".read_text():\n    sys.exit('derive: no rule for this tinyanswer')\n" + DERIVE,
        **{path: textwrap.dedent(source) for path, source in tests.items()},
    }  # fmt: skip
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    subprocess.run([sys.executable, "derive.py"], cwd=folder, check=True, timeout=60)
    subprocess.run(["git", "init", "-q", str(folder)], check=True, timeout=60)
    return folder


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and ".git" not in p.parts}


def pins(index, *arguments: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "residlab", "pins", *arguments], env=index.env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def one_line_error(completed: subprocess.CompletedProcess) -> str:
    assert completed.stderr.count("\n") == 1 and "Traceback" not in completed.stderr, completed.stderr
    return completed.stderr


# ------------------------------------------------------------------------------------------------------ outdated


def test_outdated_shows_each_pin_beside_the_newest_release_the_index_offers(index, tmp_path):
    root = make_project(tmp_path)
    completed = pins(index, "outdated", "--root", str(root))
    assert completed.returncode == 0, completed.stderr
    rows = [line.split(None, 4) for line in completed.stdout.splitlines()[1:-1]]
    assert rows == [
        ["tinyanswer", "1.0", "1.1", "behind", "requirements.txt, lock libraries"],
        ["tinyanswer", "0.9", "1.1", "behind", "lock also_tested"],
        ["tinyshape", "1.0", "2.0", "behind", "requirements.txt, lock libraries"],
        ["pytest", metadata.version("pytest"), metadata.version("pytest"), "newest", "requirements.txt"],
    ]
    assert completed.stdout.splitlines()[-1].startswith(f"3 of 4 pins differ from the newest release for Python {PYTHON}")
    assert {"/simple/tinyanswer/", "/simple/tinyshape/", "/simple/pytest/"} <= set(index.requests)


def test_outdated_says_when_the_index_cannot_be_reached(index, tmp_path):
    root = make_project(tmp_path)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    completed = pins(index, "outdated", "--root", str(root), "--index-url", f"http://127.0.0.1:{port}/simple/")
    assert completed.returncode == 3 and completed.stdout == ""
    assert "the package index could not be reached" in one_line_error(completed) and str(port) in completed.stderr


def test_an_index_that_never_answers_is_given_up_after_the_timeout(index, tmp_path):
    root = make_project(tmp_path)
    with socket.socket() as silent:  # accepts connections (the kernel does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        completed = pins(index, "try-latest", "--root", str(root), "--timeout", "1",
                         "--index-url", f"http://127.0.0.1:{silent.getsockname()[1]}/simple/", timeout=120)  # fmt: skip
    assert completed.returncode == 3 and completed.stdout == ""
    assert "could not be reached" in one_line_error(completed) and "timed out" in completed.stderr
    assert snapshot(root) == snapshot(make_project(tmp_path / "fresh"))


# ---------------------------------------------------------------------------------------------------- try-latest


@pytest.fixture(scope="module")
def trial(index, tmp_path_factory):
    """One `try-latest --write` run on the project: tinyanswer 1.1 works, tinyshape 2.0 breaks test_shape."""
    root = make_project(tmp_path_factory.mktemp("trial") / "project")
    before = snapshot(root)
    report = root.parent / "report.json"
    completed = pins(index, "try-latest", "--root", str(root), "--write", "--report", str(report),
                     "--summary", str(root.parent / "summary.md"), "--numbers-to", str(root.parent / "numbers"))  # fmt: skip
    return root, before, completed, report


def test_try_latest_names_what_works_and_the_test_a_release_breaks(trial):
    root, before, completed, report = trial
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.splitlines() == [
        "tinyanswer 1.0 -> 1.1: works",
        "tinyshape 1.0 -> 2.0: breaks tests/test_libraries.py::test_shape in the project's tests: assert (3, 2) == (2, 3)",
        "Re-pin tinyanswer 1.1",
    ]
    data = json.loads(report.read_text())
    assert data["repin"] == {"tinyanswer": "1.1"} and data["breaks"] == ["tinyshape"]
    assert data["headline"] == "try-latest: tinyshape 2.0 breaks tests/test_libraries.py::test_shape"
    assert data["summary"] == (root.parent / "summary.md").read_text()
    assert "| tinyshape | 1.0 | 2.0 | breaks `tests/test_libraries.py::test_shape` in the project's tests" in data["summary"]


def test_try_latest_traces_a_failure_to_one_library(trial, index):
    completed = trial[2]
    attempts = [line.removeprefix("try-latest: ") for line in completed.stderr.splitlines()
                if line.startswith("try-latest: ") and not line.startswith("try-latest:  ")]  # fmt: skip
    assert attempts == [
        "every newer release together: tinyanswer 1.1, tinyshape 2.0",
        "the pins as they are, to see whether the failure is a newer release's",
        "tinyanswer 1.1 alone",  # then tinyshape 2.0 on top of it: the combination already tried together
    ]
    assert {"/files/tinyanswer-1.1-py3-none-any.whl", "/files/tinyshape-2.0-py3-none-any.whl"} <= set(index.requests)


def test_try_latest_keeps_the_numbers_of_both_builds_and_release_diff_names_what_the_re_pin_moves(trial):
    numbers = trial[0].parent / "numbers"
    pinned, kept = numbers / try_latest.PINNED, numbers / try_latest.REPINNED
    # the pins as they are (the attempt that cleared tinyshape's failure of blame), and the last attempt that passed
    # with a newer release in it (tinyanswer 1.1 alone): the build the re-pin gives
    assert json.loads((pinned / "numbers.json").read_text())["pins"] == {"tinyanswer": "1.0", "tinyshape": "1.0"}
    assert json.loads((kept / "numbers.json").read_text())["pins"] == {"tinyanswer": "1.1", "tinyshape": "1.0"}
    compared = subprocess.run([sys.executable, "-S", "-m", "residlab", "release", "diff", str(pinned), str(kept)],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert compared.returncode == 1, compared.stderr  # as the workflow runs it: the standard library alone
    assert compared.stdout.splitlines() == [f"pins that differ ({pinned} -> {kept}): 1", "  tinyanswer: 1.0 -> 1.1",
                                            "index.qmd", "  changed  tinyanswer: 1.0 -> 1.1"]


def test_try_latest_write_changes_only_the_pins_of_what_worked(trial):
    root, before, _, _ = trial
    after = snapshot(root)  # no environment, no tinyshape 2.0: the trial ran in its copy
    assert {path for path in after if after[path] != before.get(path)} == {
        "requirements.txt", "residlab/locks/pythia-14m.lock.json", "derived.txt"}
    assert "tinyanswer==1.1\ntinyshape==1.0  # the shape the tests expect\n" in after["requirements.txt"].decode()
    lock = json.loads(after["residlab/locks/pythia-14m.lock.json"])
    assert lock["libraries"] == {"python": PYTHON, "tinyanswer": "1.1", "tinyshape": "1.0"}
    assert lock["also_tested"] == {"tinyanswer": "0.9"}
    assert after["derived.txt"] == b"tinyanswer==1.1\ntinyshape==1.0\n"  # after-write ran in the project itself


def test_write_from_the_report_pins_what_worked_as_try_latest_write_does(trial, index, tmp_path):
    written_by_trial = snapshot(trial[0])
    root = make_project(tmp_path)
    completed = pins(index, "write", "--root", str(root), "--from-report", str(trial[3]))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "Re-pin tinyanswer 1.1\n"
    assert snapshot(root) == written_by_trial


def test_nothing_is_blamed_when_the_pins_fail_as_they_are(index, tmp_path):
    failing = {**PROJECT_TESTS, "tests/test_own.py": "def test_own_bug():\n    assert 1 + 1 == 3\n"}
    root = make_project(tmp_path, libraries=["tinyanswer"], tests=failing)
    before = snapshot(root)
    completed = pins(index, "try-latest", "--root", str(root))
    assert completed.returncode == 3 and completed.stdout == ""
    message = completed.stderr.splitlines()[-1]
    assert message.startswith("residlab pins try-latest: error: the pins as they are fail too, so no newer release")
    assert "tests/test_own.py::test_own_bug" in message
    assert snapshot(root) == before  # two attempts, each writing pins and building an environment, all in the copy


def test_a_re_pin_whose_derived_files_cannot_be_written_is_put_back(index, tmp_path):
    root = make_project(tmp_path, after_write="derive_only_the_old.py")
    before = snapshot(root)
    completed = pins(index, "write", "--root", str(root), "tinyanswer==1.1")
    assert completed.returncode == 3 and completed.stdout == ""
    message = one_line_error(completed)
    assert "derive: no rule for this tinyanswer" in message and "the derived files are as they were" in message
    assert snapshot(root) == before


@pytest.mark.parametrize("arguments, expected", [
    (["write", "tinyanswer"], "tinyanswer: each pin is NAME==VERSION"),
    (["write", "tinyanswer==1.1+cpu"], "tinyanswer==1.1+cpu: not a release version requirements.txt can pin"),
    (["write", "numpy==2.0"], "numpy: the lock records no such library under `libraries`"),
    (["write", "--from-report", "requirements.txt"], "not a try-latest report"),
    (["try-latest", "--library", "numpy"], "--library numpy: the plan's libraries are tinyanswer, tinyshape"),
])  # fmt: skip
def test_bad_input_is_one_line_and_changes_nothing(index, tmp_path, arguments, expected):
    root = make_project(tmp_path)
    before = snapshot(root)
    arguments = [str(root / a) if a == "requirements.txt" else a for a in arguments]
    completed = pins(index, *arguments, "--root", str(root))
    assert completed.returncode == 1 and expected in one_line_error(completed)
    assert snapshot(root) == before


@pytest.mark.parametrize("table, expected", [
    (None, "no [tool.residlab.try-latest] table"),
    ({"libraries": ["x"]}, "needs libraries and checks"),
    ({"libraries": ["x"], "checks": [], "prepare": []}, "checks is empty"),
    ({"libraries": ["x"], "checks": [{"name": "t", "command": "pytest"}]}, "checks[0].command must be a command"),
    ({"libraries": ["x"], "checks": [{"name": "t", "command": ["pytest"], "timeout-minutes": 0}]}, "positive number"),
    ({"libraries": ["x"], "checks": [{"name": "t", "command": ["t"]}], "extra": 1}, "unknown: extra"),
])  # fmt: skip
def test_a_plan_is_refused_with_the_reason(table, expected):
    with pytest.raises(try_latest.TrialError) as refused:
        try_latest.parse_plan(table, "pyproject.toml")
    assert expected in str(refused.value)


def test_the_projects_own_plan_tries_the_runtime_pins_with_paths_and_targets_that_exist():
    root = Path(__file__).resolve().parents[3]
    plan = try_latest.load_plan(root)
    assert sorted(plan.libraries) == sorted(pins_module.RUNTIME_LIBRARIES)
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    (prepare,) = plan.prepare
    assert prepare[0] == "make" and "venv" in prepare and re.search(r"^venv:", makefile, re.M)
    assert ".venv-runner/.installed" in prepare and "RUNNER_VENV := .venv-runner" in makefile
    assert "pyodide" in prepare and re.search(r"^pyodide:", makefile, re.M)  # the render check serves Pyodide
    assert "editor" in prepare and re.search(r"^editor:", makefile, re.M)  # and bundles the code editor
    tests = [part for check in plan.checks for part in check.command if part.startswith("tests/")]
    assert {"tests/unit/capture", "tests/unit/audit", "tests/runners"} <= set(tests)
    assert all((root / path).is_dir() for path in tests), tests
    runner_tests = next(check for check in plan.checks if "tests/runners" in check.command)
    assert runner_tests.env == {"RESIDLAB_RUNNER_PYTHON": "{root}/.venv-runner/bin/python"}
    assert [".venv/bin/residlab", "site", "render"] in [list(check.command) for check in plan.checks]
    assert plan.after_write == (("{python}", "-m", "residlab", "sync"),)
