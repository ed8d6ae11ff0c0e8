"""Lesson 2.1 lab: train a one-block copy model, audit its residual writes, and profile pre-LN vs post-LN gradients.

The copy model and its training are ``residlab.course.lesson.copy_model``; the gradient profile is
``residlab.course.lesson.gradient_profile``. This module audits the trained model (readouts, interventions, the
Residual Contribution Audit), reading and changing the block's values at its hook points with
``residlab.capture.recording.record_sites``, and prints the lesson's report.

Run it as ``residlab lesson`` or, standalone, ``python3 residual_stream_lab.py`` (needs only torch):

    python3 residual_stream_lab.py                 # training log, readouts, interventions, audit, profiles
    python3 residual_stream_lab.py --json          # the same results as one JSON document
    python3 residual_stream_lab.py --skip-profile  # leave out the pre-LN/post-LN gradient profile
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from residlab.capture.recording import record_sites
from residlab.course.lesson.copy_model import (
    BATCH_SIZE, D_MODEL, LEARNING_RATE, N_HEADS, SEQUENCE_LENGTH, TRAINING_SEED, TRAINING_STEPS, VOCAB_SIZE,
    CopyModel, TrainingRecord, train_copy_model, trained_copy_model, training_log, weights_sha256,
)
from residlab.course.lesson.gradient_profile import PROFILE_SEEDS, GradientProfile, gradient_profile
from residlab.course.threads import single_thread

CLEAN_TOKENS = (7, 3, 9, 5, 0)
CORRUPT_TOKENS = (2, 3, 9, 5, 0)
TARGET_TOKEN = 7

# run_traced's record of one run: ResidualTrace field -> the block's hook point that carries it.
TRACE_HOOK_POINTS = {
    "r0": "hook_resid_pre",
    "attn_write": "hook_attn_out",
    "r1": "hook_resid_mid",
    "mlp_write": "hook_mlp_out",
    "r2": "hook_resid_post",
}


# --------------------------------------------------------------------------------------------------------------
# The audit: readouts, interventions and the Residual Contribution Audit
# --------------------------------------------------------------------------------------------------------------



@dataclass(frozen=True)
class Readout:
    stage: str  # which residual state the final readout was applied to
    p_target: float
    top_token: int


@dataclass(frozen=True)
class Intervention:
    case: str
    p_target: float
    top_token: int
    logit_difference: float  # logit(target) - logit(rival)


@dataclass(frozen=True)
class WriteNorms:
    attention: float  # L2 norm of the attention write at the query position
    mlp: float  # L2 norm of the MLP write at the query position


@dataclass(frozen=True)
class ComponentAudit:
    """The Residual Contribution Audit of one write at the query position, target versus rival."""

    component: str  # "attention write" or "MLP write"
    write_norm: float
    # write: direct projection d^T w with d = W_U[target] - W_U[rival], ignoring the final LayerNorm ...
    direct_projection: float
    # ... and the exact direct effect under the full readout: logit difference of readout(r_final) minus that
    # of readout(r_final - w), nothing downstream recomputed.
    direct_effect_exact: float
    # use: zero the write and let the rest of the model recompute.
    ablation_delta_p_target: float  # p(target) ablated - p(target) clean
    ablation_delta_logit_difference: float
    # recovery: put the clean write into the corrupt run at the query position.
    patched_p_target: float
    patch_recovery: float  # (LD patched - LD corrupt) / (LD clean - LD corrupt); 1 = full recovery
    # survival: is the write's direction still present in the final residual state?
    survival_cosine: float  # cos(w, r_final) at the query position
    retained_fraction: float  # (w + every later write) . w_hat / |w|; 1 = no later write removed any of it
    centred_fraction: float  # |w - mean(w)| / |w|: the share of the write the final LayerNorm can see


@dataclass(frozen=True)
class AuditResult:
    clean_tokens: tuple[int, ...]
    corrupt_tokens: tuple[int, ...]
    target: int
    rival: int  # the corrupt run's top token (the clean run's runner-up if that were the target)
    readouts: tuple[Readout, ...]
    interventions: tuple[Intervention, ...]
    write_norms: WriteNorms
    components: tuple[ComponentAudit, ...]


@dataclass(frozen=True)
class ResidualTrace:
    """The five hook points of one run; every tensor (batch, 5, d), detached."""

    r0: torch.Tensor
    attn_write: torch.Tensor
    r1: torch.Tensor
    mlp_write: torch.Tensor
    r2: torch.Tensor

    def clone(self) -> "ResidualTrace":
        return ResidualTrace(**{name: getattr(self, name).clone() for name in self.__dataclass_fields__})


@dataclass(frozen=True)
class RunOutput:
    logits: torch.Tensor  # (batch, vocab) at the query position
    trace: ResidualTrace


def _position_write(write: torch.Tensor, replacement: torch.Tensor | None, ablate: bool) -> torch.Tensor:
    """Apply an intervention to a (batch, seq, d) write: zero it, or replace its query-position row.

    Returns a new tensor whenever it changes anything, so the caller's tensors are never modified in place.
    """
    if ablate:
        write = torch.zeros_like(write)
    if replacement is not None:
        if replacement.shape != (write.shape[0], write.shape[2]):
            raise ValueError(
                f"a patch must have shape (batch, d_model) = {(write.shape[0], write.shape[2])}, "
                f"got {tuple(replacement.shape)}"
            )
        write = write.clone()
        write[:, -1, :] = replacement
    return write


def run_traced(
    model: CopyModel,
    tokens: tuple[int, ...] | torch.Tensor,
    *,
    ablate_attn: bool = False,
    ablate_mlp: bool = False,
    patch_attn: torch.Tensor | None = None,
    patch_mlp: torch.Tensor | None = None,
) -> RunOutput:
    """One forward pass without gradients, returning the logits and the five hook points.

    ablate_*: zero that whole write; patch_* (batch, d): put it at the last position of that write. Each is an
    edit at the write's hook point, so everything downstream reads the changed write.
    """
    if not isinstance(tokens, torch.Tensor):
        tokens = torch.tensor([tokens], dtype=torch.long)
    sites = [(name, getattr(model.block, point), "output") for name, point in TRACE_HOOK_POINTS.items()]
    edits = {
        name: functools.partial(_position_write, replacement=patch, ablate=ablate)
        for name, ablate, patch in (("attn_write", ablate_attn, patch_attn), ("mlp_write", ablate_mlp, patch_mlp))
        if ablate or patch is not None
    }
    with torch.no_grad(), record_sites(sites, edits) as recorder:
        logits = model(tokens)
    return RunOutput(logits=logits, trace=ResidualTrace(**recorder.records))


def _p(logits: torch.Tensor, token: int) -> float:
    return logits.softmax(-1)[0, token].item()


def _top(logits: torch.Tensor) -> int:
    return int(logits.argmax(-1)[0].item())


def _logit_difference(logits: torch.Tensor, target: int, rival: int) -> float:
    return (logits[0, target] - logits[0, rival]).item()


def choose_rival(clean_logits: torch.Tensor, corrupt_logits: torch.Tensor, target: int) -> int:
    """The token the corrupt run prefers; if that is the target itself, the clean run's best other token."""
    rival = _top(corrupt_logits)
    if rival == target:
        ranked = clean_logits[0].argsort(descending=True).tolist()
        rival = next(token for token in ranked if token != target)
    return rival


