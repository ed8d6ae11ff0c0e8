"""Lab 07's sentences about heads over the pairs (Part 6): each verdict against a random pick among the heads the design
can move, attention-score ties in the words of Lab 06 and the glossary (``TIE_MARGIN``) with the causal methods'
preference pair by pair, and what the current-token heads carry. The helpers are ``sentences``'s."""

from __future__ import annotations

import math

from residlab.course.lab07.chance import (
    ASSOCIATION_P, PERMUTATIONS, against_chance, agreement_tail, independent_range, naming_outcome, naming_permutation,
    naming_sentence, rank_association, sign_test, smallest_tail, unreachable_order_words, wilson,
)
from residlab.course.lab07.compare_sentences import null_top_outcome, null_top_sentence
from residlab.course.lab07.size_sentences import size_against_null, size_summary
from residlab.course.lab07.designs import PREDICTED_NEAR_ZERO, by_method_reason
from residlab.course.lab07.predictions import by_method_observed, left_out_caveat
from residlab.course.lab07.distribution import INTERVAL, MEAN_Z, NULL_KINDS, spread_of_differences
from residlab.course.lab07.sentences import MOSTLY, _heads, _percent, _up, _value, most_caveat
from residlab.course.lab07.verdicts import HEAD_KINDS, METHOD_NAMES, complement_of, complement_words, verdict_fractions
from residlab.course.models.induction.sentences import TIE_MARGIN

BELOW = 0.5  # a verdict "below chance": a named head on top in at most this fraction of a random pick's chance
HALF_PAIRS = 0.5  # "in most pairs": at least half of them


def kind_sentence(report: dict, name: str, method: str, kind: str) -> str:
    """Over the pairs, how often the method puts a named head on top of its block, each block's verdict opening with
    its outcome in bold (``kind_verdicts``)."""
    verdicts = kind_verdicts(report, name, method, kind)
    if len(verdicts) == 1 and verdicts[0][2] is None:
        return verdicts[0][1]
    return "; ".join(f"**{outcome}.** {text}" for outcome, text, _ in verdicts) + "."


