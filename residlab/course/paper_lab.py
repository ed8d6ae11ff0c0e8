"""Lab 04: read section 3 of Vaswani et al. (2017), "Attention Is All You Need", with code.

Four computations, each printed as one section of the report:

1. the base model's hyperparameters, and one encoder layer of that size counted by PyTorch;
2. the sinusoidal positional encoding, and a check of the property the paper states: for a fixed offset k,
   PE(pos + k) is a linear function of PE(pos) (one rotation per pair of dimensions, the same for every pos);
3. the paper's block, LayerNorm(x + Sublayer(x)), traced on a small instance of PyTorch's own
   ``nn.TransformerEncoderLayer`` (``norm_first=False``; ``norm_first=True`` is the pre-LN arrangement) with
   forward hooks, its identities checked against a forward written out by hand, and what a "residual boundary"
   means once every boundary is renormalised;
4. the pre-LN versus post-LN gradient profile of Lesson 2.1, computed by that lesson's own code.

Run it as ``residlab paper`` or, standalone, ``python3 read_transformer_paper.py`` (needs only torch):

    python3 read_transformer_paper.py                 # every section
    python3 read_transformer_paper.py --skip-profile  # leave out the gradient profile (the slow part)

Everything is deterministic: the small block's weights and input come from fixed seeds, and the checks run in
float64 so their tolerances can be tight.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from dataclasses import dataclass
from typing import Iterator

import torch
from torch import nn

from residlab.course.lesson_lab import GradientProfile, gradient_profile, single_thread  # bundled

# The base model of the paper's Table 3 (section 3 states the same values).
PAPER_BASE = {"N": 6, "d_model": 512, "h": 8, "d_ff": 2048, "P_drop": 0.1}
PAPER_HEAD_WIDTH = PAPER_BASE["d_model"] // PAPER_BASE["h"]  # d_k = d_v = d_model / h

# Sinusoidal encoding: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
PE_BASE = 10000.0
PE_POSITIONS = 100  # positions 0..99 are checked and drawn
PE_OFFSETS = (1, 7, 50)
PE_TOLERANCE = 1e-10  # float64; the rounding of sin/cos at arguments up to ~150 is about 1e-13

# The small block that is traced: the paper's shape ratios (d_ff = 4 d_model, d_k = d_model / h) at width 16.
TRACE_WIDTH = 16
TRACE_HEADS = 4
TRACE_FF_WIDTH = 4 * TRACE_WIDTH
TRACE_POSITIONS = 6
TRACE_SEED = 0
TRACE_TOLERANCE = 1e-12  # float64
TRACE_DTYPE = torch.float64


# --------------------------------------------------------------------------------------------------------------
# 1. The base model
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaseModelCount:
    layer_parameters: int  # one nn.TransformerEncoderLayer(512, 8, 2048)
    attention_parameters: int
    feed_forward_parameters: int
    norm_parameters: int
    encoder_parameters: int  # N layers, without embeddings


def count_base_encoder_layer() -> BaseModelCount:
    """Build one encoder layer at the base model's size and count its parameters by sublayer."""
    layer = nn.TransformerEncoderLayer(
        PAPER_BASE["d_model"], PAPER_BASE["h"], PAPER_BASE["d_ff"], dropout=PAPER_BASE["P_drop"], batch_first=True
    )

    def count(*modules: nn.Module) -> int:
        return sum(p.numel() for module in modules for p in module.parameters())

    total = count(layer)
    return BaseModelCount(
        layer_parameters=total,
        attention_parameters=count(layer.self_attn),
        feed_forward_parameters=count(layer.linear1, layer.linear2),
        norm_parameters=count(layer.norm1, layer.norm2),
        encoder_parameters=PAPER_BASE["N"] * total,
    )


# --------------------------------------------------------------------------------------------------------------
# 2. Sinusoidal positional encoding
# --------------------------------------------------------------------------------------------------------------


