"""Measuring helpers shared by the benchmark scripts (run them as `python benchmarks/NAME.py`)."""

from __future__ import annotations

import argparse
import random
import resource
import statistics
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


def side_by_side(variants: dict, rounds: int, warmup: int = 5, seed: int = 0) -> dict[str, list[float]]:
    """Wall seconds of each variant (name -> function of no arguments), once per round, in an order shuffled
    afresh each round by a generator seeded with ``seed``, after ``warmup`` untimed rounds (first calls
    allocate and pick kernels). A fixed rotation gives each variant the same predecessor every round, and what
    ran just before moves a variant's time (caches, allocator, frequency): shuffling spreads that over all.
    Returns name -> the per-round times, rounds aligned, so ratios are taken within a round."""
    if rounds < 1:
        raise SystemExit("the number of rounds must be at least 1")
    shuffler = random.Random(seed)
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            variants[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        order = names[:]
        shuffler.shuffle(order)
        for name in order:
            times[name].append(timed(variants[name]))
    return times


def ratio_quartiles(times: dict[str, list[float]], name: str, baseline: str) -> tuple[float, float, float]:
    """(lower quartile, median, upper quartile) of the per-round ratios ``name`` / ``baseline``: each pair ran
    in the same round, so load from other processes mostly cancels out."""
    ratios = [t / b for t, b in zip(times[name], times[baseline])]
    if len(ratios) == 1:
        return ratios[0], ratios[0], ratios[0]
    lower, median, upper = statistics.quantiles(ratios, n=4, method="inclusive")
    return lower, median, upper


def ratio_text(times: dict[str, list[float]], name: str, baseline: str) -> str:
    """'1.071x [1.052-1.090]': the median per-round ratio and its quartiles."""
    lower, median, upper = ratio_quartiles(times, name, baseline)
    return f"{median:.3f}x [{lower:.3f}-{upper:.3f}]"


def median_ms(times: dict[str, list[float]], name: str) -> float:
    return statistics.median(times[name]) * 1e3


def bare_hooks(model, input_ids, keep) -> dict:
    """Hand-written hooks on the capture's 25 sites (resolved from the block table, as every capture resolves
    them), each keeping ``keep(tensor)`` under its site name: the least any hook-based capture of these sites
    can cost. Returns what they kept."""
    from residlab.capture.blocks import block_type_for
    from residlab.capture.sites import resolve_sites
    from residlab.pythia import observe

    kept = {}
    handles = []
    for name, module, kind in resolve_sites(model, block_type_for(model.config), model.config.num_hidden_layers,
                                            final_norm=True):  # fmt: skip
        if kind == "input":
            handles.append(module.register_forward_pre_hook(
                lambda m, args, name=name: kept.__setitem__(name, keep(args[0]))))
        else:
            handles.append(module.register_forward_hook(lambda m, args, output, name=name: kept.__setitem__(
                name, keep(output[0] if isinstance(output, tuple) else output))))
    try:
        observe._forward(model, input_ids)
    finally:
        for handle in handles:
            handle.remove()
    return kept


def reference(tensor):
    return tensor


def ordinary_copy(tensor):
    """A detached copy the caller may modify in place: what a capture must keep if a later in-place write in
    the model is not to change what it recorded."""
    import torch

    with torch.inference_mode(False):
        return tensor.clone()


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


def capture_benchmark(description: str, audit_rounds: bool = False):
    """The capture benchmarks' shared start: parse ``--repeats``, ``--threads`` and ``--seed`` (and
    ``--audit-rounds`` when asked), then build their subject. Returns (args, the specimen, the fixed sentence's
    ids (1, 8))."""
    parser = argparse.ArgumentParser(description=description)
    if audit_rounds:
        parser.add_argument("--audit-rounds", type=int, default=9, help="timed rounds of each audit")
    parser.add_argument("--repeats", type=int, default=200, help="timed rounds (variants in a random order each)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: steadier timings)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rounds' random orders")
    args = parser.parse_args()
    return (args, *specimen_and_fixed_sentence(args.threads))
