"""The phone drawings of the figures a reviewer read at 412 px (Lab 05 Part 4's boundary norms and write norms, the
glossary's patching heatmap and logit-lens trajectory, and the cosines beside them): every text inside the figure's
bounds (the phone's SVG, saved at the figure's size, cuts off what lies outside), and no two tick labels of an axis
on top of each other, on a phone or a wide screen. ``layout_problems`` is checked
against drawings that have each fault, so a pass means something."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from residlab.course.models import capture_page  # noqa: E402
from residlab.course.models.capture_page import CACHED_CAPTURE  # noqa: E402
from residlab.course.models.induction import figures  # noqa: E402
from residlab.course.models.induction.measures import EXAMPLE_PERIOD, LENS_STATES, PATCH_SITES  # noqa: E402
from residlab.course.ui import figure_widths  # noqa: E402
from residlab.course.ui.figure_widths import layout_problems  # noqa: E402


def drawings(module, plot, data):
    """(wide, phone) drawings of ``module.plot(data)``, their text raised as ``both_widths`` raises it."""
    drawn = {}

    def both(draw):
        for narrow in (False, True):
            drawn[narrow] = draw(narrow)
            figure_widths._raise_small_text(drawn[narrow])
        return drawn[False]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "both_widths", both)
        getattr(module, plot)(data)
    return drawn[False], drawn[True]


def induction_report() -> dict:
    """A report of ``induction_lab.measure``'s shape for the figures: the example of 8 tokens then the same 8 (two-digit
    ids, the widest labels the 32-token vocabulary gives), the corrupted run differing at position 7."""
    rng = np.random.default_rng(0)
    first = [19, 27, 30, 11, 24, 16, 31, 28]
    tokens = first + first
    clean = tokens[: 2 * EXAMPLE_PERIOD - 1]
    corrupt = list(clean)
    corrupt[EXAMPLE_PERIOD - 1] = 13
    positions = EXAMPLE_PERIOD - 1
    return {
        "example": {"tokens": tokens, "period": EXAMPLE_PERIOD},
        "lens": {"example": {label: {"p_right_by_position": rng.uniform(0, 1, positions).tolist()}
                             for label, _, _ in LENS_STATES}},  # fmt: skip
        "patching": {"rows": [label for label, _ in PATCH_SITES],
                     "recovery": rng.uniform(-1, 1, (len(PATCH_SITES), len(clean))).tolist(),
                     "experiment": {"clean": clean, "corrupt": corrupt}},  # fmt: skip
    }


FIGURES = [
    (capture_page, "plot_boundary_norms", lambda: capture_page.read_capture(CACHED_CAPTURE)),
    (capture_page, "plot_write_norms", lambda: capture_page.read_capture(CACHED_CAPTURE)),
    (figures, "plot_patching_heatmap", induction_report),
    (figures, "plot_lens_trajectory", induction_report),
    (capture_page, "plot_consecutive_cosines", lambda: capture_page.read_capture(CACHED_CAPTURE)),
]


@pytest.mark.parametrize("module, plot, data", FIGURES, ids=[plot for _, plot, _ in FIGURES])
def test_every_text_of_the_phone_drawing_lies_inside_the_figure_and_no_tick_labels_overlap(module, plot, data):
    wide, phone = drawings(module, plot, data())
    try:
        # The wide drawing is saved by Quarto with a tight bounding box, grown round text past its edges: only
        # its tick labels are checked.
        for name, figure, edges in (("phone", phone, True), ("wide", wide, False)):
            problems = layout_problems(figure, edges=edges)
            assert not problems, f"the {name} drawing of {plot}:\n" + "\n".join(problems)
    finally:
        plt.close(wide)
        plt.close(phone)


def test_the_check_names_text_past_the_edges_and_overlapping_tick_labels():
    figure, axes = plt.subplots(figsize=(3.7, 3.0), layout="constrained")
    axes.set_xticks(range(6), [f"H{i}→H{i + 1} a long label" for i in range(6)])
    axes.set_xlabel("an axis label far longer than a phone figure is wide, cut off on both of its sides")
    problems = "\n".join(layout_problems(figure))
    plt.close(figure)
    assert "text 'an axis label far longer" in problems and "reaches past the figure's edges" in problems, problems
    assert "x tick labels 'H0→H1 a long label' and 'H1→H2 a long label' overlap" in problems, problems
