"""The sentences Lab 07 says, each chosen from the numbers of a report (``lab.run_lab``) and read against the
null of the same trained model (``distribution``): a gap against the null pairs' gaps, a cell, a path or a head
against the largest share the null pairs give, a verdict as the fraction of held-out pairs in which it holds. The
random-weight models are named only as what they are, the scale of an untrained model. No sentence holds a quote
mark (Quarto shows an inline expression's text as it is)."""

from __future__ import annotations

import math
import statistics

from residlab.audit.measures import shown
from residlab.capture.sites import site_name
from residlab.course.lab07.cells import (
    by_construction, distinct_cells, hybrid, same_intervention, same_prompt_pairs, zero_identity,
)
from residlab.course.lab07.chance import wilson, wilson_bounds
from residlab.course.lab07.designs import not_testable_reason
from residlab.course.lab07.distribution import INTERVAL, INTERVAL_NAME, MEAN_Z, null_change
from residlab.course.lab07.verdicts import HEAD_KINDS, METHOD_NAMES
from residlab.course.lab07.verdicts import percent as _percent

HALF = 0.5  # "carries most of the gap": a share of at least one half
MOSTLY = 0.9  # a verdict that holds in at least this fraction of the pairs "holds in most pairs"
MOSTLY_TEXT = _percent(MOSTLY)  # the page defines "most pairs" with it


def most_caveat(fraction: float, pairs: int) -> str:
    """What every "in most pairs" reading carries beside it: that it is a point estimate, its 95 % Wilson interval,
    and whether that interval reaches below the MOSTLY this page calls most."""
    reaches = f", reaching below the {MOSTLY_TEXT} this page calls most" if wilson_bounds(fraction, pairs)[0] < MOSTLY else ""
    return f"by point estimate; 95 % Wilson {wilson(fraction, pairs)}{reaches}"


def _value(value) -> str:
    return "undefined" if value is None else f"{shown(value, 2):.2f}"


def _interval(summary: dict) -> str:
    return f"{_value(summary['mean'])} [{_value(summary['low'])}, {_value(summary['high'])}]"


def _near_one(value: float | None) -> bool:
    """Whether two decimals would print an observed share as an identity's 1.00 (or -1.00)."""
    return value is not None and abs(round(value, 2)) == 1


def observed(value: float | None) -> str:
    """An observed share: two decimals, but three where two would print an identity's 1.00 (or -1.00)."""
    return f"{value:.3f}" if _near_one(value) else _value(value)


def observed_interval(summary: dict) -> str:
    """A mean share and its interval in one precision: three decimals for all where ``observed`` needs them for one."""
    values = (summary["mean"], summary["low"], summary["high"])
    if any(map(_near_one, values)):
        return "{} [{}, {}]".format(*(f"{value:.3f}" for value in values))
    return f"{_value(values[0])} [{_value(values[1])}, {_value(values[2])}]"


def table_mean(summary: dict) -> str:
    """A mean share in the precision the tables print it beside its interval (``observed_interval``)."""
    return observed_interval(summary).split(" ")[0]


def _small_parts(mean: float, low: float, high: float) -> tuple[str, str]:
    """A mean and its interval ("[low, high]") in one precision: two decimals, or two significant figures for all
    three where a nonzero one would round to 0.00 (so its sign, and whether the interval holds 0, can be read)."""
    small = any(value != 0 and abs(value) < 0.005 for value in (mean, low, high))
    said = _two_figures if small else _value
    return said(mean), f"[{said(low)}, {said(high)}]"


def _two_figures(value: float) -> str:
    """Two significant figures, written out in decimals (0.0000060, never 6e-06)."""
    if value == 0:
        return "0"
    return f"{value:.{max(0, 1 - math.floor(math.log10(abs(float(f'{value:.2g}')))))}f}"


def _small_interval(mean: float, low: float, high: float) -> str:
    return " ".join(_small_parts(mean, low, high))


def _up_places(value: float, places: int = 3) -> str:
    """``value`` rounded up to ``places`` decimals (several bounds said together in one precision)."""
    return f"{math.ceil(round(value * 10**places, 9)) / 10**places:.{places}f}"


