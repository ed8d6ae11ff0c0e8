"""The Lesson 2.1 copy-model audit and gradient profile (residlab.course.models.lesson_lab).

The model is trained once for the whole module (a few seconds on one thread); every test reads that run.
"""

from __future__ import annotations

import json

import pytest
import torch

from residlab.course.models import lesson_lab
from residlab.course.models.copy_model import HookPoint
from residlab.course.lesson.lesson_figures import plot_gradient_profile, total_effect_reading
from residlab.course.ui.tables import markdown_table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model() -> lesson_lab.CopyModel:
    return lesson_lab.default_training()[0]


@pytest.fixture(scope="module")
def audit(model) -> lesson_lab.AuditResult:
    return lesson_lab.audit_model(model)


@pytest.fixture(scope="module")
def profile(lesson_gradient_profile) -> lesson_lab.GradientProfile:
    return lesson_gradient_profile


def by_name(items, attribute: str) -> dict:
    return {getattr(item, attribute): item for item in items}


# ---- the document's published figures -------------------------------------------------------------------------


def test_readouts_reproduce_the_published_figures(audit):
    readouts = by_name(audit.readouts, "stage")
    assert f"{readouts['embedding'].p_target:.3f}" == "0.000"
    assert f"{readouts['after attention'].p_target:.3f}" == "0.860"
    assert f"{readouts['after MLP'].p_target:.3f}" == "1.000"
    assert readouts["after attention"].top_token == readouts["after MLP"].top_token == lesson_lab.TARGET_TOKEN


def test_interventions_reproduce_the_published_figures(audit):
    cases = by_name(audit.interventions, "case")
    published = {
        "clean": ("1.000", 7),
        "attention ablated": ("0.007", 8),
        "MLP ablated": ("0.860", 7),
        "corrupt": ("0.000", 2),
        "corrupt + clean attention patch": ("1.000", 7),
    }
    for case, (probability, top) in published.items():
        assert (f"{cases[case].p_target:.3f}", cases[case].top_token) == (probability, top), case


def test_training_reaches_perfect_batch_accuracy():
    log = lesson_lab.default_training()[1]
    assert [record.step for record in log] == [1, 100, 300, 700]
    assert log[-1].batch_accuracy == 1.0
    assert log[-1].loss < log[0].loss


# ---- the audit agrees with the trace ---------------------------------------------------------------------------


def test_residual_additions_hold_in_the_trace(model):
    trace = lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS).trace
    torch.testing.assert_close(trace.resid_mid, trace.resid_pre + trace.attn_write)
    torch.testing.assert_close(trace.resid_post, trace.resid_mid + trace.mlp_write)


def test_patched_run_carries_the_clean_attention_write(model):
    clean = lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS)
    clean_write = clean.trace.attn_write[:, -1, :]  # (1, d)
    patched = lesson_lab.run_traced(model, lesson_lab.CORRUPT_TOKENS, patch_attn=clean_write)
    corrupt = lesson_lab.run_traced(model, lesson_lab.CORRUPT_TOKENS)
    assert torch.equal(patched.trace.attn_write[:, -1, :], clean_write)
    # Only the declared site changed: the other positions keep the corrupt run's own attention writes.
    assert torch.equal(patched.trace.attn_write[:, :-1, :], corrupt.trace.attn_write[:, :-1, :])
    assert torch.equal(patched.trace.resid_pre, corrupt.trace.resid_pre)


def test_ablated_writes_are_zero(model):
    no_attention = lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS, ablate_attn=True).trace
    no_mlp = lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS, ablate_mlp=True).trace
    assert not no_attention.attn_write.any()
    assert torch.equal(no_attention.resid_mid, no_attention.resid_pre)
    assert not no_mlp.mlp_write.any()
    assert torch.equal(no_mlp.resid_post, no_mlp.resid_mid)


