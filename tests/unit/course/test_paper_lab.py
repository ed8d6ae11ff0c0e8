"""Lab 04: the positional-encoding property, the post-LN block identities, and the runner against the page.

Every value is checked against a reference computed here independently: closed-form encodings from ``math``,
and a LayerNorm, attention and feed-forward forward pass written out over Python floats, one position at a time.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from residlab.course.models import lesson_lab
from residlab.course.lab04 import paper_lab
from residlab.course.lab04 import positional_encoding
from residlab.course.lab04 import traced_block
from residlab.build.runners import RUNNERS

ROOT = Path(__file__).resolve().parents[3]
RUNNER = next(runner for runner in RUNNERS if runner.filename == "read_transformer_paper.py")
RUNNER_PATH = ROOT / "assets" / "labs" / RUNNER.filename


# ---------------------------------------------------------------- the base model


def test_base_layer_count_matches_the_closed_form():
    d, d_ff = paper_lab.PAPER_BASE["d_model"], paper_lab.PAPER_BASE["d_ff"]
    attention = 4 * d * d + 4 * d  # W_Q, W_K, W_V, W_O and their biases
    feed_forward = d * d_ff + d_ff + d_ff * d + d
    norms = 2 * 2 * d
    count = paper_lab.count_base_encoder_layer()
    assert (count.attention_parameters, count.feed_forward_parameters, count.norm_parameters) == (attention, feed_forward, norms)
    assert count.layer_parameters == attention + feed_forward + norms == 3_152_384
    assert count.encoder_parameters == 6 * count.layer_parameters
    assert paper_lab.PAPER_HEAD_WIDTH == 64


# ---------------------------------------------------------------- positional encoding


def closed_form_pe(pos: float, d_model: int) -> list[float]:
    values = []
    for j in range(d_model):
        angle = pos / 10000 ** ((j - j % 2) / d_model)
        values.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
    return values


def test_encoding_matches_the_closed_form():
    encoding = positional_encoding.sinusoidal_encoding(40, 512)
    assert encoding[0].tolist() == [0.0, 1.0] * 256
    for pos in (1, 17, 39):
        assert encoding[pos].tolist() == pytest.approx(closed_form_pe(pos, 512), abs=1e-14)
    assert encoding[1, 0].item() == pytest.approx(math.sin(1.0), abs=1e-15)
    assert encoding[1, 1].item() == pytest.approx(math.cos(1.0), abs=1e-15)


def test_offset_property_holds_within_its_tolerance_and_the_wrong_map_fails():
    check = paper_lab.check_positional_encoding()
    assert check.passed and check.max_error <= check.tolerance == positional_encoding.PE_TOLERANCE
    assert [c.offset for c in check.offsets] == list(positional_encoding.PE_OFFSETS)
    for offset in check.offsets:
        assert offset.max_error <= 1e-12
        assert offset.orthogonality_error <= 1e-14
        assert offset.wrong_map_error > 0.5
    assert check.first_rows[0] == (0.0, 1.0, 0.0, 1.0, 0.0, 1.0)
    assert check.shortest_wavelength == pytest.approx(2 * math.pi)
    assert check.longest_wavelength == pytest.approx(2 * math.pi * 10000 ** (510 / 512))


def test_offset_map_moves_any_real_position_and_composes():
    d = 64
    for pos, k in ((0.0, 1), (12.5, 3), (1000.25, 41)):
        moved = positional_encoding.offset_map(k, d) @ torch.tensor(closed_form_pe(pos, d), dtype=torch.float64)
        assert moved.tolist() == pytest.approx(closed_form_pe(pos + k, d), abs=1e-11)
    composed = positional_encoding.offset_map(3, d) @ positional_encoding.offset_map(4, d)
    assert (composed - positional_encoding.offset_map(7, d)).abs().max().item() < 1e-14


def test_figure_draws_the_sine_and_cosine_columns():
    import matplotlib

    matplotlib.use("Agg")
    from residlab.course.lab04.paper_figures import plot_positional_encoding

    figure = plot_positional_encoding(100, 512)
    sine, cosine = (ax.get_images()[0].get_array() for ax in figure.axes[:2])
    assert sine.shape == cosine.shape == (100, 256)
    assert sine[3, 5] == pytest.approx(closed_form_pe(3, 512)[10]) and cosine[3, 5] == pytest.approx(closed_form_pe(3, 512)[11])
    matplotlib.pyplot.close(figure)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: positional_encoding.sinusoidal_encoding(10, 7), "positive even number, got 7"),
        (lambda: positional_encoding.sinusoidal_encoding(0, 8), "positions must be at least 1, got 0"),
        (lambda: paper_lab.check_positional_encoding(offsets=(0,)), "offsets must be positive"),
    ],
)
def test_bad_encoding_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------- the traced block


def reference_layer_norm(row: list[float], gain: list[float], bias: list[float], eps: float) -> list[float]:
    mean = sum(row) / len(row)
    variance = sum((v - mean) ** 2 for v in row) / len(row)
    return [g * (v - mean) / math.sqrt(variance + eps) + b for v, g, b in zip(row, gain, bias)]


def reference_linear(row: list[float], weight: torch.Tensor, bias: torch.Tensor) -> list[float]:
    return [sum(w * v for w, v in zip(weights, row)) + b for weights, b in zip(weight.tolist(), bias.tolist())]


def reference_attention(rows: list[list[float]], attention: torch.nn.MultiheadAttention) -> list[list[float]]:
    """Unmasked multi-head self-attention over Python floats, one head and one query position at a time."""
    width, heads = len(rows[0]), attention.num_heads
    head_width = width // heads
    w_q, w_k, w_v = attention.in_proj_weight.chunk(3)
    b_q, b_k, b_v = attention.in_proj_bias.chunk(3)
    queries = [reference_linear(r, w_q, b_q) for r in rows]
    keys = [reference_linear(r, w_k, b_k) for r in rows]
    values = [reference_linear(r, w_v, b_v) for r in rows]
    outputs = []
    for i in range(len(rows)):
        concatenated = []
        for h in range(heads):
            part = slice(h * head_width, (h + 1) * head_width)
            scores = [sum(a * b for a, b in zip(queries[i][part], keys[j][part])) / math.sqrt(head_width) for j in range(len(rows))]
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            total = sum(weights)
            concatenated += [sum(weights[j] / total * values[j][part][c] for j in range(len(rows))) for c in range(head_width)]
        outputs.append(reference_linear(concatenated, attention.out_proj.weight, attention.out_proj.bias))
    return outputs


def reference_feed_forward(row: list[float], layer) -> list[float]:
    hidden = [max(0.0, v) for v in reference_linear(row, layer.linear1.weight, layer.linear1.bias)]
    return reference_linear(hidden, layer.linear2.weight, layer.linear2.bias)


def reference_post_ln(x: list[list[float]], layer) -> tuple[list[list[float]], list[list[float]]]:
    """u = LN1(x + SA(x)), out = LN2(u + FF(u)), from the paper's equations alone."""
    norm1 = (layer.norm1.weight.tolist(), layer.norm1.bias.tolist(), layer.norm1.eps)
    norm2 = (layer.norm2.weight.tolist(), layer.norm2.bias.tolist(), layer.norm2.eps)
    attention = reference_attention(x, layer.self_attn)
    u = [reference_layer_norm([a + b for a, b in zip(r, w)], *norm1) for r, w in zip(x, attention)]
    out = [reference_layer_norm([a + b for a, b in zip(r, reference_feed_forward(r, layer))], *norm2) for r in u]
    return u, out


