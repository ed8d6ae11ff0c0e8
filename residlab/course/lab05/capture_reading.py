"""The sentences of Lab 05 Part 4's "observe and interpret", each chosen from the numbers of the capture on the
page, so the page reads truthfully for any capture that verifies: whether the raw norm rises, falls or neither;
which block writes most; whether position 0 stands apart from the others; which of the two explanations the
alignment numbers favour, or that they favour neither. Nothing here asserts a pattern: a trained model may show
any of them (residual norms fall with depth in some models, and position 0 often behaves apart).

Every cosine is read against its null before a sentence interprets it: the analytic spread of the cosine between
a fixed vector and a uniformly random direction in the capture's width d (mean 0, standard deviation 1/sqrt(d)),
and, for a trained model, the same numbers of the random-weight run of the same shape (the synthetic specimen,
captured by the same code): ``null_sentence``.
"""

from __future__ import annotations

import math
import statistics

from residlab.capture.sites import EMBEDDING_SITE, site_name
from residlab.course.models.capture_page import CACHED_CAPTURE, PageCapture, boundary_norms, number, read_capture
from residlab.course.ui.tables import math_label

NORM_CHANGE = 0.05  # the last raw norm within 5% of the first: it neither rises nor falls
APART_FACTOR = 2.0  # position 0 stands apart at twice (or half) the other positions' median norm, or beyond
# A cosine beyond NULL_SIGMAS / sqrt(d) is one a random direction in d dimensions gives less than 0.3% of the time
# (the cosine with a fixed vector has standard deviation 1/sqrt(d)); within it, the update is indistinguishable
# from a write unrelated to the state.
NULL_SIGMAS = 3.0


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
    if not zero["apart"]:
        return (f"Position 0 **does not stand apart** from the others: {measured}, within a factor of "
                f"{APART_FACTOR:g} either way.")  # fmt: skip
    if capture.synthetic:
        return (f"Position 0 **stands apart** from the others: {measured}; in random weights, so it can arise without "
                f"training.")  # fmt: skip
    return (f"Position 0 **stands apart** from the others: {measured}. Expect this in trained decoders: many give "
            f"the first position a far larger norm than any other, a place attention can rest on when nothing "
            f"else is worth reading [@xiao2024efficient]. Leave position 0 out of averages and comparisons across "
            f"positions, or report it on its own.")  # fmt: skip


def null_sentence(capture: PageCapture, null: PageCapture | None = None) -> str:
    """The same readings on the random-weight run of the same shape (the synthetic specimen's committed capture,
    made by the same code): what can arise without training. For the specimen itself, that it is the null."""
    if capture.synthetic:
        return ("*Untrained baseline.* This capture is itself the random-weight run: every pattern above is one an "
                "untrained network of this shape shows, so none of it is evidence of anything learned.")
    null = read_capture(CACHED_CAPTURE) if null is None else null
    if width(null) != width(capture) or len(null.observation["block_updates"]) != len(capture.observation["block_updates"]):
        return "*Untrained baseline.* No random-weight run of this shape is committed, so these patterns have no untrained baseline beside them here."
    trend, zero, seen = norm_trend(null), position_zero(null), alignment(null)
    ratio = "undefined" if zero is None or zero["ratio"] is None else f"{number(zero['ratio'], 2)} times the others' median"
    factor = "undefined" if trend["factor"] is None else number(trend["factor"], 2)
    return (f"*Untrained baseline.* The same code on random weights of the same shape (`{null.manifest['repository']}`, "
            f"the same sentence and position) gives: a raw norm that {trend['direction'] if trend['direction'] != 'neither' else 'neither rises nor falls'} "
            f"(a factor of {factor} from first to last boundary), position 0 at {ratio}, and a largest |cos| "
            f"between an update and the state it lands on of {number(seen['largest_abs_cosine'], 3)}. A pattern "
            f"the trained model shares with this one draw could arise without training; whether it does in the "
            f"trained model would take more seeds and an intervention to say.")  # fmt: skip


def width(capture: PageCapture) -> int:
    """The residual width d: the length of one position's state in captures.json."""
    tensors = {entry["name"]: entry["values"][0] for entry in capture.captures["tensors"]}
    return len(tensors[EMBEDDING_SITE][0])


def cosine_null(capture: PageCapture) -> dict:
    """Analytic null of a cosine in the capture's width: its typical size 1/sqrt(d) and the band NULL_SIGMAS/sqrt(d)."""
    d = width(capture)
    return {"width": d, "typical": 1 / math.sqrt(d), "band": NULL_SIGMAS / math.sqrt(d)}


