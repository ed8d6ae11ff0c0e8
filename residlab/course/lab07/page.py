"""What Lab 07's page reads, its name at the front door (``patching_methods``): the build-time checks the page
asserts on its report, and the room's ``sentences`` and ``figures``. The report itself, ``lab.run_lab`` on the
induction model this render trained, is a shared value (``residlab.course.shared.patching_report``): computed once
per render, by the prefetch while the pages before it render."""

from __future__ import annotations

from residlab.course.lab07 import chance, compare_sentences, error_sentences, figures, goal_sentences, head_sentences, position_sentences, predictions, sentences  # noqa: F401 (the page reads them from here)
from residlab.course.lab07.distribution import HEAD_METHODS, check_distribution  # noqa: F401
from residlab.course.lab07.attribution import SPLIT_TOLERANCE, tolerance_text  # noqa: F401 (the page says it)
from residlab.course.lab07.cells import check_identities, same_prompt_pairs  # noqa: F401
from residlab.course.lab07.patching import KINDS


def check_hybrids(design: dict, name: str) -> None:
    """A hybrid prompt run twice (denoising at one swapped position, noising at the other): its two shares sum to 1
    (``sentences.same_prompt_sentence``)."""
    for a, b in same_prompt_pairs(design.get("hybrids", [])):
        assert abs(a["share"] + b["share"] - 1) < 1e-5, f"{name}: the shares of one hybrid prompt do not sum to 1"


def check_report(report: dict) -> None:
    """The invariants a report satisfies whatever the model learned (AssertionError naming the one that fails):
    every identity of each design's worked example (``cells.identities``: cells before the first changed
    position 0, block b's input equal to block b-1's output cell for cell, the cells fixed at 1 by construction 1
    in both directions; a hybrid prompt's two shares summing to 1, ``check_hybrids``), the attribution error equal
    to attribution minus exact and to the sum of its two parts (``attribution.error_split``) for every cell, and the
    distribution's means recomputed from its pairs."""
    for name, design in report["designs"].items():
        check_identities(design, design["activation"], name)
        for kind in KINDS:
            rows = zip(design["error"][kind], design["attribution"][kind], design["activation"]["denoising"][kind], design["bends"][kind])
            for block, (e_row, a_row, x_row, b_row) in enumerate(rows):
                for position, (e, a, x, bend) in enumerate(zip(e_row, a_row, x_row, b_row)):
                    assert abs(e - (a - x)) < 1e-5, f"{name} {kind}: error is not attribution minus exact"
                    for suffix in ("", "_final_first", "_shapley"):
                        assert abs(bend["upstream" + suffix] + bend["final_norm" + suffix] - e) < SPLIT_TOLERANCE, (
                            f"{name} {kind} block {block} position {position}: the error's parts do not sum to it")
        check_hybrids(design, name)
        check = design.get("first_order_check")
        if check is not None:
            for key in ("state", "metric", "two_ways"):
                assert check[key] <= check["tolerance"], f"{name}: the first-order term's {key} check {check[key]}"
    if "distribution" in report:
        check_distribution(report["distribution"])
