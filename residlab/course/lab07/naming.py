"""Lab 07's heads named by a rule that can fail, on a draw of their own.

Heads are named by a rule that can fail (``named_heads``): a head is a previous-token, current-token or induction
head when its attention score exceeds its own control score by ``NAME_MARGIN``; the control is the same head's
attention two positions back (no mechanism of the task reads that offset) and, for induction, its attention at the
induction offset on sequences whose second half is no repeat. Any number of heads, none included, can be named.
The scores are taken on a draw of their own (``naming_sequences``), so no pair's sequence names a head.
"""

from __future__ import annotations

import torch

from residlab.course.lab07.designs import make_design
from residlab.course.lab07.distribution import _round, summarise
from residlab.course.lab07.verdicts import HEAD_KINDS
from residlab.course.models.induction.measures import (
    EXAMPLE_PERIOD, attention_weights, held_out_sequences, induction_score,
)
from residlab.course.models.induction.recipe import repeated_sequences

NAME_MARGIN = 0.5  # a head is named a kind when its score exceeds its control score by this much attention
CONTROL_OFFSET = 2  # the control of a positional score: attention this many positions back
CONTROL_SEED = 2027 + 11  # draws the unrepeated second halves of the induction control
NAMING_SEED = 2027 + 13  # the naming draw: the site's rule from a generator of its own, apart from the pairs' draw


def naming_sequences() -> dict[int, torch.Tensor]:
    """Period -> the sequences the heads are named on: as many per period as the held-out draw, by the same rule, from
    ``NAMING_SEED``; none of them is a held-out sequence (checked), so a verdict over the pairs tests the naming on
    sequences it never saw."""
    naming, held_out = held_out_sequences(seed=NAMING_SEED), held_out_sequences()
    for period, tokens in naming.items():
        shared = {tuple(row) for row in tokens.tolist()} & {tuple(row) for row in held_out[period].tolist()}
        if shared:
            raise ValueError(f"the naming draw shares {len(shared)} sequence(s) of period {period} with the held-out one")
    return naming


def _positional_scores(weights: torch.Tensor) -> dict[str, torch.Tensor]:
    """kind -> (blocks, heads, sequences): each head's mean attention one position back and at its own position."""
    # from query position 1 on: at position 0 a head can attend only to itself (causal), a forced 1
    return {kind: weights.diagonal(offset=offset, dim1=-2, dim2=-1)[..., 1 + offset:].mean(dim=-1)
            for kind, offset in (("previous_token", -1), ("current_token", 0))}  # fmt: skip


def head_name_scores(model, sequences: dict | None = None) -> dict:
    """kind -> {"scores": (blocks x heads), "controls": (blocks x heads)}, each the mean over periods of the mean
    over that period's ``sequences`` (default: ``naming_sequences``, apart from the pairs); for the positional kinds
    also "spread" (blocks x heads), each head's score sequence by sequence, summarised over every sequence of every
    period pooled (``summarise``), "spread_periods", the periods pooled, and "pair_sequences" (blocks x heads x
    sequences): each head's score on each clean prompt of the pairs (the held-out sequences of ``EXAMPLE_PERIOD``
    less their last token), in their order, so a head's attention is set beside its causal shares on the very inputs
    the methods patch; "by_query" and "at_changed" read the same prompts position by position."""
    sequences = naming_sequences() if sequences is None else sequences
    generator = torch.Generator().manual_seed(CONTROL_SEED)
    parts = {kind: ([], []) for kind in HEAD_KINDS}
    per_sequence = {"previous_token": [], "current_token": []}  # (blocks, heads, sequences) per period
    for period, tokens in sequences.items():
        weights = attention_weights(model, tokens)
        control = weights.diagonal(offset=-CONTROL_OFFSET, dim1=-2, dim2=-1).mean(dim=(-2, -1))
        for kind, each in _positional_scores(weights).items():
            per_sequence[kind].append(each)
            parts[kind][0].append(each.mean(dim=-1))
            parts[kind][1].append(control)
        unrepeated = torch.cat([tokens[:, :period], repeated_sequences(generator, len(tokens), period)[:, period:]], 1)
        parts["induction"][0].append(induction_score(weights, period))
        parts["induction"][1].append(induction_score(attention_weights(model, unrepeated), period))
    out = {kind: {key: [[_round(v) for v in row] for row in torch.stack(values).mean(0).tolist()]
                  for key, values in zip(("scores", "controls"), pair)} for kind, pair in parts.items()}  # fmt: skip
    # on the prompts the methods patch (2P - 1 tokens: the target is no query position of theirs)
    pair_weights = attention_weights(model, held_out_sequences()[EXAMPLE_PERIOD][:, : 2 * EXAMPLE_PERIOD - 1])
    paired = _positional_scores(pair_weights)
    # position by position on the pairs' sequences: each head's attention one position back at every query position
    # (the score averages them all), and at the queries that read the matched-position design's changed tokens
    back = pair_weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # (blocks, heads, pairs, n - 1): query t + 1 reads t
    changed = [position + 1 for position in make_design("matched_position", held_out_sequences()[EXAMPLE_PERIOD][0]).changed]
    out["previous_token"]["by_query"] = [[[_round(v) for v in row] for row in block] for block in back.mean(dim=2).tolist()]
    out["previous_token"]["at_changed"] = {"queries": changed, "pair_sequences": [[[_round(v) for v in row] for row in block]
                                           for block in back[..., [q - 1 for q in changed]].mean(dim=-1).tolist()]}  # fmt: skip
    for kind, values in per_sequence.items():  # the spread of each head's score over the naming sequences
        pooled = torch.cat(values, dim=-1)
        out[kind]["spread"] = [[summarise(row.tolist()) for row in block] for block in pooled]
        out[kind]["spread_periods"] = [int(period) for period in sequences]
        out[kind]["pair_sequences"] = [[[_round(v) for v in row] for row in block] for block in paired[kind].tolist()]
    return out


def named_heads(scores: dict, margin: float = NAME_MARGIN) -> dict[str, list[list[int]]]:
    """kind -> [[block, head], ...]: every head whose score exceeds its control by ``margin`` (none, one or many)."""
    return {kind: [[block, head] for block, row in enumerate(table["scores"]) for head, score in enumerate(row)
                   if score - table["controls"][block][head] >= margin] for kind, table in scores.items()}  # fmt: skip