@pytest.fixture(scope="module")
def traces():
    return paper_lab.trace_arrangements()


def test_post_ln_identities_hold_within_their_tolerance(traces):
    for trace in traces.values():
        for check in trace.identities:
            assert check.max_error <= paper_lab.TRACE_TOLERANCE, check
    assert [c.name for c in traces["post-LN"].identities] == [
        "SA(x) = attention by hand", "u = LN1(x + SA(x))", "FF(u) = feed-forward by hand", "out = LN2(u + FF(u))",
    ]


def test_captures_match_an_independent_forward_over_python_floats(traces):
    layer = paper_lab.build_encoder_layers()["post-LN"]
    capture = traces["post-LN"].capture
    x = capture.block_input[0].tolist()
    with torch.no_grad():
        u, out = reference_post_ln(x, layer)
        attention = reference_attention(x, layer.self_attn)
    assert capture.attention_write[0].tolist() == [pytest.approx(row, abs=1e-12) for row in attention]
    assert capture.norm1_output[0].tolist() == [pytest.approx(row, abs=1e-12) for row in u]
    assert capture.block_output[0].tolist() == [pytest.approx(row, abs=1e-12) for row in out]
    # The input is what the lab says: standard-normal token vectors plus the sinusoidal encoding.
    generator = torch.Generator().manual_seed(paper_lab.TRACE_SEED + 1)
    tokens = torch.randn(1, paper_lab.TRACE_POSITIONS, paper_lab.TRACE_WIDTH, generator=generator, dtype=torch.float64)
    expected = [[t + p for t, p in zip(row, closed_form_pe(pos, paper_lab.TRACE_WIDTH))] for pos, row in enumerate(tokens[0].tolist())]
    assert x == [pytest.approx(row, abs=1e-14) for row in expected]


