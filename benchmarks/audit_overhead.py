"""What recording and auditing cost, measured side by side in one run on the synthetic Pythia-14M specimen.

    .venv/bin/python benchmarks/audit_overhead.py [--repeats 200] [--threads 1]

On the fixed 8-token sentence it alternates five forwards (so drift affects all alike): a plain forward;
hand-written PyTorch hooks on the capture's 25 sites that keep only a reference to each tensor ("bare hooks",
the floor of any hook-based capture), and the same hooks keeping a detached copy the caller may modify ("bare
hooks + copy", the floor of a capture that is safe from later in-place writes); Lab 05's capture
(``observe.capture_residuals``, which copies at each hook); and the audit's recording forward (24 sites,
``audit.execute`` without its parameter hashing). It prints the median of per-round ratios of each to the
plain forward (goal: ``measure.CAPTURE_GOAL``) and to both hand-written floors. Then it times one whole audit
of every write at the last position, and prints its wall time as a ratio to the plain forwards it needs (2 + 2
per declared write), and how much of it is the parameter hashing (once before the first run and after every
run).
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from measure import CAPTURE_GOAL, capture_benchmark, timed
from residlab import audit
from residlab.capture.blocks import block_type_for
from residlab.capture.recording import record_sites
from residlab.capture.sites import resolve_sites
from residlab.pythia import observe


def bare_hooks(model, input_ids, keep) -> None:
    """Hand-written hooks on the capture's 25 sites (resolved from the block table, as every capture resolves
    them), each calling ``keep(tensor)``: the least any hook-based capture of these sites can cost."""
    kept = []
    handles = []
    for _, module, kind in resolve_sites(model, block_type_for(model.config), model.config.num_hidden_layers,
                                         final_norm=True):  # fmt: skip
        if kind == "input":
            handles.append(module.register_forward_pre_hook(lambda m, args: kept.append(keep(args[0]))))
        else:
            handles.append(module.register_forward_hook(
                lambda m, args, output: kept.append(keep(output[0] if isinstance(output, tuple) else output))))
    try:
        observe._forward(model, input_ids)
    finally:
        for handle in handles:
            handle.remove()


def reference(tensor):
    return tensor


def ordinary_copy(tensor):
    """A detached copy the caller may modify in place: what a capture must keep if a later in-place write in
    the model is not to change what it recorded."""
    with torch.inference_mode(False):
        return tensor.clone()


def audit_recording(subject: audit.Subject, input_ids) -> None:
    sites = resolve_sites(subject.model, subject.block_type, len(subject.blocks))  # as audit.execute resolves them
    with record_sites(sites), torch.inference_mode():
        subject.last_logits(input_ids)


def main() -> int:
    args, model, input_ids = capture_benchmark(__doc__.splitlines()[0])  # input_ids (1, 8)
    subject = audit.Subject(model, block_type_for(model.config), {"kind": "specimen"})
    candidates = {
        "plain forward": lambda: observe._forward(model, input_ids),
        "bare hooks": lambda: bare_hooks(model, input_ids, reference),
        "bare hooks + copy": lambda: bare_hooks(model, input_ids, ordinary_copy),
        "Lab 05 capture": lambda: observe.capture_residuals(model, input_ids),
        "audit recording": lambda: audit_recording(subject, input_ids),
    }
    for _ in range(5):  # warm-up: first calls allocate and pick kernels
        for run in candidates.values():
            run()
    times = {name: [] for name in candidates}
    order = list(candidates)
    for index in range(args.repeats):
        rotated = order[index % len(order) :] + order[: index % len(order)]  # no one always runs first
        for name in rotated:
            times[name].append(timed(candidates[name]))
    print(f"recording overhead on the synthetic specimen (Pythia-14M's architecture, random weights), "
          f"n={input_ids.shape[1]} tokens, torch {torch.__version__}, {args.threads} thread(s), "
          f"median of {args.repeats} interleaved rounds")  # fmt: skip
    def ratio(name, to):
        return statistics.median(t / b for t, b in zip(times[name], times[to]))

    for name in candidates:
        to_plain = ratio(name, "plain forward")
        verdict = "within" if to_plain <= CAPTURE_GOAL else "ABOVE"
        print(f"  {name:<17} {statistics.median(times[name]) * 1e3:7.3f} ms  {to_plain:.3f}x plain forward "
              f"({verdict} the {CAPTURE_GOAL}x goal)  {ratio(name, 'bare hooks'):.3f}x bare hooks  "
              f"{ratio(name, 'bare hooks + copy'):.3f}x bare hooks + copy")  # fmt: skip

    ids = input_ids[0].tolist()
    corrupt = [ids[1]] + ids[1:]
    sites = [audit.DeclaredSite(c, b, len(ids) - 1) for b in range(len(subject.blocks)) for c in ("attn", "mlp")]
    audit_input = audit.AuditInput(tuple(ids), tuple(corrupt), ids[-1], ids[0])
    forwards = 2 + 2 * len(sites)
    start = time.perf_counter()
    audit.build_packet(subject, audit_input, sites, threads=args.threads)
    whole = time.perf_counter() - start
    plain = sum(timed(candidates["plain forward"]) for _ in range(forwards))
    hashing = statistics.median(timed(lambda: audit.parameter_digests(model)) for _ in range(9)) * (forwards + 1)
    print(f"  one audit of {len(sites)} writes: {whole * 1e3:.1f} ms = {whole / plain:.1f}x the {forwards} plain "
          f"forwards it needs ({plain * 1e3:.1f} ms); hashing the parameters ({audit.HASH_THREADS} thread(s)) before the "
          f"first run and after each is about {hashing * 1e3:.1f} ms of it ({hashing / whole:.0%})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
