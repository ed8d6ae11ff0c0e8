"""``cosine``: the cosine of two vectors, the one definition the observation (``residlab.pythia.observe``) and the
audit's measures (``residlab.audit.measures``) share, and the runners that bundle either; ``weights_sha256``: a
model's weights' identity, the one digest the copy model and the induction model record. Standard library only at
import: the vectors are torch tensors, read through their own methods."""

from __future__ import annotations


def cosine(a, b) -> float | None:
    """cos(a, b) of two vectors (d,); None (JSON null) when either norm is zero."""
    norm_a = float(a.norm().item())
    norm_b = float(b.norm().item())
    if norm_a == 0.0 or norm_b == 0.0:
        return None
    return float((a @ b).item()) / (norm_a * norm_b)


def weights_sha256(model) -> str:
    """SHA-256 over every state-dict entry (name, dtype, shape, raw bytes) in name order: the weights' identity
    (of the copy model and of the induction model alike)."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        flat = tensor.detach().contiguous().reshape(-1)
        digest.update(f"{name}|{flat.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
