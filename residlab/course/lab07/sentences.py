"""The sentences Lab 07 says, each chosen from the numbers of a report (``lab.run_lab``) and read against its
null: a gap against the noise floor of the random-weight models, a cell or a head against the largest effect any
cell of those models has, a tie called a tie with the runner-up named. No sentence holds a quote mark (Quarto
shows an inline expression's text as it is)."""

from __future__ import annotations

from residlab.audit.measures import shown
from residlab.course.lab07.designs import UNTESTABLE
from residlab.course.lab07.patching import KINDS

HALF = 0.5  # "carries most of the gap": a share of at least one half
ATTENTION_BEND = 0.1  # a patch that moves the last block's attention at the readout by this much (total variation)
SCALE_BEND = 0.05  # or changes the final LayerNorm's scale at the readout by this fraction


def _site(kind: str, block: int) -> str:
    return f"blocks.{block}.{kind}"


def _value(value) -> str:
    return "undefined" if value is None else f"{shown(value, 2):.2f}"


def floor_share(report: dict, name: str) -> float:
    """The share of this design's gap that the null's largest single-cell effect would be."""
    return report["null"]["designs"][name]["largest_cell_effect"] / abs(report["designs"][name]["gap"])


def gap_sentence(report: dict, name: str) -> str:
    design = report["designs"][name]
    null = report["null"]["designs"][name]
    floor = null["noise_floor"]
    ratio = abs(design["gap"]) / floor if floor else float("inf")
    seeds = len(report["null"]["seeds"])
    head = (f"M(clean) = {_value(design['clean_metric'])} and M(corrupt) = {_value(design['corrupt_metric'])}, a gap of "
            f"{_value(design['gap'])}; the same prompts through the {seeds} random-weight models give gaps of at most "
            f"{floor:.3f} in size (the noise floor)")  # fmt: skip
    if design["readable"]:
        return f"{head}, so this gap is {ratio:.0f} times the floor and every share below is read against it."
    return (f"{head}: this gap is within {report['read_factor']:.0f} times the floor, so no share computed from it is "
            f"read on this page.")  # fmt: skip


def distinct_cells(design: dict) -> list[tuple[str, int, str, int]]:
    """(site, position, kind, block) of every distinct cell of a design's grids, in the order the model runs. Block
    b's input is block b-1's output (the page checks they are equal cell for cell), so that tensor is one cell,
    named by both sites."""
    grids = design["activation"]["denoising"]
    depth = len(grids["resid_pre"])
    cells = []
    for block in range(depth):
        for kind in KINDS:
            if kind == "resid_pre" and block > 0:
                continue  # named with the block before's output
            site = _site(kind, block)
            if kind == "resid_post" and block < depth - 1:
                site += f" = {_site('resid_pre', block + 1)}"
            cells.extend((site, position, kind, block) for position in range(len(grids[kind][block])))
    return cells


def by_construction(design: dict, kind: str, block: int, position: int) -> str:
    """Why a cell restores the whole gap whatever the model: patching the first block's input at the only position
    where the prompts differ makes one run the other, and the last block's output at the readout is all the metric
    reads; "" for any other cell. (The designs never change the readout's own token, where every cell at the
    readout would be forced too.)"""
    depth = len(design["activation"]["denoising"]["resid_pre"])
    if kind == "resid_pre" and block == 0 and list(design["changed"]) == [position]:
        return "by construction: the prompts differ only there"
    if kind == "resid_post" and block == depth - 1 and position == design["readout"]:
        return "by construction: the metric reads only this state"
    return ""


def carrying_cells(report: dict, name: str, direction: str) -> list[tuple[str, int, float, str]]:
    """(site, position, share, why by construction or "") of every distinct cell carrying at least HALF of the gap,
    in the order the model runs."""
    design = report["designs"][name]
    grids = design["activation"][direction]
    return [(site, position, value, by_construction(design, kind, block, position))
            for site, position, kind, block in distinct_cells(design)
            if (value := grids[kind][block][position]) is not None and value >= HALF]  # fmt: skip


def grid_sentence(report: dict, name: str, direction: str) -> str:
    design = report["designs"][name]
    if not design["readable"]:
        return "Not read: the gap is within its noise floor."
    floor = floor_share(report, name)
    grids = design["activation"][direction]
    cells = distinct_cells(design)
    moving = [(kind, block, position) for _, position, kind, block in cells
              if (value := grids[kind][block][position]) is not None and abs(value) > floor]  # fmt: skip
    forced = sum(1 for kind, block, position in moving if by_construction(design, kind, block, position))
    carrying = carrying_cells(report, name, direction)
    listed = "; ".join(f"{site} at position {position} ({_value(value)}{', ' + why if why else ''})"
                       for site, position, value, why in carrying)  # fmt: skip
    what = "restored" if direction == "denoising" else "removed"
    said = (f"The cells that move at least half of the gap when {what} alone: {listed}." if carrying else
            f"No single cell moves half of the gap when {what} alone.")  # fmt: skip
    shared = " (each block's input is the block before's output, counted once)" if len(grids["resid_pre"]) > 1 else ""
    forced_said = f" ({forced} of them by construction)" if forced else ""
    # attention is causal: before the first position where the prompts differ nothing differs (check_report)
    before = sum(1 for _, position, _, _ in cells if position < min(design["changed"]))
    return (f"{said} Of the {len(cells)} distinct cells{shared}, {len(moving)}{forced_said} move M by more than the "
            f"largest effect of any cell of the random-weight models ({floor:.3f} of the gap); the others are at the "
            f"null, {before} of them exactly 0 by causality (before the first position where the prompts "
            f"differ).")  # fmt: skip


