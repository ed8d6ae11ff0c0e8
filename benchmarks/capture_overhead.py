"""How much the residual capture costs: a capturing forward against a plain forward, measured side by side.

    .venv/bin/python benchmarks/capture_overhead.py [--repeats 200] [--threads 1]

On the synthetic specimen (Pythia-14M's architecture, random weights, in memory). For the fixed sentence
and for a longer input, it alternates plain and capturing forwards (so drift affects both alike) and prints
the median time of each and the median of the per-pair ratios (goal: ``measure.CAPTURE_GOAL``), the
process's peak resident memory after the plain forwards and after the captures, the bytes of one capture's
tensors, and the size of captures.json.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from measure import CAPTURE_GOAL, capture_benchmark, peak_rss_mib, timed
from residlab.pythia import observe


def compare(model, input_ids, repeats: int) -> dict:
    """Median seconds of plain and capturing forwards of input_ids (1, n), interleaved."""
    plain = lambda: observe._forward(model, input_ids)  # noqa: E731
    capture = lambda: observe.capture_residuals(model, input_ids)  # noqa: E731
    for _ in range(5):  # warm-up: first calls allocate and pick kernels
        plain()
        capture()
    plain_times, capture_times = [], []
    for index in range(repeats):
        # Alternate which goes first, so neither always runs on a warmer cache.
        if index % 2:
            plain_times.append(timed(plain))
            capture_times.append(timed(capture))
        else:
            capture_times.append(timed(capture))
            plain_times.append(timed(plain))
    plain_median, capture_median = statistics.median(plain_times), statistics.median(capture_times)
    # The median of per-pair ratios: each pair ran back to back, so load from other processes cancels out.
    pair_ratio = statistics.median(c / p for c, p in zip(capture_times, plain_times))
    return {
        "plain_ms": plain_median * 1e3,
        "capture_ms": capture_median * 1e3,
        "ratio_of_medians": capture_median / plain_median,
        "ratio": pair_ratio,
    }


def main() -> int:
    args, model, sentence_ids = capture_benchmark(__doc__.splitlines()[0])  # sentence_ids (1, 8)
    long_ids = sentence_ids.repeat(1, 32)  # (1, 256): the sentence 32 times

    print(f"capture overhead on the synthetic specimen, torch {torch.__version__}, {args.threads} thread(s), "
          f"median of {args.repeats} interleaved pairs")
    for label, ids in (("fixed sentence", sentence_ids), ("longer input", long_ids)):
        row = compare(model, ids, args.repeats)
        verdict = "within" if row["ratio"] <= CAPTURE_GOAL else "ABOVE"
        print(f"  {label:<15} n={ids.shape[1]:<4} plain {row['plain_ms']:7.3f} ms  capture {row['capture_ms']:7.3f} ms  "
              f"ratio {row['ratio']:.3f}x ({verdict} the {CAPTURE_GOAL}x goal; ratio of medians {row['ratio_of_medians']:.3f}x)")

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
