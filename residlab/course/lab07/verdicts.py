"""The words of Lab 07's verdicts, one table read by the page and by the runner alike: the head kinds and the
methods as both name them, what each verdict over the pairs says (``VERDICT_WORDS``, ``verdict_parts``), how a
fraction is written (``percent``), and when a kind's verdict is no test of its own but the complement of a mechanism
kind's (``complement_of``, ``complement_words``)."""

from __future__ import annotations

HEAD_KINDS = {"previous_token": "previous-token", "current_token": "current-token", "induction": "induction"}
METHOD_NAMES = {"denoising": "per-head denoising", "noising": "per-head noising", "attribution": "attribution",
                "path_keys": "path patching into block 1's keys"}  # the page's and the runner's names of HEAD_METHODS
# The one table of the words a verdict is said in, read by the page and by the runner alike.
# "{kind}": the kind the verdict is about; "{others}": the other named kinds whose heads were on top.
VERDICT_WORDS = {
    "found": "a named head on top",
    "other_kind": "a head of another named kind ({others}) on top",
    "unnamed": "a head the rule names no kind on top",
    "nothing": "no head above the null bar",
    "not_testable": "not identifiable",
    "no_test": "no test against chance: the block's other heads are not identifiable here (the mechanism predicts them near 0)",
}
VERDICTS = ("found", "other_kind", "unnamed", "nothing")  # the keys of a verdict's fractions, in the page's order
MECHANISM_KINDS = ("previous_token", "induction")  # the kinds the induction mechanism names


def percent(fraction: float) -> str:
    """A fraction as the page and the runner write it: a whole percent, a space before the sign."""
    return f"{fraction:.0%}".replace("%", " %")


def complement_of(entry: dict) -> str | None:
    """The mechanism kind whose verdict a verdict entry (``head_table``'s kinds) merely complements, or None: a kind
    the mechanism does not name, in a block whose every head the mechanism does not predict near 0 is named either it or that one mechanism
    kind, so that "a named head on top" is the other verdict's "a head of another named kind on top" (no test of its
    own)."""
    owners = entry.get("owner_kinds", [])
    if entry["kind"] in MECHANISM_KINDS or entry.get("unnamed_heads", 1) or len(owners) != 1 or entry["chance"] >= 1:
        return None
    return owners[0] if owners[0] in MECHANISM_KINDS else None


def complement_words(other: str, block: int) -> str:
    """What a verdict that merely complements the ``other`` kind's is (``complement_of``), in the words the page and
    the runner share."""
    return (f"no test of its own: the complement of the {HEAD_KINDS[other]} heads' verdict (every head of block {block} "
            f"the mechanism does not predict near 0 is named one kind or the other, and the mechanism names only the {HEAD_KINDS[other]} heads)")


def verdict_parts(entry: dict, words: dict) -> list[tuple[str, float]]:
    """(words, fraction of pairs) of each verdict of a kinds entry (``head_table``), in the words the page and the
    runner both say: the kind and the other named kinds filled in; another named kind left out when none was on top,
    and a head the rule names no kind left out where the block has none (0 by construction)."""
    others = ", ".join(HEAD_KINDS[other] for other in entry.get("other_kinds", []))
    return [(words[key].format(kind=HEAD_KINDS[entry["kind"]], others=others), value)
            for key, value in entry["fractions"].items()
            if (key != "other_kind" or value) and (key != "unnamed" or entry.get("unnamed_heads", 1))]


def verdict_fractions(entry: dict, words: dict) -> str:
    """A kinds entry's verdicts over the pairs in one phrase, fraction first ("of the pairs, 97 % with a named head
    on top, ..."), as the page and the runner both print it."""
    return "of the pairs, " + ", ".join(f"{percent(value)} with {text}" for text, value in verdict_parts(entry, words))
