"""Wall time and peak memory of the full Lesson 2.1 computation, as a ratio to the bare training loop.

Run: .venv/bin/python benchmarks/lesson_computation.py [--repeats N] [--seed 0]   (N rounds, default 3)

Both measurements run in this one process, side by side, once per round in a seeded random order
(``measure.side_by_side``): the training loop alone (700 AdamW steps), and the whole lesson computation
(training, audit and the 60-stack gradient profile). It prints the median of each and the median [quartiles]
of the per-round ratios. Peak memory is the process's maximum resident set size (resource.getrusage), read
after the training-only warm-up and after all rounds, so the second reading is the peak of everything the lesson
does. (tracemalloc is not used: it misses torch's tensor memory and slows the timed Python code.) The warm-up, a
two-step training and one full training loop, keeps torch's one-off lazy initialisation out of every timing.
"""

from __future__ import annotations

import argparse
import sys

from measure import median_ms, peak_rss_mib, ratio_text, side_by_side
from residlab.course.models import lesson_lab


def full_lesson() -> None:
    log: list = []
    model = lesson_lab.train_copy_model(log=log)
    lesson_lab.audit_model(model)
    lesson_lab.gradient_profile()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds, each timing both phases")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rounds' random orders")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    lesson_lab.train_copy_model(steps=2)  # warm-up, untimed
    lesson_lab.train_copy_model()
    rss_after_training = peak_rss_mib()
    times = side_by_side({"training": lambda: lesson_lab.train_copy_model(), "lesson": full_lesson}, args.repeats,
                         warmup=0, seed=args.seed)  # fmt: skip
    rss_after_lesson = peak_rss_mib()

    print(f"median of {args.repeats} rounds, the two phases in a random order each round (seed {args.seed})")
    print(f"training loop alone     : {median_ms(times, 'training') / 1e3:7.2f} s")
    print(f"full lesson computation : {median_ms(times, 'lesson') / 1e3:7.2f} s")
    print(f"  (training + audit + gradient profile of {lesson_lab.PROFILE_SEEDS} seeds x 2 arrangements)")
    print(f"process max RSS         : {rss_after_training:7.1f} MiB after training, {rss_after_lesson:.1f} MiB after the lesson")
    print(f"ratio full / training   : {ratio_text(times, 'lesson', 'training')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