def _up(value: float, digits: int = 2) -> str:
    """``value`` (> 0) rounded up to ``digits`` significant figures, so that at most it, or no more than it, stays true."""
    if value <= 0:
        return f"{value:g}"
    exponent = math.floor(math.log10(value)) - digits + 1
    steps = math.ceil(round(value / 10**exponent, 9))
    return f"{steps * 10**exponent:.{max(0, -exponent)}f}"


def null_share(report: dict, name: str, direction: str = "denoising") -> float:
    """The largest share of the gap any single cell takes in this design's null pairs (same model, a change the
    mechanism does not use), in the direction asked."""
    return report["distribution"]["designs"][name]["null"]["cells"][direction]


NOT_READ = "Not read: the gap is within the reach of its null pairs."


def gap_sentence(report: dict, name: str) -> str:
    design = report["designs"][name]
    measured = report["distribution"]["designs"][name]
    null = measured["null"]
    pairs = report["distribution"]["pairs"]
    untrained = ", ".join(_value(gap) for gap in report["untrained"]["gaps"][name])
    head = (f"On the worked example (one draw), M(clean) = {_value(design['clean_metric'])} and M(corrupt) = "
            f"{_value(design['corrupt_metric'])}, a gap of {_value(design['gap'])}; over the {pairs} held-out pairs the "
            f"gap is {_interval(measured['gap'])} (mean [{report['distribution']['interval']}]). Their null pairs, the "
            f"same clean prompts with {null_change(name)}, at positions the mechanism does not use, give gaps of "
            f"{_interval(null['gap'])}, at most {_value(null['largest_gap'])} in size")  # fmt: skip
    scale = (f" For scale only, not as a null: the {len(report['untrained']['seeds'])} random-weight models of the same "
             f"shape give gaps of {untrained} on the worked example, what a model that learned nothing does.")  # fmt: skip
    if design["readable"]:
        ratio = abs(design["gap"]) / null["largest_gap"] if null["largest_gap"] else math.inf
        times = "infinitely many" if math.isinf(ratio) else f"{math.floor(ratio)}"
        return (f"{head}, so the example's gap is more than {times} times the largest gap any null pair gives, one draw's largest "
                f"from a long tail, which another draw can exceed (the page reads a gap above {report['read_factor']:.0f} times){_pairs_ratio(report, name)}.{scale}")
    return f"{head}: the example's gap is within {report['read_factor']:.0f} times that, so no share of it is read.{scale}"


def _pairs_ratio(report: dict, name: str) -> str:
    """Over the held-out pairs, how many gaps exceed the read factor times the null pairs' largest gap, and the
    smallest ratio pair by pair (floored, so that more than it stays true); "" where the report has no per-pair gaps."""
    measured = report["distribution"]["designs"][name]
    gaps, largest = measured.get("per_pair", {}).get("gap"), measured["null"]["largest_gap"]
    if not gaps or not largest:
        return ""
    ratios = [abs(gap) / largest for gap in gaps]
    above = sum(ratio > report["read_factor"] for ratio in ratios)
    count = "all" if above == len(ratios) else f"{above} of the"
    smallest = min(gaps, key=abs)
    mean = sum(abs(gap) for gap in gaps) / len(gaps)
    least = min(ratios)
    near = (f"; near the page's reading rule: within {math.ceil((least / report['read_factor'] - 1) * 100)} % of it"
            if report["read_factor"] < least < NEAR_RULE * report["read_factor"] else "")  # fmt: skip
    return (f"; that is one draw: over the pairs, {count} {len(ratios)} gaps exceed {report['read_factor']:.0f} times "
            f"the null pairs' largest; the smallest gap, {_value(abs(smallest))}, is at least "
            f"{math.floor(least * 10) / 10:.1f} times it (the ratio taken before rounding{near}). The null, expected to move M by 0, moves it by up "
            f"to {_value(largest)}, {100 * largest / mean:.1f} % of the pairs' mean gap ({_value(mean)})"
            + (": not a quiet null, which is why the page reads only what clears it" if largest / mean >= QUIET
               else ", a quiet null"))  # fmt: skip