def kind_verdicts(report: dict, name: str, method: str, kind: str) -> list[tuple[str, str, int | None]]:
    """(outcome, text, block) per block of ``kind`` whose verdict is read: the outcome in a few words, the verdict in
    full; one entry, block None, where the design or the method cannot identify the kind or reaches none of it."""
    measured = report["distribution"]["designs"][name]
    words = report["verdict_words"]
    if kind in measured["not_testable"]:  # the reason is said once, in Part 4 (``designs.not_testable_reason``)
        return [(words["not_testable"], f"{words['not_testable']}: {PREDICTED_NEAR_ZERO} (Part 4 says why)."
                 + by_method_observed(report, name, method, kind), None)]  # the prediction checked, as a method's is
    if kind in measured.get("not_testable_by_method", {}).get(method, ()):
        return [(f"{words['not_testable']} by this method", f"{words['not_testable']} by this method: "
                 f"{by_method_reason(name, method)}.{by_method_observed(report, name, method, kind)}", None)]
    entries = [e for e in measured["heads"][method]["kinds"].values() if e["kind"] == kind]
    if not entries:
        return [("no head it can reach", f"no {HEAD_KINDS[kind]} head this method can reach.", None)]
    said = []
    for entry in entries:
        fractions = entry["fractions"]
        fixed = entry.get("fixed", [])
        other = complement_of(entry)
        if entry["chance"] >= 1:
            chance = ""
            # no test of which head tops the block; where the others are predicted near 0, the model's own null still
            # reads it; the named heads' sizes against the null pairs are a test whatever the design decides
            caveat = left_out_caveat(report, name, method, entry["block"], fixed)
            sizes = size_against_null(entry, measured["heads"][method]["heads"])
            reading = (words["no_test"] + caveat + _one_head_carries(entry)
                       + null_top_sentence(entry, report["distribution"]["pairs"], NULL_KINDS[name]) if fixed else
                       "every head of the block is named, so which head tops it is no test: any head on top is a "
                       "named one") + (f". What they carry (not their role), pair by pair against their own null pairs: {sizes}" if sizes else "")  # fmt: skip
            decided = (f"the mechanism predicts the other heads near 0 {'under this method' if _fixed_by_method(measured, report, method, entry) else 'in this design'}"
                       if fixed else "every head named")
            summary = size_summary(entry, measured["heads"][method]["heads"])
            outcome = (f"Which head tops the block: no test ({decided}); {summary}" if summary else
                       "No test against chance" if fixed else "No test")
        elif other:
            chance = ""
            reading = complement_words(other, entry["block"])
            outcome = "Not a test of its own" + (f"; {sizes}" if (sizes := size_summary(entry, measured["heads"][method].get("heads") or [])) else "")
        else:
            movable, namings = entry.get("movable", len(entry["named"])), naming_permutation(report, name, method, entry)
            chance = (f"a random pick among the {movable} heads the mechanism does not predict near 0 in this design would "
                      f"name one in {_percent(entry['chance'])} of the pairs where a head clears the null bar")  # fmt: skip
            cleared = 1 - fractions["nothing"]
            among = fractions["found"] / cleared if cleared > 0 else 0.0  # the pick's chance is counted where one clears
            pairs = report["distribution"]["pairs"]
            found, base = counts(fractions, pairs)
            if fractions["found"] >= MOSTLY and among > entry["chance"]:
                where = f"; {found} of the {base} pairs where a head clears the null bar" if fractions["nothing"] > 0 else ""
                reading = (f"a named head is on top in most pairs ({_percent(fractions['found'])}, "
                           f"{most_caveat(fractions['found'], pairs)}{where}), above what a random pick would do "
                           f"(a sanity check, for a blind guess is a low bar: {against_chance(found, base, entry['chance'])})"
                           + _one_head_carries(entry))  # fmt: skip
                against_null = null_top_outcome(entry)  # the verdict, the model's null, the random pick
                outcome = (f"A named head on top and above the bar in {_percent(fractions['found'])} of pairs (95 % "
                           f"Wilson {wilson(fractions['found'], pairs)})"
                           + (f"; the bar aside, in {against_null}" if against_null else "")
                           + f"; above a random pick pair by pair ({_percent(entry['chance'])}, a sanity check"
                           + (f"; {naming}" if (naming := naming_outcome(namings)) else "") + ")")  # fmt: skip
            elif fractions.get("other_kind", 0) >= MOSTLY:
                reading = (f"heads of another named kind are on top in most pairs ({_percent(fractions['other_kind'])}, "
                           f"{most_caveat(fractions['other_kind'], pairs)}): the verdict says which kind carries "
                           "this design's change in the block, not how the named heads fare against a random pick")  # fmt: skip
                outcome = "Another named kind on top in most pairs"
            elif fractions["nothing"] >= HALF_PAIRS:
                reading = inconclusive(fractions, report["distribution"]["pairs"])
                outcome = "Inconclusive"
            else:
                counted = (f"among the {base} pairs where a head clears the null bar, a named head is on top in {found} "
                           f"(95 % Wilson {wilson(found / base, base)}): ")  # fmt: skip
                if among <= BELOW * entry["chance"]:
                    reading = counted + ("below chance: heads the rule does not name this kind are on top more often "
                                         "than a random pick would leave them")  # fmt: skip
                    outcome = "Below chance"
                elif among <= entry["chance"]:
                    reading = counted + "no better than a random pick"
                    outcome = "No better than a random pick"
                else:
                    reading = counted + (f"better than a random pick ({against_chance(found, base, entry['chance'])}), "
                                         f"but not in most pairs")
                    outcome = "Above a random pick's rate, not in most pairs"
            shortfall = missed(measured, method, entry)
            reading += f". {shortfall}" if shortfall else ""  # a sentence of its own: the verdict stands as read
            over_namings = naming_sentence(namings, len(entry["named"]))
            reading += "." + over_namings.removesuffix(".") if over_namings else ""  # null_top_sentence ends it
            if not outcome.startswith("A named head on top"):  # the found outcome says both already
                outcome += f" ({naming})" if (naming := naming_outcome(namings)) else ""
                outcome += f"; the bar aside, a named head tops the block in {against}" if (against := null_top_outcome(entry)) else ""
            sizes = size_summary(entry, measured["heads"][method].get("heads") or [])
            outcome += f"; {sizes}" if sizes else ""  # the named heads against their null pairs, as in every cell
            if shortfall:  # attribution misses what the exact patch it estimates finds: said first
                exact = measured["heads"]["denoising"]["kinds"][f"{entry['kind']}/{entry['block']}"]["fractions"]["found"]
                outcome = (f"Misses the named heads the exact patch finds (on top and above the bar in "
                           f"{_percent(fractions['found'])} of pairs against per-head denoising's {_percent(exact)}); "
                           f"against chance: {outcome[0].lower()}{outcome[1:]}")
            reading += null_top_sentence(entry, pairs, NULL_KINDS[name])
        by_method = _fixed_by_method(measured, report, method, entry)
        frozen = (f"; block {entry['block']} heads {', '.join(map(str, fixed))} not identifiable "
                  f"{'by this method' if by_method else 'in this design'}" if fixed else "")  # fmt: skip
        said.append((outcome, f"Block {entry['block']} (heads {', '.join(map(str, entry['named']))} named{frozen}"
                              f"{'; ' + chance if chance else ''}): " + verdict_fractions(entry, words)
                              + f" ({_by_head(report, entry, measured['heads'][method].get('heads'))}); {reading}",
                      entry["block"]))  # fmt: skip
    return said


