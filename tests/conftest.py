"""Shared fixtures: the synthetic Pythia specimen (built once per session) and a fake Hub serving it.

- ``specimen_dir``: a directory holding the six specimen files (seed 0). Shared by the whole session: copy it
  (``copy_specimen``) before changing anything in it.
- ``specimen_lock_data`` / ``specimen_lock_path``: its lock, as a dict and as a JSON file outside that directory.
- ``fake_hub_server``: a running ``tests.fakehub.FakeHub`` serving the specimen at its lock's revision (plus
  ``.bin`` weights and a custom-code file a correct fetch never requests); ``.requests`` logs every request,
  ``.faults`` injects errors. Stopped at teardown.
- ``fake_hub``: that server's endpoint URL (``http://127.0.0.1:PORT``), for code that only needs the address.
- ``hub_env``: environment variables for a subprocess pointed at the fake hub.
- ``no_retry_sleep``: makes huggingface_hub's retry back-off instant (it sleeps 1-8 s between retries).
- ``lesson_gradient_profile``: the lesson's gradient profile (median over seeds), computed once per session.

Tests never use the user's Hugging Face cache: ``HF_HOME`` points at a session temporary directory.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # so tests can `import fakehub`

# Set before anything imports huggingface_hub, which reads these once at import time.
_HF_HOME = tempfile.mkdtemp(prefix="residlab-test-hf-home-")
os.environ["HF_HOME"] = _HF_HOME
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ.pop("HF_HUB_OFFLINE", None)
# One cache of the page's ONNX export for the whole run: the unit tests, and the site suite's render of a clean copy
# (whose own project folder starts empty), find the export of unchanged weights there instead of exporting again.
os.environ.setdefault("RESIDLAB_ONNX_CACHE", str(ROOT / ".residlab-onnx"))
# Every server a test talks to is on loopback: a developer's proxy settings must not route it elsewhere.
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

# Files a real repository holds besides the six; the fetch must never ask for them.
DISTRACTOR_FILES = {
    "pytorch_model.bin": b"pickle weights a fetch must never request\n",
    "modeling_custom.py": b"raise SystemExit('custom code must never be downloaded')\n",
}


PEERS = Path(__file__).resolve().parent / "peers"


def pytest_ignore_collect(collection_path, config):
    """tests/peers runs in its own environment (.venv-peers: make test-peers), so only when named on the command
    line; a run of the whole tree leaves it out."""
    if collection_path != PEERS and PEERS not in collection_path.parents:
        return None
    named = [(config.invocation_params.dir / arg.split("::")[0]).resolve() for arg in config.args]
    return not any(path == PEERS or PEERS in path.parents for path in named)


def pytest_unconfigure(config):
    shutil.rmtree(_HF_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def lesson_gradient_profile():
    from residlab.course.models import lesson_lab

    return lesson_lab.gradient_profile()


@pytest.fixture(scope="session")
def specimen_build(tmp_path_factory):
    from residlab.pythia.specimen import write_specimen, write_specimen_lock

    base = tmp_path_factory.mktemp("specimen")
    directory = base / "artifacts"
    lock = write_specimen(directory, seed=0)
    lock_path = write_specimen_lock(lock, base / "specimen.lock.json")
    return directory, lock, lock_path


@pytest.fixture(scope="session")
def specimen_dir(specimen_build) -> Path:
    return specimen_build[0]


@pytest.fixture(scope="session")
def specimen_lock_data(specimen_build) -> dict:
    return specimen_build[1]


@pytest.fixture(scope="session")
def specimen_lock_path(specimen_build) -> Path:
    return specimen_build[2]


@pytest.fixture
def copy_specimen(specimen_dir, tmp_path):
    """Return a function copying the specimen's six files into a new directory (bytes only, writable)."""

    def copy(name: str = "artifacts") -> Path:
        target = tmp_path / name
        target.mkdir()
        for path in specimen_dir.iterdir():
            shutil.copyfile(path, target / path.name)
        return target

    return copy


@pytest.fixture
def fake_hub_server(specimen_dir, specimen_lock_data):
    from fakehub import FakeHub

    hub = FakeHub.from_directory(
        specimen_lock_data["repository"], specimen_lock_data["revision"], specimen_dir, extra_files=DISTRACTOR_FILES
    )
    with hub:
        yield hub


@pytest.fixture
def fake_hub(fake_hub_server) -> str:
    return fake_hub_server.endpoint


@pytest.fixture
def hub_env(fake_hub, tmp_path) -> dict:
    env = dict(os.environ)
    env.update(
        HF_ENDPOINT=fake_hub,
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HOME=str(tmp_path / "hf-home"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("HF_HUB_OFFLINE", None)
    return env


@pytest.fixture
def no_retry_sleep(monkeypatch):
    import huggingface_hub.file_download as file_download
    import huggingface_hub.utils._http as hub_http

    monkeypatch.setattr(hub_http.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(file_download.time, "sleep", lambda seconds: None)