NEAR_RULE = 1.1  # a smallest ratio within 10 % of the reading rule is said to be near it
QUIET = 0.05  # a null whose largest move is under this fraction of the mean gap is said to be quiet


def carrying_cells(report: dict, name: str, direction: str) -> list[tuple[str, int, str, str]]:
    """(site, position, share as said, why by construction or "") of every distinct cell carrying at least HALF of the
    gap, in the order the model runs. An observed share that two decimals would show as an identity's 1.00 is said
    with three and called observed, so it is not taken for one."""
    design = report["designs"][name]
    grids = design["activation"][direction]
    carrying = []
    for site, position, kind, block in distinct_cells(design):
        value = grids[kind][block][position]
        if value is None or value < HALF:
            continue
        fixed = by_construction(design, kind, block, position) or hybrid(design, kind, block, position)
        near_one = not fixed and round(value, 2) == 1
        said = f"{value:.3f}, observed, not an identity" if near_one else _value(value)
        carrying.append((site, position, said, fixed or by_structure(design, kind, block, position)))
    return carrying


REACH_SMALL = 0.05  # block 0's heads at the readout "barely read" the changed positions below this much attention


def by_structure(design: dict, kind: str, block: int, position: int) -> str:
    """Why a cell is near 1, or "": the last block's attention write at the readout, when block 0's heads there barely
    read the changed positions (``readout_reach``, observed: a learned attention pattern, not an identity)."""
    depth = len(design["activation"]["denoising"]["resid_pre"])
    reach = design.get("readout_reach")
    if (kind, block, position) != ("attn_write", depth - 1, design["readout"]) or reach is None or reach >= REACH_SMALL:
        return ""
    return (f"near 1 because block 0's heads at the readout barely attend to the changed positions (observed: at most "
            f"{_up(reach)} of their attention), so the readout's input to block {block} hardly differs between the runs "
            f"and nearly all the change reaches the readout through this write")


def attention_moved_at_change(report: dict, name: str) -> str:
    """How far restoring block 0's input at the (first) changed position moves block 1's attention at the readout on
    the worked example: the largest total-variation distance over its heads (``attribution.bend_measures``)."""
    design = report["designs"][name]
    return f"{design['bends']['resid_pre'][0][design['changed'][0]]['attention_moved']:.2f}"


def _bar_cell(report: dict, name: str, direction: str) -> str:
    """Which null cell sets the cells' bar (``distribution.null_bounds``), or "" for a report without it."""
    measured = report["distribution"]["designs"][name]
    at = measured["null"].get("cells_at", {}).get(direction)
    if not at:
        return ""
    said = f", set by {at['site']} at position {at['position']} in null pair {at['pair']}"
    per_pair = measured.get("per_pair", {})
    if "null_gap" in per_pair:  # where that cell moves about its null pair's whole gap, the bar is that gap
        signed = per_pair["null_gap"][at["pair"]] / per_pair["gap"][at["pair"]]
        part = measured["null"]["cells"][direction] / abs(signed) if signed else math.inf
        if 1 - HALF <= part <= 1 + HALF:
            said += (f", which there moves M by {part:.0%} of that null pair's own gap (that gap is {shown(signed):.3f} of "
                     f"the design's): the bar is about that null pair's whole gap, which reaches the readout through "
                     f"this site (the null changes tokens the mechanism does not read, not routes it does not use)")  # fmt: skip
    return said


