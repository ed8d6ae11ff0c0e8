"""What a learner or an instructor meets first: every refusal is one line naming their own input or file, saying
what happened and what to do next, never a traceback and never a name internal to the code.

The runners are copied into an empty folder and run as separate processes, as a learner runs a download; those
that need torch are also run with a Python that has none (a fresh virtual environment with nothing installed).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from residlab.course import pages

ROOT = Path(__file__).resolve().parents[2]
LABS = ROOT / "assets" / "labs"
# The registry's runners that import torch: each lists the torch check first (residlab/build/runners.py refuses one
# that does not).
TORCH_RUNNERS = [runner.filename for runner in pages.runners() if pages.TORCH_CHECK in runner.modules]


def run_alone(python: str, runner: str, arguments: list[str], folder: Path, env: dict | None = None):
    script = shutil.copyfile(LABS / runner, folder / runner)
    return subprocess.run([python, "-I", str(script), *arguments], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def one_line(text: str) -> str:
    assert text.count("\n") == 1 and text.endswith("\n"), text
    assert "Traceback" not in text
    return text.rstrip("\n")


@pytest.fixture(scope="module")
def python_without_torch(tmp_path_factory) -> str:
    """A fresh virtual environment with nothing installed: its Python has no torch, as a learner's may not."""
    folder = tmp_path_factory.mktemp("no-torch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = str(folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    probe = subprocess.run([python, "-I", "-c", "import importlib.util as u; print(u.find_spec('torch') is None)"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert probe.stdout.strip() == "True", "the base interpreter itself has torch; this test needs one without"
    return python


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment_without_proxies(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("https_proxy", "http_proxy", "no_proxy", "all_proxy")}
    return {**env, **extra}


# ---- the toy runner ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arguments, line", [
    (["--input", "1e4301,1,1"], "--input 1e4301,1,1: entry 1 is '1e4301': too large, or too many decimal places, "
                                "for the toy, which takes entries whose numerator and denominator (in lowest terms) "
                                "are at most 1e70 each, so that every value it computes stays exact; enter a smaller number"),
    (["--input", "1e10000000000,1,1"], "--input 1e10000000000,1,1: entry 1 is '1e10000000000': too large"),
    (["--second-position", "1,,3"], "--second-position 1,,3: entry 2 is empty: enter a number such as 2, -0.5 or 1/3"),
    (["--input", "1/0,2,3"], "--input 1/0,2,3: entry 1 is '1/0', a fraction with a zero denominator"),
    (["--input", "1,2"], "--input 1,2 has 2 entries; the toy stream needs 3, as in 1,2,-1 or [1;2;-1]"),
])
def test_toy_runner_refuses_bad_input_in_one_line_naming_it(tmp_path, arguments, line):
    completed = run_alone(sys.executable, "trace_residual_toy.py", arguments, tmp_path)
    assert completed.returncode == 2 and completed.stdout == ""
    assert one_line(completed.stderr).startswith(f"trace_residual_toy.py: error: {line}")
    assert "_vector_argument" not in completed.stderr and "ToyInputError" not in completed.stderr


def test_toy_runner_takes_large_entries_whose_intermediate_values_used_to_be_refused(tmp_path):
    # 9e39 once passed the entry check but made 2 * x1 = 1.8e40 in the parallel case, ending in a traceback.
    completed = run_alone(sys.executable, "trace_residual_toy.py", ["--input", "9e39,1,2", "--indent", "0"], tmp_path)
    assert completed.returncode == 0, completed.stderr
    import json

    assert json.loads(completed.stdout)["interventions"]["parallel"]["second_update"]["exact"] == [1, -1, 18 * 10**39]


# ---- runners that need torch, run with a Python that lacks it ----------------------------------------------------


@pytest.mark.parametrize("runner", TORCH_RUNNERS)
def test_torch_runners_without_torch_say_so_in_one_line(tmp_path, python_without_torch, runner):
    completed = run_alone(python_without_torch, runner, ["--skip-profile"], tmp_path)
    assert completed.returncode == 1 and completed.stdout == ""
    assert one_line(completed.stderr) == (
        f"{runner}: torch is not installed for this Python ({python_without_torch}): run it with the Python of the "
        "virtual environment its page sets up, which holds the pinned requirements (.venv-lesson/bin/python for "
        "Lesson 2.1's and Lab 04's runners, .venv-residual/bin/python for the later labs'; on Windows "
        "Scripts\\python.exe in place of bin/python)"
    )


@pytest.mark.parametrize("runner", TORCH_RUNNERS)
def test_the_torch_check_comes_before_every_torch_import_in_the_runner(runner):
    lines = (LABS / runner).read_text(encoding="utf-8").splitlines()
    check = lines.index("require_torch()")
    imports = [n for n, line in enumerate(lines) if line.lstrip().startswith(("import torch", "from torch"))]
    assert imports and check < min(imports)


def test_observation_runner_without_torch_says_so_and_writes_nothing(tmp_path, python_without_torch, copy_specimen,
                                                                     specimen_lock_path):  # fmt: skip
    artifacts = copy_specimen()
    completed = run_alone(python_without_torch, "inspect_residual_stream.py",
                          ["--offline", "--lock", str(specimen_lock_path), "--artifacts", str(artifacts), "--output", "run-01"],
                          tmp_path)  # fmt: skip
    assert completed.returncode == 1
    assert one_line(completed.stderr) == (
        "error: torch is not installed: install the pinned requirements (residual-requirements.txt) first"
    )
    assert not (tmp_path / "run-01").exists()


