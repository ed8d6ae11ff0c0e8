"""residlab.capture.recording: the one hook mechanism behind Lab 05's capture and the audit, on a tiny torch module."""

from __future__ import annotations

import platform

import pytest
import torch

from residlab.capture.patching import set_to
from residlab.capture.recording import SiteFiredTwice, record_sites
from residlab.capture.versions import library_versions


class Tiny(torch.nn.Module):
    """x (1, n, 4) -> linear -> in-place ReLU (overwrites the linear's output) -> linear."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.first = torch.nn.Linear(4, 4)
        self.relu = torch.nn.ReLU(inplace=True)
        self.last = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.last(self.relu(self.first(x)))


def sites(model):
    return [("x", model.first, "input"), ("first", model.first, "output"), ("out", model.last, "output")]


def hook_count(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_records_are_copies_taken_when_the_hook_fired_and_ordinary_tensors():
    model, x = Tiny(), torch.randn(1, 3, 4)
    with torch.inference_mode():
        expected_first = model.first(x)
    assert (expected_first < 0).any()  # the in-place ReLU will overwrite these entries after the hook
    with record_sites(sites(model)) as recorder, torch.inference_mode():
        model(x)
    first = recorder.records["first"]
    assert torch.equal(first, expected_first)  # negative entries kept: copied before the ReLU ran
    assert recorder.names == ["x", "first", "out"] and recorder.missing() == []
    assert recorder.return_kinds == {"first": "tensor", "out": "tensor"}
    assert not any(t.is_inference() for t in recorder.records.values())
    first.zero_()  # an ordinary tensor: writable outside inference mode
    assert hook_count(model) == 0 and recorder.handles_still_attached() == 0


def test_a_record_taken_with_gradients_on_is_detached():
    model, x = Tiny(), torch.randn(1, 2, 4)
    with record_sites(sites(model)) as recorder:
        model(x).sum().backward()
    assert all(not t.requires_grad and t.grad_fn is None for t in recorder.records.values())


def test_an_edit_puts_the_vector_at_its_position_before_downstream_reads_it():
    model, x = Tiny(), torch.randn(1, 3, 4)
    vector = torch.tensor([1.0, -2.0, 3.0, -4.0])
    with record_sites(sites(model), edits={"first": set_to(vector, 1)}) as recorder, torch.inference_mode():
        out = model(x)
    with torch.inference_mode():
        clean_first = model.first(x)
        patched = clean_first.clone()
        patched[0, 1] = vector
        expected_out = model.last(torch.relu(patched))
    assert torch.equal(recorder.records["first"], patched)
    assert torch.equal(out, expected_out) and torch.equal(recorder.records["out"], expected_out)


def test_an_edit_at_a_site_that_is_not_recorded_is_refused_before_any_hook():
    model = Tiny()
    with pytest.raises(ValueError, match=r"edited site\(s\) 'nowhere' are not among the sites recorded"):
        with record_sites(sites(model), edits={"nowhere": set_to(torch.zeros(4), 0)}):
            pass
    assert hook_count(model) == 0


def test_a_site_firing_twice_raises_and_every_hook_is_removed():
    model, x = Tiny(), torch.randn(1, 2, 4)
    with pytest.raises(SiteFiredTwice, match="site x fired twice"):
        with record_sites(sites(model)), torch.inference_mode():
            model(x)
            model(x)
    assert hook_count(model) == 0


def test_library_versions_name_python_and_mark_a_missing_distribution():
    versions = library_versions(["torch", "residlab-no-such-distribution"])
    assert versions["python"] == platform.python_version()
    assert versions["torch"] in (torch.__version__, torch.__version__.split("+")[0])
    assert versions["residlab-no-such-distribution"] is None
