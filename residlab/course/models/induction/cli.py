"""``residlab induction train --output DIR``: train the induction model and save it as a model directory.

DIR is the model directory: config.json and model.safetensors are the model, all that
``GPTNeoXForCausalLM.from_pretrained`` and ``residlab audit --model DIR`` read (no tokenizer, no code, no training
state). Beside them, manifest.json describes them (the recipe, the seed, the library versions, the two files'
digests and every measurement of ``induction_lab.measure``); no loader reads it, so the directory loads exactly as
Pythia's does. All three files or none, under the one output rule (``residlab.capture.outdir``): DIR must be a new
name or an empty directory, checked before training, and is written by one rename of a finished folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from residlab.audit.cli import seed_argument
from residlab.capture.outdir import OutputDirectoryError, check_output_directory, write_directory


def build_parser(prog: str = "residlab induction") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="The two-block induction model of the glossary and Lab 06.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    train = commands.add_parser("train", help="train it and save config.json, model.safetensors and manifest.json")
    train.add_argument("--output", type=Path, required=True, help="a new or empty directory")
    train.add_argument("--seed", type=seed_argument, default=None, help="the training seed (default: the recipe's)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        check_output_directory(args.output)  # before any training
    except OutputDirectoryError as refused:
        print(f"residlab induction: {refused}", file=sys.stderr)
        return 2
    from residlab.course.models.induction import induction_lab
    from residlab.course.models.induction.recipe import TRAINING_SEED

    run = induction_lab.train_and_measure(TRAINING_SEED if args.seed is None else args.seed)
    files = induction_lab.model_files(run)
    manifest = induction_lab.manifest(run, files)
    files["manifest.json"] = (json.dumps(manifest, indent=1, sort_keys=True, allow_nan=False) + "\n").encode()
    try:
        write_directory(args.output, files)
    except OutputDirectoryError as refused:
        print(f"residlab induction: {refused}", file=sys.stderr)
        return 2
    halves = run.report["halves"]
    found = run.report["heads_found"]
    print(f"trained {run.report['steps_trained']} steps in {run.training_seconds:.1f} s ({run.training_cpu_seconds:.1f} s "
          f"of CPU time; seed {run.seed}); wrote {', '.join(files)} to {args.output}")  # fmt: skip
    print(f"held-out top-1 accuracy: first half {halves['first']['accuracy']:.3f}, "
          f"repeated half {halves['repeated']['accuracy']:.3f}")  # fmt: skip
    for kind in ("previous_token", "induction"):
        head = found[kind]
        print(f"highest {head['kind']} score: block {head['block']} head {head['head']} ({head['score']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
