"""The Makefile's environments, read from what `make -n` would run on a fresh clone (no environment built yet).

Every environment installs torch first, with its own file's pin, from PyTorch's CPU index unless TORCH_INDEX
says otherwise (PyPI's Linux wheel is the CUDA build, several GB); then the rest of its requirements file.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
ENVIRONMENTS = {".venv": "requirements.txt", ".venv-compat": "tests/compat-requirements.txt",
                ".venv-runner": "assets/labs/residual-requirements.txt",
                ".venv-peers": "benchmarks/peer-requirements.txt"}  # fmt: skip
# What learners install (the page-commands test's wheelhouse is filled from these).
LEARNER_REQUIREMENTS = ("assets/labs/torch-requirements.txt", "assets/labs/residual-requirements.txt")
LIGHTHOUSE = "tests/site/lighthouse"
PYODIDE = "assets/pyodide"  # Lab 05 Part 3's interpreter, served by the site (residlab/build/pyodide_files.py)
EDITOR = "assets/editor"  # Lab 05 Part 3's code editor, bundled into the site (residlab/build/editor_bundle.py)
ONNX_RUNTIME = "assets/onnx-runtime"  # Lab 05 Part 4's model runtime, served by the site (residlab/build/onnx_files.py)


def make_dry_run(folder: Path, *arguments: str, target: str = "test") -> list[str]:
    """`make -n test` (or another target) in a copy of the files the Makefile reads, so no environment exists yet."""
    if shutil.which("make") is None:
        pytest.fail("make is not on PATH: the README's two commands need it")
    for name in ("Makefile", "pyproject.toml", *ENVIRONMENTS.values(), *LEARNER_REQUIREMENTS, f"{LIGHTHOUSE}/package.json",
                 f"{LIGHTHOUSE}/package-lock.json", f"{PYODIDE}/package.json", f"{PYODIDE}/package-lock.json",
                 f"{EDITOR}/package.json", f"{EDITOR}/package-lock.json", f"{ONNX_RUNTIME}/package.json",
                 f"{ONNX_RUNTIME}/package-lock.json"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, folder / name)
    # As on a fresh shell: when the suite itself runs under `make test TORCH_INDEX=` (as CI runs it), make passes
    # that override down through MAKEFLAGS (and the variable itself), which would answer for the Makefile here.
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "TORCH_INDEX")}
    completed = subprocess.run(["make", "-n", target, *arguments], cwd=folder, env=environment, capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.splitlines()


BESIDE = "nice -n 10 "  # the environments of the suites that run beside the long ones are built at their priority


def pip_lines(lines: list[str], environment: str) -> list[str]:
    return [line.removeprefix(BESIDE) for line in lines
            if line.removeprefix(BESIDE).startswith(f"{environment}/bin/python -m pip install")]  # fmt: skip


def test_the_environments_of_the_suites_beside_are_built_at_their_lower_priority(tmp_path):
    lines = make_dry_run(tmp_path)
    for environment in ENVIRONMENTS:
        installs = [line for line in lines if f"{environment}/bin/python -m pip install" in line]
        beside = environment in (".venv-compat", ".venv-peers")
        assert len(installs) == 2 and all(line.startswith(BESIDE) == beside for line in installs), installs


def test_every_environment_installs_torch_first_from_the_cpu_index(tmp_path):
    lines = make_dry_run(tmp_path)
    for environment, requirements in ENVIRONMENTS.items():
        torch_line, rest_line = pip_lines(lines, environment)
        assert f"--index-url {CPU_INDEX} " in torch_line
        assert f"grep -E '^torch==' {requirements}" in torch_line
        assert rest_line.endswith(f"-r {requirements}") and "--index-url" not in rest_line
        assert re.search(r"^torch==\S+$", (ROOT / requirements).read_text(encoding="utf-8"), re.MULTILINE)


def test_the_wheelhouse_takes_torch_first_from_the_cpu_index_then_what_learners_install(tmp_path):
    downloads = [line for line in make_dry_run(tmp_path) if " -m pip download " in line]
    assert len(downloads) == 2
    assert f"--index-url {CPU_INDEX} " in downloads[0]
    assert f"grep -E '^torch==' {LEARNER_REQUIREMENTS[0]}" in downloads[0]
    assert "--find-links .wheelhouse" in downloads[1] and "--index-url" not in downloads[1]  # keeps that torch
    assert downloads[1].endswith(" ".join(f"-r {name}" for name in LEARNER_REQUIREMENTS))


def test_torch_index_is_overridden_from_the_command_line(tmp_path):
    gpu = "https://download.pytorch.org/whl/cu128"
    for arguments, expected in ((("TORCH_INDEX=",), None), ((f"TORCH_INDEX={gpu}",), gpu)):
        lines = make_dry_run(tmp_path, *arguments)
        for environment in ENVIRONMENTS:
            torch_line = pip_lines(lines, environment)[0]
            assert ("--index-url" not in torch_line) if expected is None else (f"--index-url {expected} " in torch_line)


def test_ci_takes_torch_from_pypi():
    # CI's machine cannot reach PyTorch's index; its PyPI serves the CPU build.
    assert "make test TORCH_INDEX=\n" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_lighthouse_is_installed_from_its_lock_before_the_site_suite(tmp_path):
    import json

    lines = make_dry_run(tmp_path)
    install = [line for line in lines if line.startswith("npm ")]
    assert sorted(install) == sorted(f"npm ci --prefix {folder} --no-audit --no-fund --loglevel=error"
                                     for folder in (LIGHTHOUSE, PYODIDE, EDITOR, ONNX_RUNTIME))
    site_suite = next(i for i, line in enumerate(lines) if " -m pytest" in line and " tests/site " in f"{line} ")
    assert max(map(lines.index, install)) < site_suite
    package = json.loads((ROOT / LIGHTHOUSE / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((ROOT / LIGHTHOUSE / "package-lock.json").read_text(encoding="utf-8"))
    assert package["dependencies"] == {"lighthouse": "12.2.3"}  # exact: npm i -E
    assert lock["packages"]["node_modules/lighthouse"]["version"] == "12.2.3"
    assert "node_modules/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()


def _modules(arguments: list[str]) -> set[Path]:
    """The test modules a pytest command line collects: its paths, less its --ignore= ones."""
    ignored = [ROOT / argument.removeprefix("--ignore=") for argument in arguments if argument.startswith("--ignore=")]
    found = set()
    for argument in arguments:
        if argument.startswith("-"):
            continue
        path = ROOT / argument
        found |= set(path.rglob("test_*.py")) if path.is_dir() else {path}
    return {module for module in found if not any(module == ig or ig in module.parents for ig in ignored)}


def test_the_suites_side_by_side_run_every_test_module_exactly_once(tmp_path):
    # `make test` splits pytest in two to use both cores: a module missing from both would never run in CI.
    # The shorter suites run under nice: what follows it is the command.
    lines = [line.removeprefix("nice -n 10 ") for line in make_dry_run(tmp_path, "TORCH_INDEX=")]
    commands = [shlex.split(line.split(" -m pytest", 1)[1]) for line in lines
                if " -m pytest" in line and not line.startswith((".venv-compat/", ".venv-peers/"))]
    assert len(commands) == 2
    first, second = (_modules(arguments) for arguments in commands)
    assert first and second and not first & second
    peers = ROOT / "tests" / "peers"  # their own environment and suite, below
    assert first | second == {module for module in (ROOT / "tests").rglob("test_*.py") if peers not in module.parents}
    peer_commands = [line.split(" -m pytest", 1)[1].split() for line in lines if line.startswith(".venv-peers/bin/python -m pytest")]
    assert peer_commands == [["tests/peers"]]


def test_no_folder_holding_tests_is_one_pytest_does_not_enter(pytestconfig):
    # pytest's default norecursedirs has "build", which silently dropped tests/unit/build from every run.
    skipped = pytestconfig.getini("norecursedirs")
    for folder in {module.parent for module in (ROOT / "tests").rglob("test_*.py")}:
        for part in folder.relative_to(ROOT).parts:
            assert not any(fnmatch.fnmatch(part, pattern) for pattern in skipped), f"pytest skips {folder}"


@pytest.mark.parametrize("folder", [PYODIDE, EDITOR])
def test_the_editors_npm_installs_come_from_their_locks_before_any_render(tmp_path, folder):
    # The site serves Pyodide and the bundled CodeMirror from npm installs (post-render steps copy and bundle them):
    # `make render` and `make page`, the README's way to build, install both first, from their locks.
    install = f"npm ci --prefix {folder} --no-audit --no-fund --loglevel=error"
    for target, arguments in (("render", ()), ("page", ("PAGE=labs/05-trace-residual-stream.qmd",))):
        lines = make_dry_run(tmp_path, *arguments, target=target)
        assert install in lines, target
        render = next(i for i, line in enumerate(lines) if "residlab site render" in line)
        assert lines.index(install) < render, target


def test_codemirror_and_esbuild_are_pinned_exactly_in_the_editors_lock():
    import json

    package = json.loads((ROOT / EDITOR / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((ROOT / EDITOR / "package-lock.json").read_text(encoding="utf-8"))
    assert {"@codemirror/view", "@codemirror/state", "@codemirror/lang-python", "esbuild"} <= set(package["dependencies"])
    for name, version in package["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), name  # exact, as npm i -E writes it
        assert lock["packages"][f"node_modules/{name}"]["version"] == version, name


def test_pyodide_is_pinned_exactly_in_its_lock():
    import json

    package = json.loads((ROOT / PYODIDE / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((ROOT / PYODIDE / "package-lock.json").read_text(encoding="utf-8"))
    version = package["dependencies"]["pyodide"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)  # exact, as npm i -E writes it
    assert lock["packages"]["node_modules/pyodide"]["version"] == version


def test_the_onnx_runtime_is_installed_from_its_lock_before_any_render(tmp_path):
    # The site serves onnxruntime-web and the tokenizer from this install (a post-render step copies the files Lab 05
    # Part 4 loads), pinned exactly; the site suite's browser checks read it too.
    import json

    install = f"npm ci --prefix {ONNX_RUNTIME} --no-audit --no-fund --loglevel=error"
    for target, arguments in (("render", ()), ("page", ("PAGE=labs/05-trace-residual-stream.qmd",))):
        lines = make_dry_run(tmp_path, *arguments, target=target)
        assert install in lines, target
        assert lines.index(install) < next(i for i, line in enumerate(lines) if "residlab site render" in line), target
    package = json.loads((ROOT / ONNX_RUNTIME / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((ROOT / ONNX_RUNTIME / "package-lock.json").read_text(encoding="utf-8"))
    assert package["dependencies"] == {"@huggingface/tokenizers": "0.2.0", "onnxruntime-web": "1.30.0"}
    for name, version in package["dependencies"].items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
