"""``residlab pythia plan|fetch|verify|pin|...``: the same functions the runner uses, as package commands.

Each subcommand is one small function taking its own argument list; ``SUBCOMMANDS`` maps names to them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from residlab.pythia import cache, runner
from residlab.pythia.lock import load_lock


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
    """Download what is missing of the six pinned files into --artifacts DIR (or --cache), verifying each."""
    parser = _subcommand_parser("fetch", fetch_command)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--artifacts", type=Path, metavar="DIR", help="the directory holding (or to receive) the six files")
    where.add_argument("--cache", action="store_true",
                       help=f"the lock's cache folder, which `make render` uses ({cache.CACHE_ENV}, else .residlab-pythia/, "
                            f"then the lock's digest); the lock is --lock, else {cache.LOCK_ENV}, else the pinned one")
    runner.add_lock_option(parser)
    runner.add_fetch_options(parser)
    args = parser.parse_args(argv)
    if not args.cache:
        return _run(args, ["fetch", *argv])
    # The publish workflow's step: any refusal is one line naming the file and the reason.
    try:
        args.lock = args.lock or os.environ.get(cache.LOCK_ENV) or None
        args.artifacts = cache.cache_folder(load_lock(args.lock))
        return runner.run_runner(args, command=["residlab", "pythia", "fetch", *argv])
    except runner.REFUSALS as error:
        print("error: " + "; ".join(line.strip() for line in str(error).splitlines() if line.strip()), file=sys.stderr)
        return 1


def capture_command(argv: list[str]) -> int:
    """Instructors: refresh the committed capture of verified files (default: the lock's cache folder)."""
    parser = argparse.ArgumentParser(prog="residlab pythia capture", description=capture_command.__doc__)
    parser.add_argument("--captures", type=Path, metavar="DIR", required=True,
                        help="the folder of committed captures; the capture goes into DIR/<repository name>-<revision>")
    parser.add_argument("--artifacts", type=Path, metavar="DIR", help="verified files (default: the lock's cache folder)")
    parser.add_argument("--lock", type=Path, metavar="FILE", help=f"the lock (default: {cache.LOCK_ENV}, else the pinned one)")
    args = parser.parse_args(argv)
    from residlab.pythia.refresh import refresh_capture

    try:
        lock = load_lock(args.lock or os.environ.get(cache.LOCK_ENV) or None)
        folder = refresh_capture(lock, args.captures, args.artifacts)
    except runner.REFUSALS as error:
        print("error: " + "; ".join(line.strip() for line in str(error).splitlines() if line.strip()), file=sys.stderr)
        return 1
    print(f"{folder}: the committed capture of {lock.repository} at revision {lock.revision}, from verified files")
    return 0


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
    "capture": capture_command,
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
