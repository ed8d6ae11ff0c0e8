"""Lab 07's clean / corrupt pairs: two designs, each changing one thing the induction mechanism uses and keeping
everything else, so what a patch restores can only be that thing.

The clean prompt is the example sequence cut before its last token: ``P`` tokens x_0 .. x_{P-1}, then x_0 ..
x_{P-2} again. At the readout (the last position, token x_{P-2}) induction finds the earlier occurrence of x_{P-2}
(position P-2), reads the token after it (x_{P-1}, position P-1) and predicts it: the target.

- ``copied_token``: the corrupt prompt replaces x_{P-1}, the token induction should copy, by a token that occurs
  nowhere in the clean prompt (the rival). The repeat is kept: x_{P-2} still occurs earlier and is still followed
  by one token, so both prompts call for induction; they differ in one position only, in *what* it copies.  If the
  mechanism holds, the previous-token head at P-1 reads x_{P-2} in both runs, so its write there is the same (a
  learned attention pattern, observed, not a construction): this design shows the value side of the mechanism and
  cannot test the previous-token heads' part in the key side.
- ``matched_position``: the corrupt prompt swaps x_{P-3} and x_{P-2} in the first half. The same tokens are present
  in both prompts and x_{P-2} still occurs earlier, but now at P-3, followed by x_{P-3} (the rival), while position
  P-1 still holds the target. What changes is *where* the earlier occurrence is, which the previous-token head
  writes and block 1's keys read: this design isolates the key side.

The metric is M = logit(target) - logit(rival) at the readout, with the rival each design's corrupt answer, so
M(clean) > 0 and M(corrupt) < 0 for a model that does induction.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from residlab.audit.measures import shown
from residlab.course.models.induction.measures import HELD_OUT_SEED, example_sequence
from residlab.course.models.induction.recipe import VOCAB_SIZE

DESIGNS = ("copied_token", "matched_position")
# The head kinds a design cannot test under the mechanism's hypothesis. In the copied-token design a previous-token
# head's write does change (at the position after the copied token, where it reads that token), but if the mechanism
# holds, block 1 at the readout matches its key one position earlier, where a previous-token head reads the unchanged
# token before: so its shares come out near 0. That is an observation under the hypothesis (learned attention), not
# a construction: the report's numbers say how near (``not_testable_reason``).
UNTESTABLE = {"copied_token": ("previous_token",), "matched_position": ()}
_REASONS = {("copied_token", "previous_token"): (
    "this design changes only the token induction copies (position {changed}); a previous-token head's write changes "
    "at the next position, where it reads that token, but if the mechanism holds block 1 at the readout matches its "
    "key at position {changed}, where a previous-token head reads the unchanged token before, so its shares are near 0 "
    "if the mechanism holds{observed}, and a near 0 here cannot tell a previous-token head from any other")}


# What a verdict cell of an untestable kind says after "not identifiable" (page and runner); the reason, once per design.
PREDICTED_NEAR_ZERO = "the mechanism predicts these heads' shares near 0 in this design"
# The head kinds one method cannot test against chance in a design beyond the design's own, each with why, if the
# mechanism holds (observed, not a construction: the heads' rows give the numbers, tested against the null pairs).
# Per-head noising in the matched-position design puts the corrupt run's current-token writes, which differ mainly at
# the swapped positions, into the clean run, where block 1 at the readout does not attend there. Path patching into
# block 1's keys: the mechanism says the keys read the previous-token write, so it predicts the other heads' key
# writes near 0; that prediction is the key-side claim itself, so it is checked, not assumed, and the verdict is read
# against the model's own null.
_KEYS_READ = ("under the mechanism, block 1's keys read the previous-token write, not these heads', so it predicts "
              "them near 0 by this method; that prediction is part of the key-side claim, checked below against the "
              "null pairs")
UNTESTABLE_BY_METHOD = {
    ("matched_position", "noising"): (("current_token",), "noising puts their writes into the clean run, and those "
                                      "differ mainly at the swapped positions (a current-token head reads mostly its "
                                      "own position; elsewhere its write changes only through the attention it pays "
                                      "to the swapped ones, not measured here), where block 1 at the readout does not "
                                      "attend, so it predicts them near 0"),
    ("matched_position", "path_keys"): (("current_token",), _KEYS_READ),
    ("copied_token", "path_keys"): (("current_token",), _KEYS_READ),
}


def share_interval(cell: dict) -> str:
    """A head's mean share over the pairs and its interval, two decimals (as the page's ``_interval`` prints it)."""
    return f"{shown(cell['mean'], 2):.2f} [{shown(cell['low'], 2):.2f}, {shown(cell['high'], 2):.2f}]"


def by_method_reason(design: str, method: str) -> str:
    """Why ``method`` cannot test the kinds ``UNTESTABLE_BY_METHOD`` names in ``design`` (page and runner)."""
    return UNTESTABLE_BY_METHOD[(design, method)][1]


def untestable(design: str, method: str) -> tuple[str, ...]:
    """The head kinds ``method`` cannot test in ``design`` under the mechanism's hypothesis: the design's own
    (``UNTESTABLE``) and the method's (``UNTESTABLE_BY_METHOD``)."""
    return UNTESTABLE.get(design, ()) + UNTESTABLE_BY_METHOD.get((design, method), ((), ""))[0]


