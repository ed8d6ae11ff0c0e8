"""Training time of the induction model (issue 27's goal: at most 20 s on one core) beside the copy model's.

Run: .venv/bin/python benchmarks/induction_training.py [--repeats N] [--seed 0]   (N rounds, default 3)

Both trainings run in this one process on one thread, side by side, once per round in a seeded random order
(``measure.side_by_side``): Lesson 2.1's copy model (700 steps) and the induction model's recipe
(``residlab.course.models.induction.recipe``, which stops at its criterion). It prints the median wall time and CPU time
of each, their per-round ratio, and the induction training's steps and time per step. On a loaded machine both
slow down together; the ratio, the CPU time (near the wall time on an idle core) and the load average printed
beside them say how far the seconds are from an idle core's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from measure import median_ms, ratio_text, side_by_side
from residlab.course.models.induction import recipe
from residlab.course.models import copy_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds, each timing both trainings")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rounds' random orders")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    copy_model.train_copy_model(steps=2)  # warm-up, untimed: torch's and transformers' one-off initialisation
    recipe.train_induction_model(steps=2)
    cpu_seconds: dict[str, list[float]] = {"copy model": [], "induction model": []}
    induction_log: list = []

    def cpu_timed(name, train):
        def run():
            start = time.process_time()
            train()
            cpu_seconds[name].append(time.process_time() - start)

        return run

    load_before = os.getloadavg()[0]
    times = side_by_side({"copy model": cpu_timed("copy model", copy_model.train_copy_model),
                          "induction model": cpu_timed("induction model", lambda: recipe.train_induction_model(
                              log=induction_log))},
                         args.repeats, warmup=0, seed=args.seed)  # fmt: skip
    load_after = os.getloadavg()[0]
    steps = induction_log[-1][0]  # the same every round: the training is deterministic
    induction_s = median_ms(times, "induction model") / 1e3
    print(f"median of {args.repeats} rounds, one thread, in a random order each round (seed {args.seed}); "
          f"load average {load_before:.1f} before, {load_after:.1f} after, on {os.cpu_count()} cores")
    print(f"copy model      ({copy_model.TRAINING_STEPS} steps of {copy_model.BATCH_SIZE}): "
          f"{median_ms(times, 'copy model') / 1e3:7.2f} s wall, {statistics.median(cpu_seconds['copy model']):7.2f} s CPU")
    print(f"induction model ({steps} steps of {recipe.BATCH_SIZE}, of at most {recipe.TRAINING_STEPS}): "
          f"{induction_s:7.2f} s wall, "
          f"{statistics.median(cpu_seconds['induction model']):7.2f} s CPU "
          f"({induction_s / steps * 1e3:.1f} ms a step; goal: at most 20 s on an idle core)")
    print(f"ratio induction / copy model: {ratio_text(times, 'induction model', 'copy model')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
