"""Lab 07's sentences that set two numbers side by side, each chosen from the report (``lab.run_lab``): the two
directions of activation patching cell by cell and head by head, over the pairs and pair by pair
(``distribution.spread_of_differences``), the worked example beside the pairs, a verdict's top heads beside the
null pairs', and the copied-token design's corruption beside the one Lab 06 and the glossary use. The helpers are ``sentences``'s."""

from __future__ import annotations

import math

from residlab.course.lab07.chance import p_text, wilson, wilson_bounds
from residlab.course.lab07.distribution import MEAN_Z
from residlab.course.lab07.cells import by_construction, distinct_cells, hybrid, zero_identity
from residlab.course.lab07.sentences import (
    MOSTLY, _interval, _percent, _small_interval, _small_parts, _up, _value, observed, table_mean,
)
from residlab.course.lab07.verdicts import HEAD_KINDS


DIFFER = 0.1  # denoising and noising "differ" on a pair when their difference is at least this share of the gap
ONE_SIGN = 0.75  # a head's denoising minus noising "keeps one sign" when it does in at least this fraction of pairs
HALF_OF = 0.5  # one head's own path share "at least half" of the whole write's
NEGLIGIBLE = 0.01  # a mean difference told apart from 0 but smaller than this share of the gap is said to be negligible


def direction_sentence(report: dict, name: str) -> str:
    """Where denoising and noising disagree: the cell whose two directions differ most over the pairs (the median
    |denoising - noising|, ``distribution.spread_of_differences``), with the worked example's values there as one
    draw; a site that restores the behaviour alone but whose removal costs less (sufficient, not necessary), or the
    reverse."""
    design = report["designs"][name]
    if not design["readable"]:
        return ""
    grids = design["activation"]
    measured = report["distribution"]["designs"][name]
    spread = measured["activation_difference"]
    pairs = [(over["median_abs"], abs(d - n), site, position, d, n, kind, block)
             for site, position, kind, block in distinct_cells(design)
             if (d := grids["denoising"][kind][block][position]) is not None
             and (n := grids["noising"][kind][block][position]) is not None
             and (over := spread[kind][block][position]) is not None
             and position >= min(design["changed"])  # before it every cell is 0 in both directions (causal)
             and not by_construction(design, kind, block, position) and not hybrid(design, kind, block, position)]  # fmt: skip
    left_out = " (the identities and the hybrid-prompt cells left out: they are not findings about a site)"
    typical, difference, site, position, denoise, noise, kind, block = max(pairs)
    example = max(pair[1] for pair in pairs)
    if typical < DIFFER and example < DIFFER:
        width = {(site, position): spread[kind][block][position] for _, _, site, position, _, _, kind, block in pairs}
        (site, position), cell = max(width.items(), key=lambda item: item[1]["high"] - item[1]["low"])
        systematic = told_apart(pairs, spread, " Small as they are, ")
        return (f"On every cell the typical difference of denoising and noising is small{left_out}: over the pairs the median |difference| "
                f"is at most {_up(typical)} of the gap, and on the worked example every cell is within {_up(example)}; "
                f"pair by pair a cell's difference still spreads, most widely at {site}, position {position} "
                f"({_interval(cell)}).{systematic} So typically, here, restoring a site and removing it move M alike; the "
                f"cells that move most of the gap are listed above, the identities and the near-1 cell of observed attention "
                f"among them marked as such.")  # fmt: skip
    over = spread[kind][block][position]
    each = measured["activation"]
    first = (f"The cell whose two directions differ most over the pairs (median |difference| {_value(typical)}){left_out} "
             f"is {site}, position {position}; on the worked example (one draw) it is {_value(denoise)} denoising, "
             f"{_value(noise)} noising. Over the {over['pairs']} held-out pairs that cell is "
             f"{_interval(each['denoising'][kind][block][position])} denoising and "
             f"{_interval(each['noising'][kind][block][position])} noising, and their paired difference, denoising minus "
             f"noising pair by pair, is {_interval(over)}")  # fmt: skip
    others = told_apart(pairs, spread, " Beside it, ")
    if over["low"] > 0 or over["high"] < 0:
        reading = ("restoring it alone recovers more than removing it costs: the rest of the clean run can partly make up "
                   "for it" if over["mean"] > 0 else
                   "removing it costs more than restoring it alone recovers: it is needed, but not enough by itself")  # fmt: skip
        return f"{first}, of one sign throughout, so over the pairs {reading}.{others}"
    return f"{first}. {pairwise_reading(over)}{others}"