def alignment(capture: PageCapture) -> dict:
    """The separating evidence: cos(update, incoming state) per block against the null band, and the norm the
    orthogonal (Pythagorean) accumulation sqrt(|H_0|^2 + sum |update|^2) predicts for H_L beside the range that
    cosines inside the band allow. ``favoured``: "null" (every cosine inside the band: indistinguishable from
    writes unrelated to the state), "along" or "against" (every cosine outside the band has that sign), or None
    (no defined cosine, or outside cosines of both signs)."""
    updates = capture.observation["block_updates"]
    norms = boundary_norms(capture)
    null = cosine_null(capture)
    cosines = {row["block"]: row["cosine_update_with_incoming"] for row in updates
               if row["cosine_update_with_incoming"] is not None}  # fmt: skip
    predicted = math.sqrt(norms[0] ** 2 + math.fsum(row["difference_norm"] ** 2 for row in updates))
    gap = abs(predicted - norms[-1]) / norms[-1] if norms[-1] > 0 else None
    # |H_{i+1}|^2 = |H_i|^2 + |update|^2 + 2 |H_i| |update| cos: the final norm every cosine inside the band allows.
    low = high = norms[0]
    for row in updates:
        size = row["difference_norm"]
        low = math.sqrt(max(low**2 + size**2 - 2 * null["band"] * low * size, 0.0))
        high = math.sqrt(high**2 + size**2 + 2 * null["band"] * high * size)
    outside = {block: value for block, value in cosines.items() if abs(value) > null["band"]}
    largest = max((abs(value) for value in cosines.values()), default=None)
    mean = statistics.fmean(cosines.values()) if cosines else None
    if cosines and not outside:
        favoured = "null"
    elif outside and all(value > 0 for value in outside.values()):
        favoured = "along"
    elif outside and all(value < 0 for value in outside.values()):
        favoured = "against"
    else:
        favoured = None
    return {"largest_abs_cosine": largest, "mean_cosine": mean, "predicted": predicted, "observed": norms[-1],
            "gap": gap, "null_low": low, "null_high": high, "outside": outside, "defined": len(cosines),
            "null": null, "favoured": favoured}  # fmt: skip


def _blocks(outside: dict) -> str:
    return ", ".join(f"block {block} ({number(value, 2)})" for block, value in sorted(outside.items()))


def verdict_sentence(capture: PageCapture) -> str:
    seen = alignment(capture)
    null = seen["null"]
    band = (f"the band ±{number(null['band'], 3)} that a random direction in {null['width']} dimensions stays within "
            f"all but 0.3% of the time (its cosine with any fixed vector has standard deviation 1/√{null['width']} = "
            f"{number(null['typical'], 3)})")  # fmt: skip
    numbers = (f"the orthogonal accumulation predicts {number(seen['predicted'])} for the observed "
               f"{number(seen['observed'])} (cosines inside the band allow anything from {number(seen['null_low'])} "
               f"to {number(seen['null_high'])})")  # fmt: skip
    if seen["favoured"] == "null":
        return (f"In this capture the numbers **cannot tell the updates from writes unrelated to the state**: every "
                f"update's cosine with the state it lands on (largest |cos| {number(seen['largest_abs_cosine'], 3)}) "
                f"is inside {band}, and {numbers}. That is what the first explanation, "
                f"accumulation, predicts, and what any writes unrelated to the state give, so it is no evidence "
                f"for a mechanism: it only shows no directed write at this position.")  # fmt: skip
    if seen["favoured"] in ("along", "against"):
        sense = ("along the state, amplifying it" if seen["favoured"] == "along"
                 else "against the state, cancelling part of it")  # fmt: skip
        return (f"In this capture the numbers **favour the second explanation**, writes {sense}: "
                f"{len(seen['outside'])} of the {seen['defined']} updates have a cosine with the state they land on "
                f"outside {band}: {_blocks(seen['outside'])}; and {numbers}.")  # fmt: skip
    if not seen["defined"]:
        return ("In this capture the numbers **favour neither explanation**: no update's cosine with the state it "
                "lands on is defined (a state or an update of norm zero).")  # fmt: skip
    return (f"In this capture the numbers **favour neither explanation**: the updates whose cosine with the state "
            f"they land on is outside {band} point both ways, {_blocks(seen['outside'])}; and {numbers}.")  # fmt: skip
