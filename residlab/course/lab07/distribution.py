"""Lab 07 over a distribution of prompt pairs, read against a null of the same trained model.

One prompt pair is one draw. ``held_out_designs`` builds a design on every held-out sequence of the example's
period (``measures.held_out_sequences``: the site's own rule, from a generator no training uses; the first of them
is the page's worked example), and ``measure_distribution`` runs every method on each pair, then reports per
method and head the mean share over pairs, its percentile interval (``INTERVAL``) and the fraction of pairs in
which each verdict holds. The per-pair shares are in the report, so every mean can be recomputed from them
(``check_distribution``, asserted when the report is built).

The null (``null_design``) is the same trained model on a pair that changes a token the readout does not depend on:
the first token, at both of its occurrences, replaced by one the prompt does not hold. The repeat is kept and
induction predicts the same answer, so every share it gives is expected to be 0; the spread of its shares over
pairs, read with the design's own metric and divided by the design's own gap, is what a share must clear.

Heads are named by a rule that can fail (``named_heads``): a head is a previous-token, current-token or induction
head when its attention score exceeds its own control score by ``NAME_MARGIN``; the control is the same head's
attention two positions back (no mechanism of the task reads that offset) and, for induction, its attention at the
induction offset on sequences whose second half is no repeat. Any number of heads, none included, can be named.

``identities`` lists the cells whose value the construction fixes; they are marked, checked, and never read as a
finding.
"""

from __future__ import annotations

import statistics

import torch

from residlab.capture.sites import site_name
from residlab.course.lab07.attribution import corrupt_gradients, head_attribution, head_error_split
from residlab.course.lab07.designs import UNTESTABLE, Design, make_design, untestable
from residlab.course.lab07.patching import (
    DIRECTIONS, KINDS, activation_grids, head_grid, head_path_patching, path_patching, prepare,
)
from residlab.course.lab07.verdicts import HEAD_KINDS, VERDICTS
from residlab.course.models.induction.measures import (
    EXAMPLE_PERIOD, HELD_OUT_PER_PERIOD, attention_weights, held_out_sequences, induction_score,
)
from residlab.course.models.induction.recipe import VOCAB_SIZE, repeated_sequences

PAIRS = HELD_OUT_PER_PERIOD  # held-out pairs per design: every held-out sequence of the example's period
INTERVAL = (2.5, 97.5)  # the percentile interval over pairs the report gives beside each mean
INTERVAL_NAME = "2.5th to 97.5th percentile over pairs"
MEAN_Z = 1.959964  # a mean paired difference's 95 % interval: the mean +- this many standard errors
NAME_MARGIN = 0.5  # a head is named a kind when its score exceeds its control score by this much attention
CONTROL_OFFSET = 2  # the control of a positional score: attention this many positions back
CONTROL_SEED = 2027 + 11  # draws the unrepeated second halves of the induction control
HEAD_METHODS = ("denoising", "noising", "attribution", "path_keys")  # path_keys: block 0's heads only
def _round(value):
    return None if value is None else round(float(value), 6)


# ---- heads named by attention scores against their own control ------------------------------------------------