def example_place_sentence(report: dict, name: str) -> str:
    """Where the worked example's cells fall among the held-out pairs, both directions: the distinct cells whose
    value on the example lies outside the pairs' interval (the 2.5th to 97.5th percentile, so about 5 % of a typical
    pair's cells would), each named with both numbers; the identities left out (fixed, not drawn)."""
    design = report["designs"][name]
    if not design["readable"]:
        return ""
    over = report["distribution"]["designs"][name]["activation"]
    compared, outside, hybrids = 0, [], 0
    for direction in ("denoising", "noising"):
        for site, position, kind, block in distinct_cells(design):
            value, spread = design["activation"][direction][kind][block][position], over[direction][kind][block][position]
            if value is None or spread is None or by_construction(design, kind, block, position) or zero_identity(design, kind, block, position):
                continue
            compared += 1
            hybrids += bool(hybrid(design, kind, block, position))
            if not spread["low"] <= value <= spread["high"]:
                outside.append((abs(value - spread["mean"]), direction, site, position, value, spread,
                                hybrid(design, kind, block, position)))  # fmt: skip
    if not compared:
        return ""
    # the hybrid-prompt cells are observed, so counted here, though the directions' difference test leaves them out
    with_hybrids = f", the {hybrids} hybrid-prompt cells in" if hybrids else ""
    chance = f"a pair drawn like the others would have about {0.05 * compared:.0f} of {compared} cells outside"
    if not outside:
        return (f"Every one of the worked example's {compared} observed cells (both directions, the identities left out{with_hybrids}) "
                f"lies within the pairs' interval ({chance}): a typical draw, cell by cell, as far as this can show (each "
                f"interval is computed over a set that includes it, and its cells are linked, not independent draws)."
                f"{gap_rank_sentence(report, name)}")
    outside.sort(key=lambda cell: (-cell[0], cell[2], cell[3]))
    listed = "; ".join(f"{direction} at {site}, position {position}{' (' + why + ')' if why else ''}: "
                       f"{_small_parts(value, spread['low'], spread['high'])[0]} on the example, {_small_interval(spread['mean'], spread['low'], spread['high'])} "
                       f"over the pairs" for _, direction, site, position, value, spread, why in outside)  # fmt: skip
    unusual = len(outside) > 2 * 0.05 * compared
    positions = [cell[3] for cell in outside]
    shared = max(set(positions), key=positions.count)
    # cells at one position are linked (a block's output there is its input plus its writes): not independent draws
    linked = positions.count(shared) > 1
    if linked:
        reading = (f"not a count of independent draws: {positions.count(shared)} of them are at position {shared}, "
                   f"linked cells (a block's output there is its input plus its writes), so at position {shared} the "
                   f"worked example is an atypical draw, and the figures show it there, not the pairs")
    else:
        reading = ("more than twice what chance gives: at those cells it is an unusual draw, and the figures show it "
                   "there, not the pairs" if unusual else "about what chance gives: a typical draw, and where it lies "
                   "outside, read the pairs' numbers, not the figure")  # fmt: skip
    return (f"Where the worked example lies among the pairs: of its {compared} observed cells (both directions, the "
            f"identities left out{with_hybrids}), {len(outside)} fall outside the pairs' interval ({listed}); {chance}, but "
            f"{len(outside)} is {reading}." if linked else
            f"Where the worked example lies among the pairs: of its {compared} observed cells (both directions, the "
            f"identities left out{with_hybrids}), {len(outside)} fall outside the pairs' interval ({listed}); {chance}, so "
            f"{len(outside)} is {reading}.") + gap_rank_sentence(report, name)


