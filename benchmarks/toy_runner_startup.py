"""Whole-process time of the toy runner as a ratio to an empty interpreter (`python3 -c pass`).

Both commands run as fresh processes, once each per round in a seeded random order after a warm-up
(``measure.side_by_side``), so machine load affects both alike. Prints each median and the median [quartiles]
of per-round ratios runner / empty.

    python3 benchmarks/toy_runner_startup.py [--repeats N] [--python PATH] [--seed 0]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from measure import median_ms, ratio_text, side_by_side

RUNNER = Path(__file__).resolve().parent.parent / "assets" / "labs" / "trace_residual_toy.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument("--python", default=sys.executable, help="interpreter for both commands (default: this one)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rounds' random orders")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not RUNNER.exists():
        parser.error(f"{RUNNER} is missing: run `residlab sync` first")

    empty = [args.python, "-I", "-c", "pass"]
    runner = [args.python, "-I", str(RUNNER)]
    times = side_by_side({
        "python -c pass": lambda: subprocess.run(empty, check=True, stdout=subprocess.DEVNULL),
        "trace_residual_toy": lambda: subprocess.run(runner, check=True, stdout=subprocess.DEVNULL),
    }, args.repeats, warmup=1, seed=args.seed)  # fmt: skip
    print(f"interpreter: {args.python}")
    print(f"repeats: {args.repeats} rounds, each command once per round in a random order (seed {args.seed})")
    for name in times:
        print(f"{name:<19} median {median_ms(times, name):8.1f} ms")
    print(f"ratio runner / empty: {ratio_text(times, 'trace_residual_toy', 'python -c pass')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
