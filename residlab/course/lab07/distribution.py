"""Lab 07 over a distribution of prompt pairs, read against a null of the same trained model.

One prompt pair is one draw. ``held_out_designs`` builds a design on every held-out sequence of the example's
period (``measures.held_out_sequences``: the site's own rule, from a generator no training uses; the first of them
is the page's worked example), and ``measure_distribution`` runs every method on each pair, then reports per
method and head the mean share over pairs, its percentile interval (``INTERVAL``) and the fraction of pairs in
which each verdict holds. The per-pair shares are in the report, so every mean can be recomputed from them
(``check_distribution``, asserted when the report is built).

The null (``null_design``) is the same trained model on a pair that makes a change of the design's own kind where the
readout does not depend on it: for the copied-token design (a substitution) the third token, at both of its
occurrences, replaced by one the prompt does not hold; for the matched-position design (a swap) the third and fourth
tokens of the first half swapped. Not the first tokens: this model's block-0 heads attend there from the end of the
prompt (an attention sink), so a change there is read at the readout. ``null_attention`` measures how much attention
the null's positions get from the readout and the position before it, head by head. Induction predicts the same
answer at the readout, so every share the null gives is expected to be near 0; the spread of its shares over pairs,
read with the design's own metric and divided by the design's own gap, is what a share must clear.

``cells.identities`` lists the cells whose value the construction fixes; they are marked, checked, and never read as a
finding.
"""

from __future__ import annotations

import math
import statistics

import torch

from residlab.capture.sites import site_name
from residlab.course.lab07.attribution import corrupt_gradients, head_attribution, head_error_split
from residlab.course.lab07.cells import check_identities, check_mirror, identities
from residlab.course.lab07.designs import UNTESTABLE, Design, make_design, untestable
from residlab.course.lab07.predictions import higher_p, more_often_p, paired_p
from residlab.course.lab07.patching import (
    DIRECTIONS, KINDS, activation_grids, head_grid, head_path_patching, path_patching, prepare,
)
from residlab.course.lab07.verdicts import VERDICTS
from residlab.course.models.induction.measures import (
    EXAMPLE_PERIOD, HELD_OUT_PER_PERIOD, attention_weights, held_out_sequences,
)
from residlab.course.models.induction.recipe import VOCAB_SIZE

PAIRS = HELD_OUT_PER_PERIOD  # held-out pairs per design: every held-out sequence of the example's period
INTERVAL = (2.5, 97.5)  # the percentile interval over pairs the report gives beside each mean
INTERVAL_NAME = "2.5th to 97.5th percentile over pairs"
MEAN_Z = 1.959964  # a mean paired difference's 95 % interval: the mean +- this many standard errors
HEAD_METHODS = ("denoising", "noising", "attribution", "path_keys")  # path_keys: block 0's heads only
BAR_RESAMPLES = 2000  # resamples of the null pairs that show how far one draw's null bar could lie from another's
BAR_SEED = 2027 + 17  # draws the resamples of the null bar


def _round(value):
    return None if value is None else round(float(value), 6)


# ---- the pairs ---------------------------------------------------------------------------------------------


def held_out_designs(name: str, pairs: int = PAIRS) -> list[Design]:
    """The design ``name`` on the first ``pairs`` held-out sequences of the example's period (the first is the
    worked example)."""
    sequences = held_out_sequences()[EXAMPLE_PERIOD]
    if pairs > len(sequences):
        raise ValueError(f"{pairs} pairs asked for; the held-out draw has {len(sequences)}")
    return [make_design(name, sequence) for sequence in sequences[:pairs]]


# Each design's null makes a change of the design's own kind (``null_change``): where the design substitutes a token,
# the null substitutes one; where it swaps two, the null swaps two. The words are the page's and the runner's.
NULL_KINDS = {"copied_token": "substitution", "matched_position": "swap"}
NULL_POSITION = 2  # where the null changes the prompt: past positions 0 and 1, where block 0's heads sink attention
NULL_WORDS = {"substitution": f"the token at position {NULL_POSITION} replaced at both its occurrences (positions "
                              f"{NULL_POSITION} and P + {NULL_POSITION}) by one the prompt does not hold",
              "swap": f"the tokens at positions {NULL_POSITION} and {NULL_POSITION + 1} of the first half swapped (the "
                      f"second half keeps their order, as the matched-position design keeps it)"}


