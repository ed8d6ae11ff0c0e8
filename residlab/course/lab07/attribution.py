"""Attribution patching: the first-order approximation of every denoising cell from one forward and one backward
pass of the corrupt run (Nanda 2023; Syed et al. 2023).

For a site a at one position, M(corrupt, a from clean) - M(corrupt) ~ (a_clean - a_corrupt) . dM/da, the gradient
taken at the corrupt run. Divided by the gap it is the approximate recovery, beside the exact one of
``patching.activation_grids``; the error of a cell is approximate minus exact. The approximation is exact when M is
linear in a along the segment from a_corrupt to a_clean; it fails where something between the site and the readout
bends: an attention softmax that moves its weight from one position to another, a LayerNorm dividing by a scale
the patch changes. ``bend_measures`` measures both at every cell's exact patch, so a page can say which one the
worst cells show.
"""

from __future__ import annotations

import math

import torch

from residlab.audit.measures import metric_tensor
from residlab.capture.patching import run_patched
from residlab.capture.sites import site_name
from residlab.course.lab07.patching import KINDS, Pair, activation_cells, head_delta
from residlab.course.models.threads import single_thread

SPLIT_TOLERANCE = 1e-5  # the attribution error's two parts sum to it within this, every cell (asserted as built)


def corrupt_gradients(pair: Pair) -> dict[str, torch.Tensor]:
    """Block site name -> dM/da (n, d) at the corrupt run, for every site of the block table."""
    held: dict[str, torch.Tensor] = {}

    def holding(name):
        def edit(tensor):
            held[name] = tensor.clone()  # a new tensor in the graph, whose gradient is the site's
            return held[name]

        return edit

    names = [name for name, _, _ in pair.sites if name.rsplit(".", 1)[1] in KINDS]
    ids = torch.tensor([pair.design.corrupt])
    with single_thread(), torch.enable_grad():
        logits = run_patched(lambda: pair.model(input_ids=ids, use_cache=False).logits.float(), pair.sites,
                             {name: holding(name) for name in names})  # fmt: skip
        metric = metric_tensor(logits[0, -1], pair.design.target, pair.design.rival)
        gradients = torch.autograd.grad(metric, [held[name] for name in names])
    return {name: gradient[0].detach() for name, gradient in zip(names, gradients)}


def attribution_grids(pair: Pair, gradients: dict | None = None) -> dict[str, list[list[float | None]]]:
    """kind -> (blocks x positions) approximate recoveries: (a_clean - a_corrupt) . dM/da / gap."""
    gradients = corrupt_gradients(pair) if gradients is None else gradients
    grids = {}
    for kind in KINDS:
        rows = []
        for block in range(pair.depth):
            name = site_name(block, kind)
            gradient = gradients[name]
            change = ((pair.clean[name] - pair.corrupt[name]) * gradient).sum(-1)
            rows.append([None if pair.gap == 0 else float(value) / pair.gap for value in change])
        grids[kind] = rows
    return grids


def head_attribution(pair: Pair, gradients: dict | None = None) -> list[list[float | None]]:
    """(blocks x heads) approximate recoveries of patching each head's output at every position."""
    gradients = corrupt_gradients(pair) if gradients is None else gradients
    rows = []
    for block in range(pair.depth):
        gradient = gradients[site_name(block, "attn_write")]
        rows.append([None if pair.gap == 0 else
                     float((head_delta(pair, block, head, pair.clean, pair.corrupt) * gradient).sum()) / pair.gap
                     for head in range(pair.model.config.num_attention_heads)])  # fmt: skip
    return rows


def _scale(vector: torch.Tensor) -> float:
    """The standard deviation a LayerNorm divides by (epsilon left out: a ratio of two is read)."""
    return float(vector.float().std(unbiased=False))


def bend_measures(pair: Pair, kind: str, block: int, gradients: dict | None = None) -> list[dict]:
    """Per position, at the exact denoising patch of the cell: how far the last block's attention at the readout
    moved (the largest total-variation distance over its heads, 0 to 1), how much the final LayerNorm's scale
    at the readout changed (|ratio - 1|), both against the corrupt run, and the attribution error's exact split
    (``error_split``: "upstream" and "final_norm")."""
    gradients = corrupt_gradients(pair) if gradients is None else gradients
    every = list(range(pair.positions))
    patched, weights, final_states = activation_cells(pair, "denoising", kind, block, every, attention=True)
    last = pair.depth - 1
    moved = 0.5 * (weights[:, last, :, -1] - pair.corrupt_attention[last, :, -1]).abs().sum(-1).amax(-1)
    corrupt_scale = _scale(pair.corrupt[site_name(last, "resid_post")][-1])  # the final normaliser's input
    split = error_split(pair, kind, block, gradients, final_states, patched)
    return [{"attention_moved": float(m), "scale_change": abs(_scale(state) / corrupt_scale - 1),
             "upstream": parts["upstream"], "final_norm": parts["final_norm"]}
            for m, state, parts in zip(moved, final_states, split)]  # fmt: skip


def error_split(pair: Pair, kind: str, block: int, gradients: dict, final_states: torch.Tensor,
                patched: list[float]) -> list[dict]:  # fmt: skip
    """Per position, the attribution error of the cell (estimate minus exact, as shares of the gap) split exactly in
    two. With f the final normaliser then the unembedding (M = f(x), x the final state at the readout), da the
    site's clean-minus-corrupt change, J the Jacobian of x in the site at the corrupt run and dx the exact change of
    x under the patch: estimate - exact = grad f . (J da - dx) + (grad f . dx - df). The first part ("upstream") is
    what everything between the site and the final state does beyond first order; the second ("final_norm") is the
    final normaliser's own curvature along dx. ``final_states`` and ``patched``: the patched runs' x and M.
    Raises if the parts do not sum to the error within ``SPLIT_TOLERANCE`` (float arithmetic only)."""
    last = site_name(pair.depth - 1, "resid_post")
    grad_f = gradients[last][-1]
    dx = final_states.float() - pair.corrupt[last][-1]
    name = site_name(block, kind)
    estimate = ((pair.clean[name] - pair.corrupt[name]) * gradients[name]).sum(-1)  # grad f . J da, per position
    cells = []
    for position, (estimated, change, value) in enumerate(zip(estimate.tolist(), dx, patched)):
        along = float(change @ grad_f)
        exact = value - pair.corrupt_metric
        error, upstream, final = (estimated - exact) / pair.gap, (estimated - along) / pair.gap, (along - exact) / pair.gap
        if abs(upstream + final - error) > SPLIT_TOLERANCE:
            raise AssertionError(f"{name} at {position}: the split {upstream} + {final} is not the error {error}")
        cells.append({"upstream": upstream, "final_norm": final, "total": error})
    return cells


def tolerance_text(value: float = None) -> str:
    """A power of ten as the page writes it, e.g. 10⁻⁵ (``SPLIT_TOLERANCE`` by default)."""
    exponent = str(round(math.log10(SPLIT_TOLERANCE if value is None else value)))
    return "10" + exponent.translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


def centred_angle(first: torch.Tensor, second: torch.Tensor) -> float:
    """The angle in degrees between two vectors once each is centred (what a LayerNorm sees of them)."""
    a, b = first.double() - first.double().mean(), second.double() - second.double().mean()
    cosine = float((a @ b) / (a.norm() * b.norm()))
    return float(torch.rad2deg(torch.arccos(torch.tensor(max(-1.0, min(1.0, cosine))))))
