"""``residlab pythia plan|fetch|verify|pin|...``: the same functions the runner uses, as package commands.

Each subcommand is one small function taking its own argument list; ``SUBCOMMANDS`` maps names to them.
"""

from __future__ import annotations

import argparse
import sys

from residlab.pythia import runner


def _subcommand_parser(name: str, function, **defaults) -> argparse.ArgumentParser:
    """A parser named ``residlab pythia NAME``, described by the function's docstring; ``defaults`` fill in what
    the runner's shared code reads and this subcommand does not take."""
    parser = argparse.ArgumentParser(prog=f"residlab pythia {name}", description=function.__doc__.strip())
    parser.set_defaults(**{**dict(plan=False, artifacts=None, offline=False, output=None, position=None), **defaults})
    return parser


def plan_command(argv: list[str]) -> int:
    """The six files, their sizes and the total, from the lock; no network."""
    parser = _subcommand_parser("plan", plan_command, plan=True)
    runner.add_lock_option(parser)
    return _run(parser.parse_args(argv), ["plan", *argv])


def fetch_command(argv: list[str]) -> int:
    """Download what is missing of the six pinned files into --artifacts DIR, verifying each."""
    parser = _subcommand_parser("fetch", fetch_command)
    runner.add_artifacts_option(parser, required=True)
    runner.add_lock_option(parser)
    runner.add_fetch_options(parser)
    return _run(parser.parse_args(argv), ["fetch", *argv])


def verify_command(argv: list[str]) -> int:
    """Verify --artifacts DIR against the lock, offline."""
    parser = _subcommand_parser("verify", verify_command, offline=True)
    runner.add_artifacts_option(parser, required=True)
    runner.add_lock_option(parser)
    args = parser.parse_args(argv)
    return _run(args, ["verify", *argv], fetch_hint=f"run `residlab pythia fetch --artifacts {args.artifacts}`")


def pin_command(argv: list[str]) -> int:
    """Instructors: re-read a revision from the Hub API and rewrite the lock."""
    from residlab.pythia import pin

    return pin.main(argv)


def observe_command(argv: list[str]) -> int:
    """Capture the residual stream of verified files (offline) or of the synthetic specimen into --output DIR."""
    import tempfile
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="residlab pythia observe", description=observe_command.__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--artifacts", type=Path, metavar="DIR", help="verified artifact directory (checked offline)")
    source.add_argument(
        "--specimen", action="store_true", help="the synthetic specimen (random weights, NOT Pythia), written to a temp dir"
    )
    parser.add_argument("--lock", type=Path, metavar="FILE", help="lock for --artifacts (default: the pinned lock)")
    parser.add_argument("--seed", type=int, default=0, help="specimen seed (with --specimen)")
    parser.add_argument("--output", type=Path, metavar="DIR", required=True, help="new or empty result directory")
    parser.add_argument("--position", type=int, help="token position to observe (default: the last token)")
    args = parser.parse_args(argv)
    if args.specimen and args.lock:
        parser.error("--lock goes with --artifacts; --specimen writes its own lock")
    from residlab.capture.outdir import check_output_directory
    from residlab.pythia import observe
    from residlab.pythia.artifacts import verify_artifacts
    from residlab.pythia.lock import load_lock, parse_lock

    command = ["residlab", "pythia", "observe", *argv]
    try:
        check_output_directory(args.output)  # before the specimen is written or anything loaded
        if args.specimen:
            from residlab.pythia.specimen import write_specimen

            with tempfile.TemporaryDirectory(prefix="residlab-specimen-") as scratch:
                lock_data = write_specimen(Path(scratch) / "artifacts", seed=args.seed)
                lock = parse_lock(lock_data, f"write_specimen(seed={args.seed})")
                verified = verify_artifacts(Path(scratch) / "artifacts", lock)
                result = observe.observe_to_directory(verified, args.output, command=command, position=args.position)
        else:
            verified = verify_artifacts(args.artifacts, load_lock(args.lock))
            result = observe.observe_to_directory(verified, args.output, command=command, position=args.position)
    except runner.REFUSALS as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    observe.print_summary(result, args.output)
    return 0


def _run(args, arguments: list[str], **options) -> int:
    try:
        return runner.run_runner(args, command=["residlab", "pythia", *arguments], **options)
    except runner.REFUSALS as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


SUBCOMMANDS = {
    "plan": plan_command,
    "fetch": fetch_command,
    "verify": verify_command,
    "pin": pin_command,
    "observe": observe_command,
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in SUBCOMMANDS:
        stream = sys.stdout if argv and argv[0] in ("-h", "--help") else sys.stderr
        print("usage: residlab pythia {" + ",".join(SUBCOMMANDS) + "} [options]", file=stream)
        for name, function in SUBCOMMANDS.items():
            print(f"  {name:<8} {function.__doc__.strip().splitlines()[0]}", file=stream)
        if argv and argv[0] not in ("-h", "--help"):
            print(f"unknown subcommand {argv[0]!r}", file=stream)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return SUBCOMMANDS[argv[0]](argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