def not_testable_reason(design: str, kind: str, report: dict | None = None) -> str | None:
    """Why the design ``design`` cannot test heads of ``kind`` under the mechanism's hypothesis (None when it can):
    the one sentence the page and the runner both say after the verdict word, with what ``report`` observed (block
    0's write into block 1's keys only, over the held-out pairs) where a report is given."""
    if kind not in UNTESTABLE.get(design, ()):
        return None
    if report is None:
        changed, observed = "P - 1", ""
    else:
        changed = ", ".join(map(str, report["designs"][design]["changed"]))
        per_head = report["distribution"]["designs"][design]["heads"]["path_keys"]["heads"][0]


        heads = [head for block, head in report["heads"]["named"].get(kind, []) if block == 0]
        observed = (" (observed over the pairs, each head's own write into block 1's keys only: "
                    + ", ".join(f"head 0.{head} {share_interval(per_head[head])}" for head in heads) + ")") if heads else ""
    return _REASONS[(design, kind)].format(changed=changed, observed=observed)


DESIGN_SEED = HELD_OUT_SEED + 7  # draws the copied-token design's replacement; apart from the held-out draw


@dataclass(frozen=True)
class Design:
    name: str  # one of DESIGNS
    clean: tuple[int, ...]
    corrupt: tuple[int, ...]
    target: int  # what induction predicts after the clean prompt
    rival: int  # what it predicts after the corrupt prompt
    changed: tuple[int, ...]  # the positions where the two prompts differ
    period: int

    @property
    def readout(self) -> int:
        return len(self.clean) - 1


def _checked(design: Design) -> Design:
    """The invariants every design keeps: same length, the rival absent from the clean prompt's answer, the
    readout's token occurring earlier in both prompts, and the prompts differing exactly at ``changed``."""
    clean, corrupt, readout = design.clean, design.corrupt, design.readout
    if len(clean) != len(corrupt) or design.target == design.rival:
        raise ValueError(f"design {design.name}: prompts of different lengths or target equal to rival")
    for prompt, answer in ((clean, design.target), (corrupt, design.rival)):
        earlier = [p for p in range(readout) if prompt[p] == prompt[readout]]
        if len(earlier) != 1 or prompt[earlier[0] + 1] != answer:
            raise ValueError(f"design {design.name}: the readout's earlier occurrence is not followed by its answer")
    if tuple(p for p in range(len(clean)) if clean[p] != corrupt[p]) != design.changed:
        raise ValueError(f"design {design.name}: the prompts differ elsewhere than at {design.changed}")
    return design


def make_design(name: str, sequence: torch.Tensor | None = None, seed: int = DESIGN_SEED) -> Design:
    """The design ``name`` on a repeated sequence (2P,) (default: the induction pages' example)."""
    sequence = example_sequence() if sequence is None else sequence
    tokens = [int(t) for t in sequence]
    period = len(tokens) // 2
    clean = tokens[: 2 * period - 1]
    target = tokens[period - 1]
    if name == "copied_token":
        unused = [t for t in range(VOCAB_SIZE) if t not in set(tokens)]
        generator = torch.Generator().manual_seed(seed)
        rival = unused[int(torch.randint(len(unused), (1,), generator=generator))]
        corrupt = list(clean)
        corrupt[period - 1] = rival
        changed = (period - 1,)
    elif name == "matched_position":
        corrupt = list(clean)
        corrupt[period - 3], corrupt[period - 2] = clean[period - 2], clean[period - 3]
        rival = clean[period - 3]
        changed = (period - 3, period - 2)
    else:
        raise ValueError(f"no design {name!r}; the designs: {', '.join(DESIGNS)}")
    return _checked(Design(name, tuple(clean), tuple(corrupt), target, rival, changed, period))


def all_designs(sequence: torch.Tensor | None = None) -> dict[str, Design]:
    return {name: make_design(name, sequence) for name in DESIGNS}
