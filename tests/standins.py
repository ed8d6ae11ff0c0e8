"""Stand-ins for Pythia-14M that the fake hub serves under a test lock (another repository and revision), so the
publish workflow's commands can run here end to end: its architecture and tokenizer, other weights.

- ``"seed1"``: the synthetic specimen drawn from seed 1 (the committed capture is seed 0's).
- ``"falling"``: weights built so that the raw norm falls with depth, a pattern the random specimen does not
  show: attention writes nothing (its output projection is zero), and each MLP writes minus a small multiple of
  its normalised input, ``-FALLING_STEP * LN(x)``, so every block shortens the state along its own direction.
  It uses gelu(z) - gelu(-z) = z: the first projection holds +I and -I, the second -c*I and +c*I.

``standin(kind)`` returns (the six files' bytes, their lock) with the lock's repository set to the stand-in's own.
"""

from __future__ import annotations

import hashlib

STANDINS = {"seed1": "residlab-tests/standin-seed1", "falling": "residlab-tests/standin-falling-norm"}
FALLING_SEED = 2
FALLING_STEP = 0.002  # |write| = 0.002 * |LN(x)| ~ 0.023 per block, against a state of norm ~0.23 at H_0


def falling_tensors() -> dict:
    import torch

    from residlab.pythia.specimen import PINNED_CONFIG, specimen_tensors

    tensors = specimen_tensors(FALLING_SEED)
    width, inner = PINNED_CONFIG["hidden_size"], PINNED_CONFIG["intermediate_size"]
    identity = torch.eye(width)
    up = torch.zeros(inner, width)
    up[:width], up[width : 2 * width] = identity, -identity
    down = torch.zeros(width, inner)
    down[:, :width], down[:, width : 2 * width] = -FALLING_STEP * identity, FALLING_STEP * identity
    for layer in range(PINNED_CONFIG["num_hidden_layers"]):
        prefix = f"gpt_neox.layers.{layer}."
        values = {
            "attention.dense.weight": torch.zeros(width, width), "attention.dense.bias": torch.zeros(width),
            "post_attention_layernorm.weight": torch.ones(width), "post_attention_layernorm.bias": torch.zeros(width),
            "mlp.dense_h_to_4h.weight": up, "mlp.dense_h_to_4h.bias": torch.zeros(inner),
            "mlp.dense_4h_to_h.weight": down, "mlp.dense_4h_to_h.bias": torch.zeros(width),
        }  # fmt: skip
        for name, value in values.items():
            tensors[prefix + name] = value.to(torch.float16).contiguous()
    return tensors


def standin(kind: str) -> tuple[dict[str, bytes], dict]:
    from safetensors.torch import save

    from residlab.pythia.specimen import specimen_files, specimen_lock

    if kind == "seed1":
        files, seed = specimen_files(1), 1
    else:
        files, seed = specimen_files(FALLING_SEED), FALLING_SEED
        files["model.safetensors"] = save(falling_tensors(), metadata={"format": "pt"})
    lock = specimen_lock(files, seed)
    lock["repository"] = STANDINS[kind]
    # A revision of its own, from the repository and the bytes, as a Hub commit would differ.
    lock["revision"] = hashlib.sha1(f"{STANDINS[kind]}\n{lock['revision']}".encode()).hexdigest()
    lock["revision_source"] = "a test stand-in (tests/standins.py), not a Hub commit"
    return files, lock
