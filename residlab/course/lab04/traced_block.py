"""Lab 04, section 3: the paper's block, LayerNorm(x + Sublayer(x)), traced on a small instance of PyTorch's own
``nn.TransformerEncoderLayer`` (``norm_first=False``; ``norm_first=True`` is the pre-LN arrangement).

``capture_block`` records the block's input, both sublayer writes (the dropouts' outputs), both norms' inputs
and outputs and the block's output with ``residlab.capture.recording.record_sites``; the identities are
checked against a forward written out by hand from the paper's equations, and the boundaries are read as
Lab 05 reads a residual boundary, to show what that reading becomes once every boundary is renormalised.

Everything is deterministic: the small block's weights and input come from fixed seeds, and the checks run in
float64 so their tolerances can be tight.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Iterator

import torch
from torch import nn

from residlab.capture.recording import SiteFiredTwice, record_sites
from residlab.course.lab04.positional_encoding import PAPER_BASE, sinusoidal_encoding

# The small block that is traced: the paper's shape ratios (d_ff = 4 d_model, d_k = d_model / h) at width 16.
TRACE_WIDTH = 16
TRACE_HEADS = 4
TRACE_FF_WIDTH = 4 * TRACE_WIDTH
TRACE_POSITIONS = 6
TRACE_SEED = 0
TRACE_TOLERANCE = 1e-12  # float64
TRACE_DTYPE = torch.float64

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


# capture_block's sites: (BlockCapture field, the layer's submodule ('' = the layer itself), kind) and the hooked
# point each belongs to, as the error for an incomplete trace names it.
CAPTURE_SITES = (
    ("block_input", "", "input", "block_input"),
    ("attention_write", "dropout1", "output", "attention_write"),
    ("norm1_input", "norm1", "input", "norm1"),
    ("norm1_output", "norm1", "output", "norm1"),
    ("feed_forward_write", "dropout2", "output", "feed_forward_write"),
    ("norm2_input", "norm2", "input", "norm2"),
    ("norm2_output", "norm2", "output", "norm2"),
    ("block_output", "", "output", "block_output"),
)


def capture_block(layer: nn.TransformerEncoderLayer, block_input: torch.Tensor) -> BlockCapture:
    """Run ``layer`` once on ``block_input`` (1, positions, width), recording (``record_sites``) the block's input
    and output, both dropouts' outputs and both norms' inputs and outputs. Every hook is removed before this
    returns, whether the forward pass succeeds or not."""
    width = layer.linear1.in_features
    if block_input.ndim != 3 or block_input.shape[0] != 1 or block_input.shape[2] != width:
        raise ValueError(f"block input must have shape (1, positions, {width}), got {tuple(block_input.shape)}")
    if block_input.dtype != layer.linear1.weight.dtype:
        raise ValueError(f"block input must be {layer.linear1.weight.dtype}, got {block_input.dtype}")
    if layer.training:
        raise ValueError("put the layer in eval mode first: in training mode dropout changes every write")
    sites = [(name, layer.get_submodule(path), kind) for name, path, kind, _ in CAPTURE_SITES]
    point = {name: hooked for name, _, _, hooked in CAPTURE_SITES}
    try:
        with _slow_path(), torch.no_grad(), record_sites(sites) as recorder:
            layer(block_input)
    except SiteFiredTwice as error:
        twice = [point[name] for name, _, _ in sites if str(error).startswith(f"site {name} fired")]
        raise RuntimeError(f"these hooks did not fire exactly once, so the trace is incomplete: {twice}") from error
    missing = list(dict.fromkeys(point[name] for name in recorder.missing()))
    if missing:
        raise RuntimeError(f"these hooks did not fire exactly once, so the trace is incomplete: {missing}")
    return BlockCapture(**recorder.records)


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
    term_norms: dict[str, tuple[float, ...]]  # term (its formula) -> per-position L2 norm of that term
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
        # Each term named by its formula (the page's and the class's), so its norm is never read as x's or SA's own.
        terms = {
            "s2 c(s1 c(x))": s2 * _centre(s1 * _centre(capture.block_input)),
            "s2 c(s1 c(SA(x)))": s2 * _centre(s1 * _centre(capture.attention_write)),
            "s2 c(beta1)": s2 * _centre(norm1.bias.expand_as(capture.block_input)),
            "s2 c(FF(u))": s2 * _centre(capture.feed_forward_write),
            "beta2": norm2.bias.expand_as(capture.block_input),
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

