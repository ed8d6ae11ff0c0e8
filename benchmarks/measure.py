"""Measuring helpers shared by the benchmark scripts (run them as `python benchmarks/NAME.py`)."""

from __future__ import annotations

import argparse
import resource
import sys
import time

# One goal for the capture, printed by both capture benchmarks: a capturing forward of the fixed sentence
# within this ratio of a plain forward.
CAPTURE_GOAL = 1.05


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB."""
    # ru_maxrss is KiB on Linux and bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def timed(function) -> float:
    """Wall seconds of one call."""
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def specimen_and_fixed_sentence(threads: int):
    """Set torch's CPU threads; return the synthetic specimen (Pythia-14M's architecture, random weights, seed 0)
    and Lab 05's fixed sentence as token ids (1, 8): the subject and input of the capture benchmarks."""
    import torch
    from tokenizers import Tokenizer

    from residlab.pythia import observe
    from residlab.pythia.specimen import TOKENIZER_SOURCE, build_specimen_model

    torch.set_num_threads(threads)
    tokenizer = Tokenizer.from_file(str(TOKENIZER_SOURCE))
    return build_specimen_model(seed=0), torch.tensor([tokenizer.encode(observe.FIXED_TEXT).ids])


def capture_benchmark(description: str):
    """The capture benchmarks' shared start: parse ``--repeats`` and ``--threads``, then build their subject.
    Returns (args, the specimen, the fixed sentence's ids (1, 8))."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: steadier timings)")
    args = parser.parse_args()
    return (args, *specimen_and_fixed_sentence(args.threads))