def _fixed_by_method(measured: dict, report: dict, method: str, entry: dict) -> bool:
    """Whether ``entry``'s ``fixed`` heads are left out by the method, not the design (``UNTESTABLE_BY_METHOD``)."""
    kinds = measured.get("not_testable_by_method", {}).get(method, ())
    left_out = {tuple(head) for k in kinds for head in report["heads"]["named"].get(k, [])}
    return any((entry["block"], h) in left_out for h in entry.get("fixed", []))


CARRIES = 0.75  # one named head "carries" a verdict when it is on top in at least this share of the pairs found


def _one_head_carries(entry: dict) -> str:
    """Where one named head tops most pairs a named head tops, the verdict is mostly that head's, said so."""
    by_head = {int(head): fraction for head, fraction in entry.get("by_head", {}).items()}
    found = entry.get("fractions", {}).get("found", 0)
    if len(by_head) < 2 or not found:
        return ""
    head = max(by_head, key=by_head.get)
    if by_head[head] < CARRIES * found:
        return ""
    others = ", ".join(f"head {entry['block']}.{other} in {_percent(by_head[other])}" for other in sorted(by_head) if other != head)
    return (f"; it is mostly head {entry['block']}.{head}'s (on top in {_percent(by_head[head])} of the pairs; {others}), "
            f"so it says little of the other named {'head' if len(by_head) == 2 else 'heads'}")


def missed(measured: dict, method: str, entry: dict) -> str:
    """For attribution, an estimate of per-head denoising: where the exact patch puts a named head on top in most pairs
    and attribution does not, the miss, with both fractions; else ""."""
    if method != "attribution" or entry["fractions"]["found"] >= MOSTLY:
        return ""
    exact = measured["heads"]["denoising"]["kinds"].get(f"{entry['kind']}/{entry['block']}")
    if not exact or exact["fractions"]["found"] < MOSTLY:
        return ""
    return (f"Beside the exact patch it estimates: per-head denoising puts a named head on top in "
            f"{_percent(exact['fractions']['found'])} of pairs, attribution in {_percent(entry['fractions']['found'])}, "
            f"so here the first-order estimate misses the {HEAD_KINDS[entry['kind']]} heads the exact patch finds (Part 5 "
            f"gives its error head by head)")


def counts(fractions: dict, pairs: int) -> tuple[int, int]:
    """(pairs with a named head on top, pairs where a head clears the null bar), from a verdict's fractions."""
    cleared = round((1 - fractions["nothing"]) * pairs)
    return min(round(fractions["found"] * pairs), cleared), cleared


