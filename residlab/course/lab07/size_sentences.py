"""Lab 07's sentences about a named head's size against the model's own null: pair by pair against the share the
head takes on the held-out pair's own null pair (the same clean prompt, a change the mechanism does not read), which
no bar enters, and, as a description, how often it clears the null bar, with how far that count moves as the bar
does over its resampled range (one draw of 64 null pairs sets the bar, an upper percentile of heavy-tailed values)."""

from __future__ import annotations

from residlab.course.lab07.chance import p_text
from residlab.course.lab07.predictions import higher_p
from residlab.course.lab07.sentences import _percent, observed


def size_against_null(entry: dict, heads: list) -> str:
    """Per named head: its mean share; pair by pair against its own null pair's share (no bar enters: the mean
    difference with its interval, then the one-sided sign test, ``distribution.null_paired``); and, as a description,
    how often it clears the null bar (signed) on the held-out and the null pairs, with how far that moves over the
    bar's resampled range. "" without them."""
    cells = _named_cells(entry, heads)
    if not cells:
        return ""
    return "; ".join(f"head {entry['block']}.{head} (mean {observed(cell['mean'])}): its share minus its own null pair's "
                     f"averages {observed(cell['null_paired']['mean'])} (95 % interval "
                     f"{observed(cell['null_paired']['mean_interval'][0])} to {observed(cell['null_paired']['mean_interval'][1])}), "
                     f"{_paired(cell)}; above the null bar in "
                     f"{_percent(cell['clears_fraction'])} of pairs against {_percent(cell['null_clears_fraction'])} of "
                     f"the null pairs ({_percent(cell['clears_range'][0])} to {_percent(cell['clears_range'][1])} over "
                     f"the bar's resampled range)" for head, cell in cells)  # fmt: skip


def _paired(cell: dict) -> str:
    """A head's share against its null pair's in words: the counts and the one-sided sign test's p, and where the
    share is below more often than above, that direction's own one-sided p (a method can reverse a head's sign)."""
    pairs = cell["pairs"]
    return (f"above it in {cell['null_paired']['higher']} of {pairs} pairs, below in {cell['null_paired']['lower']} "
            f"(one-sided sign test, {p_text(cell['null_paired']['p'])}{_below(cell)})")


def _below(cell: dict) -> str:
    """", below more often: p = ..." where a head's share is below its null pair's in more pairs than above."""
    higher, lower = cell["null_paired"]["higher"], cell["null_paired"]["lower"]
    return f"; below more often: {p_text(higher_p(lower, higher))}" if lower > higher else ""


def _named_cells(entry: dict, heads: list) -> list[tuple[int, dict]]:
    """(head, per-head cell) for ``entry``'s named heads; [] where the report lacks the paired null comparison."""
    cells = [(head, heads[entry["block"]][head]) for head in entry["named"]] if heads else []
    return [] if any("null_paired" not in cell or "clears_range" not in cell for _, cell in cells) else cells


def size_summary(entry: dict, heads: list) -> str:
    """``size_against_null`` in a few words: each head's share minus its own null pair's, the mean with its interval,
    then the pairs above and the sign test's p; "" without it."""
    cells = _named_cells(entry, heads)
    if not cells:
        return ""
    listed = ", ".join(f"{entry['block']}.{head} {observed(cell['null_paired']['mean'])} "
                       f"[{observed(cell['null_paired']['mean_interval'][0])}, {observed(cell['null_paired']['mean_interval'][1])}], "
                       f"above in {cell['null_paired']['higher']} of {cell['pairs']} ({p_text(cell['null_paired']['p'])}{_below(cell)})"
                       for head, cell in cells)  # fmt: skip
    return f"share minus its own null pair's, mean [95 % interval], pairs above (sign test): {listed}"