def null_change(name: str) -> str:
    """What the null pairs of design ``name`` change, in words (page and runner)."""
    return NULL_WORDS[NULL_KINDS[name]]


def null_design(design: Design) -> Design:
    """The design's null pair (``NULL_KINDS``): the same clean prompt with a change of the design's own kind at
    positions no step of the mechanism reads at the readout; the design's target and rival, so M is the design's
    metric."""
    corrupt, first = list(design.clean), NULL_POSITION
    if NULL_KINDS[design.name] == "swap":
        changed = (first, first + 1)
        corrupt[first], corrupt[first + 1] = design.clean[first + 1], design.clean[first]
    else:
        held = set(design.clean) | set(design.corrupt) | {design.target, design.rival}
        replacement = min(t for t in range(VOCAB_SIZE) if t not in held)
        changed = (first, first + design.period)
        for position in changed:
            corrupt[position] = replacement
    # the readout, the token before it, the earlier occurrence and the token after it: what induction reads
    used = {design.readout, design.readout - 1, design.period - 2, design.period - 1, *design.changed}
    if used & set(changed) or tuple(corrupt) == design.clean:
        raise ValueError(f"the null of {design.name} would change what the readout reads")
    return Design(f"{design.name}_null", design.clean, tuple(corrupt), design.target, design.rival, changed,
                  design.period)  # fmt: skip


def null_attention(model, designs: list[Design]) -> dict[str, list[list[float]]]:
    """Per block and head, the attention the readout and the position before it give the null's changed positions
    ("changed") and the positions before ``NULL_POSITION`` ("first"), each summed over its positions and averaged
    over the two queries and the pairs' clean prompts: how much of each head's reading at the end of the prompt the
    null's change can reach, beside what it leaves alone."""
    weights = attention_weights(model, torch.tensor([design.clean for design in designs]))  # (blocks, heads, pairs, n, n)
    readout, changed = designs[0].readout, list(null_design(designs[0]).changed)
    ending = weights[..., [readout - 1, readout], :]
    return {key: [[_round(v) for v in row] for row in ending[..., positions].sum(-1).mean(dim=(-2, -1)).tolist()]
            for key, positions in (("changed", changed), ("first", list(range(NULL_POSITION))))}  # fmt: skip


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
    # the bar is an upper percentile of few heavy-tailed values: resampled, its middle 95 % (the fractions read
    # against it move with it; a named head's size is therefore also read pair by pair, with no bar: ``head_table``)
    generator = torch.Generator().manual_seed(BAR_SEED)
    bar_range = {method: [bar_interval(block, generator) for block in blocks] for method, blocks in maxima.items()}
    largest = {method: [{"largest": _round(max(block)), "pairs": len(block)} for block in blocks]
               for method, blocks in maxima.items()}  # fmt: skip
    cells, cells_at = {}, {}
    for direction in DIRECTIONS:  # the largest, and which cell of which null pair sets it
        cells[direction], cells_at[direction] = max(
            ((abs(v), {"site": site_name(block, kind), "position": position, "pair": index})
             for index, pair in enumerate(null_pairs) for kind, rows in pair["activation"][direction].items()
             for block, row in enumerate(rows) for position, v in enumerate(row)
             if v is not None and (kind, block, position) not in left_out), key=lambda found: found[0])  # fmt: skip
    return {"heads": bars, "heads_largest": largest, "heads_bar_range": bar_range,
            "cells": {d: _round(v) for d, v in cells.items()}, "cells_at": cells_at,
            "path": _round(max(abs(v) for pair in null_pairs for v in pair["path"].values())),
            # each path patch's own largest: a path is read against its own null, not the loosest of the four
            "path_each": {key: _round(max(abs(pair["path"][key]) for pair in null_pairs)) for key in null_pairs[0]["path"]},
            "gap": summarise([pair["gap"] for pair in null_pairs]),
            "largest_gap": _round(max(abs(pair["gap"]) for pair in null_pairs))}  # fmt: skip


