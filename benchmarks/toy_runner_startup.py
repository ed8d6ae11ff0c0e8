"""Whole-process time of the toy runner as a ratio to an empty interpreter (`python3 -c pass`).

Both commands run as fresh processes, interleaved in the same run (empty, runner, empty, runner, ...),
so machine load affects both alike. Prints each median and the ratio runner / empty.

    python3 benchmarks/toy_runner_startup.py [--repeats N] [--python PATH]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNNER = Path(__file__).resolve().parent.parent / "assets" / "labs" / "trace_residual_toy.py"


def wall_seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument("--python", default=sys.executable, help="interpreter for both commands (default: this one)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if not RUNNER.exists():
        parser.error(f"{RUNNER} is missing: run `residlab sync` first")

    empty = [args.python, "-I", "-c", "pass"]
    runner = [args.python, "-I", str(RUNNER)]
    wall_seconds(empty), wall_seconds(runner)  # warm the file cache; not counted
    empty_times, runner_times = [], []
    for _ in range(args.repeats):
        empty_times.append(wall_seconds(empty))
        runner_times.append(wall_seconds(runner))

    empty_median, runner_median = statistics.median(empty_times), statistics.median(runner_times)
    print(f"interpreter: {args.python}")
    print(f"repeats: {args.repeats} of each, interleaved")
    print(f"python -c pass      median {empty_median * 1000:8.1f} ms")
    print(f"trace_residual_toy  median {runner_median * 1000:8.1f} ms")
    print(f"ratio runner / empty: {runner_median / empty_median:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