def test_audit_runner_without_torch_says_so(tmp_path, python_without_torch):
    completed = run_alone(python_without_torch, "audit_residual_writes.py",
                          ["--specimen", "gpt2", "--clean-ids", "1,2", "--corrupt-ids", "3,2", "--target-id", "4",
                           "--rival-id", "5", "--output", "packet-01"], tmp_path)  # fmt: skip
    assert completed.returncode != 0
    assert "torch is not installed" in one_line(completed.stderr)
    assert not (tmp_path / "packet-01").exists()


# ---- the observation runner: fetch without the Hub, offline with files missing, the plan ------------------------


def test_fetch_without_the_hub_names_the_host_and_leaves_no_folder(tmp_path):
    port = closed_port()
    env = environment_without_proxies(HF_ENDPOINT=f"http://127.0.0.1:{port}")
    completed = run_alone(sys.executable, "inspect_residual_stream.py", ["--artifacts", "pythia-artifacts", "--output", "run-01"],
                          tmp_path, env=env)  # fmt: skip
    assert completed.returncode == 1
    line = one_line(completed.stderr)
    assert line.startswith(f"error: could not connect to 127.0.0.1:{port} (Connection refused): the Hub could not be reached.")
    assert "HTTPS_PROXY" in line and "NO_PROXY" in line and "--offline" in line
    assert "Nothing was written: the folder pythia-artifacts this fetch created was removed again" in line
    assert "generation_config.json" not in line and "gaierror" not in line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["inspect_residual_stream.py"]


def test_offline_with_files_missing_says_how_to_fetch_them(tmp_path):
    (tmp_path / "pythia-artifacts").mkdir()
    completed = run_alone(sys.executable, "inspect_residual_stream.py", ["--offline", "--artifacts", "pythia-artifacts"], tmp_path)
    assert completed.returncode == 1
    lines = completed.stderr.splitlines()
    assert lines[0] == "error: pythia-artifacts does not match the lock (the runner's embedded lock):"
    assert "  config.json: missing" in lines
    assert lines[-1].startswith("To fetch what is missing, run the same command without --offline: it downloads only "
                                "the missing files and keeps those that match")


def test_the_learners_plan_asks_for_no_instructors_command(tmp_path):
    completed = run_alone(sys.executable, "inspect_residual_stream.py", ["--plan"], tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert "residlab" not in completed.stdout
    assert ("generation_config.json: the lock has no sha256 for it (no public record gives one), so a fetch checks it "
            "against the Hub's metadata for this revision and an offline run checks only its size. The observation "
            "never reads it: your results do not depend on it, and there is nothing for you to do.") in completed.stdout


# ---- the residlab command: its subcommands' help, and the instructor's sync ---------------------------------------


def residlab(*arguments: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "residlab", *arguments], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})  # fmt: skip


@pytest.mark.parametrize("command, options", [
    ("plan", {"--lock"}),
    ("fetch", {"--artifacts", "--cache", "--lock", "--endpoint", "--timeout"}),
    ("verify", {"--artifacts", "--lock"}),
    ("pin", {"--revision", "--repo", "--lock", "--endpoint", "--timeout"}),
    ("observe", {"--artifacts", "--specimen", "--lock", "--seed", "--output", "--position"}),
])
def test_each_pythia_subcommand_has_its_own_help(command, options):
    import re

    completed = residlab("pythia", command, "--help")
    assert completed.returncode == 0, completed.stderr
    usage = completed.stdout.split("\n\n", 1)[0]
    assert usage.startswith(f"usage: residlab pythia {command} [-h]")
    assert set(re.findall(r"--[a-z-]+", usage)) == options


@pytest.mark.parametrize("command", ["toy", "lesson", "paper"])
def test_runner_commands_show_the_residlab_name(command):
    completed = residlab(command, "--help")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith(f"usage: residlab {command} [-h]")


def bare_site(tmp_path: Path) -> Path:
    for name in ("_quarto.yml", "requirements.txt"):
        shutil.copyfile(ROOT / name, tmp_path / name)
    return tmp_path


def test_sync_after_a_requirements_only_change_says_to_edit_the_lock_and_writes_nothing(tmp_path):
    from residlab.build import pins

    site = bare_site(tmp_path)
    requirements = site / "requirements.txt"
    locked = pins.load_lock_data()["libraries"]["transformers"]
    requirements.write_text(requirements.read_text().replace(f"transformers=={locked}", "transformers==99.0.0"))
    for arguments in (["--check"], []):
        completed = residlab("sync", "--root", str(site), *arguments)
        assert completed.returncode == 1 and completed.stdout == ""
        assert completed.stderr.splitlines()[:2] == [
            f"requirements.txt pins transformers==99.0.0 but the lock records {locked}",
            "edit the lock, residlab/locks/pythia-14m.lock.json: its `libraries` (and `also_tested`) must record the "
            "versions requirements.txt pins; `residlab sync` writes every other file from the lock, but never the lock itself",
        ]
    assert sorted(path.name for path in site.iterdir()) == ["_quarto.yml", "requirements.txt"]  # nothing written


def test_sync_with_a_runner_the_builder_refuses_is_one_line(tmp_path, monkeypatch, capsys):
    from residlab.build import runners, sync

    broken = runners.Runner("broken.py", ("course/no_such_module.py",), "a runner", "nothing", ())
    monkeypatch.setattr(runners, "RUNNERS", (*runners.RUNNERS, broken))
    assert sync.main(["--check", "--root", str(ROOT)]) == 1
    captured = capsys.readouterr()
    assert one_line(captured.err) == f"residlab sync: error: course/no_such_module.py: no such module in {runners.PACKAGE_DIR}"
