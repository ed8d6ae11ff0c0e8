"""The render cache: inert outside a site render; within one, the second page loads what the first computed, equal
bit for bit; a change to any source gives a new key, so nothing is reused across it; the freeze guard empties it.
A page waits for a value a live prefetch has planned, bounded, and never for its own process or a dead one; the
prefetch records what it finished and what failed; no runner carries any of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from residlab.build import freeze_guard
from residlab.course.lesson import copy_model
from residlab.course.render import render_cache, shared
from residlab.pythia.specimen import build_specimen_model

ROOT = Path(__file__).resolve().parents[3]


def test_without_the_variable_every_call_computes(monkeypatch):
    monkeypatch.delenv(render_cache.RENDER_CACHE_ENVIRONMENT, raising=False)
    calls = []
    for _ in range(2):
        assert render_cache.render_cached("probe", (1,), lambda: calls.append(1) or len(calls)) == len(calls)
    assert len(calls) == 2


def test_within_a_render_the_second_call_loads_and_a_source_change_misses(monkeypatch, tmp_path):
    monkeypatch.setenv(render_cache.RENDER_CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    calls = []

    def compute():
        calls.append(1)
        return {"value": torch.arange(4), "calls": len(calls)}

    first = render_cache.render_cached("probe", (1,), compute)
    second = render_cache.render_cached("probe", (1,), compute)
    assert len(calls) == 1 and torch.equal(first["value"], second["value"]) and second["calls"] == 1
    render_cache.render_cached("probe", (2,), compute)  # other arguments: another entry
    assert len(calls) == 2
    monkeypatch.setattr(render_cache, "render_source_digest", lambda: "f" * 64)  # any source edited
    assert render_cache.render_cached("probe", (1,), compute)["calls"] == 3
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".partial-")]


def test_the_source_digest_covers_every_package_file():
    files = {p.relative_to(render_cache._PACKAGE_ROOT).as_posix() for p in render_cache._PACKAGE_ROOT.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    assert {"course/lesson/copy_model.py", "pythia/specimen.py", "locks/pythia-14m.lock.json"} <= files
    assert len(render_cache.render_source_digest()) == 64


def test_cached_models_equal_computed_ones(monkeypatch, tmp_path):
    monkeypatch.setenv(render_cache.RENDER_CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    for _ in range(2):  # the first call stores, the second loads
        specimen = shared.specimen_model(0)
    reference = build_specimen_model(0)
    assert all(torch.equal(a, b) for a, b in zip(specimen.state_dict().values(), reference.state_dict().values()))
    assert not specimen.training
    trained, log = shared.copy_model_training()  # computed (700 steps), then stored
    loaded, loaded_log = shared.copy_model_training()  # read back into a fresh CopyModel
    assert loaded is not trained and copy_model.weights_sha256(loaded) == copy_model.weights_sha256(trained)
    assert loaded_log == log and not loaded.training
    assert [use["how"] for use in render_cache.read_uses(tmp_path / "cache")][-2:] == ["computed", "read"]


def test_the_freeze_guard_empties_the_cache_when_inputs_change(tmp_path):
    (tmp_path / "residlab").mkdir()
    (tmp_path / "residlab" / "a.py").write_text("x = 1\n")
    freeze_guard.guard(tmp_path)
    cache = tmp_path / freeze_guard.RENDER_CACHE_DIR
    cache.mkdir()
    (cache / "entry").write_text("kept while nothing changes")
    assert freeze_guard.guard(tmp_path) == "frozen results are current" and cache.exists()
    (tmp_path / "residlab" / "a.py").write_text("x = 2\n")
    freeze_guard.guard(tmp_path)
    assert not cache.exists()


@pytest.fixture
def cache_folder(monkeypatch, tmp_path) -> Path:
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv(render_cache.RENDER_CACHE_ENVIRONMENT, str(folder))
    return folder


@pytest.fixture
def other_process():
    """A live process that is not this one, standing in for the prefetch."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def _status(folder: Path, pid: int, planned=("probe",), **fields) -> None:
    status = {"pid": pid, "source": render_cache.render_source_digest(), "planned": list(planned), "finished": [],
              "failed": {}, "exited": False, **fields}  # fmt: skip
    (folder / render_cache.PREFETCH_STATUS).write_text(json.dumps(status))


