"""Lab 07 measured: every patching method on the induction model, beside the same code run on random-weight
models of the same shape (the null), as one report of plain data.

``run_lab(model)`` returns the report the page shows and the runner writes (``patching_methods.py --output``):

- ``heads``: the previous-token and induction heads by the model's own head scores (the induction pages' rule);
- ``null``: the highest head score of each kind in the random-weight models and, per design, the clean-corrupt gap of each random-weight model (``NULL_SEEDS``: seed 0 is the trained
  model's own starting point), the noise floor (the largest of their |gap|) and the largest |effect| in logits of
  any one denoising cell in them, the floor a single cell must pass to count;
- ``designs``: per design (``designs``), the metrics and gap, whether the gap is read (``READ_FACTOR`` times the
  floor), the activation-patching grids (both directions, every site kind), the attribution grid, its error per
  cell and the two bend measures per cell, the per-head grids and path patching;
- ``verdicts``: per design and method, whether the head with the largest per-head share in the known head's
  block is the known head (``head_verdict``); the methods: per-head activation patching (both directions),
  attribution, and path patching of each block-0 head into block 1's keys only (``path_keys``, block 0's heads).
  ``verdict_cells`` gives each cell the one word (``VERDICT_WORDS``) the runner prints and the page's table shows.

``main`` is the runner's command line: ``--model DIR`` loads a saved induction model (what ``residlab induction
train`` writes), otherwise it trains one as the site does.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from residlab.audit.measures import shown
from residlab.course.models.induction.measures import find_heads, head_scores, held_out_sequences
from residlab.course.models.induction.recipe import TRAINING_SEED, load_induction_model, new_model, train_induction_model
from residlab.course.lab07.attribution import attribution_grids, bend_measures, corrupt_gradients, head_attribution
from residlab.course.lab07.designs import UNTESTABLE, all_designs
from residlab.course.lab07.patching import (
    DIRECTIONS, KINDS, activation_grids, head_grid, head_path_patching, path_patching, prepare,
)
from residlab.course.models.threads import single_thread

REPORT_SCHEMA = "residlab-lab07-report/1"
NULL_SEEDS = (0, 1, 2)
READ_FACTOR = 3.0  # a gap is read when it exceeds this many noise floors
TIE_MARGIN = 0.05  # two heads whose shares differ by less than this (a twentieth of the gap) are tied
HEAD_METHODS = ("denoising", "noising", "attribution", "path_keys")  # path_keys: block 0's heads only
# The one word for each cell's outcome: the runner prints these and the page's table shows them, so a run on your
# own machine reads in the page's words (the page's sentences, ``sentences.OUTCOME``, say each at length). A cell
# the design cannot test, or of a design whose gap is not read, gets its own word, never a method's failure.
VERDICT_WORDS = {
    "found": "found",
    "tied": "tied",
    "other": "another head",
    "nothing": "no head above the null",
    "untestable": "not testable",
    "unread": "not read",
}


def _round(value):
    return None if value is None else round(float(value), 6)


def _grid(rows) -> list:
    return [[_round(value) for value in row] for row in rows]


def null_baseline(designs: dict) -> dict:
    """Per design: each random-weight model's gap, the noise floor, and the largest |logit effect| of a cell."""
    nulls = {name: {"gaps": [], "largest_cell_effect": 0.0} for name in designs}
    highest = {"previous_token": 0.0, "induction": 0.0}
    for seed in NULL_SEEDS:
        model = new_model(seed).eval()
        for kind, table in head_scores(model, held_out_sequences()).items():
            highest[kind] = max(highest[kind], float(table.max()))
        for name, design in designs.items():
            pair = prepare(model, design)
            nulls[name]["gaps"].append(_round(pair.gap))
            for rows in activation_grids(pair, "denoising").values():
                for row in rows:
                    for value in row:
                        if value is not None:
                            nulls[name]["largest_cell_effect"] = max(nulls[name]["largest_cell_effect"],
                                                                     abs(value * pair.gap))  # fmt: skip
    for entry in nulls.values():
        entry["noise_floor"] = max(abs(gap) for gap in entry["gaps"])
        entry["largest_cell_effect"] = _round(entry["largest_cell_effect"])
    return {"seeds": list(NULL_SEEDS), "designs": nulls, "highest_head_score": {k: _round(v) for k, v in highest.items()}}