def grid_sentence(report: dict, name: str, direction: str) -> str:
    design = report["designs"][name]
    if not design["readable"]:
        return NOT_READ
    floor = null_share(report, name, direction)
    grids = design["activation"][direction]
    cells = distinct_cells(design)
    # the last block's attention write at the readout, near 1 by observed attention: its null twin is left out of the
    # bar, so it is not compared with it, nor counted
    structural = [(kind, block, position) for _, position, kind, block in cells if by_structure(design, kind, block, position)]
    moving = [(kind, block, position) for _, position, kind, block in cells
              if (value := grids[kind][block][position]) is not None and abs(value) > floor
              and (kind, block, position) not in structural]  # fmt: skip
    forced = sum(1 for kind, block, position in moving if by_construction(design, kind, block, position))
    hybrids = sum(1 for kind, block, position in moving if hybrid(design, kind, block, position))
    carrying = carrying_cells(report, name, direction)
    listed = "; ".join(f"{site} at position {position} ({value}{', ' + why if why else ''})"
                       for site, position, value, why in carrying)  # fmt: skip
    what = "restored" if direction == "denoising" else "removed"
    said = (f"On the worked example, the cells that move at least half of the gap when {what} alone: {listed}." if carrying
            else f"On the worked example, no single cell moves half of the gap when {what} alone.")  # fmt: skip
    merges = ["each block's input is the block before's output"] if len(grids["resid_pre"]) > 1 else []
    if any(same_intervention(design, "attn_write", 0, p) for p in range(len(grids["attn_write"][0]))):
        merges.append("block 0's attention write where the prompts agree is the same intervention as its output there")
    shared = f"; {' and '.join(merges)}, each counted once" if merges else ""
    # the observed cells are counted apart from the identities, which clear the bar by construction, not as findings
    forced_said = (f" ({hybrids} of them {'a hybrid prompt' if hybrids == 1 else 'hybrid prompts'})" if hybrids else "")
    forced_said += (f", the last block's attention write at the readout not among them (near 1 by observed attention, "
                    f"{grids['attn_write'][structural[0][1]][structural[0][2]]:.3f}: not compared, for its null twin is "
                    f"left out of the bar)") if structural else ""
    identities_said = (f"; {forced} {'identity is' if forced == 1 else 'identities are'} larger too, fixed by "
                       f"construction, {'not a finding' if forced == 1 else 'not findings'}" if forced else "")
    zeros = {}
    for _, position, kind, block in cells:
        if why := zero_identity(design, kind, block, position):
            zeros[why] = zeros.get(why, 0) + 1
    zero_said = "; ".join(f"{count} {why}" for why, count in zeros.items())
    negative = [f"{site_name(block, kind)} at position {position} ({grids[kind][block][position]:.3f})"
                for kind, block, position in moving if grids[kind][block][position] < 0]  # fmt: skip
    observed = [f"{site_name(block, kind)} at position {position} ({grids[kind][block][position]:.3f})"
                for kind, block, position in moving if not by_construction(design, kind, block, position)
                and grids[kind][block][position] >= 0]  # fmt: skip
    negative_said = (f": {'; '.join(observed)}" if observed else "")
    negative_said += (f"; {len(negative)} of them negative, larger in size only: {'; '.join(negative)}" if negative else "")
    return (f"{said} Of the {len(cells)} distinct interventions on the worked example (cells{shared}), {len(moving) - forced} "
            f"observed cells{forced_said} move a larger share of the gap in size (|share|, either sign) than any cell of the "
            f"{report['distribution']['pairs']} null pairs does (the cells' bar: {floor:.3f} of the gap"
            f"{_bar_cell(report, name, direction)}; {CELLS_BAR_LEFT_OUT}){negative_said}{identities_said}; "
            f"{sum(zeros.values())} are 0 by an identity ({zero_said}).")  # fmt: skip


# Which null cells the cells' bar leaves out (``distribution.null_left_out``), said once where Part 3 opens.
CELLS_BAR_LEFT_OUT = "the null cells it leaves out are listed where this Part opens"
CELLS_BAR_RULE = ("the null's cells at the positions it changes (each carries part of its own change); its final state (its "
                  "whole gap); and the last block's attention write at the readout (the route by which its change reaches "
                  "the readout through that block, near its whole gap where the earlier block's heads there barely read "
                  "the changed positions)")


