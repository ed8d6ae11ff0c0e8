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

from residlab.pythia.artifacts import ArtifactError, fetch_artifacts, plan_text, verify_artifacts  # bundled
from residlab.pythia.lock import LockError, load_lock  # bundled


def build_runner_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Download (or verify) the pinned Pythia-14M files, then capture its residual stream.",
    )
    parser.add_argument("--plan", action="store_true", help="print the six files and their total, then stop (no network)")
    parser.add_argument("--artifacts", type=Path, metavar="DIR", help="the directory holding (or to receive) the six files")
    parser.add_argument("--offline", action="store_true", help="only verify the files already in --artifacts; download nothing")
    parser.add_argument("--lock", type=Path, metavar="FILE", help="use this lock instead of the pinned one")
    parser.add_argument("--output", type=Path, metavar="DIR", help="write manifest.json, observations.json, captures.json here")
    parser.add_argument(
        "--position", type=int, help="token position to observe, chosen after seeing the tokens (default: the last)"
    )
    parser.add_argument(
        "--endpoint", default=os.environ.get("HF_ENDPOINT"), help="Hub endpoint (default: HF_ENDPOINT, else huggingface.co)"
    )
    return parser


def _refuse_nonempty_output(output: Path) -> None:
    # Checked before any download, so a wrong --output costs nothing; the observation checks again.
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ArtifactError(f"{output}: the output directory is not empty; choose a new one (nothing is overwritten)")


def run_runner(args: argparse.Namespace, command: list[str]) -> int:
    lock = load_lock(args.lock)
    if args.plan:
        print(plan_text(lock))
        return 0
    if args.output is not None:
        _refuse_nonempty_output(args.output)
    if args.offline:
        verified = verify_artifacts(args.artifacts, lock)
        print(f"{args.artifacts}: six files verified offline against {lock.origin}; nothing downloaded")
        if verified.recorded_hashes:
            print(
                f"  {', '.join(verified.recorded_hashes)}: checked against the sha256 the fetch recorded, because the "
                f"lock is incomplete; complete it with `residlab pythia pin --revision {lock.revision}`"
            )
    else:
        print(plan_text(lock))
        verified = fetch_artifacts(args.artifacts, lock, endpoint=args.endpoint)
    if args.output is not None:
        from residlab.pythia.observe import ObservationError, observe_to_directory, print_summary  # bundled

        try:
            result = observe_to_directory(verified, args.output, command=command, position=args.position)
        except ObservationError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
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
    except (ArtifactError, LockError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