def inconclusive(fractions: dict, pairs: int) -> str:
    """A verdict whose pairs mostly have no head clearing the null bar, read among the pairs where one does (a
    random pick need not clear the null, so it is no yardstick there)."""
    found, cleared = counts(fractions, pairs)
    said = f"inconclusive: no head clears the null bar in {_percent(fractions['nothing'])} of pairs"
    if cleared == 0:
        return f"{said}, so there is no pair where one does to read"
    return (f"{said}; among the pairs where one does, a named head is on top in {found} of {cleared} (95 % Wilson "
            f"{wilson(found / cleared, cleared)})")


def score_tie(report: dict, kind: str, block: int, heads: list[int]) -> tuple[int, int] | None:
    """The two highest-scoring of ``heads`` (block ``block``, kind ``kind``) when their attention scores are closer
    than TIE_MARGIN, the margin Lab 06 and the glossary call a tie the rule cannot split; else None."""
    table = report["heads"]["name_scores"][kind]["scores"][block]
    if len(heads) < 2:
        return None
    first, second = sorted(heads, key=lambda h: -table[h])[:2]
    return (first, second) if table[first] - table[second] < TIE_MARGIN else None


def _score(report: dict, kind: str, block: int, head: int) -> str:
    """A head's attention score, with its spread over the naming sequences where the report has it."""
    table = report["heads"]["name_scores"][kind]
    spread = table.get("spread")
    said = f"{table['scores'][block][head]:.3f}"  # a tie is said with three decimals, as Lab 06 says it
    if spread:
        cell = spread[block][head]
        said += f" [{cell['low']:.3f}, {cell['high']:.3f}]"
    return said


def _score_spread_words(table: dict) -> str:
    """What the intervals beside attention scores are: per naming sequence, every period's sequences pooled."""
    spread = table.get("spread")
    if not spread:
        return ""
    periods = table["spread_periods"]
    return (f", the intervals {INTERVAL[0]:g}th to {INTERVAL[1]:g}th percentile per naming sequence over {spread[0][0]['pairs']} sequences, "
            f"{len(periods)} periods ({min(periods)} to {max(periods)}) pooled")


def _by_head(report: dict, entry: dict, heads: list | None = None) -> str:
    """Which named head the method puts on top, head by head, and how often each clears the null bar (``heads``: the
    method's per-head table, where given), in the order of their attention scores (``score_order_sentence`` gives
    the scores once, above the table): a verdict that merges the named heads is taken apart here."""
    by_score = _by_score(report, entry["kind"], entry["block"], entry["named"])
    cells = [heads[entry["block"]][h] for h in by_score] if heads else []
    clears = ("; above the null bar, head by head: " + ", ".join(
        f"head {h} {_percent(cell['clears_fraction'])}" for h, cell in zip(by_score, cells))
        if cells and all("clears_fraction" in cell for cell in cells) else "")  # fmt: skip
    return "on top, head by head: " + ", ".join(f"head {h} {_percent(entry['by_head'][str(h)])}" for h in by_score) + clears


def _by_score(report: dict, kind: str, block: int, named: list[int]) -> list[int]:
    """The named heads of one kind and block, highest attention score first."""
    table = report["heads"]["name_scores"][kind]["scores"][block]
    return sorted(named, key=lambda h: -table[h])


def score_order_sentence(report: dict) -> str:
    """The named heads' attention scores per kind and block, in score order, every neighbouring pair within
    TIE_MARGIN marked as a tie: the order Part 6's verdict cells list their heads in."""
    said, extended, any_tie = [], False, False
    for kind, heads in report["heads"]["named"].items():
        for block in sorted({b for b, _ in heads}):
            table = report["heads"]["name_scores"][kind]["scores"][block]
            by_score = _by_score(report, kind, block, [h for b, h in heads if b == block])
            ties = [(a, b) for a, b in zip(by_score, by_score[1:]) if table[a] - table[b] < TIE_MARGIN]
            extended |= bool(ties) and ties != [tuple(by_score[:2])]
            any_tie |= bool(ties)
            tied = f" (tied: {', '.join(f'heads {a} and {b}' for a, b in ties)})" if ties else ""
            said.append(f"block {block}'s {HEAD_KINDS[kind]} heads, " + ", ".join(f"head {h} {table[h]:.3f}" for h in by_score) + tied)
    if not said:
        return ""
    where = ", here applied to each neighbouring pair in score order" if extended else ""
    return (f"The verdicts below list a block's named heads in the order of their attention scores (Part 1): "
            f"{'; '.join(said)}. Two heads tie when their scores are within {TIE_MARGIN} on average, the tie threshold "
            f"of Lab 06's and the glossary's highest-score rule{where}{_other_draw(report)}"
            + (": a tie of the mean scores, not pair by pair (below, the tied heads' scores are set side by side pair "
               "by pair, where one can be reliably the higher)." if any_tie else "."))


