"""The render cache: inert outside a site render; within one, the second page loads what the first computed, equal
bit for bit; a change to any source gives a new key, so nothing is reused across it; the freeze guard empties it."""

from __future__ import annotations

import torch

from residlab.build import freeze_guard
from residlab.course import cache_layouts, copy_model, render_cache
from residlab.pythia.specimen import build_specimen_model


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
    assert {"course/copy_model.py", "pythia/specimen.py", "locks/pythia-14m.lock.json"} <= files
    assert len(render_cache.render_source_digest()) == 64


def test_cached_models_equal_computed_ones(monkeypatch, tmp_path):
    monkeypatch.setenv(render_cache.RENDER_CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    for _ in range(2):  # the first call stores, the second loads
        specimen = cache_layouts.specimen_model(0)
    reference = build_specimen_model(0)
    assert all(torch.equal(a, b) for a, b in zip(specimen.state_dict().values(), reference.state_dict().values()))
    assert not specimen.training
    stored = render_cache.render_cached("copy_model_training", (3, 7, 0.0, 2),
                                        lambda: copy_model.train_copy_model(steps=3))  # fmt: skip
    loaded = render_cache.render_cached("copy_model_training", (3, 7, 0.0, 2), lambda: None)
    assert copy_model.weights_sha256(loaded) == copy_model.weights_sha256(stored)


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
