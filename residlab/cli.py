"""The ``residlab`` command. Each subcommand hands its arguments to the module that computes it,
so ``residlab toy`` and ``python3 trace_residual_toy.py`` run the same ``main``."""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module whose main(argv) runs it, one-line help). Modules are imported only when chosen,
# so `residlab --help` and `residlab toy` never load torch.
COMMANDS = {
    "toy": ("residlab.course.lab05.toy", "Lab 05 Parts 1-3: the toy residual trace as a JSON report"),
    "lesson": ("residlab.course.models.lesson_lab", "Lesson 2.1: train the copy model, audit it, profile pre-LN vs post-LN gradients"),
    "paper": ("residlab.course.lab04.paper_lab", "Lab 04: positional encoding, the post-LN block traced and checked, gradient routes"),
    "pythia": ("residlab.pythia.cli", "Pythia-14M specimen: plan, fetch, verify, pin, observe"),
    "audit": ("residlab.course.lab06.copy_audit", "the Residual Contribution Audit: write a verifiable packet, or verify one"),
    "induction": ("residlab.course.lab06.induction_cli", "the two-block induction model: train, describe, audit, verify"),
    "site": ("residlab.build.site", "check the pages statically, or run their cells in a Jupyter kernel as Quarto would"),
    "sync": ("residlab.build.sync", "write or --check the files derived from the package (runners, pins, _variables.yml)"),
    "release": ("residlab.build.release", "record the build as a term's release; verify one; diff the numbers of two builds"),
    "pins": ("residlab.build.pins_command", "how far the pins are behind (outdated); whether the newest releases work (try-latest)"),
}


# Their modules are also the downloadable runners, whose help carries the runner's name unless given the command's.
RUNNER_COMMANDS = ("toy", "lesson", "paper", "induction")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="residlab", description="Compute what the residual-stream course site shows.")
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, help_text) in COMMANDS.items():
        subcommands.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in COMMANDS:
        # Hand the rest over untouched: argparse would reorder or reject the subcommand's own options.
        command_main = importlib.import_module(COMMANDS[argv[0]][0]).main
        if argv[0] in RUNNER_COMMANDS:
            return command_main(argv[1:], prog=f"residlab {argv[0]}") or 0
        return command_main(argv[1:]) or 0
    build_parser().parse_args(argv)  # --help, or an error naming the unknown command
    return 2


if __name__ == "__main__":
    sys.exit(main())