def score_draw_gap(report: dict) -> float | None:
    """How far the scores Lab 06 and the glossary print (``heads.scores``, held-out sequences) lie from this page's
    (the naming draw) at most, over the named heads of the kinds both score; None where the report has only one."""
    theirs = report["heads"].get("scores", {})
    gaps = [abs(theirs[kind][block][head] - report["heads"]["name_scores"][kind]["scores"][block][head])
            for kind, heads in report["heads"]["named"].items() if kind in theirs for block, head in heads]
    return max(gaps) if gaps else None


def _other_draw(report: dict) -> str:
    gap = score_draw_gap(report)
    if gap is None:
        return ""
    return (f" (Lab 06 and the glossary score the same heads on the held-out sequences, this page on its own naming "
            f"draw, so a head's two scores differ, here by at most {_up(gap, 1)})")


def _pair_by_pair(report: dict, name: str, kind: str, block: int, tie: tuple[int, int], methods: list[str]) -> str:
    """Two heads whose attention scores tie, set side by side pair by pair on the pairs' own sequences
    (``pair_sequences``: the sequences the pairs are built from): in how many pairs each head's score is the higher
    and, per method, in how many the other head's share is the larger and in how many the method orders the two as
    their scores do, against what orders drawn independently with the same margins give (``independent_range``);
    then by size, the rank correlation of the score difference with the share difference and its permutation p
    (``rank_association``). "" where the report has no per-sequence scores or no method clears the null."""
    measured = report["distribution"]["designs"][name]
    per_sequence = report["heads"]["name_scores"][kind].get("pair_sequences")
    if not per_sequence or not methods:
        return ""
    first, second = tie
    pairs = len(measured["per_pair"]["gap"])
    scores = per_sequence[block]
    score_gap = [scores[second][p] - scores[first][p] for p in range(pairs)]
    score_first = [gap < 0 for gap in score_gap]
    said, tails, ranks, shares_first = [], [], [], []
    for method in methods:
        grids = measured["per_pair"]["heads"][method]
        share_gap = [grids[p][block][second] - grids[p][block][first] for p in range(pairs)]
        share_first = [gap < 0 for gap in share_gap]
        shares_first.append(sum(share_first))
        larger = first if sum(share_first) * 2 >= pairs else second
        count = sum(share_first) if larger == first else pairs - sum(share_first)
        agree = sum(a == b for a, b in zip(score_first, share_first))
        most = pairs - abs(sum(score_first) - sum(share_first))  # the fewer "head first first" pairs all among the other's
        low, high = independent_range(pairs, sum(score_first), sum(share_first))
        rho, p_value = rank_association(score_gap, share_gap)
        tails.append((METHOD_NAMES[method], agreement_tail(pairs, sum(score_first), sum(share_first), agree),
                      smallest_tail(pairs, sum(score_first), sum(share_first))))
        ranks.append((METHOD_NAMES[method], rho, p_value))
        said.append(f"{METHOD_NAMES[method]} gives head {larger} the larger share in {count}, ordering the two as their "
                    f"scores do in {agree}{', the most these counts allow' if agree == most else ''} (independent orders "
                    f"with these counts: {low} to {high}, a two-sided 95 % range{'; above it' if agree > high else ''}), the two "
                    f"differences' rank correlation ρ = {rho:.2f} (two-sided permutation p = {p_value:.2g}, "
                    f"{PERMUTATIONS:,} permutations, Monte Carlo error about "
                    f"{math.sqrt(max(p_value * (1 - p_value), 1e-12) / PERMUTATIONS):.1g})")  # fmt: skip
    intervals = _score_spread_words(report["heads"]["name_scores"][kind])
    higher = sum(score_first)
    # Bonferroni over the tests that could reject: every rank test, and each order test whose margins allow a p below
    # the strictest bar (one whose most agreement possible is not rare under independent orders is no test)
    able = [(method, tail) for method, tail, least in tails if least < ASSOCIATION_P / (2 * len(methods))]
    unable = [least for _, _, least in tails if least >= ASSOCIATION_P / (2 * len(methods))]
    tests = len(ranks) + len(able)
    bar = ASSOCIATION_P / tests
    counted = f"a Bonferroni correction over the {tests} tests here" + (", the order tests that could not reject left out" if unable else "")
    beyond = [method for method, tail in able if tail < bar]
    listed = ", ".join(f"{tail:.2f}" for _, tail in able)
    if not able:  # no order test could pass the corrected bar; what the observed agreement is, said as it is
        by_order = unreachable_order_words(tails, len(ranks) + len(tails))
    elif beyond:
        by_order = (f"by order, {' and '.join(beyond)} agree{'s' if len(beyond) == 1 else ''} with the scores more often "
                    f"than independent orders would (one-sided p {listed}, against {bar:.3f}, {counted})")  # fmt: skip
    else:
        by_order = (f"by order, no method agrees with the scores detectably more often than independent orders would "
                    f"(one-sided p {listed}, none below {bar:.3f}"
                    + ("; one below 0.05 uncorrected: a lean, not a finding)" if any(tail < ASSOCIATION_P for _, tail in able)
                       else ")"))  # fmt: skip
    # a p within two Monte Carlo errors of the bar is undecided by these permutations: said apart, not read either way
    undecided = [(method, rho, p_value) for method, rho, p_value in ranks
                 if abs(p_value - bar) < 2 * math.sqrt(p_value * (1 - p_value) / PERMUTATIONS)]  # fmt: skip
    sized = [f"{method} (ρ = {rho:.2f})" for method, rho, p_value in ranks
             if p_value < bar and (method, rho, p_value) not in undecided]  # fmt: skip
    by_size = (f"by size, the pairs where head {second}'s score minus head {first}'s is larger are those where its share "
               f"minus head {first}'s is larger for {', '.join(sized)}, a modest association (permutation p below "
               f"{ASSOCIATION_P} / {tests}, {counted})"
               if sized else f"by size, no method's share difference follows the score difference beyond chance "
                             f"(permutation p against {bar:.3f}, {counted})")  # fmt: skip
    if undecided:
        by_size += "; " + ", ".join(f"{method} (ρ = {rho:.2f}, p = {p_value:.3f})" for method, rho, p_value in undecided) + (
            f" {'is' if len(undecided) == 1 else 'are'} undecided: p within two Monte Carlo errors of the bar "
            f"({bar:.4f}), so not read either way")  # fmt: skip
    # head first's score minus head second's, sequence by sequence: its mean and the mean's interval
    difference = spread_of_differences([-gap for gap in score_gap])
    mean, (low, high) = difference["mean"], difference["mean_interval"]
    p_sign = sign_test(higher, pairs)
    said_p = "p < 0.001" if p_sign < 0.001 else f"p = {p_sign:.3f}"
    paired = (f" (two-sided exact sign test {said_p}; the mean paired score difference is {mean:.3f} ± "
              f"{(high - low) / 2:.3f}, {MEAN_Z:.2f} standard errors)")  # fmt: skip
    apart = p_sign < ASSOCIATION_P and not low <= 0 <= high
    span = lambda counts: f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)} to {max(counts)}"  # noqa: E731
    if not apart:  # the scores tie pair by pair too: no score order for the methods to follow or reverse
        favoured, counts = ((second, [pairs - c for c in shares_first]) if sum(shares_first) * 2 < pairs * len(shares_first)
                            else (first, shares_first))  # fmt: skip
        order = (f"So pair by pair the scores do not order the two reliably either, while the methods give head "
                 f"{favoured}'s share the larger in {span(counts)} of the {pairs} pairs. ")
    elif higher * 2 == pairs:
        order = ""  # the scores split the pairs evenly: no order to follow or reverse
    else:
        order = f"So pair by pair the scores are ordered after all: head {first if higher * 2 > pairs else second}'s is reliably the higher; "
        leader, other = (first, second) if higher * 2 > pairs else (second, first)
        led = [count if leader == first else pairs - count for count in shares_first]  # pairs where leader's share is larger
        if all(count * 2 < pairs for count in led):
            order += (f"in the counts the methods reverse the score order: head {other}'s share is the larger in "
                      f"{span([pairs - count for count in led])} of the {pairs} pairs though its score is the lower in "
                      f"{higher if leader == first else pairs - higher} of them (pair by pair, how the two orders line "
                      f"up is read below, not from these counts). ")
        elif all(count * 2 > pairs for count in led):
            order += f"the methods follow the score order: head {leader}'s share is the larger in {span(led)} of the {pairs} pairs. "
        else:
            order += "the methods do not agree on which head's share is the larger. "
    return (f"By mean attention score block {block}'s {HEAD_KINDS[kind]} heads {first} and {second} are within "
            f"{TIE_MARGIN} of each other ({_score(report, kind, block, first)} and {_score(report, kind, block, second)}"
            f"{intervals}), the tie threshold of Lab 06's and the glossary's highest-score rule, which cannot split them, "
            f"while Part 1's rule names both. Set side by side pair by pair, on the {pairs} sequences of period "
            f"{report['distribution']['period']} the {name.replace('_', '-')} pairs are built from: head {first}'s score "
            f"is the higher in {higher} of {pairs} and head {second}'s in {pairs - higher}{paired}; " + "; ".join(said)
            + f". {order}Beyond that, {by_order}; {by_size}. The score "
            "averages a head's attention over every position, not only those the design changes"
            + (f"; and the {len(said)} methods share one trained model and these pairs, so where they agree that is not "
               f"{len(said)} replications" if len(said) > 1 else ""))  # fmt: skip