def _query_vector(states: torch.Tensor) -> torch.Tensor:
    """(batch=1, seq, d) -> (d,) at the query position."""
    return states[0, -1, :]


def audit_model(
    model: CopyModel,
    clean_tokens: tuple[int, ...] = CLEAN_TOKENS,
    corrupt_tokens: tuple[int, ...] = CORRUPT_TOKENS,
    target: int = TARGET_TOKEN,
) -> AuditResult:
    """Readouts, interventions, write norms and the Residual Contribution Audit of both writes."""
    for name, tokens in (("clean", clean_tokens), ("corrupt", corrupt_tokens)):
        if len(tokens) != SEQUENCE_LENGTH or not all(0 <= t < VOCAB_SIZE for t in tokens):
            raise ValueError(f"{name} tokens must be {SEQUENCE_LENGTH} ids in [0, {VOCAB_SIZE}), got {tokens}")
    if not 0 <= target < VOCAB_SIZE:
        raise ValueError(f"target must be a token id in [0, {VOCAB_SIZE}), got {target}")

    with single_thread():
        clean = run_traced(model, clean_tokens)
        corrupt = run_traced(model, corrupt_tokens)
        rival = choose_rival(clean.logits, corrupt.logits, target)
        clean_attn = _query_vector(clean.trace.attn_write).unsqueeze(0)  # (1, d)
        clean_mlp = _query_vector(clean.trace.mlp_write).unsqueeze(0)  # (1, d)
        runs = {
            "clean": clean,
            "attention ablated": run_traced(model, clean_tokens, ablate_attn=True),
            "MLP ablated": run_traced(model, clean_tokens, ablate_mlp=True),
            "corrupt": corrupt,
            "corrupt + clean attention patch": run_traced(model, corrupt_tokens, patch_attn=clean_attn),
            "corrupt + clean MLP patch": run_traced(model, corrupt_tokens, patch_mlp=clean_mlp),
        }
        with torch.no_grad():
            stage_logits = {
                "embedding": model.readout(clean.trace.r0),
                "after attention": model.readout(clean.trace.r1),
                "after MLP": model.readout(clean.trace.r2),
            }
            readouts = tuple(
                Readout(stage=stage, p_target=_p(logits, target), top_token=_top(logits))
                for stage, logits in stage_logits.items()
            )
            interventions = tuple(
                Intervention(
                    case=case,
                    p_target=_p(run.logits, target),
                    top_token=_top(run.logits),
                    logit_difference=_logit_difference(run.logits, target, rival),
                )
                for case, run in runs.items()
            )
            direction = model.unembed.weight[target] - model.unembed.weight[rival]  # (d,)
            components = (
                _component_audit(
                    model, "attention write", "attn_write", ("mlp_write",), direction, target, rival, runs,
                    ablated="attention ablated", patched="corrupt + clean attention patch",
                ),
                _component_audit(
                    model, "MLP write", "mlp_write", (), direction, target, rival, runs,
                    ablated="MLP ablated", patched="corrupt + clean MLP patch",
                ),
            )
    norms = WriteNorms(
        attention=_query_vector(clean.trace.attn_write).norm().item(),
        mlp=_query_vector(clean.trace.mlp_write).norm().item(),
    )
    return AuditResult(
        clean_tokens=tuple(clean_tokens),
        corrupt_tokens=tuple(corrupt_tokens),
        target=target,
        rival=rival,
        readouts=readouts,
        interventions=interventions,
        write_norms=norms,
        components=components,
    )


