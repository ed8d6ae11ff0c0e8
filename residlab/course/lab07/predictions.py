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
from residlab.course.lab07.verdicts import percent

PREDICTION_TEST = 0.05  # a prediction near 0 fails where a head passes the null bar more often than on the null pairs


def more_often_p(held: int, held_pairs: int, null: int, null_pairs: int) -> float:
    """One-sided Fisher exact test that the held-out pairs pass a bar more often than the null pairs (``held`` of
    ``held_pairs`` against ``null`` of ``null_pairs``): the chance, were both drawn alike, that at least ``held`` of
    the ``held + null`` passes fall among the held-out pairs (hypergeometric)."""
    passes = held + null
    return sum(math.comb(held_pairs, k) * math.comb(null_pairs, passes - k)
               for k in range(held, min(passes, held_pairs) + 1)) / math.comb(held_pairs + null_pairs, passes)


def fewest_rejected(null: int, pairs: int, bar: float) -> int | None:
    """The fewest held-out passes of ``pairs`` that ``more_often_p`` rejects below ``bar`` against ``null`` null
    passes of as many null pairs (None where none does): how large a failure the test can see."""
    return next((held for held in range(pairs + 1) if more_often_p(held, pairs, null, pairs) < bar), None)


def _sign(cell: dict) -> str:
    """The mean's own 95 % interval and how often the share is positive, where the report has them."""
    if "mean_interval" not in cell:
        return ""
    low, high = cell["mean_interval"]
    return f" (mean's 95 % interval [{low:.3f}, {high:.3f}], positive in {percent(cell['positive_fraction'])} of pairs)"


def prediction_checks(report: dict) -> list[tuple[str, str, int, int, dict]]:
    """Every check of a prediction near 0 the page makes: (design, method, block, head, the head's cell) for each head
    of a kind ``designs.UNTESTABLE_BY_METHOD`` names, where the report has its test."""
    checks = []
    for (design, method), (kinds, _) in UNTESTABLE_BY_METHOD.items():
        table = report["distribution"]["designs"].get(design, {}).get("heads", {}).get(method, {}).get("heads")
        for kind in kinds:
            for block, head in report["heads"]["named"].get(kind, []):
                if table and block < len(table) and "beyond_p" in (table[block][head] or {}):
                    checks.append((design, method, block, head, table[block][head]))
    return checks


def failed_predictions(report: dict, design: str, method: str) -> list[tuple[int, int]]:
    """(block, head) of every head whose prediction near 0 the check rejects in ``design`` under ``method``. Each
    check is read at PREDICTION_TEST uncorrected: here a rejection counts against the mechanism, and a correction for
    multiple checks would make the hypothesis harder to reject, favouring it."""
    return [(block, head) for d, m, block, head, cell in prediction_checks(report)
            if (d, m) == (design, method) and cell["beyond_p"] < PREDICTION_TEST]


def by_method_observed(report: dict, design: str, method: str, kind: str) -> str:
    """What ``method`` observed over the pairs for the heads of ``kind`` it cannot test against chance in ``design``:
    each head's mean share, its interval, its mean's interval and sign, and how often its share passes the null bar
    (its size said) in size on the held-out and on the null pairs, with the one-sided test of the two, uncorrected
    (``failed_predictions`` says why), how many of the page's checks reject, and the fewest passes the test could
    reject. The prediction could have failed, so the numbers are said; only the verdict leaves the heads out as
    competitors."""
    measured = report["distribution"]["designs"][design]
    table = measured["heads"][method]["heads"]
    cells = [(block, head, table[block][head]) for block, head in report["heads"]["named"].get(kind, [])
             if "beyond_p" in table[block][head]]  # fmt: skip
    if not cells:
        return ""
    pairs, bars = report["distribution"]["pairs"], measured["null"]["heads"][method]
    listed = "; ".join(f"head {block}.{head} {share_interval(cell)}{_sign(cell)}, past the null bar ({bars[block]:.3f} of "
                       f"the gap) in size (absolute shares; the table counts signed ones) in {percent(cell['beyond_fraction'])} "
                       f"of the held-out pairs and {percent(cell['null_beyond_fraction'])} of the null pairs "
                       f"(p = {cell['beyond_p']:.2g})" for block, head, cell in cells)  # fmt: skip
    checks = prediction_checks(report)
    rejecting = sum(cell["beyond_p"] < PREDICTION_TEST for *_, cell in checks)
    reach = [fewest_rejected(round(cell["null_beyond_fraction"] * pairs), pairs, PREDICTION_TEST) for _, _, cell in cells]
    reach_text = (f"; a weak test: with these null counts it rejects only at {min(r for r in reach if r is not None)} or "
                  f"more held-out pairs past the bar" if any(r is not None for r in reach) else
                  "; with these null counts it could reject at no count")
    test = (f"a one-sided Fisher exact test of the two rates at {PREDICTION_TEST:g}, uncorrected (a rejection counts "
            f"against the mechanism, so a correction for the page's {len(checks)} such checks would favour it; "
            f"{rejecting} of the {len(checks)} reject){reach_text}; the null pairs' rate is in-sample, for the bar is set "
            f"by the same null pairs")
    failed = [f"{block}.{head}" for block, head in failed_predictions(report, design, method)]
    signed = [f"{block}.{head}" for block, head, cell in cells
              if "mean_interval" in cell and not cell["mean_interval"][0] <= 0 <= cell["mean_interval"][1]]
    one_sign = (f"; head {signed[0]} is near 0 in size but not 0 on average (the mean's interval excludes 0)"
                if len(signed) == 1 else f"; heads {', '.join(signed[:-1])} and {signed[-1]} are near 0 in size but "
                f"not 0 on average (the means' intervals exclude 0)" if signed else "")
    held = (f"counted in size, so either sign could fail it, the prediction is not rejected here: no head passes the "
            f"bar more often on the held-out pairs than on the null pairs by {test}{one_sign}; not rejected is not "
            f"shown to be 0" if not failed else
            f"counted in size, the prediction fails for {'head' if len(failed) == 1 else 'heads'} {' and '.join(failed)}: "
            f"{'it passes' if len(failed) == 1 else 'they pass'} the bar more often on the held-out pairs than on the "
            f"null pairs by {test}{one_sign}")
    return (f" Observed over the pairs: {listed}; {held}; only the verdict of which head is on top leaves these heads "
            f"out as competitors.")
