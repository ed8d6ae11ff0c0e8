"""The Residual Contribution Audit's measures of one residual write, written once. The audit tool's packets
(``packet``), Lesson 2.1's lab (``residlab.course.models.lesson_lab``) and the runners that bundle either compute
every measure here, so the page, the packet and the download cannot disagree on a formula.

With the metric M = logit(target) - logit(rival) at the readout position and a write w at one position, every
effect is oriented one way, what the write adds to M: M(with it) - M(without it), positive when w pushes M up.

- norm: |w|;
- direct projection: d . w with d = u_target - u_rival (rows of the output embedding);
- exact direct effect: M(readout(r_final)) - M(readout(r_final - w)), nothing downstream recomputed; defined only
  for a write at the readout position (elsewhere the write reaches the readout only through later attention);
  for a write in the last block at the readout position nothing downstream is recomputed either way, so it equals
  the total effect;
- survival: cos(w, r_final) at w's position, and the retained fraction (w + every later write) . w / |w|^2;
- total effect: M(clean run) - M(clean run, w zeroed), what zeroing w removes (everything after w recomputed);
- patch recovery (denoising): (M(corrupt run, clean w patched in) - M(corrupt)) / (M(clean) - M(corrupt)), the
  share of the clean-corrupt gap the clean write restores.

A measure with no value is None (JSON null, "undefined" on a page), never a division by zero: a cosine or a
retained fraction of a zero vector, and the patch recovery when the clean and corrupt metrics are equal.

Tensor methods only (a vector is a torch tensor of shape (d,)): this module imports nothing, so any runner can
bundle it.
"""

from __future__ import annotations

from dataclasses import dataclass

from residlab.capture.vectors import cosine


@dataclass(frozen=True)
class WriteMeasures:
    """The measures of one write; None where a measure is undefined (see the module's docstring)."""

    norm: float
    direct_projection: float
    direct_effect_exact: float | None
    survival_cosine: float | None
    retained_fraction: float | None
    total_effect: float  # M(clean) - M(clean, w zeroed)
    patch_recovery: float | None


def shown(value: float, digits: int = 3) -> float:
    """``value`` rounded for printing to ``digits`` decimals, a negative value that rounds to zero made +0.0 (so it
    prints 0.000, never -0.000, which reads as a sign the number does not have)."""
    return round(value, digits) + 0.0


def metric_tensor(logits, target: int, rival: int):
    """M = logit(target) - logit(rival) over the last axis of ``logits`` (..., vocab), as a tensor: batched, and
    differentiable where the logits are (Lab 07's grids and attribution patching)."""
    return logits[..., target] - logits[..., rival]


def logit_difference(logits, target: int, rival: int) -> float:
    """The metric M = logit(target) - logit(rival) of one readout's logits (vocab,)."""
    return float(metric_tensor(logits, target, rival).item())


def normaliser_epsilon(norm) -> float:
    """The epsilon a final normaliser adds under its square root (``eps`` in LayerNorm and torch's RMSNorm,
    ``variance_epsilon`` in Transformers' RMSNorm classes); ValueError naming the class when it has neither."""
    for attribute in ("eps", "variance_epsilon"):
        value = getattr(norm, attribute, None)
        if value is not None:
            return float(value)
    raise ValueError(f"the final normaliser {type(norm).__name__} exposes no epsilon")


def metric_direction(output_embedding, target: int, rival: int):
    """d = u_target - u_rival (d,): the rows of the output embedding's weight (vocab, d) the metric reads."""
    # Taken in float32 on the CPU, where the records are measured (no copy for a float32 CPU weight).
    return (output_embedding[target].float() - output_embedding[rival].float()).detach().cpu()


def choose_rival(clean_logits, corrupt_logits, target: int) -> int:
    """The rival, named before any intervention by the lesson's rule: the token the corrupt run prefers at the
    readout; if that is the target itself, the clean run's best other token. Logits (vocab,) of each run."""
    rival = int(corrupt_logits.argmax().item())
    if rival == target:
        ranked = clean_logits.argsort(descending=True).tolist()
        rival = next(token for token in ranked if token != target)
    return rival


def patch_recovery(clean: float, corrupt: float, patched: float) -> float | None:
    """R = (M_patched - M_corrupt) / (M_clean - M_corrupt): 1 when the patch restores the clean metric, 0 when it
    changes nothing; None when the gap M_clean - M_corrupt is zero (nothing to recover)."""
    gap = clean - corrupt
    return None if gap == 0 else (patched - corrupt) / gap


def measure_write(w, final_state, later_writes, direction, *, clean: float, corrupt: float, ablated: float,
                  patched: float, readout_metric=None, final_metric: float | None = None) -> WriteMeasures:
    """Every measure of the write ``w`` (d,). ``final_state`` (d,): the clean run's final residual state at w's
    position; ``later_writes``: the clean run's writes after w at that position (d,) each; ``direction`` (d,):
    u_target - u_rival. ``clean``, ``corrupt``, ``ablated``, ``patched``: the metric of the clean run, the corrupt
    run, the clean run with w zeroed and the corrupt run with the clean w patched in. ``readout_metric``, given
    only for a write at the readout position: a state (d,) -> M through the model's final normaliser and output
    embedding; ``final_metric``: its value at ``final_state`` when the caller already has it."""
    norm = float(w.norm())
    later_sum = w.new_zeros(w.shape)
    for later in later_writes:
        later_sum = later_sum + later
    carried = w + later_sum
    direct_effect = None
    if readout_metric is not None:
        final = readout_metric(final_state) if final_metric is None else final_metric
        direct_effect = final - readout_metric(final_state - w)
    return WriteMeasures(
        norm=norm,
        direct_projection=float((direction @ w).item()),
        direct_effect_exact=direct_effect,
        survival_cosine=cosine(w, final_state),
        retained_fraction=None if norm == 0 else float((carried @ w).item()) / norm**2,
        total_effect=clean - ablated,
        patch_recovery=patch_recovery(clean, corrupt, patched),
    )
