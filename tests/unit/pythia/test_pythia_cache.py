"""The lock's cache folder (``make pythia`` = ``residlab pythia fetch --cache``) and the refresh of a committed
capture (``residlab pythia capture``), run as commands against the fake hub on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from residlab.pythia import cache
from residlab.pythia.lock import load_lock


def residlab(arguments: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "residlab", *arguments], env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def cache_env(hub_env, tmp_path, specimen_lock_path) -> dict:
    return dict(hub_env, **{cache.CACHE_ENV: str(tmp_path / "pythia-cache"), cache.LOCK_ENV: str(specimen_lock_path)})


def test_the_folder_is_named_by_the_locks_digest(specimen_lock_path, tmp_path):
    lock = load_lock(specimen_lock_path)
    changed = json.loads(specimen_lock_path.read_text())
    changed["files"][0]["source"] += " (edited)"
    other = tmp_path / "other.lock.json"
    other.write_text(json.dumps(changed))
    digest = cache.lock_digest(lock)
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert cache.lock_digest(load_lock(other)) != digest  # any change to the pin: another folder
    environ = {cache.CACHE_ENV: str(tmp_path / "root")}
    assert cache.cache_folder(lock, environ) == tmp_path / "root" / digest
    assert cache.cache_folder(load_lock(), {}) == cache.DEFAULT_CACHE_ROOT / cache.lock_digest(load_lock())
    assert cache.cached_artifacts(lock, environ) is None  # no folder: nothing to use, and no error
    assert cache.active_lock({cache.LOCK_ENV: str(specimen_lock_path)}).revision == lock.revision
    assert cache.active_lock({}).repository == "EleutherAI/pythia-14m"


def test_fetch_cache_fills_the_locks_folder_once_and_the_build_finds_it(cache_env, fake_hub_server, specimen_lock_path):
    first = residlab(["pythia", "fetch", "--cache"], cache_env)
    assert first.returncode == 0, first.stderr
    folder = cache.cache_folder(load_lock(specimen_lock_path), cache_env)
    assert sorted(path.name for path in folder.iterdir()) == sorted(load_lock(specimen_lock_path).names)
    assert f"{folder}: six files verified" in first.stdout
    requested = len(fake_hub_server.requests)
    again = residlab(["pythia", "fetch", "--cache"], cache_env)
    assert again.returncode == 0 and "nothing downloaded" in again.stdout
    assert len(fake_hub_server.requests) == requested  # every file there and pinned: no request at all
    assert cache.verified_files(load_lock(specimen_lock_path), cache_env).directory == folder


def test_a_hub_failing_mid_file_is_one_line_naming_the_file_and_nothing_is_kept(cache_env, fake_hub_server, specimen_lock_path):
    fake_hub_server.faults["model.safetensors"] = "cut"
    failed = residlab(["pythia", "fetch", "--cache"], cache_env)
    assert failed.returncode == 1
    assert failed.stderr.count("\n") == 1 and failed.stderr.startswith("error: model.safetensors: download from ")
    assert "Traceback" not in failed.stderr and "connection" in failed.stderr
    folder = cache.cache_folder(load_lock(specimen_lock_path), cache_env)
    assert not (folder / "model.safetensors").exists()
    # what did verify stays, and is never taken for the whole: the build refuses the incomplete folder by name
    from residlab.pythia.artifacts import ArtifactError

    with pytest.raises(ArtifactError, match="model.safetensors: missing"):
        cache.verified_files(load_lock(specimen_lock_path), cache_env)


def test_a_changed_file_in_the_cache_is_refused_in_one_line(cache_env, fake_hub_server, specimen_lock_path):
    assert residlab(["pythia", "fetch", "--cache"], cache_env).returncode == 0
    weights = cache.cache_folder(load_lock(specimen_lock_path), cache_env) / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 1
    weights.write_bytes(bytes(data))
    refused = residlab(["pythia", "fetch", "--cache"], cache_env)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "model.safetensors: sha256 " in refused.stderr and "(same size, different bytes)" in refused.stderr


def test_one_command_refreshes_the_committed_capture_into_a_folder_named_for_the_revision(cache_env, fake_hub_server, specimen_lock_path, tmp_path):
    captures = tmp_path / "captures"
    captures.mkdir()
    missing = residlab(["pythia", "capture", "--captures", str(captures)], cache_env)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "make pythia" in missing.stderr
    assert residlab(["pythia", "fetch", "--cache"], cache_env).returncode == 0
    lock = load_lock(specimen_lock_path)
    for _ in range(2):  # the second run replaces the first
        done = residlab(["pythia", "capture", "--captures", str(captures)], cache_env)
        assert done.returncode == 0, done.stderr
    folder = captures / f"synthetic-gpt-neox-specimen-{lock.revision}"
    assert [path.name for path in captures.iterdir()] == [folder.name]
    assert sorted(path.name for path in folder.iterdir()) == ["captures.json", "manifest.json", "observations.json"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (manifest["repository"], manifest["revision"]) == (lock.repository, lock.revision)
    assert manifest["command"] == ["residlab", "pythia", "capture"] and manifest["lock"] == specimen_lock_path.name
    assert str(tmp_path) not in (folder / "manifest.json").read_text()  # no folder of this machine in a committed file
