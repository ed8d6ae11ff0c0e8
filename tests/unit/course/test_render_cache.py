"""The render cache: inert outside a Quarto render of a project; within one, the second page loads what the first
computed, equal bit for bit; its key is the freeze guard's digest of the execution inputs, so nothing is reused
across a source change, and the freeze guard empties it. A page asking for a value another process is computing
waits on that entry's lock, bounded, then reads it; the prefetch computes its plan through the same cache, ends with
its render, and reports a failure without stopping; no runner carries any of it."""

from __future__ import annotations

import fcntl
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from residlab.build import freeze_guard
from residlab.course.models import copy_model
from residlab.course import shared
from residlab.render import render_cache
from residlab.pythia.specimen import build_specimen_model

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def project(monkeypatch, tmp_path) -> Path:
    """A Quarto project whose render is executing this process's code (Quarto sets QUARTO_PROJECT_ROOT)."""
    root = tmp_path / "project"
    (root / "residlab").mkdir(parents=True)
    (root / "_quarto.yml").write_text("project:\n  type: website\n")
    (root / "residlab" / "a.py").write_text("x = 1\n")
    monkeypatch.setenv(render_cache.PROJECT_ROOT_ENVIRONMENT, str(root))
    render_cache._digest_of.cache_clear()
    yield root
    render_cache._digest_of.cache_clear()


def test_outside_a_quarto_render_every_call_computes(monkeypatch, tmp_path):
    calls = []
    for root in (None, tmp_path):  # no project root; a folder that is not a Quarto project
        if root is None:
            monkeypatch.delenv(render_cache.PROJECT_ROOT_ENVIRONMENT, raising=False)
        else:
            monkeypatch.setenv(render_cache.PROJECT_ROOT_ENVIRONMENT, str(root))
        for _ in range(2):
            assert render_cache.render_cached("probe", (1,), lambda: calls.append(1) or len(calls)) == len(calls)
    assert len(calls) == 4 and not (tmp_path / render_cache.RENDER_CACHE_DIR).exists()


def test_within_a_render_the_second_call_loads_and_a_source_change_misses(project):
    calls = []

    def compute():
        calls.append(1)
        return {"value": torch.arange(4), "calls": len(calls)}

    first = render_cache.render_cached("probe", (1,), compute)
    second = render_cache.render_cached("probe", (1,), compute)
    assert len(calls) == 1 and torch.equal(first["value"], second["value"]) and second["calls"] == 1
    render_cache.render_cached("probe", (2,), compute)  # other arguments: another entry
    assert len(calls) == 2
    (project / "residlab" / "a.py").write_text("x = 2\n")  # an execution input edited: a new digest, a new key
    render_cache._digest_of.cache_clear()  # (a new kernel computes the digest afresh)
    assert render_cache.render_cached("probe", (1,), compute)["calls"] == 3
    folder = project / render_cache.RENDER_CACHE_DIR
    assert not list(folder.rglob(".partial-*"))
    assert [use["how"] for use in render_cache.read_uses(folder)] == ["computed", "read", "computed", "computed"]


def test_the_key_is_the_freeze_guards_digest(project):
    render_cache.render_cached("probe", (1,), lambda: 1)
    digest = freeze_guard.execution_inputs_digest(project)
    assert freeze_guard.execution_inputs_digest is render_cache.execution_inputs_digest  # one digest, one definition
    assert [path.name for path in (project / render_cache.RENDER_CACHE_DIR).iterdir() if path.is_dir()] == [digest[:16]]


def test_cached_models_equal_computed_ones(project):
    for _ in range(2):  # the first call stores, the second loads
        specimen = shared.specimen_model(0)
    assert shared.specimen_model(seed=0) is not specimen  # however the arguments are spelled: one entry, read
    reference = build_specimen_model(0)
    assert all(torch.equal(a, b) for a, b in zip(specimen.state_dict().values(), reference.state_dict().values()))
    assert not specimen.training
    trained, log = shared.copy_model_training()  # computed (700 steps), then stored
    loaded, loaded_log = shared.copy_model_training()  # read back into a fresh CopyModel
    assert loaded is not trained and copy_model.weights_sha256(loaded) == copy_model.weights_sha256(trained)
    assert loaded_log == log and not loaded.training
    uses = render_cache.read_uses(project / render_cache.RENDER_CACHE_DIR)
    assert [(use["name"], use["how"]) for use in uses] == [
        ("specimen_model", "computed"), ("specimen_model", "read"), ("specimen_model", "read"),
        ("copy_model_training", "computed"), ("copy_model_training", "read")]  # fmt: skip


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