def gap_rank_sentence(report: dict, name: str) -> str:
    """Where the worked example's gap falls among the pairs' gaps (the example is one of them), said where it is among
    the largest or smallest tenth; shares are fractions of each pair's own gap, so its size does not scale them."""
    gaps = report["distribution"]["designs"][name].get("per_pair", {}).get("gap")
    if not gaps:
        return ""
    gap, others = report["designs"][name]["gap"], gaps[1:]  # the worked example is the first pair
    larger, smaller = sum(g > gap for g in others), sum(g < gap for g in others)
    mean = sum(gaps) / len(gaps)
    if min(larger, smaller) > len(gaps) // 10:
        return ""
    where = (f"larger than all but {larger}" if larger <= smaller else f"smaller than all but {smaller}")
    return (f" Its gap, {gap:.2f}, is {where} of the other {len(others)} pairs' gaps (the mean of all {len(gaps)}: "
            f"{mean:.2f}); each share is a fraction of its own pair's gap, so the gap's size does not scale the shares.")


PAIRED_TEST = 0.05  # the level of the paired exact test that tells the held-out and null rates of a named head on top apart


def _null_top_relation(entry: dict) -> str:
    """How the held-out and null rates of a named head on top compare pair by pair (``top_named_discordant``, its
    two-sided exact McNemar p ``top_named_p``): "apart" (held above), "other way" or "not"."""
    held_only, null_only = entry["top_named_discordant"]
    if entry["top_named_p"] >= PAIRED_TEST:
        return "not"
    return "apart" if held_only > null_only else "other way"


def paired_words(entry: dict) -> str:
    """The paired comparison in a few words: the split of the pairs where only one side has a named head on top (its
    p is given in full where the verdict is, ``null_top_sentence``: the comparison is a description)."""
    held_only, null_only = entry["top_named_discordant"]
    return f"{held_only} pairs to {null_only}"


def null_top_outcome(entry: dict) -> str:
    """The verdict's headline against the model's own null for which head tops the block, in a few words (as
    ``null_top_sentence`` reads it in full); "" for a report without it."""
    if "null_top_named" not in entry:
        return ""
    told = {"apart": "more often", "other way": "less often", "not": "not told apart"}[_null_top_relation(entry)]
    return (f"{_percent(entry['top_named'])} of pairs vs {_percent(entry['null_top_named'])} of the null pairs "
            f"({paired_words(entry)}: {told}; a description)")


def null_top_sentence(entry: dict, pairs: int, null_kind: str) -> str:
    """The model's own null for which head tops the block: how often a named head is the block's top head on the
    null pairs (a change the mechanism does not read at the readout) against the held-out pairs, the bar aside in both, each with its
    Wilson interval, told apart by the paired exact test (``_null_top_relation``). ``null_kind``: the null's change
    (``distribution.NULL_KINDS``). "" for a report without it."""
    if "null_top_named" not in entry:
        return ""
    held, null = entry["top_named"], entry["null_top_named"]
    relation = _null_top_relation(entry)
    held_only, null_only = entry["top_named_discordant"]
    if relation == "apart":
        reading = ("the named heads top the block more often under the design's change than under the "
                   f"null's (a {null_kind} at positions the mechanism does not read at the readout)")
        if entry.get("fixed") and entry["chance"] >= 1:  # every other head predicted near 0: the design decides the rate
            others = ", ".join(f"{entry['block']}.{head}" for head in entry["fixed"])
            reading += (f", though the prediction decides the held-out rate: the block's other heads ({others}) are "
                        f"predicted near 0 here, so wherever it holds a named head tops the "
                        f"block; the comparison tests that prediction, not the named heads (their sizes against the null "
                        f"pairs do)")
    elif relation == "other way":
        reading = "the other way: a named head is the null pairs' top head more often than the held-out pairs'"
    else:
        reading = ("no difference the paired test tells apart (which does not show the two rates equal: the null's "
                   "rate is one draw's too)")
    return (f". Against the model's own null for which head tops the block (the bar aside in both): on the null pairs "
            f"a named head is the top head in {_percent(null)} (95 % Wilson {wilson(null, pairs)}), on the held-out "
            f"pairs in {_percent(held)} ({wilson(held, pairs)}); pair by pair, only the held-out pair has a named head "
            f"on top in {held_only} and only the null pair in {null_only} (two-sided exact McNemar test, "
            f"{p_text(entry['top_named_p'])}, of whether the two rates differ): {reading}. A description, not a test "
            f"of the named heads (the rule above these tables says why)")