def measure_design(model, design) -> dict:
    """Every method on one design."""
    pair = prepare(model, design)
    gradients = corrupt_gradients(pair)
    exact = {direction: activation_grids(pair, direction) for direction in DIRECTIONS}
    approximate = attribution_grids(pair, gradients)
    error = {kind: [[None if a is None or e is None else a - e for a, e in zip(arow, erow)]
                    for arow, erow in zip(approximate[kind], exact["denoising"][kind])] for kind in KINDS}  # fmt: skip
    bends = {kind: [[{key: _round(value) for key, value in cell.items()} for cell in bend_measures(pair, kind, block)]
                    for block in range(pair.depth)] for kind in KINDS}  # fmt: skip
    return {
        **{key: value for key, value in asdict(design).items()},
        "readout": design.readout,
        "clean_metric": _round(pair.clean_metric),
        "corrupt_metric": _round(pair.corrupt_metric),
        "gap": _round(pair.gap),
        "activation": {direction: {kind: _grid(grid) for kind, grid in grids.items()} for direction, grids in exact.items()},
        "attribution": {kind: _grid(grid) for kind, grid in approximate.items()},
        "error": {kind: _grid(grid) for kind, grid in error.items()},
        "bends": bends,
        "heads": {"denoising": _grid(head_grid(pair, "denoising")), "noising": _grid(head_grid(pair, "noising")),
                  "attribution": _grid(head_attribution(pair, gradients)),
                  "path_keys": _grid([head_path_patching(pair), [None] * model.config.num_attention_heads])},  # fmt: skip
        "path": {key: _round(value) for key, value in path_patching(pair).items()},
    }


def known_heads(scores: list, block: int, kind: str) -> list[int]:
    """The heads of ``block`` whose score of ``kind`` is within ``TIE_MARGIN`` of the block's highest: the known
    head, and any head tied with it by the model's own scores."""
    row = scores[kind][block]
    return [head for head, score in enumerate(row) if score >= max(row) - TIE_MARGIN]


def head_verdict(row: list, known: list[int], floor_share: float) -> dict:
    """Within one block's per-head shares: the top head and the runner-up; whether the top one passes the floor
    (the share the null's largest cell effect would be), whether the two are tied, and the outcome: "found" (the
    top head is a known head, and so is the runner-up if tied), "tied" (a known head tied with another),
    "other" (another head on top, untied) or "nothing" (no head passes the floor)."""
    order = sorted(range(len(row)), key=lambda head: -row[head])
    top, runner_up = order[0], order[1]
    tied = row[top] - row[runner_up] < TIE_MARGIN
    if row[top] <= floor_share:
        outcome = "nothing"
    elif top in known and (not tied or runner_up in known):
        outcome = "found"
    elif tied and (top in known or runner_up in known):
        outcome = "tied"
    else:
        outcome = "other"
    return {"top": top, "top_share": row[top], "runner_up": runner_up, "runner_up_share": row[runner_up],
            "known": known, "known_shares": [row[head] for head in known], "tied": tied, "outcome": outcome}  # fmt: skip


def verdicts(report: dict) -> dict:
    """Design -> method -> head kind -> ``head_verdict`` (None for a design whose gap is not read)."""
    out = {}
    scores = report["heads"]["scores"]
    for name, design in report["designs"].items():
        if not design["readable"]:
            out[name] = None
            continue
        floor_share = report["null"]["designs"][name]["largest_cell_effect"] / abs(design["gap"])
        out[name] = {method: {kind: head_verdict(design["heads"][method][head["block"]],
                                                 known_heads(scores, head["block"], kind), floor_share)
                              for kind, head in report["heads"]["found"].items()
                              if None not in design["heads"][method][head["block"]]}
                     for method in HEAD_METHODS}  # fmt: skip
    return out


def verdict_cells(report: dict) -> list[tuple[str, str, str, dict | None, str]]:
    """Every (design, method, head kind) cell the page's table and the runner's lines show, in their order, with its
    ``head_verdict`` (None for a design whose gap is not read) and its word from ``VERDICT_WORDS``."""
    cells = []
    for name, by_method in report["verdicts"].items():
        for method in HEAD_METHODS:
            for kind in report["heads"]["found"]:
                if by_method is not None and kind not in by_method[method]:
                    continue  # a method that cannot reach that head's block
                verdict = None if by_method is None else by_method[method][kind]
                outcome = "unread" if verdict is None else "untestable" if kind in UNTESTABLE[name] else verdict["outcome"]
                cells.append((name, method, kind, verdict, VERDICT_WORDS[outcome]))
    return cells


