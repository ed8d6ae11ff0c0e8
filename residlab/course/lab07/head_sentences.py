"""Lab 07's sentences about heads over the pairs (Part 6): each verdict against the chance of a random pick among
the heads the design can move, attention-score ties said in the words of Lab 06 and the glossary (``TIE_MARGIN``)
with the causal methods' preference pair by pair, and what the current-token heads carry, design by design. The
helpers and the other sentences are ``sentences``'s."""

from __future__ import annotations

from residlab.course.lab07.designs import not_testable_reason
from residlab.course.lab07.distribution import HEAD_KINDS, verdict_parts
from residlab.course.lab07.sentences import METHOD_NAMES, MOSTLY, _heads, _interval, _percent, _value
from residlab.course.models.induction.sentences import TIE_MARGIN


def kind_sentence(report: dict, name: str, method: str, kind: str) -> str:
    """Over the pairs, how often the method puts a head the rule named on top of its block, against the chance of a
    random pick among the heads the design can move (those of a kind it cannot test are fixed near 0 by it)."""
    measured = report["distribution"]["designs"][name]
    words = report["verdict_words"]
    if kind in measured["not_testable"]:
        return f"{words['not_testable']}: {not_testable_reason(name, kind)}."
    entries = [e for e in measured["heads"][method]["kinds"].values() if e["kind"] == kind]
    if not entries:
        return f"no {HEAD_KINDS[kind]} head this method can reach."
    said = []
    for entry in entries:
        fractions = entry["fractions"]
        fixed = entry.get("fixed", [])
        if entry["chance"] >= 1:
            chance = ""
            reading = (words["no_test"] if fixed else
                       "every head of the block is named, so this is no test: any head on top is a named one")  # fmt: skip
        else:
            movable = entry.get("movable", len(entry["named"]))
            chance = (f"a random pick among the {movable} heads this design can move would succeed in "
                      f"{_percent(entry['chance'])} of pairs")  # fmt: skip
            if fractions["found"] >= MOSTLY:
                reading = "a named head is on top in most pairs, well above what a random pick would do"
            elif fractions.get("other_kind", 0) >= MOSTLY:
                reading = ("heads of another named kind are on top in most pairs: the verdict says which kind carries "
                           "this design's change in the block, not how the named heads fare against a random pick")  # fmt: skip
            elif fractions["found"] <= entry["chance"]:
                reading = "no better than a random pick"
            else:
                reading = "a named head is on top in some pairs only"
        frozen = f"; block {entry['block']} heads {', '.join(map(str, fixed))} fixed near 0 by this design" if fixed else ""
        said.append(f"block {entry['block']} ({_heads([[entry['block'], h] for h in entry['named']])} named{frozen}"
                    f"{'; ' + chance if chance else ''}): " + ", ".join(f"{text} in {_percent(value)}" for text, value in verdict_parts(entry, words))
                    + f" of the pairs ({_by_head(report, entry)}); {reading}")  # fmt: skip
    return "; ".join(said) + "."


def score_tie(report: dict, kind: str, block: int, heads: list[int]) -> tuple[int, int] | None:
    """The two highest-scoring of ``heads`` (block ``block``, kind ``kind``) when their attention scores are closer
    than TIE_MARGIN, the margin Lab 06 and the glossary call a tie the rule cannot split; else None."""
    table = report["heads"]["name_scores"][kind]["scores"][block]
    if len(heads) < 2:
        return None
    first, second = sorted(heads, key=lambda h: -table[h])[:2]
    return (first, second) if table[first] - table[second] < TIE_MARGIN else None


def _score(report: dict, kind: str, block: int, head: int) -> str:
    """A head's attention score, with its spread over the held-out sequences where the report has it."""
    table = report["heads"]["name_scores"][kind]
    spread = table.get("spread")
    said = f"{table['scores'][block][head]:.2f}"
    if spread:
        cell = spread[block][head]
        said += f" [{cell['low']:.2f}, {cell['high']:.2f}]"
    return said


def _by_head(report: dict, entry: dict) -> str:
    """Which named head the method puts on top, head by head, beside the order of their attention scores (a tie
    said as one)."""
    table = report["heads"]["name_scores"][entry["kind"]]["scores"][entry["block"]]
    by_score = sorted(entry["named"], key=lambda h: -table[h])
    tie = score_tie(report, entry["kind"], entry["block"], entry["named"])
    return ("on top, head by head: " + ", ".join(f"head {h} {_percent(entry['by_head'][str(h)])}" for h in by_score)
            + "; by attention score: " + ", ".join(f"head {h} {table[h]:.2f}" for h in by_score)
            + (f" (heads {tie[0]} and {tie[1]} closer than {TIE_MARGIN}: a tie)" if tie else ""))


