"""The sentences of Lab 05 Part 4's "observe and interpret", each chosen from the numbers of the capture on the
page, so the page reads truthfully for any capture that verifies: whether the raw norm rises, falls or neither;
which block writes most; whether position 0 stands apart from the others; which of the two explanations the
alignment numbers favour, or that they favour neither. Nothing here asserts a pattern: a trained model may show
any of them (residual norms fall with depth in some models, and position 0 often behaves apart).
"""

from __future__ import annotations

import math
import statistics

from residlab.capture.sites import EMBEDDING_SITE, site_name
from residlab.course.models.capture_page import PageCapture, boundary_norms, number
from residlab.course.ui.tables import math_label

NORM_CHANGE = 0.05  # the last raw norm within 5% of the first: it neither rises nor falls
APART_FACTOR = 2.0  # position 0 stands apart at twice (or half) the other positions' median norm, or beyond
ALIGNMENT_THRESHOLD = 0.2  # |cos(update, incoming state)| below this counts as "roughly orthogonal"
QUADRATURE_THRESHOLD = 0.05  # relative gap between the observed and the orthogonal-accumulation norm


def _label(capture: PageCapture, index: int) -> str:
    return math_label(capture.observation["boundaries"][index]["label"])


def norm_trend(capture: PageCapture) -> dict:
    """How the selected position's raw norm moves from H_0 to H_L."""
    norms = boundary_norms(capture)
    steps = [after - before for before, after in zip(norms, norms[1:])]
    factor = norms[-1] / norms[0] if norms[0] > 0 else None
    if factor is not None and factor >= 1 + NORM_CHANGE:
        direction = "rises"
    elif factor is not None and factor <= 1 - NORM_CHANGE:
        direction = "falls"
    else:
        direction = "neither"
    return {"first": norms[0], "last": norms[-1], "factor": factor, "direction": direction,
            "blocks_up": sum(step > 0 for step in steps), "blocks": len(steps)}  # fmt: skip


def trend_sentence(capture: PageCapture) -> str:
    trend = norm_trend(capture)
    span = (f"from {number(trend['first'])} at {_label(capture, 0)} to {number(trend['last'])} at "
            f"{_label(capture, -1)}, the last block's raw output")  # fmt: skip
    up = f"it goes up in {trend['blocks_up']} of the {trend['blocks']} blocks"
    if trend["direction"] == "neither":
        return f"Its raw norm **neither rises nor falls** by more than {NORM_CHANGE:.0%} with depth: {span}; {up}."
    return f"Its raw norm **{trend['direction']}** with depth, {span} (a factor of {number(trend['factor'], 2)}); {up}."


def relative_sentence(capture: PageCapture) -> str:
    """Whether each update is a larger or smaller share of the state it lands on, first block against last."""
    relative = [row["relative_difference"] for row in capture.observation["block_updates"]]
    if not relative or None in (relative[0], relative[-1]):
        return "The size of an update relative to the state it lands on is undefined here (a state of norm zero)."
    first, last = relative[0], relative[-1]
    change = "a smaller" if last < first else "a larger" if last > first else "the same"
    return (f"The last block's update is {change} share of the state it lands on than the first block's: "
            f"{number(last, 2)} times the incoming norm against {number(first, 2)}.")  # fmt: skip


def largest_write(capture: PageCapture) -> dict:
    updates = capture.observation["block_updates"]
    row = max(updates, key=lambda update: update["difference_norm"])
    larger = "MLP" if row["mlp_write_norm"] >= row["attn_write_norm"] else "attention"
    return {"block": row["block"], "update": row["difference_norm"], "attention": row["attn_write_norm"],
            "mlp": row["mlp_write_norm"], "larger": larger}  # fmt: skip


def largest_write_sentence(capture: PageCapture) -> str:
    top = largest_write(capture)
    smaller = "attention" if top["larger"] == "MLP" else "MLP"
    return (f"Block {top['block']} writes the most at this position: its update is {number(top['update'])} long, "
            f"and its {top['larger']} write ({number(max(top['attention'], top['mlp']))}) is the longer of its two "
            f"writes (the {smaller} write: {number(min(top['attention'], top['mlp']))}).")  # fmt: skip


