"""Wall time and peak memory of the full Lesson 2.1 computation, as a ratio to the bare training loop.

Run: .venv/bin/python benchmarks/lesson_computation.py [--repeats N]   (best of N, default 3: other load on the
machine only ever adds time)

Both measurements run in this one process, side by side: first the training loop alone (700 AdamW steps),
then the whole lesson computation (training, audit and the 60-stack gradient profile). Peak memory is the
process's maximum resident set size (resource.getrusage), read after each phase, so the second reading is the
peak of everything the lesson does. (tracemalloc is not used: it misses torch's tensor memory and slows the
timed Python code.) A two-step warm-up run first keeps torch's one-off lazy initialisation out of both timings.
"""

from __future__ import annotations

import argparse
import sys

from measure import peak_rss_mib, timed
from residlab.course import lesson_lab


def full_lesson() -> None:
    log: list = []
    model = lesson_lab.train_copy_model(log=log)
    lesson_lab.audit_model(model)
    lesson_lab.gradient_profile()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="time each phase this many times; report the best")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    lesson_lab.train_copy_model(steps=2)  # warm-up, untimed
    training = [timed(lambda: lesson_lab.train_copy_model()) for _ in range(args.repeats)]
    rss_after_training = peak_rss_mib()
    lesson = [timed(full_lesson) for _ in range(args.repeats)]
    rss_after_lesson = peak_rss_mib()

    training_s, lesson_s = min(training), min(lesson)
    print(f"training loop alone     : {training_s:7.2f} s")
    print(f"full lesson computation : {lesson_s:7.2f} s")
    print(f"  (training + audit + gradient profile of {lesson_lab.PROFILE_SEEDS} seeds x 2 arrangements)")
    print(f"process max RSS         : {rss_after_training:7.1f} MiB after training, {rss_after_lesson:.1f} MiB after the lesson")
    print(f"ratio full / training   : {lesson_s / training_s:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