def head_name_scores(model, sequences: dict | None = None) -> dict:
    """kind -> {"scores": (blocks x heads), "controls": (blocks x heads)}, each the mean over periods of the mean
    over that period's held-out sequences; for the positional kinds also "spread" (blocks x heads), each head's
    score sequence by sequence, summarised over every held-out sequence of every period pooled (``summarise``),
    "spread_periods", the periods pooled, and "example_period" (blocks x heads x sequences): each head's score on each
    held-out sequence of ``EXAMPLE_PERIOD``, the sequences the pairs are built from, in their order (so a head's
    attention can be set beside its causal shares pair by pair)."""
    sequences = held_out_sequences() if sequences is None else sequences
    generator = torch.Generator().manual_seed(CONTROL_SEED)
    parts = {kind: ([], []) for kind in HEAD_KINDS}
    per_sequence = {"previous_token": [], "current_token": []}  # (blocks, heads, sequences) per period
    for period, tokens in sequences.items():
        weights = attention_weights(model, tokens)
        control = weights.diagonal(offset=-CONTROL_OFFSET, dim1=-2, dim2=-1).mean(dim=(-2, -1))
        for kind, offset in (("previous_token", -1), ("current_token", 0)):
            # from query position 1 on: at position 0 a head can attend only to itself (causal), a forced 1
            each = weights.diagonal(offset=offset, dim1=-2, dim2=-1)[..., 1 + offset:].mean(dim=-1)
            per_sequence[kind].append(each)
            parts[kind][0].append(each.mean(dim=-1))
            parts[kind][1].append(control)
        unrepeated = torch.cat([tokens[:, :period], repeated_sequences(generator, len(tokens), period)[:, period:]], 1)
        parts["induction"][0].append(induction_score(weights, period))
        parts["induction"][1].append(induction_score(attention_weights(model, unrepeated), period))
    out = {kind: {key: [[_round(v) for v in row] for row in torch.stack(values).mean(0).tolist()]
                  for key, values in zip(("scores", "controls"), pair)} for kind, pair in parts.items()}  # fmt: skip
    for kind, values in per_sequence.items():  # the spread of each head's score over the held-out sequences
        pooled = torch.cat(values, dim=-1)
        out[kind]["spread"] = [[summarise(row.tolist()) for row in block] for block in pooled]
        out[kind]["spread_periods"] = [int(period) for period in sequences]
        if EXAMPLE_PERIOD in sequences:
            example = values[list(sequences).index(EXAMPLE_PERIOD)]
            out[kind]["example_period"] = [[[_round(v) for v in row] for row in block] for block in example.tolist()]
    return out


def named_heads(scores: dict, margin: float = NAME_MARGIN) -> dict[str, list[list[int]]]:
    """kind -> [[block, head], ...]: every head whose score exceeds its control by ``margin`` (none, one or many)."""
    return {kind: [[block, head] for block, row in enumerate(table["scores"]) for head, score in enumerate(row)
                   if score - table["controls"][block][head] >= margin] for kind, table in scores.items()}  # fmt: skip


# ---- the pairs ---------------------------------------------------------------------------------------------


def held_out_designs(name: str, pairs: int = PAIRS) -> list[Design]:
    """The design ``name`` on the first ``pairs`` held-out sequences of the example's period (the first is the
    worked example)."""
    sequences = held_out_sequences()[EXAMPLE_PERIOD]
    if pairs > len(sequences):
        raise ValueError(f"{pairs} pairs asked for; the held-out draw has {len(sequences)}")
    return [make_design(name, sequence) for sequence in sequences[:pairs]]


def null_design(design: Design) -> Design:
    """The same clean prompt, its first token replaced at both occurrences (positions 0 and P) by the lowest token
    neither prompt holds; the design's target and rival, so M is the design's metric."""
    held = set(design.clean) | set(design.corrupt) | {design.target, design.rival}
    replacement = min(t for t in range(VOCAB_SIZE) if t not in held)
    corrupt = list(design.clean)
    changed = (0, design.period)
    for position in changed:
        corrupt[position] = replacement
    if design.readout in changed or design.readout - 1 in changed:
        raise ValueError(f"the null of {design.name} would change what the readout reads")
    return Design(f"{design.name}_null", design.clean, tuple(corrupt), design.target, design.rival, changed,
                  design.period)  # fmt: skip


def pair_shares(model, design: Design, gap: float | None = None) -> dict:
    """Every method's shares on one pair: the per-head grids (blocks x heads), the activation grids (kind ->
    blocks x positions, both directions) and path patching, each a share of ``gap`` (default: the pair's own)."""
    pair = prepare(model, design)
    if pair.gap == 0:
        raise ValueError(f"{design.name}: the two prompts give the same M; no share is defined")
    scale = 1.0 if gap is None else pair.gap / gap

    def scaled(rows):
        return [[_round(value * scale) for value in row] for row in rows]

    gradients = corrupt_gradients(pair)
    errors = {} if gap is not None else {"head_error": [[{key: _round(value) for key, value in cell.items()} for cell in row]
                                                        for row in head_error_split(pair, gradients)]}  # fmt: skip
    heads = {"denoising": head_grid(pair, "denoising"), "noising": head_grid(pair, "noising"),
             "attribution": head_attribution(pair, gradients), "path_keys": [head_path_patching(pair)]}  # fmt: skip
    return {"gap": _round(pair.gap), "heads": {method: scaled(rows) for method, rows in heads.items()},
            "activation": {direction: {kind: scaled(rows) for kind, rows in activation_grids(pair, direction).items()}
                           for direction in DIRECTIONS},
            "path": {key: _round(value * scale) for key, value in path_patching(pair).items()}, **errors}  # fmt: skip


