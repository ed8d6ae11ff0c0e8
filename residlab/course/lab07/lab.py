"""Lab 07 measured: every patching method on the induction model, on one worked example and over held-out prompt
pairs, each read against a null of the same trained model (``distribution``), as one report of plain data.

``run_lab(model)`` returns the report the page shows and the runner writes (``patching_methods.py --output``):

- ``heads``: the previous-token and induction heads by the model's own head scores (the induction pages' rule),
  and the heads named by the rule that can fail (``naming.named_heads``: a score above its own control);
- ``untrained``: the gap random-weight models of the same shape give on the worked example (``UNTRAINED_SEEDS``:
  seed 0 is the trained model's own starting point) and their highest head scores: the scale of an untrained
  model, a labelled baseline, not the null;
- ``designs``: per design (``designs``), the worked example (one draw): the metrics and gap, whether the gap is
  read (``READ_FACTOR`` times the largest gap of the null pairs), the activation-patching grids (both directions,
  every site kind), the attribution grid, its error per cell, the error's exact split and the bend measures per
  cell, the angle between the centred clean and corrupt final states, the per-head grids, path patching and the
  cells fixed by construction (``identities``, checked);
- ``distribution``: every method over the held-out pairs and their null pairs (``distribution.measure_distribution``):
  per method and head the mean share, its interval and the fraction of pairs of each verdict (``verdict_words``);
- ``nonlinearities``: every place the model bends.

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
from residlab.capture.blocks import block_type_for
from residlab.capture.sites import site_name
from residlab.course.lab07.attribution import (
    attribution_grids, bend_measures, centred_angle, corrupt_gradients, finite_difference_check, head_attribution,
)
from residlab.course.lab07.designs import (
    PREDICTED_NEAR_ZERO, all_designs, by_method_reason, not_testable_reason,
)
from residlab.course.lab07.cells import check_identities, check_mirror, identities, is_swap
from residlab.course.lab07.predictions import by_method_observed
from residlab.course.lab07.distribution import PAIRS, _round, check_distribution, measure_distribution
from residlab.course.lab07.naming import NAME_MARGIN, head_name_scores, named_heads
from residlab.course.lab07.patching import (
    DIRECTIONS, KINDS, _readout_metric, activation_grids, head_grid, head_path_patching, path_patching, prepare, share,
)
from residlab.course.lab07.verdicts import (
    HEAD_KINDS, METHOD_NAMES, VERDICT_WORDS, complement_of, complement_words, percent, verdict_fractions,
)
from residlab.course.models.threads import single_thread

REPORT_SCHEMA = "residlab-lab07-report/11"
UNTRAINED_SEEDS = (0, 1, 2)  # random-weight models of the same shape: the scale of an untrained model, no null
READ_FACTOR = 3.0  # a design's gap is read when it exceeds this many times the largest gap of its null pairs


def _grid(rows) -> list:
    return [[_round(value) for value in row] for row in rows]


def untrained_baseline(designs: dict) -> dict:
    """Per design, the gap each random-weight model gives on the worked example, and the highest head score of
    each kind in them: what the same code reports on a model that learned nothing (a labelled baseline, not the
    null shares are read against)."""
    gaps = {name: [] for name in designs}
    highest = {"previous_token": 0.0, "induction": 0.0}
    for seed in UNTRAINED_SEEDS:
        model = new_model(seed).eval()
        for kind, table in head_scores(model, held_out_sequences()).items():
            highest[kind] = max(highest[kind], float(table.max()))
        for name, design in designs.items():
            gaps[name].append(_round(prepare(model, design).gap))
    return {"seeds": list(UNTRAINED_SEEDS), "gaps": gaps, "highest_head_score": {k: _round(v) for k, v in highest.items()}}


def nonlinearities(model) -> list[dict]:
    """Every place the model is not linear in its residual stream, counted from its modules in the order they are
    registered: each LayerNorm, each activation function, and per attention module its three (the product of
    queries and keys, the softmax, the product of the pattern and the values). Each: module, what, and which part
    of the attribution error's split it falls in (the final normaliser's, or upstream)."""
    import torch.nn as nn

    final = block_type_for(model.config).final_norm
    places = []
    for name, module in model.named_modules():
        kind = type(module).__name__
        if isinstance(module, nn.LayerNorm):
            places.append({"module": name, "what": "LayerNorm", "part": "final" if name == final else "upstream"})
        elif kind.endswith("Attention"):
            places += [{"module": name, "what": what, "part": "upstream"}
                       for what in ("queries times keys (QK)", "softmax", "pattern times values")]  # fmt: skip
        elif "GELU" in kind.upper() or kind.endswith("Activation"):
            places.append({"module": name, "what": kind.replace("Activation", "") or kind, "part": "upstream"})
    return places


def hybrid_cells(pair, design, exact: dict) -> list[dict]:
    """For a swap design, each cell of block 0's input at a swapped position, observed as what it is: the run of a
    hybrid prompt (the receiving run's prompt with that one token from the other run; block 0's input is the
    token's embedding alone). Each: direction, position, the hybrid prompt, its M from a plain forward (no patch),
    its share, the earlier occurrences of the readout's token with the token after each, whether the target and
    the rival occur. ``exact``: the design's activation grids (direction -> kind -> rows). Raises unless the share equals the patched cell's (the identity)."""
    if not is_swap({"clean": design.clean, "corrupt": design.corrupt, "changed": list(design.changed)}):
        return []
    import torch

    grids = {direction: exact[direction]["resid_pre"][0] for direction in DIRECTIONS}
    cells = []
    for direction in DIRECTIONS:
        receiver, source = (design.corrupt, design.clean) if direction == "denoising" else (design.clean, design.corrupt)
        for position in design.changed:
            prompt = list(receiver)
            prompt[position] = source[position]
            with single_thread(), torch.inference_mode():
                metric = float(_readout_metric(pair.model(input_ids=torch.tensor([prompt]), use_cache=False).logits.float(), design)[0])
            value = share(pair, direction, metric)
            if abs(value - grids[direction][position]) > 1e-4:
                raise AssertionError(f"{design.name} {direction} at {position}: the hybrid prompt's share {value} is not the cell's")
            readout = prompt[-1]
            cells.append({"direction": direction, "position": position, "prompt": prompt, "metric": _round(metric),
                          "share": _round(value), "earlier": [[p, prompt[p + 1]] for p in range(len(prompt) - 1) if prompt[p] == readout],
                          "target_present": design.target in prompt[:-1], "rival_present": design.rival in prompt[:-1]})  # fmt: skip
    return cells


def lab06_corruption(model) -> dict:
    """Lab 06's and the glossary's corrupt prompt for the same worked example (``measures.patching_experiment``: the
    copied token replaced by their own rule's draw, the rival by their rule), and its gap, so the page can say why
    their gap is not Lab 07's copied-token gap: the position, both replacements' tokens, the rival and the gap."""
    from residlab.course.lab07.designs import Design
    from residlab.course.models.induction.measures import patching_experiment

    experiment = patching_experiment(model)
    position = experiment.first_occurrence_next
    design = Design("lab06", experiment.clean, experiment.corrupt, experiment.target, experiment.rival, (position,),
                    (len(experiment.clean) + 1) // 2)  # fmt: skip
    return {"clean": list(experiment.clean), "position": position, "clean_token": experiment.clean[position], "token": experiment.corrupt[position],
            "target": experiment.target, "rival": experiment.rival, "gap": _round(prepare(model, design).gap)}  # fmt: skip


def measure_design(model, design) -> dict:
    """Every method on one design: the worked example, one draw."""
    pair = prepare(model, design)
    gradients = corrupt_gradients(pair)
    exact = {direction: activation_grids(pair, direction) for direction in DIRECTIONS}
    approximate = attribution_grids(pair, gradients)
    error = {kind: [[None if a is None or e is None else a - e for a, e in zip(arow, erow)]
                    for arow, erow in zip(approximate[kind], exact["denoising"][kind])] for kind in KINDS}  # fmt: skip
    bends = {kind: [[{key: _round(value) for key, value in cell.items()} for cell in bend_measures(pair, kind, block, gradients)]
                    for block in range(pair.depth)] for kind in KINDS}  # fmt: skip
    last = site_name(pair.depth - 1, "resid_post")
    measured = {
        **{key: value for key, value in asdict(design).items()},
        "readout": design.readout,
        "clean_metric": _round(pair.clean_metric),
        "corrupt_metric": _round(pair.corrupt_metric),
        "gap": _round(pair.gap),
        "activation": {direction: {kind: _grid(grid) for kind, grid in grids.items()} for direction, grids in exact.items()},
        "attribution": {kind: _grid(grid) for kind, grid in approximate.items()},
        "error": {kind: _grid(grid) for kind, grid in error.items()},
        "bends": bends,
        "final_angle": _round(centred_angle(pair.clean[last][-1], pair.corrupt[last][-1])),
        "heads": {"denoising": _grid(head_grid(pair, "denoising")), "noising": _grid(head_grid(pair, "noising")),
                  "attribution": _grid(head_attribution(pair, gradients)),
                  "path_keys": _grid([head_path_patching(pair), [None] * model.config.num_attention_heads])},  # fmt: skip
        "path": {key: _round(value) for key, value in path_patching(pair).items()},
        "hybrids": hybrid_cells(pair, design, exact),
        # the most attention any block-0 head at the readout puts on the changed positions, in either run: the only
        # way block 0's write there (all block 1's queries read that M depends on) can differ between the runs
        "readout_reach": _round(max(float(attention[0, :, -1, list(design.changed)].sum(-1).max())
                                    for attention in (pair.clean_attention, pair.corrupt_attention))),
        "first_order_check": {key: float(f"{value:.3g}")
                              for key, value in finite_difference_check(pair, gradients).items()},
    }
    measured["identities"] = identities(measured, pair.depth)
    check_identities(measured, measured["activation"], design.name)
    check_mirror(measured, pair)
    return measured


def run_lab(model, pairs: int = PAIRS) -> dict:
    """The whole report for one induction model (see the module's docstring), on one CPU thread."""
    with single_thread():
        return _run_lab(model, pairs)


def _run_lab(model, pairs: int) -> dict:
    scores = head_scores(model, held_out_sequences())
    found = find_heads(scores)
    designs = all_designs()
    name_scores = head_name_scores(model)
    named = named_heads(name_scores)
    report = {
        "schema": REPORT_SCHEMA,
        "heads": {"scores": {kind: _grid(table.tolist()) for kind, table in scores.items()},
                  "found": {kind: {**asdict(head), "score": _round(head.score), "runner_up": _round(head.runner_up)}
                            for kind, head in found.items()},
                  "name_scores": name_scores, "named": named, "name_margin": NAME_MARGIN},  # fmt: skip
        "untrained": untrained_baseline(designs),
        "read_factor": READ_FACTOR,
        "nonlinearities": nonlinearities(model),
        # sequential: each block's MLP reads the state after its attention write; parallel (Pythia's): the block input
        "block_arrangement": "parallel" if getattr(model.config, "use_parallel_residual", False) else "sequential",
        "verdict_words": VERDICT_WORDS,
        "designs": {name: measure_design(model, design) for name, design in designs.items()},
        "lab06": lab06_corruption(model),
        "distribution": measure_distribution(model, named, pairs),
    }
    check_distribution(report["distribution"], min(pairs, PAIRS))
    for name, design in report["designs"].items():
        null = report["distribution"]["designs"][name]["null"]
        design["readable"] = abs(design["gap"]) > READ_FACTOR * null["largest_gap"]
    return report


def _interval(summary: dict) -> str:
    return f"{shown(summary['mean']):.3f} [{shown(summary['low']):.3f}, {shown(summary['high']):.3f}]"


def summary_lines(report: dict) -> list[str]:
    """What the runner prints: the named heads, then per design the gap, the null, the identities, path patching
    and per method and named kind the fraction of pairs of each verdict."""
    distribution = report["distribution"]
    words = report["verdict_words"]
    lines = [f"{distribution['pairs']} held-out pairs per design (period {distribution['period']}); intervals: "
             f"{distribution['interval']}"]  # fmt: skip
    for kind, heads in report["heads"]["named"].items():
        listed = ", ".join(f"block {b} head {h}" for b, h in heads) or "none"
        lines.append(f"{HEAD_KINDS[kind]} heads (score exceeds its control by at least {report['heads']['name_margin']}): {listed}")
    for name, design in report["designs"].items():
        measured = distribution["designs"][name]
        null = measured["null"]
        rule = f"above {report['read_factor']:g} times the null pairs' largest gap"
        status = f"read: {rule}" if design["readable"] else f"not read: not {rule}"
        lines.append(f"{name}: worked example gap {shown(design['gap']):.3f} ({status}); "
                     f"over pairs {_interval(measured['gap'])}; null pairs' gap {_interval(null['gap'])}")  # fmt: skip
        for identity in design["identities"]:
            spots = identity.get("positions") or ([] if identity["position"] is None else [identity["position"]])
            where = f" at position{'s' if len(spots) > 1 else ''} {' and '.join(map(str, spots))}" if spots else ""
            label = "hybrid prompt (observed)" if identity.get("mirror") else "identity"  # as the page marks them
            lines.append(f"  {label}: {identity['site']}{where}: {identity['why']}")
        lines.append("  block 0 attention write into block 1's " + ", ".join(
            f"{key} {_interval(value)}" for key, value in measured["path"].items()))  # fmt: skip
        for kind in measured["not_testable"]:  # why, once per design; each method's line says the verdict
            lines.append(f"  {HEAD_KINDS[kind]} heads not identifiable in this design: {not_testable_reason(name, kind, report)}")
        for method, table in measured["heads"].items():  # in the page's words: its method names, kinds, percents
            for kind in measured["not_testable"]:
                lines.append(f"  {METHOD_NAMES[method]}, {HEAD_KINDS[kind]} heads: {words['not_testable']}: {PREDICTED_NEAR_ZERO}")
            for kind in measured.get("not_testable_by_method", {}).get(method, ()):
                lines.append(f"  {METHOD_NAMES[method]}, {HEAD_KINDS[kind]} heads: {words['not_testable']} by this method: "
                             f"{by_method_reason(name, method)}.{by_method_observed(report, name, method, kind)}")  # fmt: skip
            for entry in table["kinds"].values():
                said = verdict_fractions(entry, words)
                if other := complement_of(entry):
                    chance = complement_words(other, entry["block"])
                elif entry["chance"] < 1:
                    chance = f"a random pick would name one in {percent(entry['chance'])} of the pairs where a head clears the null bar"
                else:  # as the page reads it: a design fixed the other heads, or every head of the block is named
                    chance = words["no_test"] if entry.get("fixed") else "every head of the block is named, so this is no test"
                bar = null["heads"][method][entry["block"]]  # the null bar the verdicts count against
                lines.append(f"  {METHOD_NAMES[method]}, {HEAD_KINDS[entry['kind']]} heads (block {entry['block']} heads "
                             f"{', '.join(map(str, entry['named']))}; {chance}; null bar {shown(bar, 2):.2f}): {said}")  # fmt: skip
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