def run_lab(model) -> dict:
    """The whole report for one induction model (see the module's docstring), on one CPU thread."""
    with single_thread():
        return _run_lab(model)


def _run_lab(model) -> dict:
    scores = head_scores(model, held_out_sequences())
    found = find_heads(scores)
    designs = all_designs()
    report = {
        "schema": REPORT_SCHEMA,
        "heads": {"scores": {kind: _grid(table.tolist()) for kind, table in scores.items()},
                  "found": {kind: {**asdict(head), "score": _round(head.score), "runner_up": _round(head.runner_up)}
                            for kind, head in found.items()}},  # fmt: skip
        "null": null_baseline(designs),
        "read_factor": READ_FACTOR,
        "tie_margin": TIE_MARGIN,
        "designs": {name: measure_design(model, design) for name, design in designs.items()},
    }
    for name, design in report["designs"].items():
        design["readable"] = abs(design["gap"]) > READ_FACTOR * report["null"]["designs"][name]["noise_floor"]
    report["verdicts"] = verdicts(report)
    return report


def summary_lines(report: dict) -> list[str]:
    """What the runner prints: per design the gap against its floor, path patching, and the head verdicts."""
    lines, cells = [], verdict_cells(report)
    for kind, head in report["heads"]["found"].items():
        lines.append(f"highest {head['kind']} score: block {head['block']} head {head['head']} ({shown(head['score']):.3f}; "
                     f"runner-up {shown(head['runner_up']):.3f})")  # fmt: skip
    for name, design in report["designs"].items():
        floor = report["null"]["designs"][name]["noise_floor"]
        lines.append(f"{name}: M(clean) {shown(design['clean_metric']):.3f}, M(corrupt) {shown(design['corrupt_metric']):.3f}, gap "
                     f"{shown(design['gap']):.3f} (noise floor {shown(floor):.3f}; {'read' if design['readable'] else 'not read'})")  # fmt: skip
        path = design["path"]
        lines.append("  block 0 attention write into block 1's " + ", ".join(
            f"{key} {'undefined' if value is None else f'{shown(value):.3f}'}" for key, value in path.items()))  # fmt: skip
        for method, kind, verdict, word in (cell[1:] for cell in cells if cell[0] == name):
            heads = f"  {method}, {kind} heads (block {report['heads']['found'][kind]['block']}"
            if verdict is None:
                lines.append(f"{heads}): {word}")
                continue
            lines.append(f"{heads} heads {verdict['known']}): top head {verdict['top']} ({shown(verdict['top_share']):.3f}), "
                         f"runner-up {verdict['runner_up']} ({shown(verdict['runner_up_share']):.3f}): {word}")  # fmt: skip
    return lines


def build_parser(prog: str = "patching_methods.py") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Lab 07: patching methods against the induction model's "
                                     "known mechanism (activation, path and attribution patching).")  # fmt: skip
    parser.add_argument("--model", type=Path, help="a saved induction model directory (default: train one, seed "
                        f"{TRAINING_SEED}, as the site does)")  # fmt: skip
    parser.add_argument("--output", type=Path, help="write the report as JSON to this new file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.output is not None and args.output.exists():
        print(f"patching_methods: {args.output} exists; name a new file", file=sys.stderr)
        return 2
    if args.model is not None and not (args.model / "config.json").is_file():
        print(f"patching_methods: {args.model} holds no config.json: not a model directory", file=sys.stderr)
        return 2
    try:
        model = train_induction_model() if args.model is None else load_induction_model(args.model)
    except (OSError, ValueError) as refused:  # a directory Transformers cannot load: its own message, one line
        print(f"patching_methods: {args.model} could not be loaded: {str(refused).splitlines()[0]}", file=sys.stderr)
        return 2
    report = run_lab(model)
    for line in summary_lines(report):
        print(line)
    if args.output is not None:
        text = json.dumps(report, indent=1, sort_keys=True, allow_nan=False) + "\n"
        partial = args.output.with_name(args.output.name + ".partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(args.output)  # the whole report or none
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