def encoding_frequencies(d_model: int, base: float = PE_BASE) -> torch.Tensor:
    """(d_model / 2,) float64: omega_i = base^(-2i / d_model), the angular frequency of dimension pair i."""
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even number, got {d_model}")
    pair = torch.arange(d_model // 2, dtype=torch.float64)
    return base ** (-2.0 * pair / d_model)


def sinusoidal_encoding(positions: int, d_model: int, base: float = PE_BASE) -> torch.Tensor:
    """(positions, d_model) float64: row pos is PE(pos); even columns are sines, odd columns cosines."""
    if positions < 1:
        raise ValueError(f"positions must be at least 1, got {positions}")
    angles = torch.arange(positions, dtype=torch.float64)[:, None] * encoding_frequencies(d_model, base)[None, :]
    encoding = torch.empty(positions, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angles)
    encoding[:, 1::2] = torch.cos(angles)
    return encoding


def offset_map(offset: int, d_model: int, base: float = PE_BASE) -> torch.Tensor:
    """(d_model, d_model) float64 M_k with PE(pos + k) = M_k PE(pos) for every pos.

    For pair i, sin(w(p+k)) = cos(wk) sin(wp) + sin(wk) cos(wp) and cos(w(p+k)) = -sin(wk) sin(wp) + cos(wk) cos(wp):
    a 2x2 rotation by wk that depends on k but not on p. M_k is block-diagonal with those rotations.
    """
    angles = offset * encoding_frequencies(d_model, base)
    cos, sin = torch.cos(angles), torch.sin(angles)
    matrix = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    matrix[even, even], matrix[even, even + 1] = cos, sin
    matrix[even + 1, even], matrix[even + 1, even + 1] = -sin, cos
    return matrix


@dataclass(frozen=True)
class OffsetCheck:
    offset: int
    max_error: float  # max |PE(pos + k) - M_k PE(pos)| over pos = 0..positions-1 and every dimension
    wrong_map_error: float  # the same with M_(k+1): what a map that is not the right one scores
    orthogonality_error: float  # max |M_k^T M_k - I|: the map is a rotation, so it keeps norms


@dataclass(frozen=True)
class PositionalCheck:
    d_model: int
    positions: int
    tolerance: float
    shortest_wavelength: float  # 2 pi / omega_0 = 2 pi
    longest_wavelength: float  # 2 pi / omega_(d/2 - 1), just under 2 pi * base
    first_rows: tuple[tuple[float, ...], ...]  # PE(0) and PE(1), first 6 dimensions
    offsets: tuple[OffsetCheck, ...]

    @property
    def max_error(self) -> float:
        return max(check.max_error for check in self.offsets)

    @property
    def passed(self) -> bool:
        return self.max_error <= self.tolerance


def check_positional_encoding(
    d_model: int = PAPER_BASE["d_model"], positions: int = PE_POSITIONS, offsets: tuple[int, ...] = PE_OFFSETS
) -> PositionalCheck:
    """Check PE(pos + k) = M_k PE(pos) for pos = 0..positions-1 and each offset k, in float64."""
    if not offsets or min(offsets) < 1:
        raise ValueError(f"offsets must be positive integers, got {offsets}")
    encoding = sinusoidal_encoding(positions + max(offsets) + 1, d_model)
    identity = torch.eye(d_model, dtype=torch.float64)
    checks = []
    for k in offsets:
        later = encoding[k : k + positions]  # rows PE(pos + k)
        rotation = offset_map(k, d_model)
        checks.append(
            OffsetCheck(
                offset=k,
                max_error=(later - encoding[:positions] @ rotation.T).abs().max().item(),
                wrong_map_error=(later - encoding[:positions] @ offset_map(k + 1, d_model).T).abs().max().item(),
                orthogonality_error=(rotation.T @ rotation - identity).abs().max().item(),
            )
        )
    frequencies = encoding_frequencies(d_model)
    return PositionalCheck(
        d_model=d_model,
        positions=positions,
        tolerance=PE_TOLERANCE,
        shortest_wavelength=(2 * math.pi / frequencies[0]).item(),
        longest_wavelength=(2 * math.pi / frequencies[-1]).item(),
        first_rows=tuple(tuple(encoding[row, :6].tolist()) for row in (0, 1)),
        offsets=tuple(checks),
    )


# --------------------------------------------------------------------------------------------------------------
# 3. The paper's block, traced with PyTorch's own encoder layer
# --------------------------------------------------------------------------------------------------------------


def build_encoder_layers(seed: int = TRACE_SEED) -> dict[str, nn.TransformerEncoderLayer]:
    """The small post-LN layer (the paper's arrangement) and a pre-LN layer with the very same weights. Eval mode.

    LayerNorm gains and biases start at 1 and 0; they are drawn here too, so no check relies on that special case.
    """
    layers = {}
    with torch.random.fork_rng(devices=[]):  # seed for these weights only; the caller's random stream is kept
        torch.manual_seed(seed)
        for name, norm_first in (("post-LN", False), ("pre-LN", True)):
            layers[name] = nn.TransformerEncoderLayer(
                TRACE_WIDTH, TRACE_HEADS, TRACE_FF_WIDTH, dropout=PAPER_BASE["P_drop"], activation="relu",
                batch_first=True, norm_first=norm_first, dtype=TRACE_DTYPE,
            )
        with torch.no_grad():
            for norm in (layers["post-LN"].norm1, layers["post-LN"].norm2):
                norm.weight.copy_(1 + 0.2 * torch.randn(TRACE_WIDTH, dtype=TRACE_DTYPE))
                norm.bias.copy_(0.1 * torch.randn(TRACE_WIDTH, dtype=TRACE_DTYPE))
    layers["pre-LN"].load_state_dict(layers["post-LN"].state_dict())
    return {name: layer.eval() for name, layer in layers.items()}


def trace_input(seed: int = TRACE_SEED) -> torch.Tensor:
    """(1, positions, width) float64: standard-normal token vectors plus the sinusoidal encoding, as in section 3.5."""
    generator = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randn(1, TRACE_POSITIONS, TRACE_WIDTH, generator=generator, dtype=TRACE_DTYPE)
    return tokens + sinusoidal_encoding(TRACE_POSITIONS, TRACE_WIDTH)


@dataclass(frozen=True)
class BlockCapture:
    """What the hooks saw in one forward pass of an encoder layer; every tensor (1, positions, width)."""

    block_input: torch.Tensor
    attention_write: torch.Tensor  # the attention sublayer's output as added (dropout1's output)
    norm1_input: torch.Tensor
    norm1_output: torch.Tensor
    feed_forward_write: torch.Tensor  # the feed-forward sublayer's output as added (dropout2's output)
    norm2_input: torch.Tensor
    norm2_output: torch.Tensor
    block_output: torch.Tensor


HOOKED_POINTS = ("block_input", "attention_write", "norm1", "feed_forward_write", "norm2", "block_output")


@contextlib.contextmanager
def _slow_path() -> Iterator[None]:
    """PyTorch may run an eval-mode encoder layer as one fused kernel that calls no submodule, so no hook would
    fire. Turn that fast path off while tracing and restore the setting afterwards."""
    previous = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(previous)


def capture_block(layer: nn.TransformerEncoderLayer, block_input: torch.Tensor) -> BlockCapture:
    """Run ``layer`` once on ``block_input`` (1, positions, width) with forward hooks on the block, both dropouts
    and both norms. Every hook is removed before this returns, whether the forward pass succeeds or not."""
    width = layer.linear1.in_features
    if block_input.ndim != 3 or block_input.shape[0] != 1 or block_input.shape[2] != width:
        raise ValueError(f"block input must have shape (1, positions, {width}), got {tuple(block_input.shape)}")
    if block_input.dtype != layer.linear1.weight.dtype:
        raise ValueError(f"block input must be {layer.linear1.weight.dtype}, got {block_input.dtype}")
    if layer.training:
        raise ValueError("put the layer in eval mode first: in training mode dropout changes every write")
    seen: dict[str, list[torch.Tensor]] = {name: [] for name in HOOKED_POINTS}

    def keep_output(name: str):
        return lambda module, inputs, output: seen[name].append(output.detach().clone())

    def keep_both(name: str):
        return lambda module, inputs, output: seen[name].append(
            torch.stack((inputs[0].detach().clone(), output.detach().clone()))
        )

    handles = []
    try:
        handles.append(layer.register_forward_pre_hook(lambda module, args: seen["block_input"].append(args[0].detach().clone())))
        handles.append(layer.dropout1.register_forward_hook(keep_output("attention_write")))
        handles.append(layer.norm1.register_forward_hook(keep_both("norm1")))
        handles.append(layer.dropout2.register_forward_hook(keep_output("feed_forward_write")))
        handles.append(layer.norm2.register_forward_hook(keep_both("norm2")))
        handles.append(layer.register_forward_hook(keep_output("block_output")))
        with _slow_path(), torch.no_grad():
            layer(block_input)
    finally:
        for handle in handles:
            handle.remove()
    missing = [name for name, values in seen.items() if len(values) != 1]
    if missing:
        raise RuntimeError(f"these hooks did not fire exactly once, so the trace is incomplete: {missing}")
    return BlockCapture(
        block_input=seen["block_input"][0],
        attention_write=seen["attention_write"][0],
        norm1_input=seen["norm1"][0][0],
        norm1_output=seen["norm1"][0][1],
        feed_forward_write=seen["feed_forward_write"][0],
        norm2_input=seen["norm2"][0][0],
        norm2_output=seen["norm2"][0][1],
        block_output=seen["block_output"][0],
    )


# The block written out from the paper's equations, with plain tensor operations and the layer's parameters.


def layer_norm_by_hand(x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    """gain * (x - mean) / sqrt(variance + eps) + bias over the last axis; variance divides by the width."""
    centred = x - x.mean(-1, keepdim=True)
    return norm.weight * centred / torch.sqrt((centred**2).mean(-1, keepdim=True) + norm.eps) + norm.bias


def attention_by_hand(x: torch.Tensor, attention: nn.MultiheadAttention) -> torch.Tensor:
    """MultiHead(x, x, x) = Concat(head_1..head_h) W^O, head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i. No mask."""
    heads = attention.num_heads
    positions, width = x.shape[-2], x.shape[-1]
    head_width = width // heads
    w_q, w_k, w_v = attention.in_proj_weight.chunk(3)
    b_q, b_k, b_v = attention.in_proj_bias.chunk(3)

    def split(projected: torch.Tensor) -> torch.Tensor:  # (..., positions, width) -> (..., heads, positions, d_k)
        return projected.reshape(*projected.shape[:-2], positions, heads, head_width).transpose(-3, -2)

    q, k, v = split(x @ w_q.T + b_q), split(x @ w_k.T + b_k), split(x @ w_v.T + b_v)
    weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(head_width), dim=-1)
    concatenated = (weights @ v).transpose(-3, -2).reshape(*x.shape)
    return concatenated @ attention.out_proj.weight.T + attention.out_proj.bias


def feed_forward_by_hand(x: torch.Tensor, layer: nn.TransformerEncoderLayer) -> torch.Tensor:
    """FFN(x) = max(0, x W1 + b1) W2 + b2."""
    hidden = torch.clamp(x @ layer.linear1.weight.T + layer.linear1.bias, min=0)
    return hidden @ layer.linear2.weight.T + layer.linear2.bias


@dataclass(frozen=True)
class IdentityCheck:
    name: str  # the identity, as the page writes it
    max_error: float  # max absolute difference between the two sides, over every position and dimension


@dataclass(frozen=True)
class ArrangementTrace:
    arrangement: str
    capture: BlockCapture
    identities: tuple[IdentityCheck, ...]
    boundaries: dict[str, torch.Tensor]  # the states between sublayers, in order, each (1, positions, width)

    @property
    def max_error(self) -> float:
        return max(check.max_error for check in self.identities)


def _max_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def check_post_ln(layer: nn.TransformerEncoderLayer, capture: BlockCapture) -> tuple[IdentityCheck, ...]:
    """u = LN1(x + SA(x)) and out = LN2(u + FF(u)), each side from the hooks or from the hand-written forward."""
    x, u, out = capture.block_input, capture.norm1_output, capture.block_output
    with torch.no_grad():
        return (
            IdentityCheck("SA(x) = attention by hand", _max_difference(capture.attention_write, attention_by_hand(x, layer.self_attn))),
            IdentityCheck("u = LN1(x + SA(x))", _max_difference(u, layer_norm_by_hand(x + capture.attention_write, layer.norm1))),
            IdentityCheck("FF(u) = feed-forward by hand", _max_difference(capture.feed_forward_write, feed_forward_by_hand(u, layer))),
            IdentityCheck("out = LN2(u + FF(u))", _max_difference(out, layer_norm_by_hand(u + capture.feed_forward_write, layer.norm2))),
        )


def check_pre_ln(layer: nn.TransformerEncoderLayer, capture: BlockCapture) -> tuple[IdentityCheck, ...]:
    """r = x + SA(LN1(x)) and out = r + FF(LN2(r))."""
    x, out = capture.block_input, capture.block_output
    with torch.no_grad():
        r = x + attention_by_hand(layer_norm_by_hand(x, layer.norm1), layer.self_attn)
        return (
            IdentityCheck("r = x + SA(LN1(x))", _max_difference(capture.norm2_input, r)),
            IdentityCheck("out = r + FF(LN2(r))", _max_difference(out, r + feed_forward_by_hand(layer_norm_by_hand(r, layer.norm2), layer))),
        )


def trace_arrangements(seed: int = TRACE_SEED) -> dict[str, ArrangementTrace]:
    """Trace the post-LN and pre-LN layers (same weights, same input) and check each one's identities."""
    layers = build_encoder_layers(seed)
    x = trace_input(seed)
    traces = {}
    for name, layer in layers.items():
        capture = capture_block(layer, x)
        if name == "post-LN":
            identities = check_post_ln(layer, capture)
            boundaries = {"x": capture.block_input, "u": capture.norm1_output, "out": capture.block_output}
        else:
            identities = check_pre_ln(layer, capture)
            boundaries = {"x": capture.block_input, "r": capture.norm2_input, "out": capture.block_output}
        traces[name] = ArrangementTrace(name, capture, identities, boundaries)
    return traces


# What the Lab 05 reading of a boundary becomes when every boundary is renormalised.


@dataclass(frozen=True)
class BoundaryReading:
    arrangement: str
    boundary_norms: dict[str, tuple[float, ...]]  # boundary -> per-position L2 norm
    # (out - x) - (SA write + FF write), relative to |out - x|, largest over positions: 0 when the writes add up
    sum_of_writes_error: float


@dataclass(frozen=True)
class PostLnDecomposition:
    """out written as a sum of terms once each position's LayerNorm scales are frozen at this run's values.

    With c(v) = v - mean(v) per position and s_j = gain_j / sigma_j (sigma_j from this run):
    out = s2 c(s1 c(x)) + s2 c(s1 c(SA)) + s2 c(bias1) + s2 c(FF) + bias2.
    """

    sigma1: tuple[float, ...]  # per-position standard deviation LN1 divided by (with eps)
    sigma2: tuple[float, ...]
    term_norms: dict[str, tuple[float, ...]]  # term -> per-position L2 norm
    reconstruction_error: float  # max |sum of the terms - out|
    normalised_norm_error: float  # max | |(boundary - bias) / gain| - sqrt(width) | over u and out, per position
    sqrt_width: float


def read_boundaries(trace: ArrangementTrace) -> BoundaryReading:
    capture = trace.capture
    change = capture.block_output - capture.block_input
    mismatch = change - (capture.attention_write + capture.feed_forward_write)
    return BoundaryReading(
        arrangement=trace.arrangement,
        boundary_norms={name: tuple(state[0].norm(dim=-1).tolist()) for name, state in trace.boundaries.items()},
        sum_of_writes_error=(mismatch[0].norm(dim=-1) / change[0].norm(dim=-1)).max().item(),
    )


def _centre(v: torch.Tensor) -> torch.Tensor:
    return v - v.mean(-1, keepdim=True)


def decompose_post_ln(layer: nn.TransformerEncoderLayer, capture: BlockCapture) -> PostLnDecomposition:
    """Split the post-LN output into the shares of the input, both writes and the first bias (see the class)."""
    norm1, norm2 = layer.norm1, layer.norm2
    with torch.no_grad():
        sigma1 = torch.sqrt(_centre(capture.norm1_input).pow(2).mean(-1, keepdim=True) + norm1.eps)
        sigma2 = torch.sqrt(_centre(capture.norm2_input).pow(2).mean(-1, keepdim=True) + norm2.eps)
        s1, s2 = norm1.weight / sigma1, norm2.weight / sigma2
        terms = {
            "input x": s2 * _centre(s1 * _centre(capture.block_input)),
            "attention write": s2 * _centre(s1 * _centre(capture.attention_write)),
            "LN1 bias": s2 * _centre(norm1.bias.expand_as(capture.block_input)),
            "feed-forward write": s2 * _centre(capture.feed_forward_write),
            "LN2 bias": norm2.bias.expand_as(capture.block_input),
        }
        total = sum(terms.values(), torch.zeros_like(capture.block_input))
        width = capture.block_input.shape[-1]
        normalised = [
            ((state - norm.bias) / norm.weight)[0].norm(dim=-1)
            for state, norm in ((capture.norm1_output, norm1), (capture.block_output, norm2))
        ]
        return PostLnDecomposition(
            sigma1=tuple(sigma1[0, :, 0].tolist()),
            sigma2=tuple(sigma2[0, :, 0].tolist()),
            term_norms={name: tuple(term[0].norm(dim=-1).tolist()) for name, term in terms.items()},
            reconstruction_error=_max_difference(total, capture.block_output),
            normalised_norm_error=max((n - math.sqrt(width)).abs().max().item() for n in normalised),
            sqrt_width=math.sqrt(width),
        )


def parallel_block_by_hand(layer: nn.TransformerEncoderLayer, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Pythia's (GPT-NeoX's) parallel arrangement with this layer's weights: out = x + SA(LN1(x)) + FF(LN2(x))."""
    with torch.no_grad():
        attention_write = attention_by_hand(layer_norm_by_hand(x, layer.norm1), layer.self_attn)
        feed_forward_write = feed_forward_by_hand(layer_norm_by_hand(x, layer.norm2), layer)
        return {
            "block_input": x,
            "attention_write": attention_write,
            "feed_forward_write": feed_forward_write,
            "block_output": x + attention_write + feed_forward_write,
        }


@dataclass(frozen=True)
class BlockComparison:
    """The three arrangements on the same weights and input: does out - x equal the sum of the two writes?"""

    sum_of_writes_error: dict[str, float]  # arrangement -> largest relative error over positions
    output_norms: dict[str, tuple[float, ...]]  # arrangement -> per-position |out|


def compare_arrangements(traces: dict[str, ArrangementTrace], layer: nn.TransformerEncoderLayer) -> BlockComparison:
    """Add the parallel arrangement, run with ``layer``'s weights on the traced input, to the two traces."""
    parallel = parallel_block_by_hand(layer, traces["post-LN"].capture.block_input)
    change = parallel["block_output"] - parallel["block_input"]
    mismatch = change - (parallel["attention_write"] + parallel["feed_forward_write"])
    errors = {name: read_boundaries(trace).sum_of_writes_error for name, trace in traces.items()}
    errors["parallel (Pythia)"] = (mismatch[0].norm(dim=-1) / change[0].norm(dim=-1)).max().item()
    norms = {name: tuple(trace.capture.block_output[0].norm(dim=-1).tolist()) for name, trace in traces.items()}
    norms["parallel (Pythia)"] = tuple(parallel["block_output"][0].norm(dim=-1).tolist())
    return BlockComparison(sum_of_writes_error=errors, output_norms=norms)


# --------------------------------------------------------------------------------------------------------------
# The whole lab and its report
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaperLabResult:
    base: BaseModelCount
    positional: PositionalCheck
    traces: dict[str, ArrangementTrace]
    readings: dict[str, BoundaryReading]
    decomposition: PostLnDecomposition
    comparison: BlockComparison
    profile: GradientProfile | None


def run_paper_lab(include_profile: bool = True) -> PaperLabResult:
    """Everything the Lab 04 page shows. The gradient profile is Lesson 2.1's ``gradient_profile()``."""
    with single_thread():
        traces = trace_arrangements()
        post_ln_layer = build_encoder_layers()["post-LN"]
        return PaperLabResult(
            base=count_base_encoder_layer(),
            positional=check_positional_encoding(),
            traces=traces,
            readings={name: read_boundaries(trace) for name, trace in traces.items()},
            decomposition=decompose_post_ln(post_ln_layer, traces["post-LN"].capture),
            comparison=compare_arrangements(traces, post_ln_layer),
            profile=gradient_profile() if include_profile else None,
        )


def _values(values: tuple[float, ...], digits: int = 3) -> str:
    return " ".join(f"{v:.{digits}f}" for v in values)


def _verdict(error: float, tolerance: float) -> str:
    return f"{error:.2e} (tolerance {tolerance:.0e}: {'pass' if error <= tolerance else 'FAIL'})"


def section_base(result: PaperLabResult) -> str:
    base = result.base
    lines = ["Base model (section 3 and Table 3)"]
    lines += [f"{name:8s} {value}" for name, value in PAPER_BASE.items()]
    lines += [
        f"d_k = d_v = d_model / h = {PAPER_HEAD_WIDTH}",
        f"one encoder layer, counted from nn.TransformerEncoderLayer({PAPER_BASE['d_model']}, {PAPER_BASE['h']}, "
        f"{PAPER_BASE['d_ff']}): {base.layer_parameters:,} parameters",
        f"  attention {base.attention_parameters:,}, feed-forward {base.feed_forward_parameters:,}, "
        f"two LayerNorms {base.norm_parameters:,}",
        f"N = {PAPER_BASE['N']} encoder layers: {base.encoder_parameters:,} parameters (embeddings not counted)",
    ]
    return "\n".join(lines)


def section_positional(result: PaperLabResult) -> str:
    check = result.positional
    lines = [f"Sinusoidal encoding, d_model = {check.d_model}, positions 0..{check.positions - 1}"]
    lines += [f"PE({row})[:6] = " + " ".join(f"{v:+.4f}" for v in values) for row, values in enumerate(check.first_rows)]
    lines.append(f"wavelengths from {check.shortest_wavelength:.4f} to {check.longest_wavelength:.1f}")
    lines.append("PE(pos + k) = M_k PE(pos), M_k block-diagonal rotations by k * omega_i")
    for offset in check.offsets:
        lines.append(
            f"k = {offset.offset:3d}: max error {offset.max_error:.2e}; with M_(k+1) instead {offset.wrong_map_error:.3f}; "
            f"max |M^T M - I| {offset.orthogonality_error:.2e}"
        )
    lines.append(f"largest error {_verdict(check.max_error, check.tolerance)}")
    return "\n".join(lines)


def section_trace(result: PaperLabResult) -> str:
    lines = [
        f"Block traced: nn.TransformerEncoderLayer(d_model={TRACE_WIDTH}, nhead={TRACE_HEADS}, "
        f"dim_feedforward={TRACE_FF_WIDTH})",
        f"norm_first=False (post-LN) and True (pre-LN), same weights, eval mode, float64, seed {TRACE_SEED}, "
        f"{TRACE_POSITIONS} positions",
    ]
    for name, trace in result.traces.items():
        lines.append(f"{name}:")
        lines += [f"  {check.name:30s} max error {_verdict(check.max_error, TRACE_TOLERANCE)}" for check in trace.identities]
    return "\n".join(lines)


def section_boundaries(result: PaperLabResult) -> str:
    decomposition = result.decomposition
    lines = [f"Boundary norms per position (sqrt(d_model) = {decomposition.sqrt_width:.3f})"]
    for name, reading in result.readings.items():
        for boundary, norms in reading.boundary_norms.items():
            lines.append(f"{name:8s} {boundary:4s} {_values(norms)}")
    lines.append(
        "post-LN: max | |(boundary - bias) / gain| - sqrt(d_model) | over u and out = "
        f"{decomposition.normalised_norm_error:.2e}"
    )
    lines.append("(out - x) - (SA write + FF write), relative to |out - x|, largest over positions:")
    lines += [f"  {name:8s} {reading.sum_of_writes_error:.3e}" for name, reading in result.readings.items()]
    lines.append("post-LN output split with this run's LayerNorm scales frozen:")
    lines.append(f"  sigma1 {_values(decomposition.sigma1)}")
    lines.append(f"  sigma2 {_values(decomposition.sigma2)}")
    lines += [f"  |{name}| {_values(norms)}" for name, norms in decomposition.term_norms.items()]
    lines.append(f"  sum of the terms - out: max error {_verdict(decomposition.reconstruction_error, TRACE_TOLERANCE)}")
    return "\n".join(lines)


def section_comparison(result: PaperLabResult) -> str:
    lines = ["Same weights, three arrangements: (out - x) - (sum of writes), relative, worst position"]
    lines += [f"  {name:18s} {error:.3e}" for name, error in result.comparison.sum_of_writes_error.items()]
    return "\n".join(lines)


def section_profile(result: PaperLabResult) -> str:
    profile = result.profile
    if profile is None:
        return "Gradient profile skipped (--skip-profile)"
    lines = [
        f"Lesson 2.1's gradient profile ({profile.depth} blocks of width {profile.width}, {profile.seeds} seeds)",
        "median of each block's mean parameter-gradient norm, first block first:",
    ]
    per_line = 9  # keeps a line short enough to read on the page
    for name, values in profile.medians.items():
        for start in range(0, len(values), per_line):
            chunk = values[start : start + per_line]
            label = f"{name} {start + 1}-{start + len(chunk)}"
            lines.append(f"{label:14s} " + " ".join(f"{v:.5f}" for v in chunk))
    return "\n".join(lines)


REPORT_SECTIONS = (section_base, section_positional, section_trace, section_boundaries, section_comparison, section_profile)


def paper_report(result: PaperLabResult) -> str:
    """The runner's whole output: every section, in the page's order, separated by blank lines."""
    return "\n\n".join(section(result) for section in REPORT_SECTIONS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="read_transformer_paper",
        description="Lab 04: the sinusoidal encoding, the post-LN block traced and checked, the gradient routes.",
    )
    parser.add_argument("--skip-profile", action="store_true", help="leave out the gradient profile (the slow part)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    print(paper_report(run_paper_lab(include_profile=not args.skip_profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
