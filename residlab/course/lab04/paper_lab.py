"""Lab 04: read section 3 of Vaswani et al. (2017), "Attention Is All You Need", with code.

Four computations, each printed as one section of the report:

1. the base model's hyperparameters, and one encoder layer of that size counted by PyTorch;
2. the sinusoidal positional encoding, and a check of the property the paper states: for a fixed offset k,
   PE(pos + k) is a linear function of PE(pos) (one rotation per pair of dimensions, the same for every pos);
3. the paper's block, LayerNorm(x + Sublayer(x)), traced on a small instance of PyTorch's own
   ``nn.TransformerEncoderLayer`` (``norm_first=False``; ``norm_first=True`` is the pre-LN arrangement) with
   hooks, its identities checked against a forward written out by hand, and what a "residual boundary"
   means once every boundary is renormalised;
4. the pre-LN versus post-LN gradient profile of Lesson 2.1, computed by that lesson's own code.

Sections 1-2 are computed in ``residlab.course.lab04.positional_encoding``, section 3 in
``residlab.course.lab04.traced_block``, section 4 in ``residlab.course.models.gradient_profile``; this module counts the base
model's parameters, runs them all and prints the report. Pages read their names from here.

Run it as ``residlab paper`` or, standalone, ``.venv-lesson/bin/python read_transformer_paper.py`` in the
environment Lesson 2.1's lab sets up (torch and NumPy, ``torch-requirements.txt``):

    .venv-lesson/bin/python read_transformer_paper.py  # every section
    .venv-lesson/bin/python read_transformer_paper.py --skip-profile  # leave out the gradient profile (the slow part)

Everything is deterministic: the small block's weights and input come from fixed seeds, and the checks run in
float64 so their tolerances can be tight.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from torch import nn

from residlab.course.models.gradient_profile import GradientProfile, gradient_profile
from residlab.course.models.threads import single_thread
from residlab.course.lab04.positional_encoding import (
    PAPER_BASE, PAPER_HEAD_WIDTH, PE_POSITIONS, PositionalCheck, check_positional_encoding,
)
from residlab.course.lab04.traced_block import (
    TRACE_FF_WIDTH, TRACE_HEADS, TRACE_POSITIONS, TRACE_SEED, TRACE_TOLERANCE, TRACE_WIDTH, ArrangementTrace,
    BlockComparison, BoundaryReading, PostLnDecomposition, build_encoder_layers, capture_block,
    compare_arrangements, decompose_post_ln, read_boundaries, trace_arrangements, trace_input,
)


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


def run_paper_lab(include_profile: bool = True, profile: GradientProfile | None = None) -> PaperLabResult:
    """Everything the Lab 04 page shows. The gradient profile is Lesson 2.1's ``gradient_profile()``: ``profile``
    if given (the page passes the one its render computed), else computed here."""
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
            profile=(profile or gradient_profile()) if include_profile else None,
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
    lines.append("  norm of each term of out, per position (c(v) = v - mean(v), s_j = gain_j / sigma_j):")
    width = max(len(name) for name in decomposition.term_norms) + 2
    lines += [f"  {'|' + name + '|':{width}s} {_values(norms)}" for name, norms in decomposition.term_norms.items()]
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
    rows = [
        (f"{name} {start + 1}-{start + len(values[start : start + per_line])}", values[start : start + per_line])
        for name, values in profile.medians.items()
        for start in range(0, len(values), per_line)
    ]
    width = max(len(label) for label, _ in rows)
    lines += [f"{label:{width}s} " + " ".join(f"{v:.5f}" for v in chunk) for label, chunk in rows]
    return "\n".join(lines)


REPORT_SECTIONS = (section_base, section_positional, section_trace, section_boundaries, section_comparison, section_profile)


def paper_report(result: PaperLabResult) -> str:
    """The runner's whole output: every section, in the page's order, separated by blank lines."""
    return "\n\n".join(section(result) for section in REPORT_SECTIONS)


def main(argv: list[str] | None = None, prog: str = "read_transformer_paper") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,  # the runner's name, or the command's (`residlab ...`) when it runs this
        description="Lab 04: the sinusoidal encoding, the post-LN block traced and checked, the gradient routes.",
    )
    parser.add_argument("--skip-profile", action="store_true", help="leave out the gradient profile (the slow part)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    print(paper_report(run_paper_lab(include_profile=not args.skip_profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
