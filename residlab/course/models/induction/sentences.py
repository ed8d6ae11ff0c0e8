"""The sentences the pages say about the induction model, each chosen from the numbers it reads (a report of
``induction_lab.measure``, a verdict of ``induction_audit.readout_write_verdict``), so a page reads truthfully
whatever this render's training produced. No sentence holds a quote mark: an inline expression's text is
shown as it is, and Quarto would print a string holding both kinds escaped."""

from __future__ import annotations

import math

from residlab.course.ui.chance import against_chance

GOAL_ACCURACY = 0.95  # the goal for the repeated half
TIE_MARGIN = 0.05  # two head scores closer than this are a tie: the rule cannot tell the heads apart
READABLE_GAP = 0.1  # a clean-corrupt gap in logit difference below this (odds within about 10%) is not read
FORCED_WITHIN = 0.05  # a recovery this close to 1, with the earlier route this close to 0, follows from the layout


def accuracy_sentence(report: dict) -> str:
    """The repeated half against the goal; the first half against chance, the accuracy of a guess among the tokens
    not yet seen (any such guess is right that often), with two standard errors of the pooled predictions."""
    halves = report["halves"]
    first, repeated = halves["first"]["accuracy"], halves["repeated"]["accuracy"]
    best = halves["first_best_possible"]
    count = halves["first"].get("predictions")
    where, margin = against_chance(first, best, count)
    learned = (f"it has learned to predict the repeat" if repeated >= GOAL_ACCURACY
               else f"it has not reached the goal of {GOAL_ACCURACY:.2f} on the repeat")  # fmt: skip
    if where == "below":
        first_reading = (f"below chance: any guess among the tokens not yet seen is right {best:.3f} of the time, "
                         f"so a lower accuracy suggests the model often predicts a token the sequence has already "
                         f"used, which its first half never repeats (the habit the repeat rewards)")  # fmt: skip
    elif where == "at":
        first_reading = f"at the chance level, {best:.3f}, that a guess among the tokens not yet seen reaches"
    else:
        first_reading = (f"above the {best:.3f} that any predictor reaches without memory of other sequences: it has "
                         f"found a shortcut the data leaves")  # fmt: skip
    # The band is chance's, not the estimate's: where a chance-level predictor would land over these predictions.
    band = (f" (over its {count} predictions, a predictor at that chance level would score within {margin:.3f} of "
            f"{best:.3f}, two standard errors)") if count else ""
    return (f"On held-out sequences its top-1 accuracy is {repeated:.3f} on the repeated half: {learned}. On the "
            f"first half it is {first:.3f}, {first_reading}{band}.")  # fmt: skip


def uniform_attention_scores(periods) -> dict[str, float]:
    """The null of each head score: the score of a head that spreads its attention evenly over every position it may
    read, computed by the same score functions on uniform causal weights, averaged over the periods as the scores are."""
    import torch

    from residlab.course.models.induction.measures import induction_score, previous_token_score

    previous, induction = [], []
    for period in periods:
        n = 2 * period
        weights = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1).unsqueeze(1)
        previous.append(float(previous_token_score(weights.unsqueeze(0))))
        induction.append(float(induction_score(weights.unsqueeze(0), period)))
    return {"previous_token": sum(previous) / len(previous), "induction": sum(induction) / len(induction)}


def _runner_up(report: dict, kind: str) -> tuple[int, int, float]:
    """The block, head and score of the second-highest head of ``kind``, from the report's score table."""
    head = report["heads_found"][kind]
    cells = [(score, block, index) for block, row in enumerate(report["head_scores"][kind])
             for index, score in enumerate(row) if (block, index) != (head["block"], head["head"])]  # fmt: skip
    score, block, index = max(cells, key=lambda cell: (cell[0], -cell[1], -cell[2]))  # equal scores: the first head
    return block, index, score


def is_tie(report: dict, kind: str) -> bool:
    """Whether the best head of ``kind`` is within TIE_MARGIN of the runner-up: the rule does not single it out."""
    return report["heads_found"][kind]["score"] - _runner_up(report, kind)[2] < TIE_MARGIN


def tie_across_blocks(report: dict, kind: str) -> bool:
    """A tie whose two heads sit in different blocks: the rule cannot say which block holds the head."""
    return is_tie(report, kind) and _runner_up(report, kind)[0] != report["heads_found"][kind]["block"]