def _hold_lock(path: Path, seconds: float, value=None) -> subprocess.Popen:
    """Another process holding ``path``'s lock for ``seconds``, then writing ``value`` (pickled) there, if given."""
    script = (
        "import fcntl, pickle, sys, time\n"
        f"lock = open({str(path.with_suffix('.lock'))!r}, 'a'); fcntl.flock(lock, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        f"time.sleep({seconds})\n"
        + (f"open({str(path)!r}, 'wb').write(pickle.dumps({value!r}))\n" if value is not None else "")
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_page_waits_for_the_process_computing_a_value_and_reads_it(project):
    path = render_cache.entry_path(project / render_cache.RENDER_CACHE_DIR, "probe", (1,))
    path.parent.mkdir(parents=True)
    holder = _hold_lock(path, 0.5, "computed by the other process")
    start = time.monotonic()
    try:
        assert render_cache.render_cached("probe", (1,), lambda: "computed by the page", wait_limit=30) == \
            "computed by the other process"  # fmt: skip
    finally:
        holder.wait(timeout=30)
    assert 0.3 < time.monotonic() - start < 20


def test_the_wait_is_bounded_and_then_the_page_computes(project):
    path = render_cache.entry_path(project / render_cache.RENDER_CACHE_DIR, "probe", (1,))
    path.parent.mkdir(parents=True)
    holder = _hold_lock(path, 30)
    start = time.monotonic()
    try:
        assert render_cache.render_cached("probe", (1,), lambda: "computed", wait_limit=0.4) == "computed"
        assert 0.35 < time.monotonic() - start < 10
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_dies_with_its_holder(project):
    path = render_cache.entry_path(project / render_cache.RENDER_CACHE_DIR, "probe", (1,))
    path.parent.mkdir(parents=True)
    holder = _hold_lock(path, 60)
    threading.Timer(0.3, holder.kill).start()
    start = time.monotonic()
    assert render_cache.render_cached("probe", (1,), lambda: "computed", wait_limit=30) == "computed"
    holder.wait()
    assert time.monotonic() - start < 20
    with open(path.with_suffix(".lock"), "a") as lock:  # released again once the value is stored
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert pickle.loads(path.read_bytes()) == "computed"


def test_the_prefetch_computes_its_plan_and_reports_a_failure_without_stopping(project, capsys):
    def broken():
        raise ValueError("no such value")

    @shared.shared_value()
    def probe():
        return 42

    assert shared.prefetch((broken, probe)) == 1
    said = capsys.readouterr().err
    assert f"residlab prefetch: process {os.getpid()}" in said
    assert "residlab prefetch: broken failed: ValueError: no such value" in said
    assert render_cache.render_cached("probe", (), lambda: None) == 42  # stored for the pages, under its name


def test_the_prefetch_stops_when_its_render_is_gone(project):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    calls = []
    assert shared.prefetch((lambda: calls.append(1),), render=int(dead.stdout)) == 0
    assert calls == []
    assert shared.prefetch((lambda: calls.append(1),), render=os.getpid()) == 0 and calls == [1]


def test_outside_a_render_the_prefetch_does_nothing(monkeypatch, capsys):
    monkeypatch.delenv(render_cache.PROJECT_ROOT_ENVIRONMENT, raising=False)
    assert shared.prefetch((lambda: pytest.fail("computed outside a render"),)) == 0
    assert "nothing to do" in capsys.readouterr().err


def test_every_planned_value_is_a_shared_value_of_the_front_door():
    """The prefetch plan holds the very functions pages call, so its cache entries are theirs (one name each)."""
    import residlab.course as front_door

    offered = [getattr(front_door, name) for name in front_door.__all__]
    for value in shared.PREFETCH:  # the copy model's training reaches pages as trained_copy_model and training_log
        assert any(value is door for door in offered) or value is shared.copy_model_training, value.__name__
        assert value.__wrapped__.__name__ == value.__name__
    assert front_door.trained_copy_model is shared.trained_copy_model and front_door.training_log is shared.training_log


def test_no_runner_carries_the_render_cache():
    for runner in (ROOT / "assets" / "labs").glob("*.py"):
        text = runner.read_text(encoding="utf-8")
        assert "render_cache" not in text and "QUARTO_PROJECT_ROOT" not in text, runner.name
