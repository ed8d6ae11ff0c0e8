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

import copy
import math

import torch
import torch.autograd.forward_ad as forward_ad

from residlab.audit.measures import metric_tensor
from residlab.capture.blocks import block_type_for
from residlab.capture.patching import run_patched
from residlab.capture.sites import resolve_paths, site_name
from residlab.course.lab07.patching import FINAL_INPUT, KINDS, Pair, activation_cells, head_delta
from residlab.course.models.threads import single_thread

SPLIT_TOLERANCE = 1e-5  # the attribution error's two parts sum to it within this, every cell (asserted as built)
FD_STEP = 3e-3  # the central finite difference's step, as a fraction of the site's change da (float64)
FD_TOLERANCE = 1e-3  # J da and the estimate agree with their finite differences within this (asserted as built)
ORDERS = ("upstream_first", "final_first")  # the two orders the error's parts can be taken in


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
    in both orders and their average (``error_split``)."""
    gradients = corrupt_gradients(pair) if gradients is None else gradients
    every = list(range(pair.positions))
    patched, weights, final_states = activation_cells(pair, "denoising", kind, block, every, attention=True)
    last = pair.depth - 1
    moved = 0.5 * (weights[:, last, :, -1] - pair.corrupt_attention[last, :, -1]).abs().sum(-1).amax(-1)
    corrupt_scale = _scale(pair.corrupt[site_name(last, "resid_post")][-1])  # the final normaliser's input
    split = error_split(pair, kind, block, gradients, final_states, patched)
    return [{"attention_moved": float(m), "scale_change": abs(_scale(state) / corrupt_scale - 1), **parts}
            for m, state, parts in zip(moved, final_states, split)]  # fmt: skip


def cell_tangents(pair: Pair, name: str) -> torch.Tensor:
    """(n, n, d): row p is the site's clean-minus-corrupt change da at position p alone (the cell's patch)."""
    change = pair.clean[name] - pair.corrupt[name]
    tangents = torch.zeros(pair.positions, *change.shape, dtype=change.dtype)
    tangents[torch.arange(pair.positions), torch.arange(pair.positions)] = change
    return tangents


def linearised_changes(pair: Pair, name: str, tangents: torch.Tensor) -> torch.Tensor:
    """(batch, d): J da for each row of ``tangents`` (batch, n, d), J the Jacobian of the final state at the readout
    in the site ``name`` at the corrupt run: one forward-mode pass, the site carrying dual numbers."""
    ids = torch.tensor([pair.design.corrupt] * len(tangents))
    final = resolve_paths(pair.model, [(FINAL_INPUT, block_type_for(pair.model.config).final_norm, "input")])
    held = []
    with single_thread(), torch.no_grad(), forward_ad.dual_level():
        run_patched(lambda: pair.model(input_ids=ids, use_cache=False), pair.sites + final,
                    {name: lambda tensor: forward_ad.make_dual(tensor, tangents.to(tensor.dtype)),
                     FINAL_INPUT: lambda tensor: held.append(tensor) or tensor})  # fmt: skip
        return forward_ad.unpack_dual(held[0]).tangent[:, -1].clone()


def readout_metric(pair: Pair, states: torch.Tensor) -> torch.Tensor:
    """f: M of final states at the readout (batch, d): the final normaliser, the unembedding, the metric."""
    with single_thread(), torch.no_grad():
        return readout_metric_graph(pair, states.float())


def split_both_orders(estimate: float, along: float, linear_exact: float, exact: float, gap: float) -> dict:
    """The error (estimate - exact) / gap split into the final normaliser's part and the upstream part, in both
    orders. ``estimate`` grad f . J da, ``along`` grad f . dx, ``linear_exact`` f(x + J da) - f(x), ``exact``
    f(x + dx) - f(x). Upstream first: upstream = estimate - along, final = along - exact. Final first: final =
    estimate - linear_exact, upstream = linear_exact - exact. The Shapley split is their average. Raises if any
    split's parts miss the error by more than ``SPLIT_TOLERANCE`` (float arithmetic only)."""
    parts = {"upstream": (estimate - along) / gap, "final_norm": (along - exact) / gap,
             "upstream_final_first": (linear_exact - exact) / gap, "final_norm_final_first": (estimate - linear_exact) / gap}
    parts["upstream_shapley"] = (parts["upstream"] + parts["upstream_final_first"]) / 2
    parts["final_norm_shapley"] = (parts["final_norm"] + parts["final_norm_final_first"]) / 2
    error = (estimate - exact) / gap
    for suffix in ("", "_final_first", "_shapley"):
        if abs(parts["upstream" + suffix] + parts["final_norm" + suffix] - error) > SPLIT_TOLERANCE:
            raise AssertionError(f"the split{suffix or ' upstream first'} does not sum to the error {error}")
    return {**parts, "total": error}


