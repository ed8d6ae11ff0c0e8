"""The sentences the pages say about the induction model, each chosen from the numbers it reads (a report of
``induction_lab.measure``, a verdict of ``induction_audit.readout_write_verdict``), so a page reads truthfully
whatever this render's training produced. No sentence holds a quote mark: an inline expression's text is
shown as it is, and Quarto would print a string holding both kinds escaped."""

from __future__ import annotations

GOAL_ACCURACY = 0.95  # the goal for the repeated half


def accuracy_sentence(report: dict) -> str:
    halves = report["halves"]
    first, repeated = halves["first"]["accuracy"], halves["repeated"]["accuracy"]
    best = halves["first_best_possible"]
    learned = (f"it has learned to predict the repeat" if repeated >= GOAL_ACCURACY
               else f"it has not reached the goal of {GOAL_ACCURACY:.2f} on the repeat")  # fmt: skip
    first_reading = ("no better than chance" if first <= 2 * best
                     else "above what any predictor can reach without memory: it has found a shortcut the data leaves")  # fmt: skip
    return (f"On held-out sequences its top-1 accuracy is {repeated:.3f} on the repeated half: {learned}. On the "
            f"first half it is {first:.3f}, {first_reading} (uniform guessing among the tokens not yet seen "
            f"would score {best:.3f}).")  # fmt: skip


def head_sentence(report: dict, kind: str) -> str:
    """What the rule found for ``kind`` ("previous_token" or "induction") and whether it is where the mechanism
    puts it (the previous-token head in block 0, the induction head in block 1)."""
    head = report["heads_found"][kind]
    threshold = report["head_rule_threshold"]
    expected_block = 0 if kind == "previous_token" else 1
    where = f"block {head['block']}, head {head['head']}"
    if not head["above_threshold"]:
        return (f"No head attends mostly as a {head['kind']} head would: the highest {head['kind']} score, "
                f"{head['score']:.2f} ({where}), is below {threshold}.")  # fmt: skip
    placed = ("where the mechanism needs it" if head["block"] == expected_block
              else f"not in block {expected_block}, where the two-step mechanism would put it")  # fmt: skip
    return (f"The highest {head['kind']} score is {head['score']:.2f}, in {where}, {placed}; the next highest "
            f"of any other head is {head['runner_up']:.2f}.")  # fmt: skip


def lens_sentence(report: dict) -> str:
    """Where along the depth the right next token first becomes the lens's top token on most repeated positions."""
    trajectory = report["lens"]["held_out"]
    readable = [state for state, values in trajectory.items() if values["top1"] > 0.5]
    numbers = ", ".join(f"{state} {values['top1']:.2f}" for state, values in trajectory.items())
    if not readable:
        return f"At no state is the right next token the top token of the lens on most repeated positions ({numbers})."
    return (f"The right next token first becomes the top token of the lens on most repeated positions at the state "
            f"named {readable[0]} (top-1 per state: {numbers}).")  # fmt: skip


def patching_sentence(report: dict) -> str:
    """Which cells of the heatmap recover at least half of the clean metric."""
    patching = report["patching"]
    cells = [(row, position, value) for row, values in zip(patching["rows"], patching["recovery"])
             for position, value in enumerate(values) if value is not None and value >= 0.5]  # fmt: skip
    if not cells:
        return "No single patched activation recovers half of the clean metric."
    listed = "; ".join(f"{row} at position {position} (R = {value:.2f})" for row, position, value in cells)
    return f"The activations that recover at least half of the clean metric on their own: {listed}."


def audit_sentence(verdict: dict) -> str:
    """Whether the audit found the write the mechanism predicts (block 1's attention at the readout position), by
    patch recovery and by total effect (what zeroing it removes), each said as it came out."""
    predicted = verdict["predicted"]
    recovery = predicted["patch_recovery"]
    recovery_text = "undefined" if recovery is None else f"{recovery:.2f}"
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
            value = row["patch_recovery"] if key == "largest_recovery" else row["total_effect"]
            sentences.append(f"By {measure} it does not: {row['site']} at position {row['position']} has a larger "
                             f"one ({value:.2f}).")  # fmt: skip
    return " ".join(sentences)


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
              f"only the token induction would copy differs.")  # fmt: skip
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
