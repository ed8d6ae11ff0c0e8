"""Every TransformerLens and nnsight snippet a page shows runs here, on the synthetic specimen (Pythia-14M's
architecture, random weights), and gives residlab's numbers: the captures bit for bit, the patch and the zero ablation
within the tolerance the audit's packet declares."""

from __future__ import annotations

import pytest
import torch

from snippet_runner import run_snippet
from residlab import audit
from residlab.course import peers
from residlab.course.lab06 import pythia_audit
from residlab.pythia import observe

CAPTURES = peers.BOXES["capture"]["files"]
PATCHES = peers.BOXES["patch"]["files"]
LESSON_CAPTURES = peers.BOXES["lesson_capture"]["files"]


def test_the_boxes_name_every_snippet_file_and_nothing_else():
    named = {name for box in peers.BOXES.values() for name in box["files"].values()}
    assert named == {path.name for path in peers.SNIPPETS.glob("*.py")}


@pytest.mark.parametrize("peer", CAPTURES)
def test_a_capture_snippet_gives_residlabs_capture_bit_for_bit(peer, specimen_dir, specimen_model, fixed_sentence_ids):
    expected = observe.capture_residuals(specimen_model, fixed_sentence_ids).sites
    found = run_snippet(CAPTURES[peer], model_dir=str(specimen_dir), hf_model=specimen_model, input_ids=fixed_sentence_ids)
    depth = specimen_model.config.num_hidden_layers
    names = {"resid_pre": "resid_pre", "attn_out": "attn_write", "mlp_out": "mlp_write", "resid_post": "resid_post"}
    assert all(len(found[name]) == depth for name in names)
    for name, site in names.items():
        for block in range(depth):
            assert torch.equal(found[name][block], expected[f"blocks.{block}.{site}"]), (peer, name, block)
    assert torch.equal(found["final"], expected[observe.FINAL_NORM_SITE]), peer


@pytest.mark.parametrize("peer", LESSON_CAPTURES)
def test_a_lesson_capture_snippet_gives_the_lessons_trace_bit_for_bit(peer, trained_copy_model, lesson_tokens):
    from residlab.course.models import lesson_lab

    expected = lesson_lab.run_traced(trained_copy_model, lesson_tokens).trace
    found = run_snippet(LESSON_CAPTURES[peer], copy_model=trained_copy_model, tokens=lesson_tokens)
    names = {"resid_pre": "resid_pre", "attn_out": "attn_write", "resid_mid": "resid_mid", "mlp_out": "mlp_write",
             "resid_post": "resid_post"}  # fmt: skip
    for name, field in names.items():
        assert torch.equal(found[name], getattr(expected, field)), (peer, name)


@pytest.fixture(scope="module")
def part3_packet(specimen_dir, tmp_path_factory):
    """Lab 06 Part 3's audit, on the specimen directory instead of Pythia-14M's: every write at the last position."""
    subject = audit.load_model_directory(specimen_dir)
    clean = audit.tokenize_prompt(subject, pythia_audit.CLEAN, "clean")
    corrupt = audit.tokenize_prompt(subject, pythia_audit.CORRUPT, "corrupt")
    target = audit.single_token(subject, pythia_audit.TARGET, "target")
    rival = audit.single_token(subject, pythia_audit.RIVAL, "rival")
    audit_input = audit.AuditInput(tuple(clean), tuple(corrupt), target, rival)
    last = len(clean) - 1
    sites = [audit.DeclaredSite("attn", block, last) for block in range(len(subject.blocks))]
    packet = audit.build_packet(subject, audit_input, sites)
    return audit_input, packet["measurement"]


def within(value: float, measured: dict) -> bool:
    tolerance = measured["tolerance"]
    return abs(value - measured["value"]) <= tolerance["absolute"] + tolerance["relative"] * abs(measured["value"])


@pytest.mark.parametrize("peer", PATCHES)
@pytest.mark.parametrize("block", [0, 5])
def test_a_patch_snippet_gives_the_audits_total_effect_and_patch_recovery(peer, block, specimen_dir,
                                                                          specimen_model, part3_packet):
    audit_input, measurement = part3_packet
    position = len(audit_input.clean_ids) - 1
    found = run_snippet(PATCHES[peer], model_dir=str(specimen_dir), hf_model=specimen_model,
                        clean_ids=torch.tensor([audit_input.clean_ids]), corrupt_ids=torch.tensor([audit_input.corrupt_ids]),
                        block=block, position=position, target=audit_input.target, rival=audit_input.rival)  # fmt: skip
    result = next(r for r in measurement["results"] if r["site"] == f"blocks.{block}.attn_write")
    clean, corrupt = (measurement["baseline"][run]["value"] for run in ("clean", "corrupt"))
    assert within(clean - found["ablated"], result["total_effect"]), (peer, clean - found["ablated"], result)
    assert within((found["patched"] - corrupt) / (clean - corrupt), result["patch_recovery"]), (peer, result)
    # Not vacuous: the intervention moved the metric (a snippet that changed nothing would give 0 and R = 0).
    assert abs(result["total_effect"]["value"]) > 1e-4 and abs(result["patch_recovery"]["value"]) > 1e-4
