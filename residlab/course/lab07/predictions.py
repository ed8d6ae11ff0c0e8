"""Lab 07's predictions near 0, checked: where the mechanism predicts a head's share near 0 under a method in a
design (``designs.UNTESTABLE_BY_METHOD``), the verdict leaves the head out as a competitor, and the prediction itself
is tested against the null pairs (page and runner say the same words).

A prediction near 0 fails in either direction, so a head's share is counted in size: how often it passes the null
bar on the held-out pairs against how often on the null pairs, one-sided (``more_often_p``, Fisher's exact test).
Beside the count, the head's mean with its own 95 % interval and how often it is positive: a share can be near 0 in
size and still reliably of one sign, which is said.
"""

from __future__ import annotations

import math

from residlab.course.lab07.designs import UNTESTABLE_BY_METHOD, share_interval
from residlab.course.lab07.verdicts import METHOD_NAMES, percent

PREDICTION_TEST = 0.05  # a prediction near 0 fails where a head passes the null bar more often than on the null pairs


def more_often_p(held: int, held_pairs: int, null: int, null_pairs: int) -> float:
    """One-sided Fisher exact test that the held-out pairs pass a bar more often than the null pairs (``held`` of
    ``held_pairs`` against ``null`` of ``null_pairs``): the chance, were both drawn alike, that at least ``held`` of
    the ``held + null`` passes fall among the held-out pairs (hypergeometric)."""
    passes = held + null
    return sum(math.comb(held_pairs, k) * math.comb(null_pairs, passes - k)
               for k in range(held, min(passes, held_pairs) + 1)) / math.comb(held_pairs + null_pairs, passes)


def higher_p(higher: int, lower: int) -> float:
    """One-sided exact sign test over paired values: of the pairs that differ, ``higher`` with the first value the
    higher and ``lower`` with it the lower, the chance of at least ``higher`` were either equally likely (binomial,
    one half); 1 where none differ."""
    differ = higher + lower
    return sum(math.comb(differ, k) for k in range(higher, differ + 1)) / 2**differ


def paired_p(held_only: int, null_only: int) -> float:
    """Two-sided exact McNemar test over paired outcomes: of the pairs where the held-out and the null pair disagree
    (``held_only`` where only the held-out pair has it, ``null_only`` where only the null pair does), the chance of
    a split at least this uneven were either side equally likely (binomial, one half)."""
    return min(1.0, 2 * higher_p(max(held_only, null_only), min(held_only, null_only)))


def fewest_rejected(null: int, pairs: int, bar: float) -> int | None:
    """The fewest held-out passes of ``pairs`` that ``more_often_p`` rejects below ``bar`` against ``null`` null
    passes of as many null pairs (None where none does): how large a failure the test can see."""
    return next((held for held in range(pairs + 1) if more_often_p(held, pairs, null, pairs) < bar), None)


def _sign(cell: dict) -> str:
    """The mean's own 95 % interval and how often the share is positive, where the report has them."""
    if "mean_interval" not in cell:
        return ""
    low, high = cell["mean_interval"]
    return (f" (mean {round(cell['mean'], 3) or 0.0:.3f}, its 95 % interval [{low:.3f}, {high:.3f}], positive in "
            f"{percent(cell['positive_fraction'])} of pairs)")


def _size(name: str, cell: dict, bar: float) -> str:
    """How large a rejected head's departure is: its mean against the null bar, and whether its mean's interval
    holds 0."""
    mean = round(cell["mean"], 3) or 0.0  # no "-0.000"
    against = "smaller in size than the bar" if abs(mean) < bar else "as large as the bar or larger"
    zero = ("" if "mean_interval" not in cell else ", its mean's interval holding 0"
            if cell["mean_interval"][0] <= 0 <= cell["mean_interval"][1] else ", its mean's interval excluding 0")
    return f"head {name}'s mean share, {mean:.3f} of the gap, is {against} ({bar:.3f}){zero}"


def prediction_checks(report: dict) -> list[tuple[str, str, int, int, dict]]:
    """Every check of a prediction near 0 the page makes, the family a correction counts: (design, method, block,
    head, the head's cell) for each head of a kind a design cannot identify (its ``not_testable``: under every method)
    or a method cannot in a design (``designs.UNTESTABLE_BY_METHOD``), where the report has its test."""
    checks = []
    for design, measured in report["distribution"]["designs"].items():
        for method, table in measured.get("heads", {}).items():
            kinds = set(measured.get("not_testable", ())) | set(UNTESTABLE_BY_METHOD.get((design, method), ((), ""))[0])
            for kind in sorted(kinds):
                for block, head in report["heads"]["named"].get(kind, []):
                    cells = table.get("heads") or []
                    if block < len(cells) and "beyond_p" in (cells[block][head] or {}):
                        checks.append((design, method, block, head, cells[block][head]))
    return checks