def disagreement_sentence(report: dict) -> str:
    """Where the attention score and the causal methods rank a kind's named heads differently, over the pairs of the
    design that can show that kind; where the scores tie (``score_tie``), no disagreement is said: the causal
    methods' preference pair by pair is. Chosen from the numbers."""
    said, tied = [], []
    spread = "per held-out sequence, 2.5th to 97.5th percentile"
    for kind, named in report["heads"]["named"].items():
        for block in sorted({b for b, _ in named}):
            heads = [h for b, h in named if b == block]
            if len(heads) < 2:
                continue
            table = report["heads"]["name_scores"][kind]["scores"][block]
            by_score = max(heads, key=lambda h: table[h])
            tie = score_tie(report, kind, block, heads)
            for name, measured in report["distribution"]["designs"].items():
                if kind in measured["not_testable"] or not report["designs"][name]["readable"]:
                    continue
                methods = ("denoising", "noising") + (("path_keys",) if block == 0 else ())
                causal = {method: max(heads, key=lambda h: measured["heads"][method]["heads"][block][h]["mean"])
                          for method in methods}  # fmt: skip
                # a ranking is read only where the top mean clears the null pairs' reach for that method and block
                clears = [method for method, head in causal.items()
                          if measured["heads"][method]["heads"][block][head]["mean"] > measured["null"]["heads"][method][block]]
                if tie:
                    entries = {m: measured["heads"][m]["kinds"].get(f"{kind}/{block}") for m in clears}
                    preferred = [(m, max(e["by_head"], key=e["by_head"].get), e) for m, e in entries.items() if e]
                    if not preferred:
                        continue
                    def others(e, h):
                        rest = [f"head {o} in {_percent(v)}" for o, v in e["by_head"].items() if o != h and v]
                        return f" ({', '.join(rest)})" if rest else ""

                    listed = ", ".join(f"{METHOD_NAMES[m]} puts head {h} on top in {_percent(e['by_head'][h])} of the "
                                       f"pairs{others(e, h)}" for m, h, e in preferred)  # fmt: skip
                    first, second = tie
                    intervals = f", the intervals {spread}" if report["heads"]["name_scores"][kind].get("spread") else ""
                    tied.append(f"By attention score block {block}'s {HEAD_KINDS[kind]} heads {first} and {second} tie "
                                f"({_score(report, kind, block, first)} and {_score(report, kind, block, second)}{intervals}; "
                                f"closer than {TIE_MARGIN}, a tie the rule cannot split, as in Lab 06 and the glossary). "
                                f"Pair by pair in the {name.replace('_', '-')} design the causal methods "
                                f"do tell them apart: {listed}")  # fmt: skip
                    continue
                disagree = [method for method in clears if causal[method] != by_score]
                if not disagree:
                    continue
                shares = ", ".join(f"{METHOD_NAMES[m]} head {causal[m]} "
                                   f"{_value(measured['heads'][m]['heads'][block][causal[m]]['mean'])} against head {by_score} "
                                   f"{_value(measured['heads'][m]['heads'][block][by_score]['mean'])}" for m in disagree)  # fmt: skip
                said.append(f"by attention score block {block} head {by_score} is the first {HEAD_KINDS[kind]} head "
                            f"({table[by_score]:.2f}), but in the {name.replace('_', '-')} design the mean shares over the "
                            f"pairs rank another first ({shares}): attention weights say where a head reads, not what "
                            f"its write does")  # fmt: skip
    parts = [sentence + "." for sentence in tied]
    if said:
        parts.append("Where attention scores and causal effects disagree: " + "; ".join(said) + ".")
    if not parts:
        return "Attention scores and causal shares rank the named heads of each kind alike."
    return " ".join(parts)


def outside_sentence(report: dict) -> str:
    """What the heads the mechanism does not name (current-token heads) carry, design by design: a head carries part
    of the gap in a design only where its interval over the pairs excludes 0 and its mean clears the null's reach."""
    named = report["heads"]["named"].get("current_token", [])
    if not named:
        return "No head is named a current-token head."
    scores = report["heads"]["name_scores"]["current_token"]["scores"]
    parts, carry_anywhere = [], False
    for name, measured in report["distribution"]["designs"].items():
        table = measured["heads"]["denoising"]["heads"]
        null = measured["null"]["heads"]["denoising"]
        shares = ", ".join(f"block {b} head {h} {_interval(table[b][h])}" for b, h in named)
        carrying = [(b, h) for b, h in named if table[b][h]["low"] > 0 and table[b][h]["mean"] > null[b]]
        carry_anywhere |= bool(carrying)
        design = name.replace("_", "-")
        if carrying:
            reading = (f"so {_heads(carrying)} {'carries' if len(carrying) == 1 else 'carry'} part of the gap here (an "
                       f"interval above 0 and a mean above the null pairs' reach)")  # fmt: skip
        else:
            reading = "every interval includes 0 or stays within the null pairs' reach, so here they carry nothing this design can tell from 0"
        parts.append(f"in the {design} design their denoising shares are {shares}, {reading}")
    heads = "; ".join(f"block {b} head {h} attends to its own position with weight {scores[b][h]:.2f}" for b, h in named)
    closing = (" Where they carry part of it, the mechanism of Part 1 is not the whole story: a head that attends to "
               "its own position writes something of the token there, which block 1's values can carry to the readout."
               if carry_anywhere else " The named mechanism accounts for the rest.")  # fmt: skip
    return (f"Outside the named mechanism, {heads} (current-token heads). Over the held-out pairs, " + "; ".join(parts)
            + "." + closing)