def disagreement_sentence(report: dict) -> str:
    """Where the attention score and the causal methods rank a kind's named heads differently, over the pairs of the
    design that can show that kind; where the scores tie (``score_tie``), no disagreement is said: the causal
    methods' preference pair by pair is. Chosen from the numbers."""
    said, tied = [], []
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
                # a ranking is read only where the top mean clears the null bar for that method and block
                clears = [method for method, head in causal.items()
                          if measured["heads"][method]["heads"][block][head]["mean"] > measured["null"]["heads"][method][block]]
                if tie:
                    matched = _pair_by_pair(report, name, kind, block, tie, clears)
                    if matched:
                        tied.append(matched)
                    continue
                disagree = [method for method in clears if causal[method] != by_score]
                if not disagree:
                    continue
                shares = ", ".join(f"{METHOD_NAMES[m]} head {causal[m]} "
                                   f"{_value(measured['heads'][m]['heads'][block][causal[m]]['mean'])} against head {by_score} "
                                   f"{_value(measured['heads'][m]['heads'][block][by_score]['mean'])}" for m in disagree)  # fmt: skip
                said.append(f"by attention score block {block} head {by_score} is the first {HEAD_KINDS[kind]} head "
                            f"({table[by_score]:.3f}), but in the {name.replace('_', '-')} design the mean shares over the "
                            f"pairs rank another first ({shares}): attention weights say where a head reads, not what "
                            f"its write does")  # fmt: skip
    parts = [sentence + "." for sentence in tied]
    if said:
        parts.append("Where attention scores and causal effects disagree: " + "; ".join(said) + ".")
    if not parts:
        return "Attention scores and causal shares rank the named heads of each kind alike."
    return " ".join(parts)