def hybrid_rows(report: dict, name: str) -> list[list[str]]:
    """One row per hybrid-prompt cell of a swap design (``lab.hybrid_cells``): the cell, the prompt, the earlier
    occurrences of the readout's token and what follows each, whether the target and the rival occur, M and the
    share (equal to the patched cell's, asserted)."""
    design = report["designs"][name]
    rows = []
    for cell in design["hybrids"]:
        earlier = ", ".join(f"{p} (then {after})" for p, after in cell["earlier"]) or "none"
        present = "; ".join(f"{what} {token} {'present' if cell[key] else 'absent'}" for what, token, key in
                            (("target", design["target"], "target_present"), ("rival", design["rival"], "rival_present")))  # fmt: skip
        rows.append([f"{cell['direction']}, position {cell['position']}", " ".join(map(str, cell["prompt"])), earlier, present,
                     _value(cell["metric"]), _value(cell["share"])])  # fmt: skip
    return rows


def hybrid_sentence(report: dict, name: str) -> str:
    """What the hybrid prompts show, chosen from them: a share above 1 or below 0 read through what the prompt holds."""
    design = report["designs"][name]
    cells = design["hybrids"]
    if not cells:
        return ""
    said = []
    for cell in cells:
        followers = {after for _, after in cell["earlier"]}
        if design["target"] in followers and design["rival"] not in followers:
            why = "the target follows an earlier occurrence of the readout's token and the rival follows none"
        elif design["rival"] in followers and design["target"] not in followers:
            why = "the rival follows an earlier occurrence of the readout's token and the target follows none"
        elif not followers:
            why = "the readout's token occurs nowhere earlier, so there is nothing for induction to copy"
        else:
            why = "both the target and the rival follow earlier occurrences of the readout's token"
        extra = sorted(followers - {design["target"], design["rival"]})
        if extra:
            why += f" (token {', '.join(map(str, extra))} follows one too)"
        denoising = cell["direction"] == "denoising"
        if cell["metric"] > design["clean_metric"]:  # denoising (M - M(corrupt)) / G > 1; noising (M(clean) - M) / G < 0
            why += (f"; its M ({_value(cell['metric'])}) is above the clean run's ({_value(design['clean_metric'])}), "
                    f"so the share is {'above 1' if denoising else 'below 0'}")  # fmt: skip
        elif cell["metric"] < design["corrupt_metric"]:
            why += (f"; its M ({_value(cell['metric'])}) is below the corrupt run's ({_value(design['corrupt_metric'])}), "
                    f"so the share is {'below 0' if denoising else 'above 1'}")  # fmt: skip
        else:
            why += (f"; its M ({_value(cell['metric'])}) lies between the corrupt run's ({_value(design['corrupt_metric'])}) "
                    f"and the clean run's ({_value(design['clean_metric'])}), so the share is between 0 and 1, and M "
                    + ("above 0: the prompt still favours the target" if cell["metric"] > 0 else
                       "at or below 0: the prompt does not favour the target"))  # fmt: skip
        if design["target"] in followers and design["rival"] in followers:
            why += " (which of two copyable tokens the model favours, and by how much, is observed here, not derived)"
        said.append(f"{cell['direction']} at position {cell['position']} gives {_value(cell['share'])}: {why}")
    return ("Each of these cells is the run of a hybrid prompt (checked to equal the patched cell when the page is built), "
            "so it is read as that prompt's behaviour: " + "; ".join(said) + "." + same_prompt_sentence(cells))


def same_prompt_sentence(cells: list[dict]) -> str:
    """A swap's hybrid cells run each prompt twice, denoising at one swapped position and noising at the other: their
    shares sum to 1 by construction ((M - M(corrupt)) + (M(clean) - M) = G), said as the identity it is."""
    pairs = same_prompt_pairs(cells)
    if not pairs:
        return ""
    sums = "; ".join(f"{a['direction']} at position {a['position']} and {b['direction']} at position {b['position']}: "
                     f"{_value(a['share'])} {'+' if b['share'] >= 0 else '−'} {_value(abs(b['share']))}" for a, b in pairs)  # fmt: skip
    return (f" Denoising at one swapped position and noising at the other run the same hybrid prompt, so their shares "
            f"sum to 1 by construction, an identity ((M − M(corrupt)) + (M(clean) − M) = G; checked when the page is "
            f"built): {sums}. So of these {len(cells)} rows only {len(cells) - len(pairs)} "
            f"{'carries' if len(cells) - len(pairs) == 1 else 'carry'} observed values of their own; "
            f"{'the other' if len(pairs) == 1 else f'each of the other {len(pairs)}'} is 1 minus its partner's share.")


