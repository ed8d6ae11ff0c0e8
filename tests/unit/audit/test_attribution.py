"""Direct logit attribution with the final normaliser's scale frozen (residlab.audit.attribution): its terms sum
to the logit difference the model computes, and each term is recomputed here in float64 from the formula."""

from __future__ import annotations

import pytest
import torch

from residlab.audit.attribution import FINAL_NORM_BIAS, OUTPUT_BIAS, direct_logit_attribution

# float32 rounding of a sum of a few terms of size ~10 (the copy model's), with a margin.
ABSOLUTE, RELATIVE = 1e-5, 1e-5


def reference_terms(norm, head, writes: dict, target: int, rival: int, centre: bool) -> dict:
    """The formula, in float64, with the scale computed from the summed state by hand."""
    vectors = {name: w.double() for name, w in writes.items()}
    state = sum(vectors.values())
    centred = state - state.mean() if centre else state
    scale = (centred.pow(2).sum() / state.numel() + norm.eps).sqrt()
    direction = (head.weight[target] - head.weight[rival]).double()
    gain = norm.weight.double()
    terms = {name: float((direction * gain) @ ((w - w.mean()) if centre else w) / scale) for name, w in vectors.items()}
    terms[FINAL_NORM_BIAS] = float(direction @ norm.bias.double()) if getattr(norm, "bias", None) is not None else 0.0
    terms[OUTPUT_BIAS] = float(head.bias[target] - head.bias[rival]) if head.bias is not None else 0.0
    return terms


@pytest.mark.slow
def test_the_copy_models_terms_sum_to_its_logit_difference():
    from residlab.course.models import lesson_lab

    model = lesson_lab.default_training()[0]
    audit = lesson_lab.audit_model(model)
    attribution = audit.attribution
    clean = next(case for case in audit.interventions if case.case == "clean")
    # The metric the attribution reads is the clean run's own, bit for bit.
    assert attribution.logit_difference == clean.logit_difference
    assert attribution.total == pytest.approx(clean.logit_difference, rel=RELATIVE, abs=ABSOLUTE)
    run = lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS)
    writes = {"embedding": run.trace.resid_pre[0, -1], "attention write": run.trace.attn_write[0, -1],
              "MLP write": run.trace.mlp_write[0, -1]}  # fmt: skip
    with torch.no_grad():
        expected = reference_terms(model.final_norm, model.unembed, writes, audit.target, audit.rival, centre=True)
    found = {**attribution.terms, **attribution.bias_terms}
    assert list(found) == list(expected)
    for name, value in expected.items():
        assert found[name] == pytest.approx(value, rel=RELATIVE, abs=ABSOLUTE), name
    assert sum(expected.values()) == pytest.approx(clean.logit_difference, rel=RELATIVE, abs=ABSOLUTE)
    # Attribution is not removal: the attention write's term and its exact direct effect differ in sign here.
    attention = audit.components[0]
    assert attribution.terms["attention write"] * attention.direct_effect_exact < 0


@pytest.mark.parametrize("kind", ["LayerNorm", "RMSNorm"])
def test_terms_sum_exactly_with_both_bias_terms_named(kind):
    torch.manual_seed(0)
    width, vocab = 16, 10
    norm = torch.nn.LayerNorm(width) if kind == "LayerNorm" else torch.nn.RMSNorm(width, eps=1e-6)
    head = torch.nn.Linear(width, vocab, bias=True)
    with torch.no_grad():
        norm.weight.normal_(1.0, 0.3)
        if kind == "LayerNorm":
            norm.bias.normal_(0.0, 0.3)
    writes = {f"write {i}": torch.randn(width) * (i + 1) for i in range(5)}
    attribution = direct_logit_attribution(norm, head, writes, target=3, rival=7)
    assert attribution.total == pytest.approx(attribution.logit_difference, rel=RELATIVE, abs=ABSOLUTE)
    with torch.no_grad():
        expected = reference_terms(norm, head, writes, 3, 7, centre=kind == "LayerNorm")
    found = {**attribution.terms, **attribution.bias_terms}
    for name, value in expected.items():
        assert found[name] == pytest.approx(value, rel=RELATIVE, abs=ABSOLUTE), name
    assert attribution.bias_terms[OUTPUT_BIAS] != 0.0
    assert (attribution.bias_terms[FINAL_NORM_BIAS] != 0.0) == (kind == "LayerNorm")


def test_an_unknown_normaliser_and_no_writes_are_refused_in_one_line():
    head = torch.nn.Linear(4, 3)
    with pytest.raises(ValueError, match="knows LayerNorm and RMSNorm, not Identity"):
        direct_logit_attribution(torch.nn.Identity(), head, {"w": torch.ones(4)}, 0, 1)
    with pytest.raises(ValueError, match="at least one write"):
        direct_logit_attribution(torch.nn.LayerNorm(4), head, {}, 0, 1)


@pytest.mark.parametrize("specimen", ["gpt2", "gpt_neox"])
def test_the_packets_dla_terms_and_bias_terms_sum_to_its_clean_metric(specimen):
    """Every write declared at the readout position: the packet's DLA terms, the embedding's (recomputed here) and
    the packet's two bias terms sum to its clean metric; each term equals the float64 formula's."""
    from residlab import audit

    subject = audit.build_specimen(specimen, seed=0)
    audit_input = audit.AuditInput((5, 17, 3, 40, 2), (9, 17, 3, 40, 2), 12, 30)
    last = len(audit_input.clean_ids) - 1
    sites = [audit.DeclaredSite(c, b, last) for b in range(len(subject.blocks)) for c in ("attn", "mlp")]
    measurement = audit.build_packet(subject, audit_input, sites)["measurement"]
    clean = next(run for run in audit.run_audit(subject, audit_input, sites)[0] if run.run_id == "clean")
    writes = {"embedding": clean.sites["blocks.0.resid_pre"][last]}
    writes.update({site.name: clean.sites[site.name][last] for site in sites})
    with torch.no_grad():
        expected = reference_terms(subject.final_norm, subject.head, writes, 12, 30, centre=True)
    recorded = {row["site"]: row["dla_term"]["value"] for row in measurement["results"]}
    for name, value in recorded.items():
        assert value == pytest.approx(expected[name], rel=RELATIVE, abs=ABSOLUTE), name
    attribution = measurement["attribution"]
    assert attribution["final_normaliser_bias"]["value"] == pytest.approx(expected[FINAL_NORM_BIAS], abs=ABSOLUTE)
    assert attribution["output_bias"]["value"] == pytest.approx(expected[OUTPUT_BIAS], abs=ABSOLUTE)
    total = sum(recorded.values()) + expected["embedding"] + expected[FINAL_NORM_BIAS] + expected[OUTPUT_BIAS]
    assert total == pytest.approx(measurement["baseline"]["clean"]["value"], rel=RELATIVE, abs=ABSOLUTE)
    # Additive attribution is not removal: some write's DLA term and its exact direct effect differ.
    assert any(abs(row["dla_term"]["value"] - row["direct_effect_exact"]["value"]) > 1e-3 for row in measurement["results"])