def told_apart(pairs: list, spread: dict, lead: str) -> str:
    """The cells (of ``pairs``, those compared) whose mean paired difference is told apart from 0 (its 95 % interval,
    ``mean_interval``, excludes 0), with their means, and how many would be by chance alone (each
    tested at 95 %, no correction over the cells); "" where none is. Every such cell is named."""
    told = sorted(((abs(over["mean"]), site, position, over) for _, _, site, position, _, _, kind, block in pairs
                   if (over := spread[kind][block][position]).get("mean_interval")
                   and not over["mean_interval"][0] <= 0 <= over["mean_interval"][1]), key=lambda item: -item[0])  # fmt: skip
    if not told:
        return ""
    counted = f"{len(told)} cells' mean differences are" if len(told) > 1 else "1 cell's mean difference is"
    named = "; ".join(f"{site}, position {position}: {_small_interval(over['mean'], *over['mean_interval'])}"
                      for _, site, position, over in told)  # fmt: skip
    tiny = [over for *_, over in told if abs(over["mean"]) < NEGLIGIBLE]
    size = (f" {len(tiny)} of them {'is' if len(tiny) == 1 else 'are'} under {NEGLIGIBLE} of the gap in size: told "
            f"apart, but negligible, and a mean's interval on differences mostly near 0 is fragile." if tiny else "")
    survive = [f"{site}, position {position}" for _, site, position, over in told
               if _two_sided_p(over) < 0.05 / len(pairs)]  # fmt: skip
    corrected = (f"{'; '.join(survive)} {'survives' if len(survive) == 1 else 'survive'} a Bonferroni correction over "
                 f"them (p below 0.05 / {len(pairs)} by the normal approximation): {'a finding' if len(survive) == 1 else 'findings'} "
                 f"about {'that cell' if len(survive) == 1 else 'those cells'}; the others are not read" if survive else
                 f"none survives a Bonferroni correction over them, so none is read")  # fmt: skip
    return (f"{lead}{counted} told apart from 0 by the mean's own 95 % interval ({named}); each is tested at 95 % "
            f"with no correction over the {len(pairs)} cells compared, so about {0.05 * len(pairs):.1f} would be by "
            f"chance alone; {corrected}.{size}")  # fmt: skip


def _two_sided_p(over: dict) -> float:
    """The two-sided normal p of a mean paired difference, its standard error read back from ``mean_interval``."""
    low, high = over["mean_interval"]
    error = (high - low) / (2 * MEAN_Z)
    return math.erfc(abs(over["mean"]) / error / math.sqrt(2)) if error > 0 else 0.0


def pairwise_reading(over: dict) -> str:
    """What a paired difference of both signs over the pairs says, chosen from its typical size
    (``distribution.spread_of_differences``): the mean, the median |difference| against DIFFER, and the fraction of
    pairs whose |difference| exceeds the worked example's."""
    example, beyond = abs(over["first"]), over["beyond_first"]
    spread = f"95 % of pairs within [{_value(over['low'])}, {_value(over['high'])}]"
    average = mean_reading(over)
    if over["median_abs"] < DIFFER:
        return (f"{average}, and pair by pair too: the median |difference| is {_value(over['median_abs'])}, below "
                f"{DIFFER} of the gap ({spread}); the worked example's |difference| {_value(example)} is exceeded in only "
                f"{_percent(beyond)} of pairs.")  # fmt: skip
    if beyond >= 0.75:
        where = "among the smaller ones"
    elif beyond <= 0.25:
        where = "among the larger ones"
    else:
        where = "typical, not special"
    return (f"{average}, but pair by pair they differ widely in both directions: the median |difference| is "
            f"{_value(over['median_abs'])} ({spread}), above 0 in {_percent(over['above_zero'])} of pairs and below in "
            f"{_percent(over['below_zero'])}; the worked example's |difference| {_value(example)} is exceeded in "
            f"{_percent(beyond)} of pairs, {where}.")  # fmt: skip