def path_sentence(report: dict, name: str) -> str:
    design = report["designs"][name]
    if not design["readable"]:
        return NOT_READ
    path = design["path"]
    over = report["distribution"]["designs"][name]["path"]
    null = report["distribution"]["designs"][name]["null"]
    each = null.get("path_each", {key: null["path"] for key in over})  # a report before them: the four's largest
    floor, queries_floor = each["keys"], each["queries"]
    keys, everything = over["keys"]["mean"], over["everything"]["mean"]
    numbers = (f"over the held-out pairs, into block 1's keys only {observed_interval(over['keys'])}, queries only "
               f"{observed_interval(over['queries'])}, values only {observed_interval(over['values'])}; into everything "
               f"downstream {observed_interval(over['everything'])} (the worked example: keys {observed(path['keys'])}, "
               f"everything {observed(path['everything'])})")  # fmt: skip
    if abs(keys) <= floor:
        per_pair = [pair["keys"] for pair in report["distribution"]["designs"][name].get("per_pair", {}).get("path", [])]
        beyond = [(abs(share), index, share) for index, share in enumerate(per_pair) if abs(share) > floor]
        bar_pairs = {at["pair"] for at in report["distribution"]["designs"][name]["null"].get("cells_at", {}).values()}
        same_prompt = (", the clean prompt whose null pair also sets Part 3's cell bar (one prompt behind both)"
                       if beyond and max(beyond)[1] in bar_pairs else "")
        exceptions = (f" (pair by pair, {len(beyond)} of the {len(per_pair)} pairs' keys-only shares "
                      f"{'passes' if len(beyond) == 1 else 'pass'} that reach in "
                      f"size, the largest {observed(max(beyond)[2])} in pair {max(beyond)[1]}{same_prompt}: the mean and its interval "
                      f"hide {'it' if len(beyond) == 1 else 'them'})" if beyond else
                      f" (pair by pair too: none of the {len(per_pair)} pairs' keys-only shares passes it in size)" if per_pair else "")
        reading = (f"on average the keys carry nothing beyond their null pairs' reach{exceptions}: what block 0's attention write carries in this "
                   "design reaches the readout by another path" + (", the values" if over["values"]["mean"] >= HALF * everything else "")
                   + " (the changed token's own route into block 1's keys, through its embedding, is not split here)")  # fmt: skip
    elif everything and keys >= HALF * everything:
        paths = report["distribution"]["designs"][name].get("per_pair", {}).get("path", [])
        ratios = sorted(pair["keys"] / pair["everything"] for pair in paths if pair["everything"])
        # the 2.5th and 97.5th percentiles by linear interpolation, as every interval over pairs on the page
        middle = statistics.quantiles(ratios, n=40, method="inclusive") if len(ratios) > 1 else ratios * 2
        spread = (f"; pair by pair the keys' part of the whole write runs from {ratios[0]:.2f} to {ratios[-1]:.2f} (the "
                  f"{INTERVAL_NAME}: {middle[0]:.2f} to {middle[-1]:.2f})" if ratios else "")
        reading = (f"the keys alone carry {keys / everything:.0%} of what the whole write carries, on average (a ratio "
                   f"of means{spread}): on average the write acts mainly by telling block 1 where to attend")  # fmt: skip
    else:
        reading = f"the keys carry part of it ({keys / everything:.0%} of what the whole write carries)" if everything else "the whole write carries nothing"
    rest = report["distribution"]["designs"][name].get("path_rest")
    if everything and rest:
        three = over["keys"]["mean"] + over["queries"]["mean"] + over["values"]["mean"]
        low, high = rest["mean_interval"]
        told = (f"told apart from 0 as a mean (pair by pair its median size is {_value(rest['median_abs'])})"
                if low > 0 or high < 0 else "not told apart from 0")
        null = report["distribution"]["designs"][name].get("null_path_rest")
        null_rest = f" (on the null pairs the same rest is {_interval(null)})" if null else ""
        reading += (f". Each path is the direct one, from block 0's attention write into block 1's keys, queries or "
                    f"values; the route through block 0's MLP, which reads that write, is in none of them. Their three "
                    f"separate shares sum to {three / everything:.0%} of the whole write's share on average: three "
                    f"patches, not one joint patch, and attention is nonlinear. The rest, the whole write's share less "
                    f"the three pair by pair, is {_small_interval(rest['mean'], rest['low'], rest['high'])} of the gap "
                    f"(the mean's 95 % interval {_small_parts(rest['mean'], low, high)[1]}, mean ± "
                    f"{MEAN_Z:.2f} standard errors), {told}" + null_rest + ": what the MLP's route, the write's direct "
                    f"route at the readout (into the final state and block 1's MLP there) and the paths' interaction "
                    f"carry together, not split here")  # fmt: skip
    structural = ""
    if abs(over["queries"]["mean"]) <= queries_floor and "readout_reach" in design:
        uniform = 1 / len(design["clean"])
        structural = (f" The queries carry nothing, partly by structure: block 1 is the last block and M reads the readout "
                      f"alone, so only block 1's query there counts; and partly learned: block 0's write at the readout "
                      f"differs between the runs only through what its heads there read at the changed positions (block "
                      f"0's input is each token's embedding), at most {_up(design['readout_reach'])} of their attention on "
                      f"the worked example (observed; a head attending evenly would put {uniform:.2f} on each position).")  # fmt: skip
    untestable = report["distribution"]["designs"][name].get("not_testable", [])
    if abs(keys) <= floor and untestable:
        structural += (" The keys' near 0 is what the mechanism predicts here, observed, not a finding about the heads: "
                       + "; ".join(not_testable_reason(name, kind, report) for kind in untestable)
                       + ". Not identifiable under that hypothesis.")
    elif untestable:
        structural += (" Not identifiable in this design under the mechanism's hypothesis: "
                       + "; ".join(not_testable_reason(name, kind, report) for kind in untestable) + ".")
    return (f"Block 0's attention write at every position, clean into corrupt (Part 3's cells patch one position at a "
            f"time): {numbers}. So {reading} (each path is read against its own null: the largest |share| it takes "
            f"over the null pairs, keys only {each['keys']:.2f}, queries only {each['queries']:.2f}, values only "
            f"{each['values']:.2f}, everything downstream {each['everything']:.2f})." + structural)


