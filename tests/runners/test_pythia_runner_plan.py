"""The downloadable runner, ``assets/labs/inspect_residual_stream.py``, run alone from a temporary copy:
its stdlib-only plan, its fetch and offline verification against the fake hub, and its agreement with
``residlab pythia``. Its plain offline observation, as Lab 05's page runs it, is checked where the page's commands run
(tests/site/test_page_commands.py: the three files, the lock's revision, the last position, where it wrote)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from residlab.build import runners
from residlab.pythia import cli
from residlab.pythia.lock import ALLOWED_FILES

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "assets" / "labs" / "inspect_residual_stream.py"
RUNNER_SPEC = next(runner for runner in runners.RUNNERS if runner.filename == RUNNER.name)


@pytest.fixture
def runner_copy(tmp_path) -> Path:
    """The runner alone in an empty folder, away from the repository and the package."""
    folder = tmp_path / "learner"
    folder.mkdir()
    return Path(shutil.copyfile(RUNNER, folder / RUNNER.name))


def run(arguments: list[str], *, cwd: Path, env: dict | None = None, stdlib_only: bool = False):
    # -I: no user site, no PYTHON* variables, script folder not on the path; -S: no site-packages at all.
    flags = ["-I", "-S"] if stdlib_only else ["-I"]
    return subprocess.run(
        [sys.executable, *flags, *arguments], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def without_lock_line(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.strip().startswith("lock:")]


def test_the_runner_reads_the_capture_first_then_the_download_and_verification():
    # What a learner is told to read (the block table, the site names, the recording, the observation) opens the
    # file; the download and verification of the pinned files it does not depend on follow; the command line last.
    sections = [line.split()[2] for line in RUNNER.read_text(encoding="utf-8").splitlines()
                if line.startswith("# ---- residlab/")]
    assert sections[:6] == [
        "residlab/capture/blocks.py", "residlab/capture/sites.py", "residlab/capture/recording.py",
        "residlab/capture/versions.py", "residlab/capture/vectors.py", "residlab/pythia/observe.py",
    ]
    assert set(sections[6:-1]) == {
        "residlab/capture/outdir.py", "residlab/capture/files.py", "residlab/pythia/lock.py", "residlab/pythia/hub.py",
        "residlab/pythia/artifacts.py", "residlab/pythia/load.py",
    }
    assert sections[-1] == "residlab/pythia/runner.py"
    assert {pointer.section for pointer in RUNNER_SPEC.read_first} <= set(RUNNER_SPEC.modules[:6])


def test_runner_embeds_the_pinned_lock():
    import ast

    text = RUNNER.read_text(encoding="utf-8")
    body = ast.parse(text).body
    # The lock is the data section just before the __main__ block: one assignment, the pinned lock.
    section = body[-2]
    assert isinstance(section, ast.Assign) and [target.id for target in section.targets] == ["EMBEDDED_LOCK_JSON"]
    namespace: dict = {}
    exec(ast.get_source_segment(text, section), namespace)
    pinned = json.loads((ROOT / "residlab" / "locks" / "pythia-14m.lock.json").read_text(encoding="utf-8"))
    assert json.loads(namespace["EMBEDDED_LOCK_JSON"]) == pinned


def test_plan_runs_with_the_standard_library_alone(runner_copy, capsys):
    for library in ("huggingface_hub", "torch", "transformers"):  # this interpreter really lacks them
        probe = run(["-c", f"import {library}"], cwd=runner_copy.parent, stdlib_only=True)
        assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr
    result = run([runner_copy.name, "--plan"], cwd=runner_copy.parent, stdlib_only=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for name in ALLOWED_FILES:
        assert sum(line.split()[0] == name for line in lines if line.startswith("  ")) == 1
    assert "6 files, 30,264,046 bytes in all" in result.stdout
    assert "lock: the runner's embedded lock" in result.stdout
    assert [path.name for path in runner_copy.parent.iterdir()] == [runner_copy.name]  # wrote nothing
    # The package prints the same plan.
    assert cli.main(["plan"]) == 0
    assert without_lock_line(capsys.readouterr().out) == without_lock_line(result.stdout)


def test_runner_refuses_a_lock_whose_total_disagrees_with_its_files(runner_copy, tmp_path):
    lock = json.loads((ROOT / "residlab" / "locks" / "pythia-14m.lock.json").read_text(encoding="utf-8"))
    lock["total_bytes"] += 1
    bad = tmp_path / "bad.lock.json"
    bad.write_text(json.dumps(lock), encoding="utf-8")
    result = run([runner_copy.name, "--plan", "--lock", str(bad)], cwd=runner_copy.parent, stdlib_only=True)
    assert result.returncode == 1
    assert "the plan and the lock disagree" in result.stderr and "30,264,047" in result.stderr
    assert result.stdout == ""


def test_runner_needs_plan_or_artifacts(runner_copy):
    result = run([runner_copy.name], cwd=runner_copy.parent, stdlib_only=True)
    assert result.returncode == 2 and "give --plan, or --artifacts DIR" in result.stderr


def test_runner_fetches_then_verifies_offline_with_no_request(
    runner_copy, tmp_path, specimen_lock_path, fake_hub_server, hub_env, capsys
):
    artifacts = tmp_path / "pythia-artifacts"
    fetched = run(
        [runner_copy.name, "--artifacts", str(artifacts), "--lock", str(specimen_lock_path)],
        cwd=runner_copy.parent,
        env=hub_env,
    )
    assert fetched.returncode == 0, fetched.stderr
    assert sorted(path.name for path in artifacts.iterdir()) == sorted(ALLOWED_FILES)
    assert sorted(set(fake_hub_server.resolved_files())) == sorted(ALLOWED_FILES)
    assert "six files verified" in fetched.stdout
    requests_made = list(fake_hub_server.requests)

    # Verification needs no third-party library at all: run it where huggingface_hub cannot even be imported.
    offline = run(
        [runner_copy.name, "--offline", "--artifacts", str(artifacts), "--lock", str(specimen_lock_path)],
        cwd=runner_copy.parent,
        env=hub_env,
        stdlib_only=True,
    )
    assert offline.returncode == 0, offline.stderr
    assert fake_hub_server.requests == requests_made  # HF_ENDPOINT pointed at the hub; nothing reached it
    # The package's verify prints exactly what the runner printed.
    assert cli.main(["verify", "--artifacts", str(artifacts), "--lock", str(specimen_lock_path)]) == 0
    assert capsys.readouterr().out == offline.stdout

    (artifacts / "tokenizer_config.json").write_bytes(b"{}")
    damaged = run(
        [runner_copy.name, "--offline", "--artifacts", str(artifacts), "--lock", str(specimen_lock_path)],
        cwd=runner_copy.parent,
        env=hub_env,
    )
    assert damaged.returncode == 1
    assert "tokenizer_config.json: 2 bytes, the lock says" in damaged.stderr
    assert fake_hub_server.requests == requests_made


def test_runner_refuses_a_non_empty_output_before_downloading(
    runner_copy, tmp_path, specimen_lock_path, fake_hub_server, hub_env
):
    output = tmp_path / "run-01"
    output.mkdir()
    (output / "manifest.json").write_text("an earlier run")
    result = run(
        [runner_copy.name, "--artifacts", str(tmp_path / "a"), "--lock", str(specimen_lock_path), "--output", str(output)],
        cwd=runner_copy.parent,
        env=hub_env,
    )
    assert result.returncode == 1 and "not empty" in result.stderr
    assert fake_hub_server.requests == []
    assert not (tmp_path / "a").exists()
    assert (output / "manifest.json").read_text() == "an earlier run"


def test_runner_observes_the_position_it_is_given(runner_copy, tmp_path, copy_specimen, specimen_lock_path, hub_env):
    output = tmp_path / "run-position"
    result = run(
        [runner_copy.name, "--offline", "--artifacts", str(copy_specimen()), "--lock", str(specimen_lock_path),
         "--output", str(output), "--position", "2"],
        cwd=runner_copy.parent,
        env=hub_env,
    )
    assert result.returncode == 0, result.stderr
    observations = json.loads((output / "observations.json").read_text(encoding="utf-8"))
    assert observations["selected_position"] == 2
    assert observations["selected_token"]["position"] == 2
