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
Tensor methods only, and ``measures`` (the metric, its direction and the normaliser's epsilon, written once): no
import of torch, so the audit's packet (``measurement.json``: each write's ``dla_term`` and the shared
``attribution``) and the runners that bundle it carry nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from residlab.audit.measures import logit_difference, metric_direction, normaliser_epsilon

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


def _centres(norm) -> bool:
    """True for a LayerNorm (subtracts the mean), False for an RMSNorm; anything else is refused in one line."""
    name = type(norm).__name__
    if "RMSNorm" in name:
        return False
    if name.endswith("LayerNorm"):
        return True
    raise ValueError(f"direct logit attribution knows LayerNorm and RMSNorm, not {type(norm).__name__}")


def frozen_scale(norm, state):
    """The final normaliser's scale s for ``state`` (d,): what it divides by, held fixed for every term."""
    centred = state - state.mean() if _centres(norm) else state
    return ((centred * centred).mean() + normaliser_epsilon(norm)).sqrt()


def _frozen_readout(norm, head, state, target: int, rival: int):
    """(the linear map every write goes through with s frozen at ``state``: (d * g) / s, whether P centres, s)."""
    centres = _centres(norm)
    scale = frozen_scale(norm, state)
    # The gain moved to the state's device and dtype (the audit measures float32 records on the CPU).
    gain = norm.weight.detach().to(state) if getattr(norm, "weight", None) is not None else state.new_ones(state.shape)
    direction = metric_direction(head.weight, target, rival)
    return direction * gain / scale, centres, scale


def _term(readout, centres: bool, write) -> float:
    return float(readout @ (write - write.mean() if centres else write))


def write_term(norm, head, write, state, target: int, rival: int) -> float:
    """One write's DLA term (d,) with the scale frozen at ``state``, the final state (d,) it is a summand of: what
    the audit's packet records beside each write's removal effects."""
    readout, centres, _ = _frozen_readout(norm, head, state.detach(), target, rival)
    return _term(readout, centres, write.detach())


def bias_terms(norm, head, target: int, rival: int) -> dict[str, float]:
    """The two named bias terms: d . b (the final normaliser's bias) and c_target - c_rival (the output bias)."""
    direction = metric_direction(head.weight, target, rival)
    norm_bias = getattr(norm, "bias", None)
    head_bias = getattr(head, "bias", None)
    return {
        FINAL_NORM_BIAS: 0.0 if norm_bias is None else float(direction @ norm_bias.detach().to(direction)),
        OUTPUT_BIAS: 0.0 if head_bias is None else logit_difference(head_bias.detach().float(), target, rival),
    }


def direct_logit_attribution(norm, head, writes: dict, target: int, rival: int) -> LogitAttribution:
    """DLA of ``writes`` (name -> (d,) float tensor at the readout position; they must sum to the final state)
    through ``norm`` and ``head`` (a Linear whose weight rows are the output embedding) for target vs rival."""
    if not writes:
        raise ValueError("direct logit attribution needs at least one write")
    vectors = [vector.detach() for vector in writes.values()]
    state = vectors[0].clone()
    for vector in vectors[1:]:
        state = state + vector
    readout, centres, scale = _frozen_readout(norm, head, state, target, rival)
    logits = head(norm(state)).detach()
    return LogitAttribution(
        terms={name: _term(readout, centres, w) for name, w in zip(writes, vectors)},
        bias_terms=bias_terms(norm, head, target, rival),
        scale=float(scale),
        logit_difference=logit_difference(logits, target, rival),
    )