def mean_reading(over: dict) -> str:
    """The mean paired difference read with its own interval (``mean_interval``: mean +- 1.96 standard errors): not
    told apart from 0 where the interval holds 0, else its sign, and whether it is below DIFFER of the gap."""
    low, high = over.get("mean_interval", (None, None))
    mean = over["mean"]
    if low is None:
        return f"On average the difference is {_value(mean)}"
    mean_said, bounds = _small_parts(mean, low, high)
    said = f"{mean_said}, the mean's 95 % interval {bounds} (mean ± 1.96 standard errors)"
    if low <= 0 <= high:
        return f"On average the two directions are not told apart: the mean difference is {said}, which holds 0"
    direction = "exceeds" if mean > 0 else "falls short of"
    size = f" by less than {DIFFER} of the gap" if abs(high if mean > 0 else low) < DIFFER else ""
    return f"On average denoising {direction} noising{size}: the mean difference is {said}"


def lab06_sentence(report: dict, name: str = "copied_token") -> str:
    """Why Lab 06's and the glossary's gap is not the copied-token design's: the same position corrupted, to another
    token (their rule's draw) and with another rival (their rule's), each read from the report (``lab.lab06_corruption``)."""
    other, design = report.get("lab06"), report["designs"][name]
    if other is None:
        return ""
    (position,) = design["changed"]
    same = other["clean"] == list(design["clean"]) and other["position"] == position
    where = ("the same clean prompt at the same position" if same else
             f"another clean prompt, at position {other['position']}")  # fmt: skip
    replaced = ("to the same token" if other["token"] == design["corrupt"][position] else
                f"to token {other['token']}, their own rule's draw, where this design puts token {design['corrupt'][position]}")
    rival = ("the same rival" if other["rival"] == design["rival"] else
             f"rival {other['rival']} by their rule, this design {design['rival']}")
    differ = "so the gaps differ" if round(other["gap"], 2) != round(design["gap"], 2) else "and the gaps agree"
    return (f"Lab 06 and the glossary corrupt {where} (token {other['clean_token']}) {replaced}; they read "
            f"{rival}; the gap of that corruption, M(clean) minus M(corrupt), is {_value(other['gap'])} (the glossary prints "
            f"it, Lab 06 the two values), this worked example's {_value(design['gap'])}, {differ}.")


def key_step_sentence(report: dict) -> str:
    """For Lab 06 and the glossary, which zero or patch block 0's attention write at the position after the earlier
    occurrence: what Lab 07's report says that write's total effect mixes. In the copied-token design, the path
    shares of the whole write through block 1's keys and values, and the current-token heads' denoising shares
    (the heads that write there besides the previous-token heads); in the matched-position design, the keys alone.
    Each number read from the report, the reading chosen from them."""
    over = report["distribution"]["designs"]
    copied, matched = over["copied_token"], over["matched_position"]
    keys, values = copied["path"]["keys"], copied["path"]["values"]
    current = report["heads"]["named"].get("current_token", [])
    carrying = [(b, h) for b, h in current if copied["heads"]["denoising"]["heads"][b][h]["clears_fraction"] >= MOSTLY]
    heads = ""
    if carrying:
        listed = ", ".join(f"head {b}.{h} {_interval(copied['heads']['denoising']['heads'][b][h])}" for b, h in carrying)
        heads = (f", and the current-token {'head' if len(carrying) == 1 else 'heads'}, patched head by head, carry part "
                 f"of the gap ({listed})")
    if values["mean"] > abs(keys["mean"]) and abs(keys["mean"]) <= copied["null"].get("path_each", {}).get("keys", copied["null"]["path"]):
        route = (f"Lab 07 finds that, with only the copied token changed, block 0's whole attention write reaches the "
                 f"readout mostly through block 1's values ({_interval(values)} of the gap), not its keys "
                 f"({_interval(keys)}){heads}")  # fmt: skip
    else:
        route = (f"Lab 07 finds that, with only the copied token changed, block 0's whole attention write reaches the "
                 f"readout through block 1's keys ({_interval(keys)} of the gap) and its values ({_interval(values)}){heads}")
    route += (f" (each a mean [2.5th to 97.5th percentile] over {report['distribution']['pairs']} held-out pairs, as "
              f"every interval below)")
    isolated = matched["path"]["keys"]
    previous = [(b, h) for b, h in report["heads"]["named"].get("previous_token", []) if b == 0]
    per_head = matched["heads"].get("path_keys", {}).get("heads", [[]])[0]
    whose = ""
    if previous and per_head:
        listed = " and ".join(f"head 0.{h}'s {_interval(per_head[h])}" for _, h in previous)
        whose = (f"; head by head, each previous-token head's own write sent there alone carries {listed} (separate "
                 f"patches, which need not add up to the whole){_one_carrier(report)}")
    return (f"Zeroing that write removes more than the note: it removes everything block 0's heads write there, the "
            f"current-token heads' included. {route}. So the write's total effect does not isolate the key step. "
            f"Lab 07's matched-position design lets path patching separate the key route from the value route: block 0's whole write sent "
            f"into block 1's keys alone carries {_interval(isolated)} of its gap{whose}.")