def head_sentence(report: dict, kind: str) -> str:
    """What the rule found for ``kind`` ("previous_token" or "induction") and whether it is where the mechanism
    puts it (the previous-token head in block 0, the induction head in block 1); a tie called a tie, with the
    runner-up's block and head; both read against a head that attends evenly."""
    head = report["heads_found"][kind]
    threshold = report["head_rule_threshold"]
    expected_block = 0 if kind == "previous_token" else 1
    where = f"block {head['block']}, head {head['head']}"
    null = uniform_attention_scores(report["held_out"]["periods"])[kind]
    even = f"a head attending evenly to every position it may read scores {null:.2f}"
    if not head["above_threshold"]:
        return (f"No head attends mostly as a {head['kind']} head would: the highest {head['kind']} score, "
                f"{head['score']:.2f} ({where}), is below {threshold} ({even}).")  # fmt: skip
    block, index, second = _runner_up(report, kind)
    placed = ("where the mechanism needs it" if head["block"] == expected_block
              else f"not in block {expected_block}, where the two-step mechanism would put it")  # fmt: skip
    if is_tie(report, kind):
        both = (f"both {placed}" if block == head["block"]
                else "in different blocks, so the rule cannot say which block holds the head")  # fmt: skip
        return (f"The highest {head['kind']} scores are a tie: {head['score']:.3f} in {where} and {second:.3f} in "
                f"block {block}, head {index}, closer than {TIE_MARGIN}, so the rule cannot single out one head; "
                f"they are {both} ({even}).")  # fmt: skip
    return (f"The highest {head['kind']} score is {head['score']:.2f}, in {where}, {placed}; the next highest is "
            f"{second:.2f}, in block {block}, head {index}, and {even}.")  # fmt: skip


def lens_sentence(report: dict) -> str:
    """Where along the depth the right next token first becomes the lens's top token on most repeated positions,
    beside chance (one token in the vocabulary)."""
    trajectory = report["lens"]["held_out"]
    chance = report["halves"]["uniform_chance"]
    readable = [state for state, values in trajectory.items() if values["top1"] > 0.5]
    numbers = ", ".join(f"{state} {values['top1']:.2f}" for state, values in trajectory.items())
    null = f"a uniform guess is right {chance:.3f} of the time"
    if not readable:
        return (f"At no state is the right next token the top token of the lens on most repeated positions "
                f"({numbers}; {null}).")  # fmt: skip
    return (f"The right next token first becomes the top token of the lens on most repeated positions at the state "
            f"named {readable[0]} (top-1 per state: {numbers}; {null}).")  # fmt: skip


def patching_sentence(report: dict) -> str:
    """Which cells of the heatmap recover at least half of the clean metric; nothing is read when the gap between
    the clean and corrupt metrics is below READABLE_GAP."""
    patching = report["patching"]
    gap = patching["clean_metric"] - patching["corrupt_metric"]
    if abs(gap) < READABLE_GAP:
        return (f"The clean and corrupt runs differ by only {gap:.3f} in logit difference, below the {READABLE_GAP} "
                f"this page reads, so no recovery is read: a ratio over so small a gap is noise.")  # fmt: skip
    cells = [(row, position, value) for row, values in zip(patching["rows"], patching["recovery"])
             for position, value in enumerate(values) if value is not None and value >= 0.5]  # fmt: skip
    if not cells:
        return f"No single patched activation recovers half of the clean-corrupt gap of {gap:.2f}."
    changed = [p for p, (c, k) in enumerate(zip(patching["experiment"]["clean"], patching["experiment"]["corrupt"]))
               if c != k]  # fmt: skip
    first_row = patching["rows"][0]
    identity = (first_row, changed[0]) if len(changed) == 1 else None  # R = 1 exactly: the only changed input
    listed = "; ".join(f"{row} at position {position} (R = {value:.2f})" if (row, position) == identity else
                       f"{row} at position {position} (R = {observed_recovery(value)})" for row, position, value in cells)  # fmt: skip
    found = f"The activations that recover at least half of the clean-corrupt gap of {gap:.2f} on their own: {listed}."
    if len(changed) == 1 and any(row == first_row and position == changed[0] for row, position, _ in cells):
        found += (f" The {first_row} at position {changed[0]} is no finding: it is the only place the two inputs "
                  f"differ, so patching it makes the corrupted run the clean one and R = 1 by construction.")  # fmt: skip
    readout = len(patching["recovery"][0]) - 1
    at_readout = dict(zip(patching["rows"], (values[readout] for values in patching["recovery"])))
    last = patching["rows"][-1]  # block 1's attention write; every other row is on the route before it
    earlier = [abs(value) for row, value in at_readout.items() if row != last and value is not None]
    found += "" if not earlier else (" " + forced_sentence(at_readout[last], max(earlier), readout)).rstrip()
    return found


