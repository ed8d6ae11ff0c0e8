"""The audit hashes its parameters twice, whatever the number of runs, and still catches a run that writes to one:
an in-place write (under ``torch.inference_mode``, where the runs execute) bumps the tensor's version counter and
the run is re-hashed and named; a write that bypasses the counter and persists is caught by the closing hash."""

from __future__ import annotations

import weakref

import pytest
import torch

from residlab import audit
from residlab.audit import runs as audit_runs

CLEAN, CORRUPT, TARGET, RIVAL = (5, 17, 3, 40, 2), (9, 17, 3, 40, 2), 12, 30


def _audit_input():
    return audit.AuditInput(CLEAN, CORRUPT, TARGET, RIVAL)


def _all_writes(subject) -> list:
    return [audit.DeclaredSite(c, b, len(CLEAN) - 1) for b in range(len(subject.blocks)) for c in ("attn", "mlp")]


def _count_hashes(monkeypatch) -> list:
    calls = []
    real = audit_runs.parameter_digests

    def counted(model):
        calls.append(1)
        return real(model)

    monkeypatch.setattr(audit_runs, "parameter_digests", counted)
    return calls


@pytest.mark.parametrize("writes", [1, 6])
def test_an_audit_hashes_its_parameters_twice_whatever_the_number_of_writes(writes, monkeypatch):
    subject = audit.build_specimen("gpt_neox", 0)
    calls = _count_hashes(monkeypatch)
    packet = audit.build_packet(subject, _audit_input(), _all_writes(subject)[:writes])
    assert len(calls) == 2
    per_run = packet["measurement"]["checks"]["parameter_digest_per_run"]
    assert len(per_run) == 2 + 2 * writes
    digest = packet["model"]["parameters"]["digest"]
    assert {d for run in per_run for d in (run["before"], run["after"])} == {digest}
    assert digest == audit.parameter_digests(subject.model)["digest"]


def _write_during(subject, run_index: int, write) -> None:
    """A forward hook on the first block that calls ``write(parameter)`` during run ``run_index`` (0-based)."""
    fired = []
    parameter = next(subject.blocks[0].parameters())

    def hook(module, args, output):
        fired.append(1)
        if len(fired) == run_index + 1:
            write(parameter)

    subject.blocks[0].register_forward_hook(hook)


def test_an_in_place_write_under_inference_mode_is_caught_and_the_run_named(monkeypatch):
    subject = audit.build_specimen("gpt_neox", 0)
    calls = _count_hashes(monkeypatch)
    assert not torch.is_inference_mode_enabled()
    _write_during(subject, 3, lambda p: (torch.is_inference_mode_enabled() or pytest.fail("not under inference_mode"),
                                         p.mul_(1.5)))  # fmt: skip
    sites = _all_writes(subject)[:2]
    with pytest.raises(audit.AuditError, match=r"run patch blocks\.0\.attn_write@4: the parameters changed during the run"):
        audit.build_packet(subject, _audit_input(), sites)
    assert len(calls) == 3  # before, the written run re-hashed when its counter moved, after
    runs, _ = audit.run_audit(audit.build_specimen("gpt_neox", 0), _audit_input(), sites)
    assert len({run.digest_after for run in runs}) == 1  # the same audit without the write: nothing flagged


def test_a_write_the_version_counter_misses_is_caught_by_the_closing_hash():
    subject = audit.build_specimen("gpt_neox", 0)
    _write_during(subject, 1, lambda p: p.data.mul_(1.5))  # .data has its own version counter
    with pytest.raises(audit.AuditError, match="changed during the audit by a write no version counter saw"):
        audit.build_packet(subject, _audit_input(), _all_writes(subject)[:1])


def test_a_swapped_parameter_is_re_hashed():
    subject = audit.build_specimen("gpt_neox", 0)
    block = subject.blocks[0]
    name, parameter = next(block.named_parameters())
    module_name, _, attribute = name.rpartition(".")
    owner = block.get_submodule(module_name) if module_name else block

    def swap(p):
        setattr(owner, attribute, torch.nn.Parameter(p.detach().clone() + 1, requires_grad=False))

    _write_during(subject, 0, swap)
    with pytest.raises(audit.AuditError, match=r"run clean: the parameters changed during the run"):
        audit.build_packet(subject, _audit_input(), _all_writes(subject)[:1])


def test_parameters_without_a_version_counter_are_hashed_after_every_run(monkeypatch):
    subject = audit.build_specimen("gpt_neox", 0)
    with torch.inference_mode():  # an inference tensor keeps no version counter
        subject.blocks[0].input_layernorm.weight = torch.nn.Parameter(torch.ones(subject.head.weight.shape[1]),
                                                                      requires_grad=False)  # fmt: skip
    calls = _count_hashes(monkeypatch)
    runs, _ = audit.run_audit(subject, _audit_input(), _all_writes(subject)[:1])
    assert len(calls) == 1 + len(runs) + 1
    assert len({run.digest_after for run in runs}) == 1


def test_an_intervened_run_is_compared_as_it_ends_and_keeps_no_records(monkeypatch):
    """The audit holds two runs' site records (clean and corrupt) whatever the number of writes: each intervened
    run is compared with its source before the next run starts, then kept as its logits and digests only."""
    subject = audit.build_specimen("gpt_neox", 0)
    sites = _all_writes(subject)[:3]
    records, alive = [], []  # a weak reference to one record tensor of each run; the live ones at each comparison
    execute, compare = audit_runs.execute, audit_runs.compare_to_source

    def recorded(*args, **kwargs):
        run = execute(*args, **kwargs)
        records.append(weakref.ref(next(iter(run.sites.values()))))
        return run

    def compared(run, source):
        alive.append(sum(reference() is not None for reference in records))
        return compare(run, source)

    monkeypatch.setattr(audit_runs, "execute", recorded)
    monkeypatch.setattr(audit_runs, "compare_to_source", compared)
    runs, comparisons = audit.run_audit(subject, _audit_input(), sites)
    assert [run.run_id for run in runs[:2]] == ["clean", "corrupt"] and all(run.sites for run in runs[:2])
    assert len(runs) == 2 + 2 * len(sites) and all(run.sites == {} and run.logits is not None for run in runs[2:])
    assert [c["run"] for c in comparisons] == [run.run_id for run in runs[2:]]
    assert alive == [3] * len(comparisons)  # clean, corrupt and the run being compared: never more
    assert all(c["upstream_identical"] == c["upstream_sites"] and c["declared_equals_replacement"] for c in comparisons)
