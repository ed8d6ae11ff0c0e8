"""What Lab 07's page reads, its name at the front door (``patching_methods``): the build-time checks the page
asserts on its report, and the room's ``sentences`` and ``figures``. The report itself, ``lab.run_lab`` on the
induction model this render trained, is a shared value (``residlab.course.shared.patching_report``): computed once
per render, by the prefetch while the pages before it render."""

from __future__ import annotations

from residlab.course.lab07 import figures, sentences  # noqa: F401 (the page reads them from here)
from residlab.course.lab07.lab import HEAD_METHODS, VERDICT_WORDS, verdict_cells  # noqa: F401
from residlab.course.lab07.patching import DIRECTIONS, KINDS


def check_report(report: dict) -> None:
    """The invariants a report satisfies whatever the model learned (AssertionError naming the one that fails):
    every cell before the first position where the prompts differ is exactly 0 (attention is causal, so nothing
    there differs between the runs), block b's input equals block b-1's output cell for cell, the cells that restore
    the whole gap by construction (``sentences.by_construction``) restore it in both directions, and the attribution
    error is attribution minus exact."""
    for name, design in report["designs"].items():
        first = min(design["changed"])
        for direction in DIRECTIONS:
            grids = design["activation"][direction]
            for kind in KINDS:
                for row in grids[kind]:
                    assert all(value == 0.0 for value in row[:first]), f"{name} {direction} {kind}: a cell before {first} moved"
            for block in range(1, len(grids["resid_pre"])):
                assert grids["resid_pre"][block] == grids["resid_post"][block - 1], f"{name}: resid_pre {block} != resid_post {block - 1}"
            for site, position, kind, block in sentences.distinct_cells(design):
                if sentences.by_construction(design, kind, block, position):
                    value = grids[kind][block][position]
                    assert value is not None and abs(value - 1.0) < 1e-4, f"{name} {direction} {site} at {position}: {value}, not 1 by construction"
        for kind in KINDS:
            for e_row, a_row, x_row in zip(design["error"][kind], design["attribution"][kind], design["activation"]["denoising"][kind]):
                for e, a, x in zip(e_row, a_row, x_row):
                    assert abs(e - (a - x)) < 1e-5, f"{name} {kind}: error is not attribution minus exact"
