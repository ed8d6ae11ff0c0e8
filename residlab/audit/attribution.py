"""Direct logit attribution (DLA) with the final normaliser's scale frozen: the additive account of a logit
difference that the audit's removal effects are compared with.

At the readout position the final state is the sum of its writes, r = sum_i w_i (the embedding counts as a
write). The final normaliser N is affine in r once its scale s(r) is held at the value it has for this r:

    LayerNorm: N(r) = g * (r - mean(r)) / s + b,   s = sqrt(var(r) + eps)
    RMSNorm:   N(r) = g * r / s,                   s = sqrt(mean(r^2) + eps)

so with d = u_target - u_rival (rows of the output embedding) and the output bias c, the metric
M = logit(target) - logit(rival) splits exactly into one term per write and two named bias terms:

    M = sum_i (d * g) . P(w_i) / s  +  d . b  +  (c_target - c_rival)

with P the centring (LayerNorm) or the identity (RMSNorm). The terms sum to M whatever the writes are; a term
is not what removing its write would do: removal changes s, and changes every later write (the ablation
effect). Both are read at one position, the readout's. Bad input raises ValueError with a one-line message.
Imports only torch and ``measures`` (the metric and its direction, written once), so a runner that bundles it
(the lesson's) carries nothing else of the audit floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from residlab.audit.measures import logit_difference, metric_direction

FINAL_NORM_BIAS = "final normaliser bias"
OUTPUT_BIAS = "output bias"


@dataclass(frozen=True)
class LogitAttribution:
    """One readout's DLA: ``terms`` (write name -> its term, in the order given), the two bias terms (0.0 where
    the module has no bias), the frozen scale, and the metric the model's own readout computes."""

    terms: dict[str, float]
    bias_terms: dict[str, float]
    scale: float
    logit_difference: float

    @property
    def total(self) -> float:
        return sum(self.terms.values()) + sum(self.bias_terms.values())


def _epsilon(norm) -> float:
    for attribute in ("eps", "variance_epsilon"):
        value = getattr(norm, attribute, None)
        if value is not None:
            return float(value)
    raise ValueError(f"the final normaliser {type(norm).__name__} exposes no epsilon")


def _centres(norm) -> bool:
    """True for a LayerNorm (subtracts the mean), False for an RMSNorm; anything else is refused in one line."""
    if isinstance(norm, torch.nn.LayerNorm):
        return True
    if isinstance(norm, getattr(torch.nn, "RMSNorm", ())) or "RMSNorm" in type(norm).__name__:
        return False
    raise ValueError(f"direct logit attribution knows LayerNorm and RMSNorm, not {type(norm).__name__}")


def frozen_scale(norm, state):
    """The final normaliser's scale s for ``state`` (d,): what it divides by, held fixed for every term."""
    centred = state - state.mean() if _centres(norm) else state
    return torch.sqrt((centred * centred).mean() + _epsilon(norm))


def direct_logit_attribution(norm, head, writes: dict, target: int, rival: int) -> LogitAttribution:
    """DLA of ``writes`` (name -> (d,) float tensor at the readout position; they must sum to the final state)
    through ``norm`` and ``head`` (a Linear whose weight rows are the output embedding) for target vs rival."""
    if not writes:
        raise ValueError("direct logit attribution needs at least one write")
    with torch.no_grad():
        vectors = list(writes.values())
        state = vectors[0].clone()
        for vector in vectors[1:]:
            state = state + vector
        centres = _centres(norm)
        scale = frozen_scale(norm, state)
        gain = norm.weight if norm.weight is not None else torch.ones_like(state)
        direction = metric_direction(head.weight, target, rival)
        readout = direction * gain / scale  # the linear map every write goes through, with s frozen
        terms = {name: float(readout @ (w - w.mean() if centres else w)) for name, w in writes.items()}
        norm_bias = getattr(norm, "bias", None)
        head_bias = getattr(head, "bias", None)
        bias_terms = {
            FINAL_NORM_BIAS: 0.0 if norm_bias is None else float(direction @ norm_bias),
            OUTPUT_BIAS: 0.0 if head_bias is None else logit_difference(head_bias, target, rival),
        }
        logits = head(norm(state))
        return LogitAttribution(
            terms=terms,
            bias_terms=bias_terms,
            scale=float(scale),
            logit_difference=logit_difference(logits, target, rival),
        )