def test_interventions_never_mutate_the_clean_run(model):
    clean = lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS)
    before = clean.trace.clone()
    logits_before = clean.logits.clone()
    patch = clean.trace.attn_write[:, -1, :]
    lesson_lab.run_traced(model, lesson_lab.CORRUPT_TOKENS, patch_attn=patch)
    lesson_lab.run_traced(model, lesson_lab.CORRUPT_TOKENS, patch_mlp=clean.trace.mlp_write[:, -1, :])
    lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS, ablate_attn=True)
    lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS, ablate_mlp=True)
    lesson_lab.audit_model(model)
    for name in before.__dataclass_fields__:
        assert torch.equal(getattr(clean.trace, name), getattr(before, name)), name
    assert torch.equal(clean.logits, logits_before)
    # And a fresh clean run still gives the same numbers: the model itself was not changed either.
    assert torch.equal(lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS).trace.resid_post, before.resid_post)


def test_rival_is_the_corrupt_runs_top_token(audit):
    assert audit.rival == by_name(audit.interventions, "case")["corrupt"].top_token == 2


def test_contribution_audit_is_consistent_with_the_trace(model, audit):
    trace = lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS).trace
    attention, mlp = by_name(audit.components, "component").values()
    direction = model.unembed.weight[audit.target] - model.unembed.weight[audit.rival]
    with torch.no_grad():
        assert attention.direct_projection == pytest.approx(torch.dot(direction, trace.attn_write[0, -1]).item())
        assert mlp.direct_projection == pytest.approx(torch.dot(direction, trace.mlp_write[0, -1]).item())
    assert attention.write_norm == pytest.approx(audit.write_norms.attention)
    assert mlp.write_norm == pytest.approx(audit.write_norms.mlp)
    # The MLP write is the last write: zeroing it and removing it from the final state are the same change, and
    # both effects are what the write adds, so they agree in sign and value.
    assert mlp.total_effect == pytest.approx(mlp.direct_effect_exact, abs=1e-4)
    assert mlp.total_effect_p_target == pytest.approx(
        by_name(audit.interventions, "case")["clean"].p_target - by_name(audit.interventions, "case")["MLP ablated"].p_target)
    # Nothing is written after the MLP, so all of its direction is retained.
    assert mlp.retained_fraction == pytest.approx(1.0)
    # Patching the clean attention write restores the clean logit difference in this one-block model.
    assert attention.patch_recovery == pytest.approx(1.0, abs=1e-4)


def test_final_layernorm_makes_raw_projection_and_exact_effect_differ(audit):
    # The caveat the lesson states: d^T w is not the output change once a final LayerNorm rescales the state.
    for component in audit.components:
        assert component.direct_projection != pytest.approx(component.direct_effect_exact, rel=1e-3)


def test_audit_rejects_malformed_tokens(model):
    with pytest.raises(ValueError, match="corrupt tokens"):
        lesson_lab.audit_model(model, corrupt_tokens=(2, 3, 9))
    with pytest.raises(ValueError, match="patch must have shape"):
        lesson_lab.run_traced(model, lesson_lab.CORRUPT_TOKENS, patch_attn=torch.zeros(lesson_lab.D_MODEL))
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_hook_points_own_nothing_and_the_block_takes_no_intervention_arguments(model):
    block = model.block
    for name in lesson_lab.TRACE_HOOK_POINTS.values():
        assert isinstance(getattr(block, name), HookPoint) and list(getattr(block, name).parameters()) == []
    assert not any("hook_" in key for key in model.state_dict())
    resid_pre = model.embed(torch.tensor([lesson_lab.CLEAN_TOKENS]))
    for keyword in ("trace", "ablate_attn", "patch_mlp"):
        with pytest.raises(TypeError):
            block(resid_pre, **{keyword: None})


def test_training_restores_the_thread_setting():
    before = torch.get_num_threads()
    lesson_lab.train_copy_model(steps=2)
    assert torch.get_num_threads() == before