# ---- identities: cells the construction fixes --------------------------------------------------------------


def identities(design: dict, depth: int) -> list[dict]:
    """Every cell whose value is fixed by construction, whatever the model: the cells before the first changed
    position (0: attention is causal), block b's input (one tensor with block b-1's output), block 0's attention
    write where the prompts agree (the same patching intervention as block 0's output there), block 0's input at
    the only changed position (1: patching it makes one run the other), the last block's output at the readout
    (1: all the metric reads) and the last block's writes and output at every other position (0: nothing downstream
    reads them). Each: site, kind, block, position (None: every position), value, why; an identity whose value is
    another cell's has ``equals`` (that cell's kind and block) instead of a value."""
    first = min(design["changed"])
    cells = [{"site": f"every site at positions 0 to {first - 1}", "kind": None, "block": None, "position": None,
              "value": 0.0, "why": "before the first position where the prompts differ: attention is causal"}] if first else []  # fmt: skip
    for block in range(1, depth):
        cells.append({"site": f"{site_name(block, 'resid_pre')} = {site_name(block - 1, 'resid_post')}", "kind": "resid_pre",
                      "block": block, "position": None, "value": None, "equals": ["resid_post", block - 1],
                      "why": "one tensor under two names: block input is the block before's output"})  # fmt: skip
    if "clean" in design:
        agree = [p for p in range(first, len(design["clean"])) if design["clean"][p] == design["corrupt"][p]]
        cells.append({"site": site_name(0, "resid_pre"), "kind": "resid_pre", "block": 0, "position": None,
                      "positions": agree, "value": 0.0,
                      "why": "block 0's input where the prompts agree: the same token, so the same tensor in both runs"})  # fmt: skip
        everywhere = [p for p in range(len(design["clean"])) if design["clean"][p] == design["corrupt"][p]]
        cells.append({"site": f"{site_name(0, 'attn_write')} = {site_name(0, 'resid_post')}", "kind": "attn_write",
                      "block": 0, "position": None, "positions": everywhere, "value": None, "equals": ["resid_post", 0],
                      "why": "where the prompts agree block 0's input is the same in both runs, so patching its attention "
                             "write there patches its output there too (its MLP reads that position only): one "
                             "intervention under two names, whose patching shares are block 0's output's (an attribution "
                             "estimate of each stays its own)"})  # fmt: skip
    if is_swap(design):
        a, b = design["changed"]
        cells.append({"site": site_name(0, "resid_pre"), "kind": "resid_pre", "block": 0, "position": None,
                      "positions": [a, b], "value": None, "mirror": True,
                      "why": f"the swap mirrors it: each run's tensor at position {a} is the other's at {b} and the "
                             "reverse (block 0's input is the token's embedding alone; positions enter inside attention), so "
                             "patching one of them runs a hybrid prompt: its share is that prompt's behaviour (Part 3's table)"})  # fmt: skip
    if len(design["changed"]) == 1:
        cells.append({"site": site_name(0, "resid_pre"), "kind": "resid_pre", "block": 0, "position": design["changed"][0],
                      "value": 1.0, "why": "the prompts differ only there: patching it makes one run the other"})  # fmt: skip
    cells.append({"site": site_name(depth - 1, "resid_post"), "kind": "resid_post", "block": depth - 1,
                  "position": design["readout"], "value": 1.0, "why": "the final state at the readout: all the metric reads"})  # fmt: skip
    unread = [p for p in range(first, design["readout"])]
    for kind in ("attn_write", "mlp_write", "resid_post"):
        cells.append({"site": site_name(depth - 1, kind), "kind": kind, "block": depth - 1, "position": None,
                      "positions": unread, "value": 0.0,
                      "why": "the last block at a position other than the readout: nothing downstream reads it"})  # fmt: skip
    return cells


