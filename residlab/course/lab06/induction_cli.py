"""``residlab induction``, or the standalone ``induction_model.py``: train the induction model, describe a saved
one, audit it on Lab 06 Part 2's input, and verify that audit's packet.

    python3 induction_model.py train --output induction-model
    python3 induction_model.py describe induction-model
    python3 induction_model.py audit induction-model --output packet-induction
    python3 induction_model.py verify packet-induction --model induction-model

``train``: DIR is the model directory: config.json and model.safetensors are the model, all that
``GPTNeoXForCausalLM.from_pretrained`` and the audit's ``--model DIR`` read (no tokenizer, no code, no training
state). Beside them, manifest.json describes them (the recipe, the seed, the library versions, the two files'
digests and every measurement of ``induction_lab.measure``); no loader reads it, so the directory loads exactly as
Pythia's does. All three files or none, under the one output rule (``residlab.capture.outdir``): DIR must be a new
name or an empty directory, checked before training, and is written by one rename of a finished folder.

``describe`` measures a saved model again (held-out accuracy, the heads found); ``audit`` writes the Residual
Contribution Audit of a saved model as a packet, on the input and the declared writes of Lab 06 Part 2
(``induction_audit``); ``verify`` re-runs such a packet against the model. Exit status: 0 done (or verified),
1 refused or not verified, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from residlab.audit.packet import audit_to_directory, summary_lines
from residlab.audit.loading import place_directory
from residlab.audit.subject import AuditError, seed_argument
from residlab.audit.verify import verify_packet
from residlab.capture.outdir import OutputDirectoryError, check_output_directory, write_directory


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="The two-block induction model of the glossary and Lab 06.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    train = commands.add_parser("train", help="train it and save config.json, model.safetensors and manifest.json")
    train.add_argument("--output", type=Path, required=True, help="a new or empty directory")
    train.add_argument("--seed", type=seed_argument, default=None, help="the training seed (default: the recipe's)")
    describe = commands.add_parser("describe", help="measure a saved model: held-out accuracy, the heads found")
    describe.add_argument("model", type=Path, help="the model directory train wrote")
    audit = commands.add_parser("audit", help="audit a saved model on Lab 06 Part 2's input, as a packet")
    audit.add_argument("model", type=Path, help="the model directory train wrote")
    audit.add_argument("--output", type=Path, required=True, help="the packet: a new or empty directory")
    verify = commands.add_parser("verify", help="re-run an audit packet against the model and check it")
    verify.add_argument("packet", type=Path, help="the packet directory audit wrote")
    verify.add_argument("--model", type=Path, required=True, help="the model directory it audited")
    return parser


def report_lines(report: dict) -> list[str]:
    """What train and describe print of a measured model: the accuracy, then each head kind in the page's words
    (``induction.sentences.head_sentence``: a tie closer than its margin is said to be a tie the rule cannot split)."""
    from residlab.course.models.induction.sentences import head_sentence

    halves = report["halves"]
    lines = [f"held-out top-1 accuracy: first half {halves['first']['accuracy']:.3f}, "
             f"repeated half {halves['repeated']['accuracy']:.3f}"]  # fmt: skip
    for kind in ("previous_token", "induction"):
        lines.append(head_sentence(report, kind))
    return lines


def train(output: Path, seed: int | None) -> int:
    from residlab.course.models.induction.induction_lab import manifest, model_files, train_and_measure
    from residlab.course.models.induction.recipe import TRAINING_SEED

    check_output_directory(output)  # before any training
    run = train_and_measure(TRAINING_SEED if seed is None else seed)
    files = model_files(run)
    files["manifest.json"] = (json.dumps(manifest(run, files), indent=1, sort_keys=True, allow_nan=False) + "\n").encode()
    write_directory(output, files)
    print(f"trained {run.report['steps_trained']} steps in {run.training_seconds:.1f} s ({run.training_cpu_seconds:.1f} s "
          f"of CPU time; seed {run.seed}); wrote {', '.join(files)} to {output}")  # fmt: skip
    for line in report_lines(run.report):
        print(line)
    return 0


def describe(model_dir: Path) -> int:
    from residlab.course.models.induction.induction_lab import measure

    # Loaded as the audit loads it (offline, safetensors, eager attention, float32): one line if it is no model.
    for line in report_lines(measure(place_directory(model_dir).model)):
        print(line)
    return 0


def audit(model_dir: Path, output: Path) -> int:
    from residlab.course.lab06.induction_audit import declared_sites, experiment_input
    from residlab.course.models.induction.measures import patching_experiment

    check_output_directory(output)  # refused before the model is loaded
    subject = place_directory(model_dir)
    experiment = patching_experiment(subject.model)  # the rival is the model's own, by the lesson's rule
    packet = audit_to_directory(subject, experiment_input(experiment), declared_sites(experiment), output)
    for line in summary_lines(packet):
        print(line)
    print(f"wrote model.json, input.json, intervention.json, measurement.json into {output}")
    return 0


def verify(packet_dir: Path, model_dir: Path) -> int:
    report = verify_packet(packet_dir, place_directory(model_dir))
    print("\n".join(report.printed()))
    return 0 if report.passed else 1


def main(argv: list[str] | None = None, prog: str = "induction_model.py") -> int:
    args = build_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "train":
            return train(args.output, args.seed)
        if args.command == "describe":
            return describe(args.model)
        if args.command == "audit":
            return audit(args.model, args.output)
        return verify(args.packet, args.model)
    except (AuditError, OutputDirectoryError) as refused:  # a refusal: one line, nothing written
        print(f"{prog}: {refused}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