def _one_carrier(report: dict) -> str:
    """Where one previous-token head's own write into block 1's keys carries at least HALF_OF of block 0's whole
    write's in the matched-position design, on average: said, with in how many pairs it does; "" otherwise."""
    matched = report["distribution"]["designs"]["matched_position"]
    whole = matched["path"]["keys"]["mean"]
    per_head = matched["heads"].get("path_keys", {}).get("heads", [[]])[0]
    previous = [h for b, h in report["heads"]["named"].get("previous_token", []) if b == 0]
    carriers = [h for h in previous if per_head and whole and per_head[h]["mean"] >= HALF_OF * whole]
    if len(carriers) != 1:
        return ""
    ratio = per_head[carriers[0]]["mean"] / whole
    return (f", head 0.{carriers[0]}'s write alone carries {ratio:.2f} of what the whole write sent into the keys "
            f"carries (a ratio of means){_pairs_at_least_half(matched, carriers[0])}")


def key_carrier_sentence(report: dict) -> str:
    """For Part 6: what Lab 06 and the glossary say of the key route head by head (``_one_carrier``), said here too."""
    said = _one_carrier(report)
    whole = report["distribution"]["designs"]["matched_position"]["path"]["keys"]
    return (f"In the matched-position design, block 0's whole write sent into block 1's keys alone carries "
            f"{_interval(whole)} of the gap (Part 4){said}." if said else "")


def _pairs_at_least_half(measured: dict, head: int) -> str:
    """In how many pairs block 0 head ``head``'s own write into block 1's keys carries at least HALF_OF of the whole
    write's, pair by pair; "" for a report without per-pair shares."""
    per_pair = measured.get("per_pair", {})
    grids, paths = per_pair.get("heads", {}).get("path_keys"), per_pair.get("path")
    if not grids or not paths:
        return ""
    count = sum(grid[0][head] >= HALF_OF * path["keys"] for grid, path in zip(grids, paths))
    return f"; pair by pair at least {HALF_OF:g} of it in {count} of the {len(paths)}"