def position_norms(capture: PageCapture) -> list[float]:
    """Per token position: the mean norm of its raw states H_0..H_L, from the tensors in captures.json."""
    tensors = {entry["name"]: entry["values"][0] for entry in capture.captures["tensors"]}
    blocks = len(capture.observation["block_updates"])
    states = [tensors[EMBEDDING_SITE]] + [tensors[site_name(block, "resid_post")] for block in range(blocks)]
    positions = len(capture.observations["tokens"])
    return [statistics.fmean(math.sqrt(math.fsum(x * x for x in state[p])) for state in states) for p in range(positions)]


def position_zero(capture: PageCapture) -> dict | None:
    """Position 0's mean raw norm against the other positions' median; None for a one-token text."""
    norms = position_norms(capture)
    if len(norms) < 2:
        return None
    others = statistics.median(norms[1:])
    ratio = norms[0] / others if others > 0 else None
    apart = ratio is None or ratio >= APART_FACTOR or ratio <= 1 / APART_FACTOR
    return {"norm": norms[0], "others": others, "ratio": ratio, "apart": apart}


def position_zero_sentence(capture: PageCapture) -> str:
    zero = position_zero(capture)
    if zero is None:
        return "The text is one token, so there is no other position to compare position 0 with."
    ratio = "undefined (the others' median is zero)" if zero["ratio"] is None else f"{number(zero['ratio'], 2)} times"
    measured = (f"averaged over the raw boundaries its states are {number(zero['norm'])} long, {ratio} the median "
                f"of the other positions ({number(zero['others'])})")  # fmt: skip
    if zero["apart"]:
        return f"Position 0 **stands apart** from the others: {measured}."
    return (f"Position 0 **does not stand apart** from the others: {measured}, within a factor of "
            f"{APART_FACTOR:g} either way.")  # fmt: skip


def alignment(capture: PageCapture) -> dict:
    """The separating evidence: cos(update, incoming state) per block, and the norm the orthogonal (Pythagorean)
    accumulation sqrt(|H_0|^2 + sum |update|^2) predicts for H_L; which explanation they favour, or None."""
    updates = capture.observation["block_updates"]
    norms = boundary_norms(capture)
    cosines = [row["cosine_update_with_incoming"] for row in updates if row["cosine_update_with_incoming"] is not None]
    predicted = math.sqrt(norms[0] ** 2 + math.fsum(row["difference_norm"] ** 2 for row in updates))
    gap = abs(predicted - norms[-1]) / norms[-1] if norms[-1] > 0 else None
    largest = max((abs(value) for value in cosines), default=None)
    mean = statistics.fmean(cosines) if cosines else None
    if largest is not None and largest < ALIGNMENT_THRESHOLD and gap is not None and gap < QUADRATURE_THRESHOLD:
        favoured = "accumulation"
    elif mean is not None and mean >= ALIGNMENT_THRESHOLD:
        favoured = "along"
    elif mean is not None and mean <= -ALIGNMENT_THRESHOLD:
        favoured = "against"
    else:
        favoured = None
    return {"largest_abs_cosine": largest, "mean_cosine": mean, "predicted": predicted, "observed": norms[-1],
            "gap": gap, "favoured": favoured}  # fmt: skip


def verdict_sentence(capture: PageCapture) -> str:
    seen = alignment(capture)
    numbers = (f"the orthogonal accumulation predicts {number(seen['predicted'])} for the observed "
               f"{number(seen['observed'])}")  # fmt: skip
    largest, mean = number(seen["largest_abs_cosine"]), number(seen["mean_cosine"])
    if seen["favoured"] == "accumulation":
        return (f"In this capture the numbers **favour the first explanation**, accumulation: every update is close "
                f"to orthogonal to the state it lands on (largest |cos| {largest}), and {numbers}.")  # fmt: skip
    if seen["favoured"] == "along":
        return (f"In this capture the numbers **favour the second explanation**, writes along the state: on average "
                f"the updates lean along the state they land on (mean cos {mean}), and {numbers}.")  # fmt: skip
    if seen["favoured"] == "against":
        return (f"In this capture the numbers **favour the second explanation**, writes against the state: on "
                f"average the updates point against the state they land on (mean cos {mean}), cancelling part of "
                f"it, and {numbers}.")  # fmt: skip
    return (f"In this capture the numbers **favour neither explanation**: the updates are neither all close to "
            f"orthogonal to the state they land on (largest |cos| {largest}) nor consistently along or against it "
            f"(mean cos {mean}), and {numbers}.")  # fmt: skip