def direction_sentence(report: dict, name: str) -> str:
    """Where denoising and noising disagree: a site that restores the behaviour alone but whose removal costs less
    (sufficient, not necessary), or the reverse."""
    design = report["designs"][name]
    if not design["readable"]:
        return ""
    grids = design["activation"]
    pairs = [(abs(d - n), site, position, d, n) for site, position, kind, block in distinct_cells(design)
             if (d := grids["denoising"][kind][block][position]) is not None
             and (n := grids["noising"][kind][block][position]) is not None]  # fmt: skip
    difference, site, position, denoise, noise = max(pairs)
    if difference < 0.1:
        return (f"Denoising and noising agree on every cell within {_value(difference)} of the gap: here each site that "
                f"restores the behaviour is also one whose removal takes it away.")  # fmt: skip
    reading = ("restoring it alone recovers more than removing it costs: the rest of the clean run can partly make up "
               "for it" if denoise > noise else
               "removing it costs more than restoring it alone recovers: it is needed, but not enough by itself")  # fmt: skip
    return (f"The two directions differ most at {site}, position {position}: {_value(denoise)} denoising, {_value(noise)} "
            f"noising; {reading}.")  # fmt: skip


def path_sentence(report: dict, name: str) -> str:
    design = report["designs"][name]
    if not design["readable"]:
        return "Not read: the gap is within its noise floor."
    path = design["path"]
    floor = floor_share(report, name)
    keys, everything = path["keys"], path["everything"]
    numbers = (f"into block 1's keys only {_value(keys)}, queries only {_value(path['queries'])}, values only "
               f"{_value(path['values'])}; into everything downstream {_value(everything)}")  # fmt: skip
    if abs(keys) <= floor:
        reading = ("the keys carry nothing above the null: what this design changes reaches the readout by another "
                   "path" + (", the values" if path["values"] >= HALF * everything else ""))  # fmt: skip
    elif everything and keys >= HALF * everything:
        reading = (f"the keys alone carry {keys / everything:.0%} of what the whole write carries: the write acts "
                   "mainly by telling block 1 where to attend")  # fmt: skip
    else:
        reading = f"the keys carry part of it ({keys / everything:.0%} of what the whole write carries)" if everything else "the whole write carries nothing"
    return f"Block 0's attention write, clean into corrupt: {numbers}. So {reading}."


def bend_class(cell: dict) -> str:
    if cell["attention_moved"] >= ATTENTION_BEND:
        return "attention"
    if cell["scale_change"] >= SCALE_BEND:
        return "layernorm"
    return "none"


def attribution_cells(report: dict, name: str) -> list[dict]:
    """Every distinct cell with its exact and approximate recovery, error and bend measures."""
    design = report["designs"][name]
    cells = []
    for site, position, kind, block in distinct_cells(design):
        error = design["error"][kind][block][position]
        if error is None:
            continue
        bend = design["bends"][kind][block][position]
        cells.append({"site": site, "position": position, "error": error,
                      "exact": design["activation"]["denoising"][kind][block][position],
                      "approximate": design["attribution"][kind][block][position],
                      **bend, "bend": bend_class(bend)})  # fmt: skip
    return cells


def attribution_sentence(report: dict, name: str) -> str:
    if not report["designs"][name]["readable"]:
        return "Not read: the gap is within its noise floor."
    cells = attribution_cells(report, name)
    worst = max(cells, key=lambda cell: abs(cell["error"]))
    by_class = {key: [c for c in cells if c["bend"] == key] for key in ("attention", "layernorm", "none")}
    largest = {key: max((abs(c["error"]) for c in group), default=0.0) for key, group in by_class.items()}
    first = (f"The largest error is at {worst['site']}, position {worst['position']}: attribution says "
             f"{_value(worst['approximate'])}, the exact patch {_value(worst['exact'])} (error {_value(worst['error'])}).")  # fmt: skip
    if worst["bend"] == "attention":
        why = (f"That patch moves block 1's attention at the readout by {_value(worst['attention_moved'])} (total "
               "variation): the softmax leaves the region where it is close to linear, and a gradient taken at the "
               "corrupt run cannot see attention jump to another position.")  # fmt: skip
    elif worst["bend"] == "layernorm":
        why = (f"That patch does not move block 1's attention at the readout ({_value(worst['attention_moved'])}) but changes "
               f"the final LayerNorm's scale there by {worst['scale_change']:.0%}: the gradient at the corrupt run "
               "differentiates the division by that scale, but only to first order, and a change of that size over "
               "the whole patch is beyond where the linearisation holds.")  # fmt: skip
    else:
        why = ("Neither measured bend is there (attention at the readout and the final LayerNorm's scale barely move): "
               "the curvature is elsewhere, in the MLP's GELU or the block inputs' LayerNorms.")  # fmt: skip
    tally = (f"Largest error where attention moves by at least {ATTENTION_BEND}: {_value(largest['attention'])} "
             f"({len(by_class['attention'])} cells); where only the final scale changes by at least {SCALE_BEND:.0%}: "
             f"{_value(largest['layernorm'])} ({len(by_class['layernorm'])} cells); elsewhere: {_value(largest['none'])} "
             f"({len(by_class['none'])} cells).")  # fmt: skip
    return f"{first} {why} {tally}"


