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

import torch

from residlab.audit.measures import metric_tensor
from residlab.capture.patching import run_patched
from residlab.capture.sites import site_name
from residlab.course.lab07.patching import KINDS, Pair, activation_cells, head_delta
from residlab.course.models.threads import single_thread


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


def bend_measures(pair: Pair, kind: str, block: int) -> list[dict]:
    """Per position, at the exact denoising patch of the cell: how far the last block's attention at the readout
    moved (the largest total-variation distance over its heads, 0 to 1) and how much the final LayerNorm's scale
    at the readout changed (|ratio - 1|), both against the corrupt run."""
    every = list(range(pair.positions))
    _, weights, final_states = activation_cells(pair, "denoising", kind, block, every, attention=True)
    last = pair.depth - 1
    moved = 0.5 * (weights[:, last, :, -1] - pair.corrupt_attention[last, :, -1]).abs().sum(-1).amax(-1)
    corrupt_scale = _scale(pair.corrupt[site_name(last, "resid_post")][-1])  # the final normaliser's input
    return [{"attention_moved": float(m), "scale_change": abs(_scale(state) / corrupt_scale - 1)}
            for m, state in zip(moved, final_states)]