def observed_recovery(value: float) -> str:
    """An observed recovery: two decimals, three where two would print the 1.00 an identity gives."""
    return f"{value:.3f}" if abs(round(value, 2)) == 1 else f"{value:.2f}"


def audit_sentence(verdict: dict) -> str:
    """Whether the audit found the write the mechanism predicts (block 1's attention at the readout position), by
    patch recovery and by total effect (what zeroing it removes), each said as it came out."""
    predicted = verdict["predicted"]
    recovery = predicted["patch_recovery"]
    recovery_text = "undefined" if recovery is None else observed_recovery(recovery)
    described = (f"the attention write of block 1 at position {predicted['position']} (total effect "
                 f"{predicted['total_effect']:.2f}, patch recovery {recovery_text})")  # fmt: skip
    if verdict["found_by_recovery"] and verdict["found_by_total"]:
        return (f"The audit finds the write the mechanism predicts: of the declared writes, {described} has both "
                f"the largest patch recovery and the largest total effect (in size).")  # fmt: skip
    sentences = [f"The write the mechanism predicts is {described}."]
    for key, found, measure in (("largest_recovery", "found_by_recovery", "patch recovery"),
                                ("largest_total", "found_by_total", "total effect (in size)")):  # fmt: skip
        row = verdict[key]
        if verdict[found]:
            sentences.append(f"By {measure} the audit finds it: no declared write has a larger one.")
        else:
            value = observed_recovery(row["patch_recovery"]) if key == "largest_recovery" else f"{row['total_effect']:.2f}"
            sentences.append(f"By {measure} it does not: {row['site']} at position {row['position']} has a larger "
                             f"one ({value}).")  # fmt: skip
    sentences.append(forced_sentence(recovery, verdict.get("earlier_at_readout"), predicted["position"]))
    return " ".join(sentence for sentence in sentences if sentence)


def forced_sentence(recovery: float | None, earlier: float | None, position: int) -> str:
    """When block 1's attention write at the readout recovers about all of the gap while what reaches block 1 there
    from earlier blocks recovers about none: that recovery follows from the two-block layout, said as such."""
    if recovery is None or earlier is None or abs(recovery - 1) > FORCED_WITHIN or earlier > FORCED_WITHIN:
        return ""
    at_most = math.ceil(round(earlier * 1000, 9)) / 1000  # rounded up, so that at most it stays true
    return (f"Block 1's attention write at position {position} recovers {observed_recovery(recovery)}, and that is close to forced, "
            f"not found: what the earlier block writes at position {position} recovers at most {at_most:.3f}, so block 1's input there is all but the same in "
            f"both runs, and block 1's attention at the readout is the only route left from the changed token to the "
            f"readout; patching its clean value leaves the clean computation downstream. The partial recoveries and "
            f"the total effects are the informative numbers.")  # fmt: skip


def experiment_sentence(experiment: dict) -> str:
    """The corrupted input and the rival, said as they came out: which one token the corruption changed, and how
    the lesson's rule (the corrupted run's top token; the clean run's best other token if that is the target)
    named the rival. ``experiment``: a ``PatchingExperiment`` as a dict."""
    position = experiment["first_occurrence_next"]
    clean, corrupt = experiment["clean"][position], experiment["corrupt"][position]
    design = (f"The corrupted input keeps the repeat and changes only the token at position {position}, the one "
              f"after the earlier occurrence of the last token, from {clean} to {corrupt}, a token that occurs "
              f"nowhere in the clean input. Both inputs hold the same tokens but that one, and the last token "
              f"occurs earlier at the same place in both, so a recovery cannot come from which tokens are present; "
              f"only the token induction would copy differs, though restoring it can also move where block 1 attends "
              f"at the readout (Lab 07 Part 2 measures how far for its own, similar corruption, on its worked "
              f"example), so a recovery is not the copied value alone.")  # fmt: skip
    top, rival = experiment["corrupt_top"], experiment["rival"]
    if top == experiment["target"]:
        named = (f"The corrupted run still predicts the target {top}, so by the rule of Lesson 2.1 the rival is the "
                 f"best other token of the clean run, {rival}.")  # fmt: skip
    else:
        copied = ("the token induction would copy there" if top == corrupt
                  else f"not the token induction would copy there, {corrupt}")  # fmt: skip
        named = (f"The rival, named by the rule of Lesson 2.1, is the top prediction of the corrupted run, token "
                 f"{rival}: {copied}.")  # fmt: skip
    return f"{design} {named}"