def is_swap(design: dict) -> bool:
    """Whether the corrupt prompt swaps the clean prompt's tokens at its two changed positions."""
    changed = design["changed"]
    if len(changed) != 2 or "clean" not in design:
        return False
    a, b = changed
    return design["clean"][a] == design["corrupt"][b] and design["clean"][b] == design["corrupt"][a]


def check_mirror(design: dict, pair) -> None:
    """Raise unless, for a swap, block 0's input at each swapped position of one run is the other run's at the other
    position, bit for bit (the identity ``identities`` names)."""
    if not is_swap(design):
        return
    a, b = design["changed"]
    name = site_name(0, "resid_pre")
    for first, second in ((a, b), (b, a)):
        if not torch.equal(pair.clean[name][first], pair.corrupt[name][second]):
            raise AssertionError(f"{design.get('name', 'design')}: {name} at {first} (clean) is not the corrupt run's at {second}")


def check_identities(design: dict, grids: dict, where: str, tolerance: float = 1e-4) -> None:
    """Raise if a grid (direction -> kind -> blocks x positions) breaks an identity of ``identities``."""
    depth = len(grids[DIRECTIONS[0]]["resid_pre"])
    for identity in identities(design, depth):
        for direction in DIRECTIONS:
            rows = grids[direction]
            if identity["kind"] is None:
                moved = [kind for kind in KINDS for row in rows[kind] for v in row[: min(design["changed"])] if v != 0.0]
                if moved:
                    raise AssertionError(f"{where} {direction}: a cell before {min(design['changed'])} moved ({moved[0]})")
            elif identity.get("mirror"):
                continue  # a tensor identity, checked on the runs' tensors (check_mirror)
            elif identity.get("equals"):
                kind, block = identity["kind"], identity["block"]
                other, other_block = identity["equals"]
                mine, theirs = rows[kind][block], rows[other][other_block]
                for position in identity.get("positions") or range(len(mine)):
                    if (mine[position] is None) != (theirs[position] is None) or (
                            mine[position] is not None and abs(mine[position] - theirs[position]) > tolerance):
                        raise AssertionError(f"{where} {direction}: {kind} {block} at {position} ({mine[position]}) is not "
                                             f"{other} {other_block}'s ({theirs[position]}): the same intervention")  # fmt: skip
            elif identity["position"] is None:
                for position in identity["positions"]:
                    value = rows[identity["kind"]][identity["block"]][position]
                    if value is None or abs(value - identity["value"]) > tolerance:
                        raise AssertionError(f"{where} {direction} {identity['site']} at {position}: {value}, not "
                                             f"{identity['value']:g} by construction")  # fmt: skip
            else:
                value = rows[identity["kind"]][identity["block"]][identity["position"]]
                if value is None or abs(value - identity["value"]) > tolerance:
                    raise AssertionError(f"{where} {direction} {identity['site']} at {identity['position']}: {value}, "
                                         f"not {identity['value']:g} by construction")  # fmt: skip


# ---- aggregation ---------------------------------------------------------------------------------------------


def summarise(values: list[float]) -> dict:
    """The mean over pairs, the percentile interval ``INTERVAL`` and the number of pairs."""
    tensor = torch.tensor(values, dtype=torch.float64)
    low, high = torch.quantile(tensor, torch.tensor([INTERVAL[0] / 100, INTERVAL[1] / 100], dtype=torch.float64)).tolist()
    return {"mean": _round(tensor.mean()), "low": _round(low), "high": _round(high), "pairs": len(values)}


def _cells(grids: list, shape_of) -> list:
    """Per cell of ``shape_of`` (a list of lists), the values of every pair's grid at that cell."""
    return [[[grid[i][j] for grid in grids] for j in range(len(row))] for i, row in enumerate(shape_of)]