def bar_interval(maxima: list[float], generator: torch.Generator) -> list[float]:
    """The middle 95 % of the null bar over ``BAR_RESAMPLES`` resamples (with replacement) of the null pairs' block
    maxima: a rough range, for a bootstrap of an upper percentile of few values is itself rough."""
    values = torch.tensor(maxima, dtype=torch.float64)
    draws = values[torch.randint(len(maxima), (BAR_RESAMPLES, len(maxima)), generator=generator)]
    bars = torch.quantile(draws, INTERVAL[1] / 100, dim=1)
    return [_round(v) for v in torch.quantile(bars, torch.tensor([INTERVAL[0] / 100, INTERVAL[1] / 100], dtype=torch.float64)).tolist()]


def null_paired(values: list[float], null_values: list[float]) -> dict:
    """A head's share on each held-out pair against its share on that pair's null pair (the same clean prompt): the
    mean difference and its 95 % interval (``mean_interval``), the pairs where the held-out share is the higher and
    the lower, and the one-sided exact sign test that it is the higher more often (``predictions.higher_p``). No bar
    enters it, so it does not move with one draw's null bar."""
    differences = [v - n for v, n in zip(values, null_values, strict=True)]
    higher, lower = sum(d > 0 for d in differences), sum(d < 0 for d in differences)
    return {"mean": _round(statistics.fmean(differences)), "mean_interval": mean_interval(differences),
            "higher": higher, "lower": lower, "p": _round(higher_p(higher, lower))}


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


def mean_interval(values: list[float]) -> list[float]:
    """The mean's 95 % interval, the mean +- MEAN_Z standard errors (a normal approximation; one value: the value)."""
    mean = statistics.fmean(values)
    error = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return [_round(mean - MEAN_Z * error), _round(mean + MEAN_Z * error)]


def spread_of_differences(differences: list[float]) -> dict:
    """The summary over pairs (``summarise``) of paired differences, with their typical size: the median of
    |difference|, the first pair's difference (the worked example's) and the fraction of pairs whose |difference|
    exceeds the first's, the fractions of pairs above and below 0, and the mean's own interval ("mean_interval":
    the mean +- MEAN_Z standard errors, a normal approximation: is the average difference told apart from 0?)."""
    count = len(differences)
    first = differences[0]
    return {**summarise(differences), "median_abs": _round(statistics.median(abs(v) for v in differences)), "first": _round(first),
            "mean_interval": mean_interval(differences),
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


def _paired_tops(held: list[bool], null: list[bool]) -> dict:
    """The null pairs' rate of a named head on top (``null_top_named``) and the paired comparison with the held-out
    pairs' (null pair i shares its clean prompt with held-out pair i): the pairs where only the held-out pair has one
    on top and where only the null pair has (``top_named_discordant``), and the exact McNemar p of that split
    (``top_named_p``, ``predictions.paired_p``)."""
    held_only = sum(h and not n for h, n in zip(held, null, strict=True))
    null_only = sum(n and not h for h, n in zip(held, null, strict=True))
    return {"null_top_named": _round(sum(null) / len(null)), "top_named_discordant": [held_only, null_only],
            "top_named_p": _round(paired_p(held_only, null_only))}


def head_table(pairs: list[dict], method: str, bound: list[float], named: dict, fixed: dict | None = None,
               largest: list[float] | None = None, null_pairs: list[dict] = (), bar_range: list | None = None) -> dict:
    """Per block and head: the summary over pairs, the fraction of pairs in which the head is on top of its block
    and in which it clears the null (its bar, ``bound``, which the verdicts use, and, beside it, the null pairs'
    largest, ``largest``), and in which its share passes the bar in size, either sign (``beyond_fraction``; with
    ``null_pairs``, the same on them, ``null_beyond_fraction``, and ``beyond_p``, ``predictions.more_often_p``
    of the two; signed: ``null_clears_fraction``, and with ``bar_range`` (the bar's resampled range per block)
    ``clears_range``, the signed fraction at the range's two ends); how a named head's size is read, pair by pair
    against its null pair, with no bar (``null_paired``); per kind with named heads in a block, the fraction of pairs
    of each verdict.
    ``fixed``: the kinds the design cannot test (their heads' shares near 0 if the mechanism holds), kind -> heads.
    The chance of a verdict counts as competitors only the heads the mechanism does not predict near 0: the block's heads
    less those of ``fixed``; where only the named heads can move, the chance is 1 (no test). Beside it, a null of the
    model for which head tops the block: the fraction of pairs, and of ``null_pairs``, whose top head is a named one,
    the bar aside in both (``top_named``, ``null_top_named``), compared pair by pair (``_paired_tops``)."""
    fixed = fixed or {}
    largest = largest or bound
    grids = [pair["heads"][method] for pair in pairs]
    shape = grids[0]
    held_cells = _cells(grids, shape)
    passes = lambda values, block: sum(abs(v) > bound[block] for v in values)  # noqa: E731  in size, either sign
    per_head = [[{**summarise(values), "top_fraction": _round(sum(max(range(len(grid[block])), key=grid[block].__getitem__) == head
                                                               for grid in grids) / len(grids)),
                  "clears_fraction": _round(sum(v > bound[block] for v in values) / len(values)),
                  # in size, either sign: how a prediction near 0 could fail (``predictions.by_method_observed``)
                  "beyond_fraction": _round(passes(values, block) / len(values)),
                  "clears_largest_fraction": _round(sum(v > largest[block] for v in values) / len(values)),
                  "positive_fraction": _round(sum(v > 0 for v in values) / len(values)),
                  "mean_interval": mean_interval(values)}
                 for head, values in enumerate(row)] for block, row in enumerate(held_cells)]  # fmt: skip
    if null_pairs:  # the same passes on the null pairs, and whether the held-out pairs pass more often
        null_cells = _cells([pair["heads"][method] for pair in null_pairs], shape)
        for block, (row, null_row) in enumerate(zip(held_cells, null_cells)):
            for head, (values, null_values) in enumerate(zip(row, null_row)):
                held, null = passes(values, block), passes(null_values, block)
                # signed, as a named head's share is read (a share past the bar the wrong way is no detection)
                null_above = sum(v > bound[block] for v in null_values)
                per_head[block][head].update(null_beyond_fraction=_round(null / len(null_values)),
                                             beyond_p=_round(more_often_p(held, len(values), null, len(null_values))),
                                             null_clears_fraction=_round(null_above / len(null_values)),
                                             null_paired=null_paired(values, null_values))
                if bar_range:  # at the high end of the bar's range fewer pairs clear it: (fewest, most)
                    per_head[block][head]["clears_range"] = [_round(sum(v > bar for v in values) / len(values))
                                                             for bar in reversed(bar_range[block])]  # fmt: skip
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
                                        **(_paired_tops([top in in_block for top, _ in outcomes], [top in in_block for top in null_tops])
                                           if null_tops else {})}  # fmt: skip
    return {"heads": per_head, "kinds": kinds}


