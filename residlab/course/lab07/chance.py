"""The chance models Lab 07's page reads its counts against, each computed exactly or from a fixed seed: the Wilson
interval of a fraction of pairs (``wilson``), the range of agreements two orders drawn independently with fixed
margins give, its one-sided tail and the smallest tail those margins allow (``independent_range``,
``agreement_tail``, ``smallest_tail``: hypergeometric), a paired order's exact sign test (``sign_test``), a rank
correlation with its permutation p (``rank_association``), and where the null bar, a percentile of the null pairs'
values, sits among them (``null_bar_position``, ``null_bar_exceeded``)."""

from __future__ import annotations

import itertools
import math

from residlab.course.lab07.distribution import BAR_RESAMPLES, INTERVAL, MEAN_Z, NULL_POSITION
from residlab.course.lab07.predictions import higher_p
from residlab.course.lab07.verdicts import METHOD_NAMES, percent

def wilson_bounds(fraction: float, pairs: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of a fraction of ``pairs`` pairs."""
    z = MEAN_Z  # the same 95 % normal quantile as a mean's interval
    centre = (fraction + z * z / (2 * pairs)) / (1 + z * z / pairs)
    half = z * math.sqrt(fraction * (1 - fraction) / pairs + z * z / (4 * pairs * pairs)) / (1 + z * z / pairs)
    return centre - half, centre + half


def wilson(fraction: float, pairs: int) -> str:
    """``wilson_bounds`` outward rounded to tenths of a percent (so 99.1 % is not shown as a certain 100 %)."""
    low, high = wilson_bounds(fraction, pairs)
    return f"[{max(0.0, math.floor(low * 1000) / 10):.1f} %, {min(100.0, math.ceil(high * 1000) / 10):.1f} %]"


ASSOCIATION_P = 0.05  # a rank association is read when its permutation p is below this over the methods (Bonferroni)
PERMUTATIONS = 50_000  # the permutation test's draws, from a fixed seed so every build gives the same p; at p near
# the Bonferroni bars here its Monte Carlo error is about 0.0005


def independent_range(pairs: int, first_by_score: int, first_by_share: int, mass: float = 0.95) -> tuple[int, int]:
    """The central range (equal tails, each at most (1 - mass) / 2) of the pairs in which two orders agree when they
    are drawn independently with these margins (``_agreement_law``)."""
    weights = _agreement_law(pairs, first_by_score, first_by_share)
    tail = (1 - mass) / 2
    low = next(agree for i, (agree, _) in enumerate(weights) if sum(w for _, w in weights[: i + 1]) > tail)
    high = next(agree for i, (agree, _) in reversed(list(enumerate(weights))) if sum(w for _, w in weights[i:]) > tail)
    return low, high


def agreement_tail(pairs: int, first_by_score: int, first_by_share: int, observed: int) -> float:
    """P(agreement >= observed) for orders drawn independently with these margins (``independent_range``'s law)."""
    return sum(weight for agree, weight in _agreement_law(pairs, first_by_score, first_by_share) if agree >= observed)


def smallest_tail(pairs: int, first_by_score: int, first_by_share: int) -> float:
    """The smallest one-sided p ``agreement_tail`` can give with these margins (at the most agreement they allow): a
    test whose smallest p is above its bar could not have rejected, whatever the orders."""
    most = _agreement_law(pairs, first_by_score, first_by_share)[-1][0]
    return agreement_tail(pairs, first_by_score, first_by_share, most)


def unreachable_order_words(tails: list[tuple[str, float, float]], tests: int) -> str:
    """The order tests that no margin lets pass a Bonferroni bar over ``tests`` tests, read for what they show:
    ``tails``, per method (name, observed one-sided p, the least p its margins allow). Where the agreement is the most
    the counts allow, that is said, with its p; either way the orders are not read as linked (an uncorrected p below 0.05
    on one draw's pairs need not hold on another's)."""
    at_most = [method for method, tail, least in tails if tail <= least]
    where = "in every method" if len(at_most) == len(tails) else f"for {' and '.join(at_most)}"
    observed_p = ", ".join(f"{tail:.3f}" for _, tail, _ in tails)
    lead = (f"by order, the agreement is the most these counts allow {where} (one-sided p {observed_p} under independent "
            f"orders), " if at_most else f"by order, the one-sided p of agreement under independent orders is {observed_p}; ")
    return (f"{lead}yet no order test here could pass a Bonferroni bar over the {tests} tests ({ASSOCIATION_P / tests:.3f}: even "
            f"the most agreement possible has p {min(least for _, _, least in tails):.2f} or more), and the tests share "
            f"their pairs, so the orders are not read as linked (an uncorrected p below 0.05 on one draw's pairs is no finding)")


def _agreement_law(pairs: int, first_by_score: int, first_by_share: int) -> list[tuple[int, float]]:
    """(agreement, probability) in increasing order for two orders drawn independently with these margins: the pairs
    where both put the first head first are hypergeometric, and agreement is pairs - both margins + twice that."""
    total = math.comb(pairs, first_by_share)
    support = range(max(0, first_by_score + first_by_share - pairs), min(first_by_score, first_by_share) + 1)
    return [(pairs - first_by_score - first_by_share + 2 * k,
             math.comb(first_by_score, k) * math.comb(pairs - first_by_score, first_by_share - k) / total) for k in support]


def sign_test(first: int, pairs: int) -> float:
    """Two-sided exact sign test: P(a fair coin's count is at least as far from pairs / 2 as ``first``), at most 1."""
    return min(1.0, 2 * higher_p(max(first, pairs - first), min(first, pairs - first)))


def rank_association(x: list[float], y: list[float], permutations: int = PERMUTATIONS, seed: int = 0) -> tuple[float, float]:
    """Spearman's rank correlation of ``x`` and ``y`` (ties ranked by their average) and its two-sided permutation p
    ((count of |permuted rho| >= |rho|, plus 1) / (permutations + 1))."""
    import torch

    def ranks(values):
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for index in order[i : j + 1]:
                out[index] = (i + j) / 2
            i = j + 1
        return out

    def pearson(a, b):
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        cov = sum((u - ma) * (v - mb) for u, v in zip(a, b))
        spread = math.sqrt(sum((u - ma) ** 2 for u in a) * sum((v - mb) ** 2 for v in b))
        return cov / spread if spread else 0.0

    rx, ry = ranks(x), ranks(y)
    rho = pearson(rx, ry)
    # every permutation at once: row i of ``shuffled`` is ry in the order of a seeded random permutation
    generator = torch.Generator().manual_seed(seed)
    orders = torch.argsort(torch.rand(permutations, len(ry), generator=generator, dtype=torch.float64), dim=1)
    centred_x = torch.tensor(rx, dtype=torch.float64) - sum(rx) / len(rx)
    shuffled = torch.tensor(ry, dtype=torch.float64)[orders] - sum(ry) / len(ry)
    spread = math.sqrt(float((centred_x ** 2).sum()) * float((shuffled[0] ** 2).sum()))
    permuted = (shuffled @ centred_x) / spread if spread else torch.zeros(permutations, dtype=torch.float64)
    beyond = int((permuted.abs() >= abs(rho) - 1e-12).sum())
    return rho, (beyond + 1) / (permutations + 1)


def _nth_largest(rank: int) -> str:
    suffix = "th" if 10 <= rank % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(rank % 10, "th")
    return "largest" if rank == 1 else f"{rank}{suffix} largest"


def null_bar_position(pairs: int) -> str:
    """Where the null bar (``NULL_BAR``, the linear-interpolation percentile ``torch.quantile`` takes over ``pairs``
    values) lies among the null pairs' values, counted from the top."""
    position = INTERVAL[1] / 100 * (pairs - 1)  # 0-based, ascending
    below, above = pairs - math.floor(position), pairs - math.ceil(position)  # ranks from the top
    if below == above:
        return f"at the {_nth_largest(below)} of those values"
    nearer = below if position - math.floor(position) < 0.5 else above
    return (f"between the {_nth_largest(below)} and the {_nth_largest(above)} of those values, nearer the "
            f"{_nth_largest(nearer)}")


def null_bar_count(pairs: int) -> int:
    """In how many of ``pairs`` null pairs some head of the block clears the null bar (``null_bar_position``): the
    values above the interpolated percentile, ties aside."""
    return pairs - 1 - math.floor(INTERVAL[1] / 100 * (pairs - 1))


def bar_range_sentence(report: dict, name: str = "matched_position", method: str = "denoising") -> str:
    """How far one draw's null bar could lie from another's (``null.heads_bar_range``: the null pairs resampled), for
    ``method`` in design ``name``, block by block; "" for a report without it."""
    null = report["distribution"]["designs"][name]["null"]
    if "heads_bar_range" not in null:
        return ""
    bars, ranges = null["heads"][method], null["heads_bar_range"][method]
    listed = " and ".join(f"block {block}'s {bar:.3f} between {low:.3f} and {high:.3f}"
                          for block, (bar, (low, high)) in enumerate(zip(bars, ranges)))  # fmt: skip
    largest = null["heads_largest"][method]
    return (f"Resampling the null pairs gives a rough range for another draw's bar, which understates how far it can move: for "
            f"{METHOD_NAMES[method]} in the {name.replace('_', '-')} design, {listed} (the middle 95 % of the bar over "
            f"{BAR_RESAMPLES:,} resamples). A resample cannot go past this draw's largest value ("
            + ", ".join(f"block {block}'s {entry['largest']:.3f}" for block, entry in enumerate(largest))
            + "), so another draw's bar can lie outside this range, most readily above it. Every fraction counted "
            f"against a bar moves with it, the verdicts' included, and its Wilson interval covers the sampling of pairs under this draw's bar only; so "
            f"a named head's size is tested pair by pair instead, against its share on the held-out pair's own null "
            f"pair, which no bar enters (Part 6), and the summary above counts nothing against the bar.")


def null_bar_exceeded(pairs: int) -> str:
    """``null_bar_count`` in words."""
    above = null_bar_count(pairs)
    return f"{above} of the {pairs} null pairs ({percent(above / pairs)}, ties aside)"


def against_chance(found: int, base: int, rate: float) -> str:
    """``found`` of ``base`` pairs against the random pick's ``rate``, in words, with no p: the pairs are not the unit
    chance acts on (the rule names the heads once per model; ``naming_permutation`` is the test over namings)."""
    return (f"{found} of {base} against {percent(rate)} for a blind pick, with no p, for the pairs are not what chance "
            f"acts on: the rule names the heads once per model")


def fraction_uncertainty(pairs: int) -> str:
    """How uncertain a fraction of ``pairs`` pairs is: the 95 % Wilson interval at the counts nearest 50 % and 95 %."""
    half, most = round(pairs / 2), round(0.95 * pairs)
    return (f"at {pairs} pairs, {half} of them ({percent(half / pairs)}) have a 95 % Wilson interval of "
            f"{wilson(half / pairs, pairs)}, and {most} ({percent(most / pairs)}) {wilson(most / pairs, pairs)}, outward "
            f"rounded; every fraction of pairs on this page is a point estimate, and where a verdict is read as holding "
            f"in most pairs, or a count is read among the pairs where a head clears the null bar, its Wilson interval is "
            f"said beside it (for a count against the bar, an interval over the pairs' sampling under this draw's bar: "
            f"another draw's bar moves the count further, Part 1)")


def p_text(p: float, smallest: float = 1e-6) -> str:
    """A p value as the page prints it: two significant figures, or below ``smallest`` (the report's rounding)."""
    return f"p < 1e-{round(-math.log10(smallest))}" if p < smallest else f"p = {p:.2g}"


NAMING_TEST = 0.05  # the level a naming's permutation p is read at


def naming_permutation(report: dict, name: str, method: str, entry: dict) -> tuple[float, int, float] | None:
    """The random pick's other reading: chance over namings, not over pairs. A naming happens once per model, so the
    question "would another naming do as well?" is asked of every way to name as many heads among those the
    mechanism does not predict near 0: how often each puts one of its heads on top and above the bar, from the
    report's per-pair shares. Returns the permutation p (the share of namings doing at least as well as the rule's),
    the number of namings (1 over it is the smallest p there can be) and the best rate of another naming; None for a
    report without per-pair shares."""
    measured = report["distribution"]["designs"][name]
    grids = measured.get("per_pair", {}).get("heads", {}).get(method)
    if not grids:
        return None
    block, bar = entry["block"], measured["null"]["heads"][method][entry["block"]]
    rows = [grid[block] for grid in grids]
    tops = [max(range(len(row)), key=row.__getitem__) for row in rows]
    tops = [top if row[top] > bar else None for top, row in zip(tops, rows)]  # as ``distribution.head_outcome``
    movable = [head for head in range(len(rows[0])) if head not in entry.get("fixed", [])]
    rates = {naming: sum(top in naming for top in tops) / len(tops)
             for naming in itertools.combinations(movable, len(entry["named"]))}
    rule = tuple(sorted(entry["named"]))
    p = sum(rate >= rates[rule] for rate in rates.values()) / len(rates)
    return p, len(rates), max((rate for naming, rate in rates.items() if naming != rule), default=0.0)


def naming_sentence(namings: tuple[float, int, float] | None, size: int) -> str:
    """``naming_permutation``'s result, for a naming of ``size`` heads, in words: how many namings do at least as
    well, the best other's rate, the permutation p and the least p the block allows; "" for None."""
    if namings is None:
        return ""
    p, count, best = namings
    least = 1 / count
    reading = (f"no naming of this block could go below {least:.2g}, so against chance over namings this is no test, "
               f"whatever the pairs show" if least >= NAMING_TEST else
               f"{'below' if p < NAMING_TEST else 'not below'} {NAMING_TEST:g}")
    others = round(p * count) - 1  # the rule's own naming does as well as itself
    return (f" Chance enters the rule once per model, where it names the heads, not once per pair: of the {count} "
            f"ways to name {size} of the block's heads the mechanism does not predict near 0, "
            f"{'no other naming puts' if not others else f'{others} other naming puts' if others == 1 else f'{others} other namings put'} "
            f"a head on top and above the bar at least as often as the rule's (the best other: {percent(best)} of "
            f"pairs); counting the rule's own, {others + 1} of {count}, a permutation p of {p:.2g}; {reading}.")


def naming_outcome(namings: tuple[float, int, float] | None) -> str:
    """``naming_sentence`` in a few words: "over the 6 namings p = 0.17, no test"; "" for None."""
    if namings is None:
        return ""
    p, count, _ = namings
    return f"over the {count} namings p = {p:.2g}" + (", no test" if 1 / count >= NAMING_TEST else "")


def null_reach_sentence(report: dict) -> str:
    """How much attention the null's changed positions get from the end of the prompt (``distribution.null_attention``),
    design by design, the head that gives them most named, beside what the prompt's first positions get, and whether
    leaving those alone was the quieter choice; "" for a report without it."""
    said, quieter = [], True
    for name, measured in report["distribution"]["designs"].items():
        attention = measured["null"].get("attention")
        if not attention:
            return ""
        most = max((value, block, head) for block, row in enumerate(attention["changed"]) for head, value in enumerate(row))
        first = max((value, block, head) for block, row in enumerate(attention["first"]) for head, value in enumerate(row))
        quieter = quieter and first[0] > most[0]
        said.append(f"in the {name.replace('_', '-')} design its positions ({' and '.join(map(str, measured['null']['changed']))}) "
                    f"get at most {most[0]:.2f} of a head's attention (head {most[1]}.{most[2]}), the prompt's first "
                    f"{NULL_POSITION} positions up to {first[0]:.2f} (head {first[1]}.{first[2]})")
    reading = ("the null leaves the first positions alone because this model's heads read them more from there" if quieter
               else "here the first positions are read no more than the null's own, so leaving them alone gains nothing")
    return ("How far the null's change reaches the end of the prompt, averaged over the pairs' clean prompts, of the "
            "attention each head gives from the readout and the position before it: " + "; ".join(said) + ". A head "
            f"that reads a null's positions from there carries its change to the readout; {reading}.")