OUTCOME = {
    "found": "finds the known head",
    "tied": "ties a known head with another",
    "other": "puts another head on top",
    "nothing": "finds no head above the null",
}


def heads_sentence(report: dict, name: str, method: str, kind: str) -> str:
    verdicts = report["verdicts"][name]
    if verdicts is None:
        return "Not read: the gap is within its noise floor."
    if kind in UNTESTABLE[name]:
        return "Not testable by this design: it leaves this head's write unchanged (Part 2)."
    verdict = verdicts[method][kind]
    block = report["heads"]["found"][kind]["block"]
    known = (f"head {verdict['known'][0]}" if len(verdict["known"]) == 1
             else "heads " + " and ".join(str(head) for head in verdict["known"]))
    both_known = verdict["top"] in verdict["known"] and verdict["runner_up"] in verdict["known"]
    tie = (", a tie between two known heads" if both_known else ", a tie") if verdict["tied"] else ""
    top = (f"head {verdict['top']} ({_value(verdict['top_share'])}; runner-up head {verdict['runner_up']}, "
           f"{_value(verdict['runner_up_share'])}{tie})")  # fmt: skip
    text = f"{OUTCOME[verdict['outcome']]}: in block {block} the largest share is {top}; the known {known}"
    shares = ", ".join(f"{_value(share)}" for share in verdict["known_shares"])
    if verdict["outcome"] in ("other", "nothing") and max(verdict["known_shares"]) <= floor_share(report, name):
        return f"{text} carry {shares}, nothing above the null in this design."
    return f"{text} carr{'ies' if len(verdict['known']) == 1 else 'y'} {shares}."


def known_heads_sentence(report: dict) -> str:
    """The heads by the model's own scores, a tie called a tie with the runner-up named."""
    parts = []
    scores = report["heads"]["scores"]
    for kind, head in report["heads"]["found"].items():
        row = scores[kind][head["block"]]
        order = sorted(range(len(row)), key=lambda h: -row[h])
        runner = order[1] if order[0] == head["head"] else order[0]
        tie = row[head["head"]] - row[runner] < report["tie_margin"]
        parts.append(f"the highest {head['kind']} score is block {head['block']} head {head['head']} "
                     f"({head['score']:.3f}), " + (f"tied with head {runner} of the same block ({row[runner]:.3f})"
                     if tie else f"clear of the block's runner-up, head {runner} ({row[runner]:.3f})"))  # fmt: skip
    null = report["null"]["highest_head_score"]
    return ("By the model's own attention scores, " + "; ".join(parts) + f". In the random-weight models no head "
            f"scores above {null['previous_token']:.3f} (previous-token) or {null['induction']:.3f} (induction).")


METHOD_NAMES = {"denoising": "per-head denoising", "noising": "per-head noising", "attribution": "attribution",
                "path_keys": "path patching into block 1's keys"}  # fmt: skip


def methods_sentence(report: dict) -> str:
    """How often each method finds a known head, over the designs whose gap is read and the heads it can reach;
    and how attribution's per-head shares compare with the exact denoising ones."""
    counts = {method: [0, 0] for method in METHOD_NAMES}
    smaller, compared = 0, 0
    for name, verdicts in report["verdicts"].items():
        if verdicts is None:
            continue
        for method, kinds in verdicts.items():
            for kind, verdict in kinds.items():
                if kind in UNTESTABLE[name]:
                    continue  # the design cannot show this head: no find and no miss
                counts[method][0] += verdict["outcome"] == "found"
                counts[method][1] += 1
        design, floor = report["designs"][name], floor_share(report, name)
        for exact_row, approximate_row in zip(design["heads"]["denoising"], design["heads"]["attribution"]):
            for exact, approximate in zip(exact_row, approximate_row):
                if abs(exact) > floor:
                    compared += 1
                    smaller += abs(approximate) < abs(exact)
    if not any(total for _, total in counts.values()):
        return "No design's gap is read, so no method is asked to find a head."
    found = "; ".join(f"{METHOD_NAMES[method]} {hits} of {total}" for method, (hits, total) in counts.items() if total)
    return (f"Cases where the method finds a known head (design by head kind, each design's untestable kind left "
            f"out): {found}. Of the {compared} heads whose "
            f"exact denoising share passes the null, attribution gives {smaller} a smaller share in size than the exact "
            f"patch does.")  # fmt: skip