def arrangement_sentence(report: dict) -> str:
    """Whether the model's blocks are sequential or parallel, read from its configuration (in the report)."""
    if report["block_arrangement"] == "sequential":
        return ("Its blocks are sequential (`use_parallel_residual` is false in its configuration): each block's MLP "
                "reads the state after the block's attention write, so block 0's MLP sees what block 0's heads wrote. "
                "Pythia-14M's blocks, in Lab 05 and the glossary, are parallel: there both read the block's input.")
    return ("Its blocks are parallel (`use_parallel_residual` is true in its configuration), as Pythia-14M's are: each "
            "block's attention and MLP both read the block's input.")




def _heads(heads: list) -> str:
    return ", ".join(f"block {block} head {head}" for block, head in heads) or "no head"


def known_heads_sentence(report: dict) -> str:
    """The heads the rule names, each kind with its scores against their controls."""
    heads = report["heads"]
    parts = []
    for kind, named in heads["named"].items():
        table = heads["name_scores"][kind]
        listed = "; ".join(f"block {b} head {h} ({table['scores'][b][h]:.3f} against {table['controls'][b][h]:.3f})"
                           for b, h in named)  # fmt: skip
        parts.append(f"{HEAD_KINDS[kind]}: {listed}" if named else f"{HEAD_KINDS[kind]}: none")
    untrained = report["untrained"]["highest_head_score"]
    return ("The rule names these heads (score against its control): " + "; ".join(parts) + ". In the "
            f"{len(report['untrained']['seeds'])} random-weight models, for scale, no head scores above "
            f"{_up_places(untrained['previous_token'])} as previous-token or {_up_places(untrained['induction'])} as "
            f"induction.")  # fmt: skip