def _component_audit(
    model: CopyModel,
    label: str,
    write_name: str,
    later_write_names: tuple[str, ...],
    direction: torch.Tensor,
    target: int,
    rival: int,
    runs: dict[str, RunOutput],
    *,
    ablated: str,
    patched: str,
) -> ComponentAudit:
    clean, corrupt = runs["clean"], runs["corrupt"]
    write = getattr(clean.trace, write_name)  # (1, seq, d)
    w = _query_vector(write)  # (d,)
    w_norm = w.norm()
    final_state = clean.trace.r2  # (1, seq, d)
    # Exact direct effect: remove this write from the final state only, keep everything else as it was.
    without_write = final_state.clone()
    without_write[0, -1, :] -= w
    direct_effect = _logit_difference(model.readout(final_state), target, rival) - _logit_difference(
        model.readout(without_write), target, rival
    )
    ld_clean = _logit_difference(clean.logits, target, rival)
    ld_corrupt = _logit_difference(corrupt.logits, target, rival)
    ld_patched = _logit_difference(runs[patched].logits, target, rival)
    unit = w / w_norm
    carried = w + sum((_query_vector(getattr(clean.trace, name)) for name in later_write_names), torch.zeros_like(w))
    return ComponentAudit(
        component=label,
        write_norm=w_norm.item(),
        direct_projection=torch.dot(direction, w).item(),
        direct_effect_exact=direct_effect,
        ablation_delta_p_target=_p(runs[ablated].logits, target) - _p(clean.logits, target),
        ablation_delta_logit_difference=_logit_difference(runs[ablated].logits, target, rival) - ld_clean,
        patched_p_target=_p(runs[patched].logits, target),
        patch_recovery=(ld_patched - ld_corrupt) / (ld_clean - ld_corrupt),
        survival_cosine=F.cosine_similarity(w, _query_vector(final_state), dim=0).item(),
        retained_fraction=(torch.dot(carried, unit) / w_norm).item(),
        centred_fraction=((w - w.mean()).norm() / w_norm).item(),
    )

