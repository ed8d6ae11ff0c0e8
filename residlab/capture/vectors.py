"""``cosine``: the cosine of two vectors, the one definition the observation (``residlab.pythia.observe``) and the
audit's measures (``residlab.audit.measures``) share, and the runners that bundle either. Standard library only:
the vectors are torch tensors, read through their own methods."""

from __future__ import annotations


def cosine(a, b) -> float | None:
    """cos(a, b) of two vectors (d,); None (JSON null) when either norm is zero."""
    norm_a = float(a.norm().item())
    norm_b = float(b.norm().item())
    if norm_a == 0.0 or norm_b == 0.0:
        return None
    return float((a @ b).item()) / (norm_a * norm_b)
