"""The induction model trained and measured: what ``residlab induction train`` saves and what the pages show.

``train_and_measure(seed)`` trains the recipe (``recipe``), measures it (``measures``) and returns an
``InductionRun``: the model and a report of plain data (numbers, lists, strings), the manifest's measurements.
``manifest(run)`` adds the recipe, the seed, the library versions and the saved files' digests.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass


from residlab.capture.versions import library_versions
from residlab.course.models.copy_model import weights_sha256
from residlab.course.models.induction import measures
from residlab.course.models.induction.recipe import TRAINING_SEED, model_directory_files, recipe, train_induction_model

LIBRARIES = ("torch", "transformers", "safetensors", "numpy")


@dataclass
class InductionRun:
    model: object  # GPTNeoXForCausalLM, eval mode
    seed: int
    report: dict  # plain data: every measurement the manifest and the pages state
    training_seconds: float  # wall time of the training alone, on this machine (not part of the report)
    training_cpu_seconds: float  # this process's CPU time in it: near the wall time on an idle core


@dataclass(frozen=True)
class InductionResults:
    """What the pages read of one training (``residlab.course.shared.induction_training``): plain data and
    bytes, no model, so a page reading them imports no Transformers. Defined here, not in the module the
    prefetch runs as ``__main__``, so that pickle names a class every page can import."""

    report: dict  # induction_lab.measure: every number the glossary entries and Lab 06 Part 2 show
    audit: object  # induction_audit.InductionAudit: Lab 06 Part 2's packet and its verification
    model_files: dict  # {"config.json": bytes, "model.safetensors": bytes}: the weights, for a check to reload


def _rounded(values) -> list:
    return [[float(v) for v in row] for row in values.tolist()]


def measure(model) -> dict:
    """Every measurement of the report, on the held-out sequences and the example."""
    held_out = measures.held_out_sequences()
    halves = measures.half_scores(model, held_out)
    scores = measures.head_scores(model, held_out)
    found = measures.find_heads(scores)
    example = measures.example_sequence()
    weights = measures.attention_weights(model, example.unsqueeze(0))[:, :, 0]  # (blocks, heads, n, n)
    experiment = measures.patching_experiment(example)
    return {
        "held_out": {"seed": measures.HELD_OUT_SEED, "per_period": measures.HELD_OUT_PER_PERIOD,
                     "periods": sorted(held_out)},  # fmt: skip
        "halves": {key: asdict(value) if isinstance(value, measures.HalfScores) else value
                   for key, value in halves.items()},  # fmt: skip
        "head_scores": {kind: _rounded(table) for kind, table in scores.items()},
        "heads_found": {kind: asdict(head) for kind, head in found.items()},
        "head_rule_threshold": measures.HEAD_RULE_THRESHOLD,
        "example": {
            "tokens": example.tolist(),
            "period": measures.EXAMPLE_PERIOD,
            "attention": {kind: _rounded(weights[head.block, head.head]) for kind, head in found.items()},
        },
        "lens": {
            "example": measures.lens_trajectory(model, example.unsqueeze(0)),
            "held_out": measures.lens_trajectory(model, held_out[measures.EXAMPLE_PERIOD]),
        },
        "patching": {"experiment": asdict(experiment), **measures.patching_heatmap(model, experiment)},
    }


def train_and_measure(seed: int = TRAINING_SEED) -> InductionRun:
    log: list = []
    start, cpu_start = time.perf_counter(), time.process_time()
    model = train_induction_model(seed=seed, log=log)
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    report = measure(model)
    report["training_log"] = [{"step": step, "loss": loss, "batch_accuracy": accuracy} for step, loss, accuracy in log]
    report["steps_trained"] = log[-1][0] if log else 0  # the last step is always logged; none when none ran
    return InductionRun(model, seed, report, seconds, cpu_seconds)


def manifest(run: InductionRun, files: dict[str, bytes]) -> dict:
    """What the saved directory's manifest.json holds."""
    return {
        "what": "a two-block GPTNeoXForCausalLM trained by residlab on repeated random tokens (issue 27)",
        "written_by": "residlab induction train (residlab.course.models.induction.cli)",
        "recipe": recipe(),
        "seed": run.seed,
        "versions": library_versions(LIBRARIES),
        "training_seconds": round(run.training_seconds, 3),
        "training_cpu_seconds": round(run.training_cpu_seconds, 3),
        "weights_sha256": weights_sha256(run.model),
        "files": {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in files.items()},
        "measurements": run.report,
    }


def model_files(run: InductionRun) -> dict[str, bytes]:
    return model_directory_files(run.model)
