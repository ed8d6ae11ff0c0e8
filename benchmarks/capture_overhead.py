"""How much the residual capture costs: a capturing forward against a plain forward, measured side by side.

    .venv/bin/python benchmarks/capture_overhead.py [--repeats 200] [--threads 1] [--seed 0]

On the synthetic specimen (Pythia-14M's architecture, random weights, in memory). For the fixed sentence
and for a longer input, it runs a plain and a capturing forward each round in a seeded random order, after a
warm-up (``measure.side_by_side``), and prints the median time of each and the median of the per-round ratios
with their quartiles (goal: ``measure.CAPTURE_GOAL``), the
process's peak resident memory after the plain forwards and after the captures, the bytes of one capture's
tensors, and the size of captures.json.
"""

from __future__ import annotations

import json
import sys

import torch

from measure import CAPTURE_GOAL, capture_benchmark, median_ms, peak_rss_mib, ratio_quartiles, ratio_text, side_by_side
from residlab.pythia import observe


def compare(model, input_ids, repeats: int, seed: int) -> dict:
    """Per-round seconds of plain and capturing forwards of input_ids (1, n), side by side."""
    return side_by_side({
        "plain": lambda: observe._forward(model, input_ids),
        "capture": lambda: observe.capture_residuals(model, input_ids),
    }, repeats, seed=seed)  # fmt: skip


def main() -> int:
    args, model, sentence_ids = capture_benchmark(__doc__.splitlines()[0])  # sentence_ids (1, 8)
    long_ids = sentence_ids.repeat(1, 32)  # (1, 256): the sentence 32 times

    print(f"capture overhead on the synthetic specimen, torch {torch.__version__}, {args.threads} thread(s), "
          f"median [quartiles] of {args.repeats} rounds in a random order (seed {args.seed})")
    for label, ids in (("fixed sentence", sentence_ids), ("longer input", long_ids)):
        times = compare(model, ids, args.repeats, args.seed)
        verdict = "within" if ratio_quartiles(times, "capture", "plain")[1] <= CAPTURE_GOAL else "ABOVE"
        print(f"  {label:<15} n={ids.shape[1]:<4} plain {median_ms(times, 'plain'):7.3f} ms  capture "
              f"{median_ms(times, 'capture'):7.3f} ms  ratio {ratio_text(times, 'capture', 'plain')} "
              f"({verdict} the {CAPTURE_GOAL}x goal)")  # fmt: skip

    peak_plain = peak_rss_mib()
    captures = [observe.capture_residuals(model, long_ids) for _ in range(3)]
    peak_capture = peak_rss_mib()
    one = captures[0]
    capture_bytes = sum(t.numel() * t.element_size() for t in one.sites.values())
    print(f"  peak resident memory: {peak_plain:.1f} MiB after the timed runs, {peak_capture:.1f} MiB after holding "
          f"3 captures of n=256 (one capture's tensors: {capture_bytes / 2**20:.2f} MiB, {len(one.sites)} sites)")

    sentence = observe.capture_residuals(model, sentence_ids)
    tokens = [{"id": int(i)} for i in sentence_ids[0]]
    size = len(json.dumps(observe.capture_tensors_json(sentence, tokens), separators=(",", ":")).encode()) + 1
    raw = sum(t.numel() * 4 for name, t in sentence.sites.items())
    print(f"  captures.json for the fixed sentence: {size / 1024:.1f} KiB ({raw / 1024:.1f} KiB of float32 captured)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