def null_left_out(design: Design, depth: int) -> set[tuple[str, int, int]]:
    """The null pairs' cells the cells' bar leaves out, (kind, block, position): every cell at a position the null
    changes (patched alone, it carries part of the null's own change, a prompt of its own as a hybrid is, not a site
    downstream of it), the last block's output at the readout (the null's whole gap over the design's, by
    construction) and the last block's attention write at the readout (the one route by which a change at other
    positions reaches the readout through the last block: near the whole gap wherever the earlier blocks' heads at the
    readout barely read the changed positions, so a bar it set would be the null's gap, not a site's effect)."""
    return ({(kind, block, position) for kind in KINDS for block in range(depth) for position in design.changed}
            | {("resid_post", depth - 1, design.readout), ("attn_write", depth - 1, design.readout)})  # fmt: skip


def null_bounds(null_pairs: list[dict], left_out: set[tuple[str, int, int]] = frozenset()) -> dict:
    """The within-model null's reach. Per head method and block, the **null bar** a verdict counts against
    ("heads"): in each null pair the largest |share| any head of the block takes (the statistic a verdict reads, the
    block's top head), and the ``INTERVAL``'s upper percentile of those over the null pairs, so some head of the block
    clears it in about 2.5 % of null pairs; beside it ("heads_largest") the largest of them and how many null pairs
    there are, so a reader sees whether one outlier would have set a bar of the largest. Per direction the largest
    |share| any cell takes but those ``left_out`` (``null_left_out``); the path shares' largest; and the null gap's
    spread and largest."""
    maxima = {method: [[max(abs(v) for v in pair["heads"][method][block] if v is not None) for pair in null_pairs]
                       for block in range(len(null_pairs[0]["heads"][method]))
                       if any(v is not None for v in null_pairs[0]["heads"][method][block])]
              for method in HEAD_METHODS}  # fmt: skip
    bars = {method: [_round(torch.quantile(torch.tensor(block, dtype=torch.float64), INTERVAL[1] / 100)) for block in blocks]
            for method, blocks in maxima.items()}  # fmt: skip
    largest = {method: [{"largest": _round(max(block)), "pairs": len(block)} for block in blocks]
               for method, blocks in maxima.items()}  # fmt: skip
    cells, cells_at = {}, {}
    for direction in DIRECTIONS:  # the largest, and which cell of which null pair sets it
        cells[direction], cells_at[direction] = max(
            ((abs(v), {"site": site_name(block, kind), "position": position, "pair": index})
             for index, pair in enumerate(null_pairs) for kind, rows in pair["activation"][direction].items()
             for block, row in enumerate(rows) for position, v in enumerate(row)
             if v is not None and (kind, block, position) not in left_out), key=lambda found: found[0])  # fmt: skip
    return {"heads": bars, "heads_largest": largest,
            "cells": {d: _round(v) for d, v in cells.items()}, "cells_at": cells_at,
            "path": _round(max(abs(v) for pair in null_pairs for v in pair["path"].values())),
            "gap": summarise([pair["gap"] for pair in null_pairs]),
            "largest_gap": _round(max(abs(pair["gap"]) for pair in null_pairs))}  # fmt: skip


ERROR_PARTS = ("total", "final_norm_shapley", "upstream_shapley", "final_norm", "final_norm_final_first")


def head_error_table(pairs: list[dict]) -> list[list[dict]]:
    """(blocks x heads): per part of the per-head attribution error (``ERROR_PARTS``: the error, its Shapley split,
    the final normaliser's part in each order) the summary over pairs. Raises where a pair's error is not its
    attribution share minus its exact denoising share."""
    for index, pair in enumerate(pairs):
        for block, row in enumerate(pair["head_error"]):
            for head, cell in enumerate(row):
                error = pair["heads"]["attribution"][block][head] - pair["heads"]["denoising"][block][head]
                if abs(cell["total"] - error) > 1e-4:
                    raise AssertionError(f"pair {index} block {block} head {head}: the split error {cell['total']} is not "
                                         f"attribution minus exact {error}")  # fmt: skip
    shape = pairs[0]["head_error"]

    def upstream_larger(block, head):  # pair by pair: is the upstream part (Shapley) the larger in size?
        cells = [pair["head_error"][block][head] for pair in pairs]
        return _round(sum(abs(c["upstream_shapley"]) > abs(c["final_norm_shapley"]) for c in cells) / len(cells))

    return [[{**{part: summarise([pair["head_error"][block][head][part] for pair in pairs]) for part in ERROR_PARTS},
              "upstream_larger_fraction": upstream_larger(block, head)}
             for head in range(len(row))] for block, row in enumerate(shape)]  # fmt: skip


