"""What Lab 07's page reads, its one name at the front door (``patching_methods``): the report of ``lab.run_lab``
on the induction model this render trained (the one the glossary and Lab 06 show), computed once per render
through the render cache, the build-time checks the page asserts, and the room's ``sentences`` and ``figures``."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from residlab.course.models.induction.recipe import load_induction_model
from residlab.course.lab07 import figures, sentences  # noqa: F401 (the page reads them from here)
from residlab.course.lab07.lab import HEAD_METHODS, run_lab  # noqa: F401
from residlab.course.lab07.patching import DIRECTIONS, KINDS
from residlab.render.render_cache import render_cached


def model_from_files(files: dict[str, bytes]):
    """The induction model loaded from its directory's files (config.json, model.safetensors), as a learner's
    runner loads the directory ``residlab induction train`` writes."""
    with tempfile.TemporaryDirectory(prefix="residlab-lab07-") as scratch:
        for name, data in files.items():
            (Path(scratch) / name).write_bytes(data)
        return load_induction_model(Path(scratch))


def site_report(model_files: dict[str, bytes]) -> dict:
    """``run_lab`` on the induction model of ``model_files`` (the page passes this render's,
    ``induction_training().model_files``), once per render: the cache key is the files' digest."""
    digest = hashlib.sha256(b"".join(model_files[name] for name in sorted(model_files))).hexdigest()
    return render_cached("lab07_report", (digest,), lambda: run_lab(model_from_files(model_files)))


def check_report(report: dict) -> None:
    """The invariants a report satisfies whatever the model learned (AssertionError naming the one that fails):
    every cell before the first position where the prompts differ is exactly 0 (attention is causal, so nothing
    there differs between the runs), block b's input equals block b-1's output cell for cell, and the attribution
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
        for kind in KINDS:
            for e_row, a_row, x_row in zip(design["error"][kind], design["attribution"][kind], design["activation"]["denoising"][kind]):
                for e, a, x in zip(e_row, a_row, x_row):
                    assert abs(e - (a - x)) < 1e-5, f"{name} {kind}: error is not attribution minus exact"