def all_named_sentence(report: dict) -> str:
    """Where the rule names every head of a block one kind (so which is on top is no test), what the heads carry by
    per-head denoising over the pairs, design by design: the score names them alike; the means say whether they
    carry alike (the largest mean against the smallest), one sentence per such block. "" where no block is named
    whole."""
    sentences = []
    for kind, named in report["heads"]["named"].items():
        for block in sorted({b for b, _ in named}):
            heads = [h for b, h in named if b == block]
            scores = report["heads"]["name_scores"][kind]["scores"][block]
            said, differ = [], []
            if len(heads) != len(scores):
                continue
            for name, measured in report["distribution"]["designs"].items():
                if kind in measured["not_testable"] or not report["designs"][name]["readable"]:
                    continue
                table = measured["heads"]["denoising"]["heads"][block]
                means = {h: table[h]["mean"] for h in heads}
                top, low = max(means, key=means.get), min(means, key=means.get)
                listed = ", ".join(f"head {block}.{h} {_value(means[h])}" for h in heads)
                alike = means[top] - means[low] < HALF_PAIRS * abs(means[top]) or means[top] <= 0
                differ.append(not alike)
                said.append(f"in the {name.replace('_', '-')} design per-head denoising gives {listed} on average"
                            + ("" if alike else f", shares that differ by up to {_value(means[top] - means[low])}"))  # fmt: skip
            if said:
                reading = (": the rule gives one name to heads whose causal shares differ." if any(differ) else
                           "; their causal shares are alike too.")  # fmt: skip
                sentences.append(f"Every head of block {block} scores as {HEAD_KINDS[kind]} ({min(scores):.3f} to "
                                 f"{max(scores):.3f}), so which one a method puts on top is no test of the rule; "
                                 + "; ".join(said) + reading)  # fmt: skip
    return " ".join(sentences)