def failed_predictions(report: dict, design: str, method: str, corrected: bool = False) -> list[tuple[int, int]]:
    """(block, head) of every head whose prediction near 0 the check rejects in ``design`` under ``method``: at
    PREDICTION_TEST uncorrected, or with ``corrected`` at ``corrected_level`` (Bonferroni over the page's checks).
    Both are said: a rejection counts against the mechanism, so a correction makes the hypothesis harder to reject
    (favouring it), while an uncorrected rejection among several checks is weak evidence, not a failure shown."""
    level = corrected_level(report) if corrected else PREDICTION_TEST
    return [(block, head) for d, m, block, head, cell in prediction_checks(report)
            if (d, m) == (design, method) and cell["beyond_p"] < level]


def corrected_level(report: dict) -> float:
    """PREDICTION_TEST divided by the number of the page's checks (Bonferroni)."""
    return PREDICTION_TEST / max(1, len(prediction_checks(report)))


def top_count(report: dict, design: str, method: str, block: int, head: int) -> int | None:
    """In how many held-out pairs ``head`` has its block's largest signed share under ``method``, the bar aside and
    every head of the block competing (None without the report's per-pair shares): whether leaving it out of a verdict
    could change the verdict."""
    grids = report["distribution"]["designs"][design].get("per_pair", {}).get("heads", {}).get(method)
    if not grids:
        return None
    return sum(max(range(len(grid[block])), key=lambda h: grid[block][h]) == head for grid in grids)


def left_out_caveat(report: dict, design: str, method: str, block: int, fixed: list[int]) -> str:
    """For a verdict that leaves out ``fixed`` heads of ``block`` as competitors: which of them the check rejects
    (uncorrected, or also corrected), and whether the verdict depends on leaving them out (how often each would top
    the block were it competing); "" where the check rejects none."""
    rejected = [head for b, head in failed_predictions(report, design, method) if b == block and head in fixed]
    if not rejected:
        return ""
    strong = {head for b, head in failed_predictions(report, design, method, corrected=True) if b == block}
    names = " and ".join(f"{block}.{head}" for head in rejected)
    how = ("even after the correction for the page's checks" if all(h in strong for h in rejected) else
           f"at {PREDICTION_TEST:g} uncorrected only, weak evidence" if not strong else "for some of them only uncorrected")  # fmt: skip
    tops = [(head, top_count(report, design, method, block, head)) for head in rejected]
    pairs = report["distribution"]["pairs"]
    if any(count is None for _, count in tops):
        depends = ""
    else:
        depends = ("competing, " + " and ".join(f"head {block}.{head} would have the block's largest share (the bar "
                                                f"aside) in {count} of the {pairs} pairs" for head, count in tops)
                   + (f", so the verdict does not depend on leaving {'it' if len(tops) == 1 else 'them'} out" if all(c == 0 for _, c in tops) else ""))  # fmt: skip
    return (f"; this leaves out {'head' if len(rejected) == 1 else 'heads'} {names} on a prediction the check below "
            f"rejects ({how})" + (f"; {depends}" if depends else ""))


def check_rule(report: dict) -> str:
    """How every prediction near 0 is checked and read, said once (each check's cell gives its numbers and result):
    the test, both levels and how many of the page's checks reject at each, and what the test cannot see."""
    checks = prediction_checks(report)
    if not checks:
        return ""
    pairs, level = report["distribution"]["pairs"], corrected_level(report)
    rejecting = sum(cell["beyond_p"] < PREDICTION_TEST for *_, cell in checks)
    surviving = sum(cell["beyond_p"] < level for *_, cell in checks)
    return (f"The check of a prediction near 0 (every row marked not identifiable): a head's share is counted in "
            f"size (absolute shares, said past the null bar; the per-head table above counts signed ones, said above "
            f"the null bar), so either sign could fail it, and how often it passes its block's null bar on the held-out pairs is "
            f"set against how often on the null pairs by a one-sided Fisher exact test of the two rates, read at "
            f"{PREDICTION_TEST:g} uncorrected (a rejection counts against the mechanism, so a correction would favour "
            f"it) and at {level:.2g}, Bonferroni over the page's {len(checks)} such checks: {rejecting} of them reject "
            f"uncorrected (about {PREDICTION_TEST * len(checks):.1f} would by chance alone were each an exact test at "
            f"{PREDICTION_TEST:g}: a rough guide, for these discrete tests reject less often than their level, and the "
            f"in-sample null, below, leans them the other way), {surviving} corrected; a rejection only uncorrected is weak evidence, not a failure shown. "
            f"The test is weak: with {pairs} pairs a side it rejects only at {fewest_rejected(0, pairs, PREDICTION_TEST)} "
            f"or more held-out passes where no null pair passes, {fewest_rejected(1, pairs, PREDICTION_TEST)} or more "
            f"where one does. It sees only shares past the bar, so near 0 means within the null bar in size, and a "
            f"consistent share below the bar passes it (a row says so where a head's mean's interval excludes 0). The "
            f"null pairs' rate is in-sample (the bar is set by those pairs, so few pass it by construction), which "
            f"leans the test toward rejecting; and the two sets are paired (each null pair shares its clean prompt "
            f"with a held-out pair), which a test of two independent rates ignores.")