def naming_sequences(report: dict) -> str:
    """Which sequences the attention scores that name heads are averaged over, counted from the report."""
    table = report["heads"]["name_scores"]["previous_token"]
    periods, count = table["spread_periods"], table["spread"][0][0]["pairs"]
    each = f", {count // len(periods)} of each" if count % len(periods) == 0 else ""
    return (f"{count} sequences of periods {min(periods)} to {max(periods)}{each} (each period weighted equally), drawn "
            f"by the site's rule from a generator of their own, none of them a pair's sequence or used in training")


def chance_sentence(report: dict) -> str:
    """What a random pick of a head would score under the rule, block by block."""
    heads = len(report["heads"]["scores"]["induction"][0])
    parts = []
    for kind, named in report["heads"]["named"].items():
        for block in sorted({b for b, _ in named}):
            count = sum(1 for b, _ in named if b == block)
            parts.append(f"{count} of {heads} in block {block} as {HEAD_KINDS[kind]}"
                         + (", so there a method that puts any head on top finds one: no test" if count == heads else ""))  # fmt: skip
    return "The rule names " + "; ".join(parts) + "." if parts else "The rule names no head."


NULL_BAR = f"{INTERVAL[1]:g}th percentile"  # the null bar: this percentile over the null pairs of the block's top share
# a method that cannot reach a block's heads (path patching into block 1's keys speaks only of earlier blocks)
UNREACHED = "n/a: this method cannot reach this block's heads"
LARGEST_IN_BLOCK = "largest in block (null not applied)"  # the head table's label; a verdict's "on top" needs the null cleared


def head_rows(report: dict, name: str) -> list[list[str]]:
    """One row per head: the block and head, what the rule names it, then per method its mean share [interval]
    over the pairs, the fraction of pairs in which its share is its block's largest (LARGEST_IN_BLOCK: the null not
    applied, unlike a verdict's "on top") and the fraction in which its share is above the null bar (``null_rows``)."""
    measured = report["distribution"]["designs"][name]
    named = {(b, h): HEAD_KINDS[kind] + (" (not identifiable in this design: near 0 if the mechanism holds)"
                                         if kind in measured["not_testable"] else "")
             for kind, heads in report["heads"]["named"].items() for b, h in heads}  # fmt: skip
    rows = []
    for block, row in enumerate(measured["heads"]["denoising"]["heads"]):
        for head in range(len(row)):
            cells = []
            for method in METHOD_NAMES:
                table = measured["heads"][method]["heads"]
                if block >= len(table):
                    cells.append(UNREACHED)
                    continue
                entry = table[block][head]
                largest = (f", above the null pairs' largest {_percent(entry['clears_largest_fraction'])}"
                           if "clears_largest_fraction" in entry else "")
                cells.append(f"{observed_interval(entry)}; {LARGEST_IN_BLOCK} {_percent(entry['top_fraction'])}, above the "
                             f"null bar {_percent(entry['clears_fraction'])}{largest}")  # fmt: skip
            rows.append([f"{block}.{head}", named.get((block, head), "none"), *cells])
    return rows


def null_rows(report: dict, name: str) -> list[list[str]]:
    """Rows for the head table: per block and method, the null bar the verdicts count against (the upper percentile,
    over the null pairs, of the largest absolute share any head of the block takes in a null pair), with that largest
    beside it (would one outlier have set a bar of the largest?)."""
    null = report["distribution"]["designs"][name]["null"]
    bars, largest = null["heads"], null["heads_largest"]
    depth = len(bars["denoising"])

    def cell(method, block):
        if block >= len(bars.get(method, [])):
            return UNREACHED
        return f"{_value(bars[method][block])} (largest {_value(largest[method][block]['largest'])})"

    pairs = largest["denoising"][0]["pairs"]
    return [[f"null, block {block}", f"the null bar: {NULL_BAR} over {pairs} null pairs of the block's "
             f"largest absolute share in a pair", *(cell(m, block) for m in METHOD_NAMES)] for block in range(depth)]  # fmt: skip