def test_a_page_waits_for_a_planned_value_and_reads_it(cache_folder, other_process):
    _status(cache_folder, other_process.pid)
    path = render_cache.entry_path(cache_folder, "probe", (1,))
    writer = threading.Timer(0.3, lambda: render_cache.write_atomically(path, __import__("pickle").dumps("prefetched")))
    writer.start()
    start = time.monotonic()
    assert render_cache.render_cached("probe", (1,), lambda: "computed by the page", wait_limit=30) == "prefetched"
    assert 0.25 < time.monotonic() - start < 10
    assert [(use["name"], use["how"]) for use in render_cache.read_uses(cache_folder)] == [("probe", "read")]


def test_the_wait_is_bounded_and_then_the_page_computes(cache_folder, other_process):
    _status(cache_folder, other_process.pid)
    start = time.monotonic()
    assert render_cache.render_cached("probe", (1,), lambda: "computed", wait_limit=0.4) == "computed"
    assert 0.35 < time.monotonic() - start < 5
    assert render_cache.read_uses(cache_folder)[-1]["how"] == "computed"


@pytest.mark.parametrize("case", ["dead", "own", "finished", "failed", "exited", "other sources", "unplanned"])
def test_no_wait_where_nothing_will_come(cache_folder, other_process, case):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = {"dead": int(dead.stdout), "own": os.getpid()}.get(case, other_process.pid)
    fields = {"finished": {"finished": ["probe"]}, "failed": {"failed": {"probe": "ValueError: x"}},
              "exited": {"exited": True}, "other sources": {"source": "0" * 64}}.get(case, {})  # fmt: skip
    _status(cache_folder, pid, planned=("another",) if case == "unplanned" else ("probe",), **fields)
    start = time.monotonic()
    assert render_cache.render_cached("probe", (1,), lambda: "computed", wait_limit=30) == "computed"
    assert time.monotonic() - start < 5


def test_the_prefetch_records_what_it_finished_and_what_failed(cache_folder, capsys):
    def fails():
        raise ValueError("no such value")

    plan = (("probe", lambda: render_cache.render_cached("probe", (1,), lambda: 42)), ("broken", fails))
    assert shared.prefetch(plan) == 1
    status = json.loads((cache_folder / render_cache.PREFETCH_STATUS).read_text())
    assert status["planned"] == ["probe", "broken"] and status["finished"] == ["probe"] and status["exited"]
    assert status["failed"] == {"broken": "ValueError: no such value"} and status["pid"] == os.getpid()
    assert "residlab prefetch: broken failed: ValueError: no such value" in capsys.readouterr().err
    assert render_cache.render_cached("probe", (1,), lambda: None) == 42  # stored for the pages


def test_the_prefetch_stops_when_its_render_is_gone(cache_folder):
    calls = []
    assert shared.prefetch((("probe", lambda: calls.append(1)),), parent=os.getppid() + 1) == 0
    status = json.loads((cache_folder / render_cache.PREFETCH_STATUS).read_text())
    assert calls == [] and status["finished"] == [] and status["exited"]


def test_without_a_render_cache_the_prefetch_does_nothing(monkeypatch, capsys):
    monkeypatch.delenv(render_cache.RENDER_CACHE_ENVIRONMENT, raising=False)
    assert shared.prefetch((("probe", lambda: pytest.fail("computed outside a render")),)) == 0
    assert "nothing to do" in capsys.readouterr().err


def test_each_planned_value_is_what_a_page_asks_for(cache_folder):
    """Every entry of the prefetch plan names the cache entry its function writes (a page asking for it waits)."""
    names = [name for name, _ in shared.PREFETCH]
    assert len(set(names)) == len(names)
    source = (ROOT / "residlab" / "course" / "render" / "shared.py").read_text(encoding="utf-8")
    for name in names:
        assert f'render_cached("{name}"' in source, name


def test_no_runner_carries_the_render_cache():
    for runner in (ROOT / "assets" / "labs").glob("*.py"):
        text = runner.read_text(encoding="utf-8")
        assert "render_cache" not in text and "RESIDLAB_RENDER_CACHE" not in text, runner.name