def head_direction_sentence(report: dict, name: str) -> str:
    """Per design, the heads whose per-head denoising minus noising keeps one sign in at least ONE_SIGN of the pairs
    and whose mean difference's 95 % interval does not overlap the same head's on the null pairs (the difference's
    own null, ``null_head_difference``; ``_apart_from_null``): sufficient more than necessary, or the reverse. Why is not
    tested here, so not said. Chosen from the numbers."""
    if not report["designs"][name]["readable"]:
        return ""
    measured = report["distribution"]["designs"][name]
    rows, null = measured["head_difference"], measured["null_head_difference"]
    signed = [(b, h, c) for b, row in enumerate(rows) for h, c in enumerate(row)
              if c["above_zero"] >= ONE_SIGN or c["below_zero"] >= ONE_SIGN]
    clear = [(b, h, c) for b, h, c in signed if _apart_from_null(c, null[b][h])]
    faint = [(b, h, c) for b, h, c in signed if not _apart_from_null(c, null[b][h])]
    # a head of a kind one direction cannot test here (Part 6): its difference is that direction's predicted near 0
    kind_of = {(b, h): kind for kind, heads in report["heads"]["named"].items() for b, h in heads}
    blind = {direction: measured.get("not_testable_by_method", {}).get(direction, ()) for direction in ("denoising", "noising")}
    predicted = [(b, h, c) for b, h, c in clear if kind_of.get((b, h)) in blind["noising"] + blind["denoising"]]
    clear = [cell for cell in clear if cell not in predicted]
    more = [(b, h, c) for b, h, c in clear if c["above_zero"] >= ONE_SIGN]
    less = [(b, h, c) for b, h, c in clear if c["below_zero"] >= ONE_SIGN]
    rule = (f"the difference is denoising minus noising; a head is flagged here when it keeps one sign in at least "
            f"{_percent(ONE_SIGN)} of pairs and its mean difference's 95 % interval does not overlap the same head's "
            f"on the null pairs")  # fmt: skip
    said = []
    # said as the two numbers compare, not as "sufficient" or "necessary": a head that restores a small share alone
    # is not sufficient, and which cause makes the directions differ is not tested here
    pairs = report["distribution"]["pairs"]

    def difference(c: dict) -> str:  # the mean difference with its own interval, where the report has one
        low, high = c.get("mean_interval", (None, None))
        if low is None:
            return f"mean difference {_value(c['mean'])}"
        return f"mean difference {_small_interval(c['mean'], low, high)}, mean ± {MEAN_Z:.2f} SE"

    def flagged(b: int, h: int, c: dict, side: str, direction: str) -> str:
        below = f", reaching below the {_percent(ONE_SIGN)} of the rule" if wilson_bounds(c[side], pairs)[0] < ONE_SIGN else ""
        return (f"head {b}.{h} in {_percent(c[side])} of pairs (95 % Wilson {wilson(c[side], pairs)}{below}; "
                f"{difference(c)}; {direction} {table_mean(measured['heads'][direction]['heads'][b][h])} on average)")  # fmt: skip

    if more:
        said.append("denoising exceeds noising for " + ", ".join(flagged(b, h, c, "above_zero", "denoising") for b, h, c in more))
    if less:
        said.append("noising exceeds denoising for " + ", ".join(flagged(b, h, c, "below_zero", "noising") for b, h, c in less))
    for b, h, c in predicted:  # the direction that cannot test the head predicts its share near 0: the other is observed
        kind = kind_of[(b, h)]
        blind_direction = "noising" if kind in blind["noising"] else "denoising"
        seen = "denoising" if blind_direction == "noising" else "noising"
        said.append(f"head {b}.{h} ({HEAD_KINDS[kind]}, {difference(c)}): {blind_direction} cannot test it in this "
                    f"design (Part 6) and the mechanism predicts its {blind_direction} share near 0 "
                    f"({table_mean(measured['heads'][blind_direction]['heads'][b][h])} on average), so the difference "
                    f"is mostly its {seen} share ({table_mean(measured['heads'][seen]['heads'][b][h])} on average), "
                    f"observed and read in Part 6, not a separate finding about the two directions")  # fmt: skip
    if faint:
        said.append(", ".join(f"head {b}.{h}" for b, h, _ in faint) + " keep" + ("s" if len(faint) == 1 else "")
                    + " one sign too, but with a mean difference whose interval overlaps its null pairs' ("
                    + ", ".join(f"{_mean_and_interval(c)} against {_mean_and_interval(null[b][h])}" for b, h, c in faint) + "), so not read")  # fmt: skip
    averaged = on_average(rows, null, [(b, h) for b, h, _ in signed])
    if not said:
        return (f"Per head, over the pairs no head's difference keeps one sign in at least {_percent(ONE_SIGN)} of "
                f"pairs, so no head is flagged here ({rule}).{averaged}")
    causes = []  # each cause said for the sign it predicts (Part 3)
    if more:
        causes.append("denoising above noising can come from other heads standing in for it when it is removed "
                      "(backup)")
    if less:
        causes.append("noising above denoising can come from a head that works only together with others")
    if more or less:
        causes.append("either sign from block 1 reading other positions in the two runs (where a swap moves what it "
                      "attends to, restoring a head can remove the rival's support rather than restore the target's)")
    why = f" Why a head's two directions differ is not tested here: {'; '.join(causes)} (Part 3)." if causes else ""
    return f"Per head, over the pairs ({rule}): " + "; ".join(said) + "." + averaged + why


