"""Residual capture side by side with its peers, on the same weights and tokens in one process.

    .venv-peers/bin/python benchmarks/peer_capture.py [--repeats 100] [--threads 1] [--seed 0]

The peers are optional and live in their own environment (``make venv-peers`` builds it from
``benchmarks/peer-requirements.txt``); without them this script says so and exits 0. On the synthetic specimen
(Pythia-14M's architecture, random weights), for the fixed 8-token sentence and for the same sentence 16 times
(128 tokens), it first checks that every capture gives tensors equal (``torch.equal``, bit for bit) to Lab 05's
at each of its 25 sites, then times, each round in a seeded random order after a warm-up (``measure.side_by_side``):

- a plain forward (``GPTNeoXForCausalLM`` under ``torch.inference_mode``): the baseline;
- hand-written hooks on the 25 sites keeping a reference, and keeping a detached copy (the floors);
- Lab 05's capture (``observe.capture_residuals``);
- nnsight's ``trace`` with 25 ``.save()`` calls;
- TransformerLens's ``TransformerBridge``: its forward alone, ``run_with_cache`` filtered to the 25 sites, and
  ``run_with_cache`` of every hook.

Each peer wraps its own copy of the model (the same weights), so what a wrapper leaves on a model never slows
another variant. It prints each median time and the median [quartiles] of per-round ratios to the plain forward.
"""

from __future__ import annotations

import copy
import importlib.metadata
import sys
import tempfile
from pathlib import Path

from measure import bare_hooks, capture_benchmark, median_ms, ordinary_copy, ratio_text, reference, side_by_side

PEERS = ("nnsight", "transformer-lens")
REQUIREMENTS = Path(__file__).resolve().parent / "peer-requirements.txt"


def missing_peers() -> list[str]:
    missing = []
    for name in PEERS:
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def bridge_hook_names(depth: int) -> dict[str, str]:
    """Lab 05's site name -> the TransformerBridge hook that sees the same tensor."""
    names = {}
    for block in range(depth):
        names[f"blocks.{block}.resid_pre"] = f"blocks.{block}.hook_in"
        names[f"blocks.{block}.attn_write"] = f"blocks.{block}.attn.hook_out"
        names[f"blocks.{block}.mlp_write"] = f"blocks.{block}.mlp.hook_out"
        names[f"blocks.{block}.resid_post"] = f"blocks.{block}.hook_out"
    names["final_norm.out"] = "ln_final.hook_out"
    return names


def nnsight_capture(traced, input_ids, depth: int) -> dict:
    """nnsight's trace saving the 25 sites (dropout is the identity in eval mode, so the writes are its inputs'
    values, as Lab 05 records them at the dropout's output)."""
    import torch

    saved = {}
    with torch.inference_mode(), traced.trace(input_ids, use_cache=False):
        for block in range(depth):
            layer = traced.gpt_neox.layers[block]
            saved[f"blocks.{block}.resid_pre"] = layer.input.save()
            saved[f"blocks.{block}.attn_write"] = layer.post_attention_dropout.output.save()
            saved[f"blocks.{block}.mlp_write"] = layer.post_mlp_dropout.output.save()
            saved[f"blocks.{block}.resid_post"] = layer.output.save()
        saved["final_norm.out"] = traced.gpt_neox.final_layer_norm.output.save()
    return {name: value[0] if isinstance(value, tuple) else value for name, value in saved.items()}


def bridge_cache(bridge, input_ids, names: list[str] | None):
    import torch

    with torch.inference_mode():
        return bridge.run_with_cache(input_ids, names_filter=names)[1]


def bridge_forward(bridge, input_ids):
    import torch

    with torch.inference_mode():
        return bridge(input_ids)


def boot_bridge(model, directory: Path):
    """A TransformerBridge around ``model`` (the config is read from ``directory``: no Hub)."""
    from transformer_lens.model_bridge import TransformerBridge

    from residlab.pythia.specimen import write_specimen

    write_specimen(directory)
    return TransformerBridge.boot_transformers(str(directory), hf_model=model, device="cpu")


def parity(captures: dict[str, dict], reference_sites: dict) -> list[str]:
    """One line per capture: how many of the 25 sites equal Lab 05's bit for bit."""
    import torch

    lines = []
    for name, sites in captures.items():
        equal = sum(torch.equal(sites[site], tensor) for site, tensor in reference_sites.items() if site in sites)
        verdict = "ok" if equal == len(reference_sites) else "DIFFERENT"
        lines.append(f"  parity {name:<34} {equal} of {len(reference_sites)} sites bit-identical to Lab 05's [{verdict}]")
    return lines


def main() -> int:
    missing = missing_peers()
    if missing:
        print(f"skipped: the peers {', '.join(missing)} are not installed here. Build their environment as "
              f"{REQUIREMENTS.name} says (make venv-peers), then run this script with .venv-peers/bin/python.")
        return 0
    import torch
    from nnsight import NNsight

    from residlab.pythia import observe

    args, model, sentence_ids = capture_benchmark(__doc__.splitlines()[0])
    depth = model.config.num_hidden_layers
    traced = NNsight(copy.deepcopy(model))
    names = bridge_hook_names(depth)
    with tempfile.TemporaryDirectory(prefix="residlab-peers-") as directory:
        bridge = boot_bridge(copy.deepcopy(model), Path(directory) / "specimen")
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in ("torch", "transformers", *PEERS))
    print(f"capture side by side with its peers on the synthetic specimen (Pythia-14M's architecture, random "
          f"weights), {versions}, {args.threads} thread(s), median [quartiles] of per-round ratios to a plain "
          f"forward, {args.repeats} rounds in a random order (seed {args.seed})")  # fmt: skip
    failed = False
    for ids in (sentence_ids, sentence_ids.repeat(1, 16)):
        lab05 = observe.capture_residuals(model, ids).sites
        full, cached = bridge_cache(bridge, ids, None), bridge_cache(bridge, ids, list(names.values()))
        lines = parity({
            "hand-written hooks + copy": bare_hooks(model, ids, ordinary_copy),
            "nnsight trace, 25 saves": nnsight_capture(traced, ids, depth),
            "TransformerBridge, filtered cache": {site: cached[hook] for site, hook in names.items()},
            "TransformerBridge, full cache": {site: full[hook] for site, hook in names.items()},
        }, lab05)  # fmt: skip
        failed |= any(line.endswith("[DIFFERENT]") for line in lines)
        times = side_by_side({
            "plain forward": lambda: observe._forward(model, ids),
            "hand-written hooks": lambda: bare_hooks(model, ids, reference),
            "hand-written hooks + copy": lambda: bare_hooks(model, ids, ordinary_copy),
            "residlab capture (Lab 05)": lambda: observe.capture_residuals(model, ids),
            "nnsight trace, 25 saves": lambda: nnsight_capture(traced, ids, depth),
            "TransformerBridge forward": lambda: bridge_forward(bridge, ids),
            "TransformerBridge cache, 25 sites": lambda: bridge_cache(bridge, ids, list(names.values())),
            f"TransformerBridge cache, all {len(full)}": lambda: bridge_cache(bridge, ids, None),
        }, args.repeats, seed=args.seed)  # fmt: skip
        print(f"n={ids.shape[1]} tokens")
        print("\n".join(lines))
        for name in times:
            print(f"  {name:<34} {median_ms(times, name):8.3f} ms  {ratio_text(times, name, 'plain forward')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