def path_rest(path: dict) -> float:
    """The whole write's share less its three direct paths' (into the next block's keys, queries and values), each
    patched separately: what the route through the block's MLP and the paths' interaction carry together."""
    return path["everything"] - path["keys"] - path["queries"] - path["values"]


def spread_of_differences(differences: list[float]) -> dict:
    """The summary over pairs (``summarise``) of paired differences, with their typical size: the median of
    |difference|, the first pair's difference (the worked example's) and the fraction of pairs whose |difference|
    exceeds the first's, the fractions of pairs above and below 0, and the mean's own interval ("mean_interval":
    the mean +- MEAN_Z standard errors, a normal approximation: is the average difference told apart from 0?)."""
    count = len(differences)
    first = differences[0]
    mean = sum(differences) / count
    error = statistics.stdev(differences) / count**0.5 if count > 1 else 0.0
    return {**summarise(differences), "median_abs": _round(statistics.median(abs(v) for v in differences)), "first": _round(first),
            "mean_interval": [_round(mean - MEAN_Z * error), _round(mean + MEAN_Z * error)],
            "beyond_first": _round(sum(abs(v) > abs(first) for v in differences) / count),
            "above_zero": _round(sum(v > 0 for v in differences) / count),
            "below_zero": _round(sum(v < 0 for v in differences) / count)}  # fmt: skip


def direction_difference(pairs: list[dict], kind: str) -> list[list[dict | None]]:
    """(blocks x positions): per cell the spread over pairs of denoising minus noising, pair by pair
    (``spread_of_differences``; None where a pair leaves either undefined). The first pair is the worked example."""
    rows = []
    for block, row in enumerate(pairs[0]["activation"]["denoising"][kind]):
        cells = []
        for position in range(len(row)):
            values = [(pair["activation"]["denoising"][kind][block][position], pair["activation"]["noising"][kind][block][position])
                      for pair in pairs]  # fmt: skip
            cells.append(None if any(d is None or n is None for d, n in values) else spread_of_differences([d - n for d, n in values]))
        rows.append(cells)
    return rows


def head_difference(pairs: list[dict]) -> list[list[dict]]:
    """(blocks x heads): per head the spread over pairs of its per-head denoising share minus its noising share,
    pair by pair (``spread_of_differences``): where restoring a head alone recovers more than removing it costs."""
    rows = []
    for block, row in enumerate(pairs[0]["heads"]["denoising"]):
        rows.append([spread_of_differences([pair["heads"]["denoising"][block][head] - pair["heads"]["noising"][block][head]
                                            for pair in pairs]) for head in range(len(row))])  # fmt: skip
    return rows


def head_outcome(row: list, named: list[int], bound: float, others: tuple = ()) -> tuple[int, str]:
    """One pair, one block: the top head and the verdict key: "nothing" when no head clears the null's bound,
    "found" when the top head is named, "other_kind" when it is a head the rule names another kind (``others``),
    "unnamed" when the rule names it no other kind."""
    top = max(range(len(row)), key=lambda head: row[head])
    if row[top] <= bound:
        return top, "nothing"
    return top, "found" if top in named else "other_kind" if top in others else "unnamed"