def test_hand_written_pieces_agree_with_torch_functional():
    layer = paper_lab.build_encoder_layers()["post-LN"]
    x = paper_lab.trace_input()
    with torch.no_grad():
        expected_norm = F.layer_norm(x, (paper_lab.TRACE_WIDTH,), layer.norm1.weight, layer.norm1.bias, layer.norm1.eps)
        assert (traced_block.layer_norm_by_hand(x, layer.norm1) - expected_norm).abs().max().item() < 1e-14
        expected_attention, _ = layer.self_attn(x, x, x, need_weights=False)
        assert (traced_block.attention_by_hand(x, layer.self_attn) - expected_attention).abs().max().item() < 1e-13


def test_pre_ln_layer_shares_the_weights_and_arranges_them_differently(traces):
    layers = paper_lab.build_encoder_layers()
    post, pre = layers["post-LN"].state_dict(), layers["pre-LN"].state_dict()
    assert post.keys() == pre.keys() and all(torch.equal(post[name], pre[name]) for name in post)
    assert not torch.allclose(layers["post-LN"].norm1.weight, torch.ones(paper_lab.TRACE_WIDTH, dtype=torch.float64))
    assert (traces["pre-LN"].capture.block_output - traces["post-LN"].capture.block_output).abs().max().item() > 0.1


def test_identity_check_fails_on_the_wrong_arrangement(traces):
    layer = paper_lab.build_encoder_layers()["post-LN"]
    wrong = traced_block.check_post_ln(layer, traces["pre-LN"].capture)
    assert max(check.max_error for check in wrong) > 0.1


def test_boundaries_are_pinned_and_the_writes_no_longer_add_up(traces):
    readings = {name: paper_lab.read_boundaries(trace) for name, trace in traces.items()}
    assert readings["post-LN"].sum_of_writes_error > 0.1
    assert readings["pre-LN"].sum_of_writes_error < 1e-12
    layer = paper_lab.build_encoder_layers()["post-LN"]
    decomposition = paper_lab.decompose_post_ln(layer, traces["post-LN"].capture)
    assert decomposition.reconstruction_error <= paper_lab.TRACE_TOLERANCE
    assert decomposition.normalised_norm_error < 1e-4
    # Exactly: |(LN(v) - bias) / gain| = sqrt(d) * sqrt(var / (var + eps)), var the variance of what LN received.
    capture = traces["post-LN"].capture
    for state, received, norm in ((capture.norm1_output, capture.norm1_input, layer.norm1), (capture.block_output, capture.norm2_input, layer.norm2)):
        for out_row, in_row in zip(((state - norm.bias) / norm.weight)[0].tolist(), received[0].tolist()):
            mean = sum(in_row) / len(in_row)
            variance = sum((v - mean) ** 2 for v in in_row) / len(in_row)
            expected = math.sqrt(len(in_row)) * math.sqrt(variance / (variance + norm.eps))
            assert math.sqrt(sum(v * v for v in out_row)) == pytest.approx(expected, abs=1e-12)
    sigma1 = [math.sqrt(sum((v - sum(r) / len(r)) ** 2 for v in r) / len(r) + layer.norm1.eps) for r in capture.norm1_input[0].tolist()]
    assert list(decomposition.sigma1) == pytest.approx(sigma1, abs=1e-13)


