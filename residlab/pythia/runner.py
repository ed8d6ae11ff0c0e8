"""The command line of ``inspect_residual_stream.py``: plan, fetch or verify the pinned files, then observe.

    python3 inspect_residual_stream.py --plan
    python3 inspect_residual_stream.py --artifacts pythia-artifacts --output run-01
    python3 inspect_residual_stream.py --offline --artifacts pythia-artifacts --output run-02

``--plan`` needs only the standard library and makes no request. ``--artifacts DIR`` downloads what is missing
of the six pinned files (or, with ``--offline``, only verifies them); ``--output DIR`` then runs the observation
on the verified files. ``--lock FILE`` points everything at another lock (the tests' synthetic specimen).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from residlab.capture.outdir import OutputDirectoryError, check_output_directory
from residlab.pythia.artifacts import (
    ArtifactError, FetchLimits, fetch_artifacts, plan_text, unpinned_note, verify_artifacts,
)
from residlab.pythia.load import ObservationError
from residlab.pythia.lock import LockError, load_lock
from residlab.pythia.observe import observe_to_directory, print_summary

# What a run can refuse with: each is printed as one line, with exit status 1 (never a traceback).
REFUSALS = (ArtifactError, LockError, ObservationError, OutputDirectoryError)


def build_runner_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Download (or verify) the pinned Pythia-14M files, then capture its residual stream.",
    )
    parser.add_argument("--plan", action="store_true", help="print the six files and their total, then stop (no network)")
    add_artifacts_option(parser)
    parser.add_argument("--offline", action="store_true", help="only verify the files already in --artifacts; download nothing")
    add_lock_option(parser)
    parser.add_argument("--output", type=Path, metavar="DIR", help="write manifest.json, observations.json, captures.json here")
    parser.add_argument(
        "--position", type=int,
        help="token position the summary selects, chosen after seeing the tokens (default: the last; all are observed)",
    )
    add_fetch_options(parser)
    return parser


# The options shared with ``residlab pythia plan|fetch|verify``, each of which takes only the ones it uses.
def add_artifacts_option(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument("--artifacts", type=Path, metavar="DIR", required=required,
                        help="the directory holding (or to receive) the six files")


def add_lock_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lock", type=Path, metavar="FILE", help="use this lock instead of the pinned one")


def add_fetch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--endpoint", default=os.environ.get("HF_ENDPOINT"), help="Hub endpoint (default: HF_ENDPOINT, else huggingface.co)"
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=FetchLimits().deadline_s,
        metavar="SECONDS",
        help=f"give up a fetch that takes longer than this in all (default {FetchLimits().deadline_s:g})",
    )


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def run_runner(args: argparse.Namespace, command: list[str], fetch_hint: str = "run the same command without --offline") -> int:
    """Plan, fetch or verify, then observe. ``fetch_hint`` says how to fetch instead, for a failed offline run."""
    lock = load_lock(args.lock)
    if args.plan:
        print(plan_text(lock))
        return 0
    if args.output is not None:
        check_output_directory(args.output)  # before any download, so a wrong --output costs nothing
    if args.offline:
        try:
            verified = verify_artifacts(args.artifacts, lock)
        except ArtifactError as error:
            raise ArtifactError(
                f"{error}\nTo fetch what is missing, {fetch_hint}: it downloads only the missing files and keeps "
                "those that match (it never overwrites a file; one that does not match is named: move it away first)"
            ) from None
        print(f"{args.artifacts}: six files verified offline against {lock.origin}; nothing downloaded")
        if verified.unpinned:
            print("  " + unpinned_note(verified.unpinned))
    else:
        print(plan_text(lock))
        verified = fetch_artifacts(args.artifacts, lock, endpoint=args.endpoint, limits=FetchLimits(deadline_s=args.timeout))
    if args.output is not None:
        result = observe_to_directory(verified, args.output, command=command, position=args.position)
        print_summary(result, args.output)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_runner_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.plan and args.artifacts is None:
        parser.error("give --plan, or --artifacts DIR")
    if args.plan and (args.offline or args.output):
        parser.error("--plan only prints the plan; run again without it to fetch or observe")
    try:
        return run_runner(args, command=list(sys.argv) if argv is None else ["inspect_residual_stream.py", *argv])
    except REFUSALS as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