def _splits(pair: Pair, estimates: list[float], linear: torch.Tensor, final_states: torch.Tensor,
            patched: list[float]) -> list[dict]:  # fmt: skip
    """The error split of each patch: its estimate, J da, exact final state and exact M."""
    last = site_name(pair.depth - 1, "resid_post")
    corrupt_state = pair.corrupt[last][-1]
    grad_f = corrupt_gradients_final(pair)
    dx = final_states.float() - corrupt_state
    if abs(float(readout_metric(pair, corrupt_state[None])[0]) - pair.corrupt_metric) > 1e-4:
        raise AssertionError("f of the corrupt final state is not M(corrupt): the final normaliser is misnamed")
    linear_exact = (readout_metric(pair, corrupt_state + linear) - pair.corrupt_metric).tolist()
    return [split_both_orders(estimated, float(change @ grad_f), lin, value - pair.corrupt_metric, pair.gap)
            for estimated, change, lin, value in zip(estimates, dx, linear_exact, patched)]  # fmt: skip


def corrupt_gradients_final(pair: Pair) -> torch.Tensor:
    """grad f at the corrupt run's final state (d,): the gradient of M in the final normaliser's input."""
    state = pair.corrupt[site_name(pair.depth - 1, "resid_post")][-1].clone().requires_grad_(True)
    with torch.enable_grad():
        return torch.autograd.grad(readout_metric_graph(pair, state), state)[0]


def readout_metric_graph(pair: Pair, state: torch.Tensor) -> torch.Tensor:
    """f, differentiable: the final normaliser, the unembedding and the metric of final states (..., d)."""
    norm = pair.model.get_submodule(block_type_for(pair.model.config).final_norm)
    return metric_tensor(pair.model.get_output_embeddings()(norm(state)), pair.design.target, pair.design.rival)


def error_split(pair: Pair, kind: str, block: int, gradients: dict, final_states: torch.Tensor,
                patched: list[float]) -> list[dict]:  # fmt: skip
    """Per position, the attribution error of the cell (estimate minus exact, as shares of the gap) split exactly in
    two, in both orders (``split_both_orders``). With f the final normaliser then the unembedding (M = f(x), x the
    final state at the readout), da the site's clean-minus-corrupt change, J the Jacobian of x in the site at the
    corrupt run (``linearised_changes``) and dx the exact change of x under the patch: upstream first, estimate -
    exact = grad f . (J da - dx) + (grad f . dx - df); final normaliser first, (grad f . J da - f(x + J da) + f(x))
    + (f(x + J da) - f(x + dx)). ``final_states`` and ``patched``: the patched runs' x and M."""
    name = site_name(block, kind)
    estimates = ((pair.clean[name] - pair.corrupt[name]) * gradients[name]).sum(-1).tolist()  # grad f . J da
    return _splits(pair, estimates, linearised_changes(pair, name, cell_tangents(pair, name)), final_states, patched)


def head_error_split(pair: Pair, gradients: dict) -> list[list[dict]]:
    """(blocks x heads): the attribution error of patching each head's output at every position (denoising), split
    in both orders as ``error_split`` splits a cell's. One forward for every head of every block: per block, one
    batch row per head patched exactly and one per head carrying the head's change as a dual number (J da)."""
    heads, depth = pair.model.config.num_attention_heads, pair.depth
    deltas = [torch.stack([head_delta(pair, block, head, pair.clean, pair.corrupt) for head in range(heads)])
              for block in range(depth)]  # fmt: skip

    def edit(block):
        def apply(tensor):
            exact, tangent = torch.zeros_like(tensor), torch.zeros_like(tensor)
            exact[2 * heads * block: 2 * heads * block + heads] = deltas[block]
            tangent[2 * heads * block + heads: 2 * heads * (block + 1)] = deltas[block]
            return tensor + exact + forward_ad.make_dual(torch.zeros_like(tensor), tangent)

        return apply

    ids = torch.tensor([pair.design.corrupt] * (2 * heads * depth))
    final = resolve_paths(pair.model, [(FINAL_INPUT, block_type_for(pair.model.config).final_norm, "input")])
    held = []
    with single_thread(), torch.no_grad(), forward_ad.dual_level():
        edits = {site_name(block, "attn_write"): edit(block) for block in range(depth)}
        edits[FINAL_INPUT] = lambda tensor: held.append(tensor) or tensor
        logits = run_patched(lambda: pair.model(input_ids=ids, use_cache=False), pair.sites + final, edits).logits
        metric = metric_tensor(forward_ad.unpack_dual(logits).primal[:, -1].float(), pair.design.target, pair.design.rival)
        states, linear = (part[:, -1].clone() for part in forward_ad.unpack_dual(held[0])[:2])
    rows = []
    for block in range(depth):
        exact, dual = slice(2 * heads * block, 2 * heads * block + heads), slice(2 * heads * block + heads, 2 * heads * (block + 1))
        estimates = (deltas[block] * gradients[site_name(block, "attn_write")]).sum((-2, -1)).tolist()
        rows.append(_splits(pair, estimates, linear[dual], states[exact], metric[exact].tolist()))
    return rows