def test_parallel_block_matches_torch_modules_and_keeps_a_running_sum(traces):
    layer = paper_lab.build_encoder_layers()["post-LN"]
    x = paper_lab.trace_input()
    parallel = traced_block.parallel_block_by_hand(layer, x)
    with torch.no_grad():
        read = layer.norm1(x)
        attention, _ = layer.self_attn(read, read, read, need_weights=False)
        feed_forward = layer.linear2(torch.relu(layer.linear1(layer.norm2(x))))
    assert (parallel["block_output"] - (x + attention + feed_forward)).abs().max().item() < 1e-13
    comparison = paper_lab.compare_arrangements(traces, layer)
    assert comparison.sum_of_writes_error["parallel (Pythia)"] < 1e-12
    assert comparison.sum_of_writes_error["post-LN"] > 0.1


# ---------------------------------------------------------------- the capture's hooks and its refusals


def hook_count(layer) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in layer.modules())


def test_capture_removes_its_hooks_and_restores_the_fast_path_even_when_the_forward_fails(monkeypatch):
    layer = paper_lab.build_encoder_layers()["post-LN"]
    before = torch.backends.mha.get_fastpath_enabled()
    paper_lab.capture_block(layer, paper_lab.trace_input())
    assert hook_count(layer) == 0 and torch.backends.mha.get_fastpath_enabled() == before

    def broken(*args, **kwargs):
        raise RuntimeError("norm2 failed")

    monkeypatch.setattr(layer.norm2, "forward", broken)
    with pytest.raises(RuntimeError, match="norm2 failed"):
        paper_lab.capture_block(layer, paper_lab.trace_input())
    assert hook_count(layer) == 0 and torch.backends.mha.get_fastpath_enabled() == before


def test_capture_refuses_a_sublayer_that_runs_twice_or_not_at_all(monkeypatch):
    layer = paper_lab.build_encoder_layers()["post-LN"]
    monkeypatch.setattr(layer, "_ff_block", lambda x: layer.dropout2(layer.dropout2(x)))
    with pytest.raises(RuntimeError, match=r"did not fire exactly once.*\['feed_forward_write'\]"):
        paper_lab.capture_block(layer, paper_lab.trace_input())
    monkeypatch.setattr(layer, "_ff_block", torch.zeros_like)
    with pytest.raises(RuntimeError, match=r"did not fire exactly once.*\['feed_forward_write'\]"):
        paper_lab.capture_block(layer, paper_lab.trace_input())
    assert hook_count(layer) == 0


def test_capture_refuses_bad_input_and_training_mode():
    layer = paper_lab.build_encoder_layers()["post-LN"]
    with pytest.raises(ValueError, match=r"shape \(1, positions, 16\), got \(6, 16\)"):
        paper_lab.capture_block(layer, paper_lab.trace_input()[0])
    with pytest.raises(ValueError, match="must be torch.float64, got torch.float32"):
        paper_lab.capture_block(layer, paper_lab.trace_input().float())
    with pytest.raises(ValueError, match="eval mode"):
        paper_lab.capture_block(layer.train(), paper_lab.trace_input())
    assert hook_count(layer) == 0


# ---------------------------------------------------------------- the gradient route


def test_gradient_route_is_the_lesson_code_itself():
    assert paper_lab.gradient_profile is lesson_lab.gradient_profile
    text = RUNNER_PATH.read_text(encoding="utf-8")
    assert inspect.getsource(lesson_lab.gradient_profile) in text
    assert text.count("def gradient_profile(") == 1
