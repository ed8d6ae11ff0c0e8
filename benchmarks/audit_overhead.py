"""What recording and auditing cost, measured side by side in one run on synthetic GPT-NeoX specimens.

    .venv/bin/python benchmarks/audit_overhead.py [--repeats 200] [--audit-rounds 9] [--threads 1] [--seed 0]

Recording, on the synthetic Pythia-14M specimen and the fixed 8-token sentence, five forwards each round in a
seeded random order after a warm-up (``measure.side_by_side``): a plain forward; hand-written PyTorch hooks on
the capture's 25 sites that keep only a reference to each tensor ("bare hooks", the floor of any hook-based
capture), and the same hooks keeping a detached copy the caller may modify ("bare hooks + copy", the floor of a
capture that is safe from later in-place writes); Lab 05's capture (``observe.capture_residuals``, which copies
at each hook); and the audit's recording forward (24 sites, ``audit.execute`` without its parameter check). It
prints the median [quartiles] of per-round ratios of each to the plain forward (goal: ``measure.CAPTURE_GOAL``)
and to both hand-written floors.

Auditing, for 2, 6 and 12 writes at the last position and two model sizes (Pythia-14M's architecture, and the
same with Pythia-70M's width: 70M parameters), each round runs in a random order one whole audit
(``audit.build_packet``), the 2 + 2 x writes plain forwards it needs, and one hash of every parameter
(``audit.parameter_digests``). It prints the audit over its forwards, and the two hashes an audit makes (before
its first run and after its last) as a share of it: constant in the number of writes. (Before, every run was
hashed before and after: 2 x writes + 4 hashes per audit, counting the model record's.)
"""

from __future__ import annotations

import sys

import torch

from measure import CAPTURE_GOAL, bare_hooks, capture_benchmark, median_ms, ordinary_copy, ratio_quartiles, ratio_text
from measure import reference, side_by_side
from residlab import audit
from residlab.capture.blocks import block_type_for
from residlab.capture.recording import record_sites
from residlab.capture.sites import resolve_sites
from residlab.pythia import observe


def audit_recording(subject: audit.Subject, input_ids) -> None:
    sites = resolve_sites(subject.model, subject.block_type, len(subject.blocks))  # as audit.execute resolves them
    with record_sites(sites), torch.inference_mode():
        subject.last_logits(input_ids)


def seventy_million_specimen(seed: int = 0):
    """Pythia-70M's shape (width 512, MLP 2048, 8 heads, 6 blocks) with random weights, float32, eager, eval."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from residlab.pythia.specimen import PINNED_CONFIG

    torch.manual_seed(seed)
    config = dict(PINNED_CONFIG, hidden_size=512, intermediate_size=2048, num_attention_heads=8)
    return GPTNeoXForCausalLM(GPTNeoXConfig.from_dict(config, attn_implementation="eager")).eval()


def audit_scaling(model, input_ids, rounds: int, threads: int, seed: int) -> list[str]:
    """One line per number of writes: the audit over its plain forwards, and its two hashes' share of it."""
    subject = audit.Subject(model, block_type_for(model.config), {"kind": "specimen"})
    ids = input_ids[0].tolist()
    audit_input = audit.AuditInput(tuple(ids), tuple([ids[1]] + ids[1:]), ids[-1], ids[0])
    every_write = [audit.DeclaredSite(c, b, len(ids) - 1) for b in range(len(subject.blocks)) for c in ("attn", "mlp")]
    parameters = sum(p.numel() for p in model.parameters())
    lines = []
    for writes in (2, 6, 12):
        sites = every_write[:writes]
        forwards = 2 + 2 * writes

        def plain_forwards():
            for _ in range(forwards):
                observe._forward(model, input_ids)

        times = side_by_side({
            "audit": lambda: audit.build_packet(subject, audit_input, sites, threads=threads),
            "forwards": plain_forwards,
            "hash": lambda: audit.parameter_digests(model),
        }, rounds, warmup=1, seed=seed)  # fmt: skip
        hashing = 2 * ratio_quartiles(times, "hash", "audit")[1]
        lines.append(f"  {parameters / 1e6:5.1f}M parameters, {writes:2} writes: audit {median_ms(times, 'audit'):8.1f} ms "
                     f"= {ratio_text(times, 'audit', 'forwards')} its {forwards} plain forwards; its 2 parameter hashes "
                     f"({median_ms(times, 'hash'):.1f} ms each) {hashing:.0%} of it "
                     f"(hashing every run took {2 * writes + 4})")  # fmt: skip
    return lines


def main() -> int:
    args, model, input_ids = capture_benchmark(__doc__.splitlines()[0], audit_rounds=True)  # input_ids (1, 8)
    subject = audit.Subject(model, block_type_for(model.config), {"kind": "specimen"})
    times = side_by_side({
        "plain forward": lambda: observe._forward(model, input_ids),
        "bare hooks": lambda: bare_hooks(model, input_ids, reference),
        "bare hooks + copy": lambda: bare_hooks(model, input_ids, ordinary_copy),
        "Lab 05 capture": lambda: observe.capture_residuals(model, input_ids),
        "audit recording": lambda: audit_recording(subject, input_ids),
    }, args.repeats, seed=args.seed)  # fmt: skip
    print(f"recording overhead on the synthetic specimen (Pythia-14M's architecture, random weights), "
          f"n={input_ids.shape[1]} tokens, torch {torch.__version__}, {args.threads} thread(s), "
          f"median [quartiles] of per-round ratios, {args.repeats} rounds in a random order (seed {args.seed})")  # fmt: skip
    for name in times:
        verdict = "within" if ratio_quartiles(times, name, "plain forward")[1] <= CAPTURE_GOAL else "ABOVE"
        print(f"  {name:<17} {median_ms(times, name):7.3f} ms  {ratio_text(times, name, 'plain forward')} plain forward "
              f"({verdict} the {CAPTURE_GOAL}x goal)  {ratio_text(times, name, 'bare hooks')} bare hooks  "
              f"{ratio_text(times, name, 'bare hooks + copy')} bare hooks + copy")  # fmt: skip

    print(f"one audit of every write at the last position over the plain forwards it needs, {args.audit_rounds} rounds "
          f"in a random order, parameters hashed on {audit.HASH_THREADS} thread(s)")  # fmt: skip
    for lines in (audit_scaling(model, input_ids, args.audit_rounds, args.threads, args.seed),
                  audit_scaling(seventy_million_specimen(), input_ids, args.audit_rounds, args.threads, args.seed)):
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