def _final_states(pair: Pair, name: str, edit) -> torch.Tensor:
    """(batch, d): the final state at the readout of the corrupt run with ``edit`` at the site ``name``, in the
    model's own precision (no cast)."""
    final = resolve_paths(pair.model, [(FINAL_INPUT, block_type_for(pair.model.config).final_norm, "input")])
    held = []
    ids = torch.tensor([pair.design.corrupt] * pair.positions)
    with single_thread(), torch.no_grad():
        run_patched(lambda: pair.model(input_ids=ids, use_cache=False), pair.sites + final,
                    {name: edit, FINAL_INPUT: lambda tensor: held.append(tensor) or tensor})  # fmt: skip
    return held[0][:, -1]


def finite_difference_check(pair: Pair, gradients: dict, step: float = FD_STEP) -> dict:
    """The first-order term checked against central finite differences at every cell (site x position), on a float64
    copy of the model (so rounding does not hide a wrong term): J da (forward mode) against (x(a_corrupt + h da) -
    x(a_corrupt - h da)) / 2h, and grad f . J da against the same difference of M = f(x), each largest difference as
    a fraction of the largest |J da| or |grad f . J da| over the cells; and the page's estimate (the backward pass,
    in the model's precision) against grad f . J da (the same term, computed the other way). Raises over
    ``FD_TOLERANCE``."""
    from residlab.course.lab07.patching import prepare

    exact = prepare(copy.deepcopy(pair.model).double(), pair.design)
    grad_f = corrupt_gradients_final(exact)
    state_gap, state_size, metric_gap, two_ways, size = 0.0, 0.0, 0.0, 0.0, 0.0
    for kind in KINDS:
        for block in range(pair.depth):
            name = site_name(block, kind)
            tangents = cell_tangents(exact, name)
            linear = linearised_changes(exact, name, tangents)
            x_plus, x_minus = (_final_states(exact, name, lambda tensor, s=s: tensor + s * tangents) for s in (step, -step))
            state_gap = max(state_gap, float(((x_plus - x_minus) / (2 * step) - linear).norm(dim=-1).max()))
            state_size = max(state_size, float(linear.norm(dim=-1).max()))
            with torch.no_grad():
                difference = (readout_metric_graph(exact, x_plus) - readout_metric_graph(exact, x_minus)) / (2 * step)
            first_order = linear @ grad_f
            metric_gap = max(metric_gap, float((difference - first_order).abs().max()))
            backward = ((pair.clean[name] - pair.corrupt[name]) * gradients[name]).sum(-1).double()
            two_ways = max(two_ways, float((backward - first_order).abs().max()))
            size = max(size, float(first_order.abs().max()))
    result = {"step": step, "state": state_gap / state_size, "metric": metric_gap / size, "two_ways": two_ways / size,
              "tolerance": FD_TOLERANCE}  # fmt: skip
    for key in ("state", "metric", "two_ways"):
        if result[key] > FD_TOLERANCE:
            raise AssertionError(f"the first-order term's {key} check: {result[key]:.2e}, over {FD_TOLERANCE:g}")
    return result


def tolerance_text(value: float = None) -> str:
    """A power of ten as the page writes it, e.g. 10⁻⁵ (``SPLIT_TOLERANCE`` by default)."""
    exponent = str(round(math.log10(SPLIT_TOLERANCE if value is None else value)))
    return "10" + exponent.translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


def centred_angle(first: torch.Tensor, second: torch.Tensor) -> float:
    """The angle in degrees between two vectors once each is centred (what a LayerNorm sees of them)."""
    a, b = first.double() - first.double().mean(), second.double() - second.double().mean()
    cosine = float((a @ b) / (a.norm() * b.norm()))
    return float(torch.rad2deg(torch.arccos(torch.tensor(max(-1.0, min(1.0, cosine))))))