# --------------------------------------------------------------------------------------------------------------
# The whole lesson computation and its report
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LessonResult:
    training_log: tuple[TrainingRecord, ...]
    audit: AuditResult
    profile: GradientProfile | None


def run_lesson(include_profile: bool = True) -> LessonResult:
    """Train (once per process), audit, and optionally profile: everything the lesson page shows."""
    return LessonResult(
        training_log=training_log(),
        audit=audit_model(trained_copy_model()),
        profile=gradient_profile() if include_profile else None,
    )


def format_report(result: LessonResult) -> str:
    """The plain-text report the runner prints."""
    audit = result.audit
    lines = ["Training (batch of 128, before each update)"]
    lines += [f"step={r.step:3d} loss={r.loss:.4f} batch_accuracy={r.batch_accuracy:.3f}" for r in result.training_log]
    lines += ["", f"Layer-wise readouts for target token {audit.target} on {list(audit.clean_tokens)}"]
    lines += [f"{r.stage:16s} p(target)={r.p_target:.3f} top={r.top_token}" for r in audit.readouts]
    lines += ["", f"Interventions (corrupt input {list(audit.corrupt_tokens)}; rival token {audit.rival})"]
    lines += [
        f"{i.case:34s} p(target)={i.p_target:.3f} top={i.top_token} logit_diff={i.logit_difference:+.3f}"
        for i in audit.interventions
    ]
    lines += ["", "Write norms at the query position"]
    lines += [f"attention {audit.write_norms.attention:.4f}", f"MLP       {audit.write_norms.mlp:.4f}"]
    lines += ["", f"Residual Contribution Audit (target {audit.target} vs rival {audit.rival}, query position)"]
    header = ("component", "norm", "d^T w", "direct", "ablate dP", "ablate dLD", "patch P", "recovery",
              "cos(w,r2)", "retained", "centred")  # fmt: skip
    lines.append(f"{header[0]:16s}" + "".join(f"{h:>11s}" for h in header[1:]))
    for c in audit.components:
        values = (c.write_norm, c.direct_projection, c.direct_effect_exact, c.ablation_delta_p_target,
                  c.ablation_delta_logit_difference, c.patched_p_target, c.patch_recovery, c.survival_cosine,
                  c.retained_fraction, c.centred_fraction)  # fmt: skip
        lines.append(f"{c.component:16s}" + "".join(f"{v:11.3f}" for v in values))
    if result.profile is not None:
        profile = result.profile
        lines += [
            "",
            f"Median gradient profiles ({profile.depth} blocks of width {profile.width}, {profile.seeds} seeds; "
            "first block first)",
        ]
        lines += [f"{name:8s} " + " ".join(f"{v:.5f}" for v in values) for name, values in profile.medians.items()]
    return "\n".join(lines)


def result_as_json(result: LessonResult) -> str:
    return json.dumps(asdict(result), indent=2)


def main(argv: list[str] | None = None, prog: str = "residual_stream_lab") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,  # the runner's name, or the command's (`residlab ...`) when it runs this
        description="Lesson 2.1: train the copy model, audit its residual writes, profile pre-LN vs post-LN.",
    )
    parser.add_argument("--json", action="store_true", help="print the results as one JSON document")
    parser.add_argument("--skip-profile", action="store_true", help="leave out the gradient profile")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    result = run_lesson(include_profile=not args.skip_profile)
    print(result_as_json(result) if args.json else format_report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