def head_table(pairs: list[dict], method: str, bound: list[float], named: dict, fixed: dict | None = None,
               largest: list[float] | None = None, null_pairs: list[dict] = ()) -> dict:
    """Per block and head: the summary over pairs, the fraction of pairs in which the head is on top of its block
    and in which it clears the null (its bar, ``bound``, which the verdicts use, and, beside it, the null pairs'
    largest, ``largest``), and in which its share passes the bar in size, either sign (``beyond_fraction``); per kind with named heads in a block, the fraction of pairs of each verdict.
    ``fixed``: the kinds the design cannot test (their heads' shares near 0 if the mechanism holds), kind -> heads.
    The chance of a verdict counts as competitors only the heads the mechanism leaves free to move: the block's heads
    less those of ``fixed``; where only the named heads can move, the chance is 1 (no test). Beside it, a null of the
    model for which head tops the block: the fraction of pairs, and of ``null_pairs``, whose top head is a named one,
    the bar aside in both (``top_named``, ``null_top_named``)."""
    fixed = fixed or {}
    largest = largest or bound
    grids = [pair["heads"][method] for pair in pairs]
    shape = grids[0]
    per_head = [[{**summarise(values), "top_fraction": _round(sum(max(range(len(grid[block])), key=grid[block].__getitem__) == head
                                                               for grid in grids) / len(grids)),
                  "clears_fraction": _round(sum(v > bound[block] for v in values) / len(values)),
                  # in size, either sign: how a prediction near 0 could fail (``designs.by_method_observed``)
                  "beyond_fraction": _round(sum(abs(v) > bound[block] for v in values) / len(values)),
                  "clears_largest_fraction": _round(sum(v > largest[block] for v in values) / len(values)),
                  "positive_fraction": _round(sum(v > 0 for v in values) / len(values))}
                 for head, values in enumerate(row)] for block, row in enumerate(_cells(grids, shape))]  # fmt: skip
    kinds = {}
    for kind, heads in named.items():
        for block in sorted({b for b, _ in heads}):
            if block >= len(shape) or None in shape[block]:
                continue  # a method that cannot reach this block
            in_block = [h for b, h in heads if b == block]
            frozen = sorted({h for rows in fixed.values() for b, h in rows if b == block} - set(in_block))
            owners = {h: other for other, rows in {**named, **fixed}.items() if other != kind
                      for b, h in rows if b == block and h not in in_block}  # fmt: skip
            movable = len(shape[block]) - len(frozen)
            outcomes = [head_outcome(grid[block], in_block, bound[block], tuple(owners)) for grid in grids]
            verdicts = [verdict for _, verdict in outcomes]
            null_tops = [max(range(len(pair["heads"][method][block])), key=pair["heads"][method][block].__getitem__)
                         for pair in null_pairs]  # fmt: skip
            kinds[f"{kind}/{block}"] = {"kind": kind, "block": block, "named": in_block, "fixed": frozen, "movable": movable,
                                        # heads of the block the rule names no kind: none, and "unnamed" is 0 by construction
                                        "unnamed_heads": len(shape[block]) - len(in_block) - len(owners),
                                        "owner_kinds": sorted({owners[h] for h in owners if h not in frozen}),
                                        "chance": _round(len(in_block) / movable),
                                        "fractions": {key: _round(verdicts.count(key) / len(verdicts)) for key in VERDICTS},
                                        "other_kinds": sorted({owners[top] for top, verdict in outcomes if verdict == "other_kind"}),
                                        "by_head": {str(h): _round(sum(top == h and verdict == "found" for top, verdict in outcomes) / len(outcomes))
                                                    for h in in_block},
                                        "top_named": _round(sum(top in in_block for top, _ in outcomes) / len(outcomes)),
                                        **({"null_top_named": _round(sum(top in in_block for top in null_tops) / len(null_tops))}
                                           if null_tops else {})}  # fmt: skip
    return {"heads": per_head, "kinds": kinds}