def measure_distribution(model, named: dict, pairs: int = PAIRS) -> dict:
    """Per design: every method over ``pairs`` held-out pairs and over their null pairs, summarised."""
    out = {"pairs": pairs, "period": EXAMPLE_PERIOD, "interval": INTERVAL_NAME, "designs": {}}
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
            "null": {**bounds, "kind": NULL_KINDS[name], "changed": list(null_design(designs[0]).changed),
                     "attention": null_attention(model, designs),
                     "heads_summary": {m: [[summarise(v) for v in row] for row in _cells([p["heads"][m] for p in nulls], nulls[0]["heads"][m])]
                                                 for m in HEAD_METHODS}},  # fmt: skip
            "heads": {method: head_table(measured, method, bounds["heads"][method],
                                         {k: v for k, v in named.items() if k not in untestable(name, method)},
                                         {k: v for k, v in named.items() if k in untestable(name, method)},
                                         [t["largest"] for t in bounds["heads_largest"][method]], nulls,
                                         bounds["heads_bar_range"][method])
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
                         "null_gap": [pair["gap"] for pair in nulls],
                         "null_heads": {method: [pair["heads"][method] for pair in nulls] for method in HEAD_METHODS}},  # fmt: skip
        }
    return out


def check_distribution(distribution: dict, least: int = PAIRS) -> None:
    """What a distribution keeps whatever the model (AssertionError naming the one that fails): at least ``least``
    pairs, and every per-head mean, interval and fraction recomputed here from the per-pair shares, and each head's
    comparison with its own null pairs (``null_paired``) from theirs."""
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
                    if "null_paired" in summary:
                        null_values = [grid[block][head] for grid in per_pair["null_heads"][method]]
                        assert summary["null_paired"] == null_paired(values, null_values), f"{name} {method} block {block} head {head}: null_paired"