def _apart_from_null(cell: dict, null: dict) -> bool:
    """Whether a mean difference's 95 % interval (``mean_interval``) does not overlap the same head's on the null
    pairs: a mean against a mean, not against the null's per-pair spread."""
    (low, high), (null_low, null_high) = cell["mean_interval"], null["mean_interval"]
    return low > null_high or high < null_low


def _mean_and_interval(cell: dict) -> str:
    """A mean difference with its 95 % interval, as the null comparison reads it."""
    return _small_interval(cell["mean"], *cell["mean_interval"])


def on_average(rows: list, null: list, flagged: list) -> str:
    """The heads not flagged by one sign whose mean difference is still told apart from 0 by its own 95 % interval
    (``mean_interval``, as Part 3 reads cells): each with its mean, how often it is positive, and where it lies
    against its null pairs' mean; how many would be told apart by chance alone, and which survive a Bonferroni
    correction over the heads (only those are read, as differing on average, not pair by pair). "" where none is."""
    heads = [(b, h, c) for b, row in enumerate(rows) for h, c in enumerate(row)]
    told = [(b, h, c) for b, h, c in heads if (b, h) not in flagged and c.get("mean_interval")
            and not c["mean_interval"][0] <= 0 <= c["mean_interval"][1]]  # fmt: skip
    if not told:
        return ""
    told.sort(key=lambda cell: -abs(cell[2]["mean"]))

    def one(b: int, h: int, c: dict) -> str:
        apart = _apart_from_null(c, null[b][h])
        return (f"head {b}.{h} ({_small_interval(c['mean'], *c['mean_interval'])}, above 0 in {_percent(c['above_zero'])} "
                f"of pairs; {'apart from' if apart else 'overlapping'} its null pairs' mean {_mean_and_interval(null[b][h])})")

    survive = [(b, h, c) for b, h, c in told if _two_sided_p(c) < 0.05 / len(heads) and _apart_from_null(c, null[b][h])]
    if survive:
        each = "; ".join(f"for head {b}.{h} on average {'denoising exceeds noising' if c['mean'] > 0 else 'noising exceeds denoising'}"
                         f"{' by less than ' + str(DIFFER) + ' of the gap' if abs(c['mean']) < DIFFER else ''} "
                         f"(mean {c['mean']:.4f} [{c['mean_interval'][0]:.4f}, {c['mean_interval'][1]:.4f}], "
                         f"p = {_two_sided_p(c):.2g})"
                         for b, h, c in survive)  # fmt: skip
        read = (f"{len(survive)} of them {'survives' if len(survive) == 1 else 'survive'} a Bonferroni correction over "
                f"the {len(heads)} heads (p below 0.05 / {len(heads)} by the normal approximation) apart from "
                f"{'its' if len(survive) == 1 else 'their'} null pairs' mean: {each}, a difference of the mean, not "
                f"of most pairs; the others are not read")  # fmt: skip
    else:
        read = "none of them both survives a Bonferroni correction over the heads and lies apart from its null pairs' mean, so none is read"
    return (f" Not flagged by one sign, yet told apart from 0 on average by the mean's own 95 % interval (as Part 3 "
            f"reads cells; mean ± {MEAN_Z:.2f} SE): " + "; ".join(one(b, h, c) for b, h, c in told)
            + f". Each is tested at 95 % with no correction over the {len(heads)} heads, so about "
            f"{0.05 * len(heads):.1f} would be by chance alone; {read}.")