def measure_distribution(model, named: dict, pairs: int = PAIRS) -> dict:
    """Per design: every method over ``pairs`` held-out pairs and over their null pairs, summarised."""
    out = {"pairs": pairs, "period": EXAMPLE_PERIOD, "interval": INTERVAL_NAME, "name_margin": NAME_MARGIN, "designs": {}}
    for name in UNTESTABLE:
        designs = held_out_designs(name, pairs)
        measured, nulls = [], []
        for index, design in enumerate(designs):
            shares = pair_shares(model, design)
            check_identities({"changed": list(design.changed), "readout": design.readout, "clean": design.clean,
                              "corrupt": design.corrupt}, shares["activation"],
                             f"{name} pair {index}")  # fmt: skip
            check_mirror({"name": name, "clean": design.clean, "corrupt": design.corrupt, "changed": list(design.changed)},
                         prepare(model, design))  # fmt: skip
            measured.append(shares)
            nulls.append(pair_shares(model, null_design(design), gap=shares["gap"]))
        depth = len(measured[0]["activation"]["denoising"]["resid_pre"])
        bounds = null_bounds(nulls, null_left_out(null_design(designs[0]), depth))
        out["designs"][name] = {
            "gap": summarise([pair["gap"] for pair in measured]),
            "null": {**bounds, "heads_summary": {m: [[summarise(v) for v in row] for row in _cells([p["heads"][m] for p in nulls], nulls[0]["heads"][m])]
                                                 for m in HEAD_METHODS}},  # fmt: skip
            "heads": {method: head_table(measured, method, bounds["heads"][method],
                                         {k: v for k, v in named.items() if k not in untestable(name, method)},
                                         {k: v for k, v in named.items() if k in untestable(name, method)},
                                         [t["largest"] for t in bounds["heads_largest"][method]], nulls)
                      for method in HEAD_METHODS},  # fmt: skip
            "not_testable": list(UNTESTABLE[name]),
            # the kinds a method cannot test beyond the design's own (``designs.UNTESTABLE_BY_METHOD``)
            "not_testable_by_method": {m: [k for k in untestable(name, m) if k not in UNTESTABLE[name]] for m in HEAD_METHODS},
            "activation": {d: {k: [[summarise(v) for v in row] for row in _cells([p["activation"][d][k] for p in measured],
                                                                                  measured[0]["activation"][d][k])]
                               for k in KINDS} for d in DIRECTIONS},  # fmt: skip
            # per cell and per head, the paired difference denoising - noising over the pairs: its mean, its spread
            # and its typical size pair by pair (whether the two directions differ on average, pair by pair, or both)
            "activation_difference": {k: direction_difference(measured, k) for k in KINDS},
            "head_difference": head_difference(measured),
            "null_head_difference": head_difference(nulls),  # the same differences on the null pairs: their own null
            "path": {key: summarise([pair["path"][key] for pair in measured]) for key in measured[0]["path"]},
            # what the three direct paths, patched separately, leave of the whole write's share, pair by pair
            "path_rest": spread_of_differences([path_rest(pair["path"]) for pair in measured]),
            "null_path_rest": summarise([path_rest(pair["path"]) for pair in nulls]),  # the same rest's own null
            "head_error": head_error_table(measured),
            "identities": identities({"changed": list(designs[0].changed), "readout": designs[0].readout,
                                      "clean": designs[0].clean, "corrupt": designs[0].corrupt}, depth),
            "per_pair": {"gap": [pair["gap"] for pair in measured],
                         "heads": {method: [pair["heads"][method] for pair in measured] for method in HEAD_METHODS},
                         "path": [pair["path"] for pair in measured],
                         "null_gap": [pair["gap"] for pair in nulls]},  # fmt: skip
        }
    return out


def check_distribution(distribution: dict, least: int = PAIRS) -> None:
    """What a distribution keeps whatever the model (AssertionError naming the one that fails): at least ``least``
    pairs, and every per-head mean, interval and fraction recomputed here from the per-pair shares."""
    for name, design in distribution["designs"].items():
        per_pair = design["per_pair"]
        count = len(per_pair["gap"])
        assert count >= least, f"{name}: {count} pairs, fewer than {least}"
        for method, grids in per_pair["heads"].items():
            for block, row in enumerate(design["heads"][method]["heads"]):
                for head, summary in enumerate(row):
                    values = [grid[block][head] for grid in grids]
                    if None in values:
                        continue
                    mean = sum(values) / count
                    assert abs(summary["mean"] - mean) < 1e-5, f"{name} {method} block {block} head {head}: mean {summary['mean']}, not {mean:.6f}"
                    assert summary["low"] <= summary["high"], f"{name} {method} block {block} head {head}: an empty interval"
                    assert summary["pairs"] == count, f"{name} {method}: {summary['pairs']} pairs summarised of {count}"