def test_the_statements_the_lesson_page_makes_about_the_audit(audit):
    attention, mlp = audit.components
    cases = by_name(audit.interventions, "case")
    # "Scale is not leverage": the larger write is not the one pointing more along d.
    assert attention.write_norm > mlp.write_norm
    assert mlp.direct_projection > attention.direct_projection > 0
    # "The final normaliser breaks the simple sum": positive projection, opposite-signed exact effect.
    assert attention.direct_effect_exact < 0
    # "Use runs through later computation": zeroing attention removes far more than its direct effect adds, and
    # with the other sign (both are what the write adds: the difference is indirect, through what is recomputed after it).
    assert attention.total_effect > 0 > attention.direct_effect_exact
    assert "of the opposite sign to its direct effect" in total_effect_reading(attention.total_effect,
                                                                               attention.direct_effect_exact)
    # Survival: the later MLP write adds to the attention write's direction.
    assert attention.retained_fraction > 1
    # Recovery: full for attention (by construction), partial for the MLP, whose patch leaves the rival on top.
    assert mlp.patch_recovery < 0.5
    assert cases["corrupt + clean MLP patch"].top_token == audit.rival


def test_attention_patch_reproduces_the_clean_query_state(model):
    # The page explains full recovery as guaranteed: only position 0 differs between the runs.
    clean = lesson_lab.run_traced(model, lesson_lab.CLEAN_TOKENS)
    patched = lesson_lab.run_traced(
        model, lesson_lab.CORRUPT_TOKENS, patch_attn=clean.trace.attn_write[:, -1, :]
    )
    torch.testing.assert_close(patched.trace.resid_post[:, -1], clean.trace.resid_post[:, -1])
    torch.testing.assert_close(patched.logits, clean.logits)


def test_weights_hash_identifies_the_weights(model):
    import hashlib

    # The documented definition, computed here: name, dtype, shape and raw bytes of every entry, in name order.
    expected = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        expected.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        expected.update(tensor.detach().contiguous().numpy().tobytes())
    first = lesson_lab.weights_sha256(model)
    assert first == expected.hexdigest()
    assert lesson_lab.weights_sha256(lesson_lab.train_copy_model(steps=2)) != first


# ---- the gradient profile (Figure 5) ---------------------------------------------------------------------------


def test_profile_has_one_value_per_depth_per_arrangement(profile):
    assert list(profile.medians) == ["pre-LN", "post-LN", "pre-LN + final LN"]
    for values in profile.medians.values():
        assert len(values) == 18


def test_figure_has_labelled_axes_and_legend(profile):
    import matplotlib

    matplotlib.use("Agg")
    figure = plot_gradient_profile(profile)
    ax = figure.axes[0]
    assert ax.get_xlabel() and ax.get_ylabel()
    assert ax.get_yscale() == "log"
    (legend,) = figure.legends
    assert [text.get_text() for text in legend.get_texts()] == ["pre-LN", "post-LN", "pre-LN + final LN"]
    assert len(ax.lines) == 3 and all(len(line.get_xdata()) == 18 for line in ax.lines)
    # The legend hides no point (it lies outside the axes), and the log axis is labelled at both ends of the data.
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    values = [value for line in ax.lines for value in line.get_ydata()]
    ticks = ax.get_yticks()
    assert min(ticks) == pytest.approx(min(values)) and max(ticks) == pytest.approx(max(values))
    low, high = ax.get_ylim()
    assert low < min(values) and max(values) < high


# ---- the report --------------------------------------------------------------------------------------------------


def test_json_report_holds_the_same_numbers(capsys):
    assert lesson_lab.main(["--json", "--skip-profile"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["profile"] is None
    cases = {case["case"]: case for case in document["audit"]["interventions"]}
    assert round(cases["attention ablated"]["p_target"], 3) == 0.007
    assert [row["stage"] for row in document["audit"]["readouts"]] == ["embedding", "after attention", "after MLP"]


def test_markdown_table_shape_and_errors():
    table = markdown_table(["a", "b"], [[1, "x"]], align="rl")
    assert table.splitlines() == ["| a | b |", "| ---: | :--- |", "| 1 | x |"]
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        markdown_table(["a", "b"], [[1]])
    with pytest.raises(ValueError, match="align"):
        markdown_table(["a", "b"], [[1, 2]], align="lx")