def by_method_observed(report: dict, design: str, method: str, kind: str) -> str:
    """What ``method`` observed over the pairs for the heads of ``kind`` it cannot test against chance in ``design``:
    each head's mean share, its interval, its mean's interval and sign, and how often its share passes the null bar
    (its size said) in size on the held-out and on the null pairs, with the one-sided test of the two, uncorrected and
    corrected (``failed_predictions`` says why both), how many of the page's checks reject each way, the fewest passes
    the test could reject, and a rejected head's mean against the bar. A rejection only uncorrected is said as weak
    evidence, one that survives the correction as a failure. The prediction could have failed, so the numbers are
    said; only the verdict leaves the heads out as competitors."""
    measured = report["distribution"]["designs"][design]
    table = measured["heads"][method]["heads"]
    cells = [(block, head, table[block][head]) for block, head in report["heads"]["named"].get(kind, [])
             if "beyond_p" in table[block][head]]  # fmt: skip
    if not cells:
        return ""
    pairs, bars = report["distribution"]["pairs"], measured["null"]["heads"][method]
    listed = "; ".join(f"head {block}.{head} {share_interval(cell)}{_sign(cell)}, past the null bar ({bars[block]:.3f} of "
                       f"the gap) in size in {percent(cell['beyond_fraction'])} "
                       f"of the held-out pairs and {percent(cell['null_beyond_fraction'])} of the null pairs "
                       f"(p = {cell['beyond_p']:.2g})" for block, head, cell in cells)  # fmt: skip
    level = corrected_level(report)
    reach = [(f"{block}.{head}", fewest_rejected(round(cell["null_beyond_fraction"] * pairs), pairs, PREDICTION_TEST))
             for block, head, cell in cells]  # fmt: skip
    reachable = [(name, count) for name, count in reach if count is not None]
    if not reachable:
        reach_text = "; with these null counts it could reject at no count"
    elif len({count for _, count in reachable}) == 1:
        reach_text = f"; with these null counts it rejects only at {reachable[0][1]} or more held-out pairs past the bar"
    else:
        reach_text = "; with these null counts it rejects only at " + ", ".join(
            f"{count} or more held-out pairs past the bar for head {name}" for name, count in reachable)
    test = f"the check (read as Part 6 says, before its tables){reach_text}"
    failed = [found for found in failed_predictions(report, design, method) if found in {(b, h) for b, h, _ in cells}]
    strong = set(failed_predictions(report, design, method, corrected=True))
    signed = [(f"{block}.{head}", cell, abs(cell["mean"]) < bars[block]) for block, head, cell in cells
              if "mean_interval" in cell and not cell["mean_interval"][0] <= 0 <= cell["mean_interval"][1]]
    one_sign = "".join(f"; head {name} is not 0 on average (its mean's interval excludes 0; positive in "
                       f"{percent(cell['positive_fraction'])} of pairs)" + (", but within the bar in size: a consistent "
                       "share below the bar, which this test cannot see" if below else ", and its mean is as large as the "
                       "bar or larger") for name, cell, below in signed)  # fmt: skip
    if not failed:
        held = (f"the prediction is not rejected here: no head passes the bar more often on the held-out pairs than on "
                f"the null pairs by {test}{one_sign}; not rejected is not shown to be 0")
    else:
        by_cell = {(block, head): cell for block, head, cell in cells}
        groups = [([f for f in failed if f in strong], f"the prediction fails for {{heads}}: {{verb}} the bar more "
                   f"often on the held-out pairs than on the null pairs, {{whose}} p below {level:.2g}, even after the "
                   f"correction"),
                  ([f for f in failed if f not in strong], f"weak evidence against the prediction for {{heads}}, not a "
                   f"failure shown: {{verb}} the bar more often on the held-out pairs than on the null pairs, {{whose}} p "
                   f"below {PREDICTION_TEST:g} uncorrected but not below {level:.2g}")]  # fmt: skip
        said = [template.format(heads=("head " if len(heads) == 1 else "heads ") + " and ".join(f"{b}.{h}" for b, h in heads),
                                verb="it passes" if len(heads) == 1 else "they pass",
                                whose="its" if len(heads) == 1 else "each")
                for heads, template in groups if heads]  # fmt: skip
        size = "; ".join(_size(f"{b}.{h}", by_cell[(b, h)], bars[b]) for b, h in failed)
        held = f"{'; '.join(said)}, by {test}; in size, {size}{one_sign}"
    return (f" Observed over the pairs: {listed}; {held}; only the verdict of which head is on top leaves these heads "
            f"out as competitors.")