def outside_sentence(report: dict) -> str:
    """What the heads the mechanism does not name (current-token heads) carry, design by design, head by head: the
    mean share over the pairs, the fraction of pairs in which it is above 0 and the fraction in which it clears the
    null bar (both from ``distribution.head_table``); a head carries part of the gap in a design where it
    clears the null in most pairs (``MOSTLY``)."""
    named = report["heads"]["named"].get("current_token", [])
    if not named:
        return "No head is named a current-token head."
    scores = report["heads"]["name_scores"]["current_token"]["scores"]
    parts, carry_anywhere = [], False
    for name, measured in report["distribution"]["designs"].items():
        table = measured["heads"]["denoising"]["heads"]
        said = [_head_reading(b, h, table[b][h]) for b, h in named]
        carry_anywhere |= any(table[b][h]["clears_fraction"] >= MOSTLY for b, h in named)
        parts.append(f"in the {name.replace('_', '-')} design (denoising), " + "; ".join(said))
    heads = "; ".join(f"block {b} head {h} attends to its own position with weight {scores[b][h]:.3f} on average" for b, h in named)
    closing = (" How they carry it is not measured head by head on this page. One reading the numbers allow, untested "
               "here: a head that attends to its own position writes that position's token into the stream, and block "
               "1's values, which read the position the induction head attends to, carry it to the readout beside the "
               "token's own embedding, a part of Part 1's copying step rather than another mechanism; path patching of "
               "each such head into block 1's values alone (Part 4 does it for the whole write) would test it."
               if carry_anywhere else
               " No current-token head clears the null bar in most pairs; a head above 0 in most pairs is a "
               "consistent lean that this design cannot tell, pair by pair, from what the null pairs give.")  # fmt: skip
    return (f"Not named by the mechanism, {heads} (current-token heads). Over the held-out pairs, " + "; ".join(parts)
            + "." + closing)


def _head_reading(block: int, head: int, entry: dict) -> str:
    """One head's share over the pairs, read from the fraction of pairs above 0 and the fraction clearing the null."""
    positive, clears = entry["positive_fraction"], entry["clears_fraction"]
    largest = entry.get("clears_largest_fraction")
    beside = f", above the null pairs' largest in {_percent(largest)}" if largest is not None else ""
    said = (f"block {block} head {head} carries {_value(entry['mean'])} on average (above 0 in {_percent(positive)} of "
            f"pairs, above the null bar in {_percent(clears)}{beside})")  # fmt: skip
    pairs = entry.get("pairs")

    def most(fraction):  # a "most pairs" reading is a point estimate: its Wilson interval beside it
        return f" ({most_caveat(fraction, pairs)})" if pairs else ""

    if clears >= MOSTLY:
        return said + f": part of the gap, above the null bar in most pairs{most(clears)}"
    if positive >= MOSTLY:
        return (said + f": above 0 in most pairs{most(positive)}, but above the null bar in fewer than the "
                f"{_percent(MOSTLY)} this page calls most")
    return said + f": not above the null bar in {_percent(1 - clears)} of pairs"
