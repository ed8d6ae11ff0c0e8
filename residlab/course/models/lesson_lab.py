"""Lesson 2.1 lab: train a one-block copy model, audit its residual writes, and profile pre-LN vs post-LN gradients.

The copy model and its training are ``residlab.course.models.copy_model``; the gradient profile is
``residlab.course.models.gradient_profile``. This module audits the trained model (readouts, interventions, the
Residual Contribution Audit), reading and changing the block's values at its hook points with
``residlab.capture.recording.record_sites``, and prints the lesson's report.

Run it as ``residlab lesson`` or, standalone, ``.venv-lesson/bin/python residual_stream_lab.py`` in the
environment Lesson 2.1's lab sets up (torch and NumPy, ``torch-requirements.txt``):

    .venv-lesson/bin/python residual_stream_lab.py  # training log, readouts, interventions, audit, profiles
    .venv-lesson/bin/python residual_stream_lab.py --json  # the same results as one JSON document
    .venv-lesson/bin/python residual_stream_lab.py --skip-profile  # leave out the pre-LN/post-LN gradient profile
    .venv-lesson/bin/python residual_stream_lab.py packet DIR  # the audit of the copy model as a packet, written into DIR
    .venv-lesson/bin/python residual_stream_lab.py verify DIR  # the model retrained from its seed, and that packet verified
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from residlab.capture.patching import set_to, zeroed
from residlab.audit.packet import audit_to_directory, summary_lines
from residlab.audit.runs import AuditInput, DeclaredSite
from residlab.audit.subject import AuditError, Subject
from residlab.audit.verify import verify_packet
from residlab.capture.blocks import COPY_MODEL
from residlab.capture.outdir import OutputDirectoryError, check_output_directory
from residlab.capture.recording import record_sites
from residlab.audit.measures import choose_rival, logit_difference, measure_write, metric_direction
from residlab.audit.attribution import LogitAttribution, direct_logit_attribution
from residlab.course.models.copy_model import (
    BATCH_SIZE, D_MODEL, LEARNING_RATE, N_HEADS, SEQUENCE_LENGTH, TRAINING_SEED, TRAINING_STEPS, VOCAB_SIZE,
    CopyModel, TrainingRecord, default_training, train_copy_model, training_sequence_counts, weights_sha256,
)
from residlab.course.models.gradient_profile import PROFILE_SEEDS, GradientProfile, gradient_profile
from residlab.course.models.threads import single_thread

CLEAN_TOKENS = (7, 3, 9, 5, 0)
CORRUPT_TOKENS = (2, 3, 9, 5, 0)
TARGET_TOKEN = 7

# run_traced's record of one run: ResidualTrace field -> the block's hook point that carries it.
TRACE_HOOK_POINTS = {
    "resid_pre": "hook_resid_pre",
    "attn_write": "hook_attn_out",
    "resid_mid": "hook_resid_mid",
    "mlp_write": "hook_mlp_out",
    "resid_post": "hook_resid_post",
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
    # use: zero the write and let the rest of the model recompute; the total effect is what zeroing it removes,
    # oriented as every effect here: what the write adds, the clean run minus the run without it.
    total_effect_p_target: float  # p(target) clean - p(target) with w zeroed
    total_effect: float  # LD clean - LD with w zeroed
    # recovery: put the clean write into the corrupt run at the query position.
    patched_p_target: float
    # (LD patched - LD corrupt) / (LD clean - LD corrupt); 1 = full recovery; None (undefined) when the clean and
    # corrupt logit differences are equal
    patch_recovery: float | None
    # survival: is the write's direction still present in the final residual state? None for a zero write.
    survival_cosine: float | None  # cos(w, r_final) at the query position
    retained_fraction: float | None  # (w + every later write) . w / |w|^2; 1 = no later write removed any of it
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
    # direct logit attribution of the clean run's query state (embedding and both writes), final scale frozen
    attribution: LogitAttribution


@dataclass(frozen=True)
class ResidualTrace:
    """The five hook points of one run; every tensor (batch, 5, d), detached."""

    resid_pre: torch.Tensor
    attn_write: torch.Tensor
    resid_mid: torch.Tensor
    mlp_write: torch.Tensor
    resid_post: torch.Tensor

    def clone(self) -> "ResidualTrace":
        return ResidualTrace(**{name: getattr(self, name).clone() for name in self.__dataclass_fields__})


@dataclass(frozen=True)
class RunOutput:
    logits: torch.Tensor  # (batch, vocab) at the query position
    trace: ResidualTrace


def _write_edit(ablate: bool, replacement: torch.Tensor | None):
    """The edit of one write (``residlab.capture.patching``): zero it, put ``replacement`` (batch, d) at its query
    position, or both in that order. Each returns a new tensor, so the caller's tensors are never modified."""
    zero = zeroed() if ablate else None
    patch = None if replacement is None else set_to(replacement.unsqueeze(1), -1)

    def edit(write: torch.Tensor) -> torch.Tensor:
        if replacement is not None and replacement.shape != (write.shape[0], write.shape[2]):
            raise ValueError(
                f"a patch must have shape (batch, d_model) = {(write.shape[0], write.shape[2])}, "
                f"got {tuple(replacement.shape)}"
            )
        for step in (zero, patch):
            write = write if step is None else step(write)
        return write

    return edit


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
        name: _write_edit(ablate, patch)
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
    """The audit's metric of a batch of one's logits (1, vocab)."""
    return logit_difference(logits[0], target, rival)


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
        rival = choose_rival(clean.logits[0], corrupt.logits[0], target)  # named before any intervention
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
                "embedding": model.readout(clean.trace.resid_pre),
                "after attention": model.readout(clean.trace.resid_mid),
                "after MLP": model.readout(clean.trace.resid_post),
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
            direction = metric_direction(model.unembed.weight, target, rival)  # (d,)
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
    writes = {"embedding": clean.trace.resid_pre, "attention write": clean.trace.attn_write,
              "MLP write": clean.trace.mlp_write}  # fmt: skip
    attribution = direct_logit_attribution(
        model.final_norm, model.unembed, {name: _query_vector(w) for name, w in writes.items()}, target, rival
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
        attribution=attribution,
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
    """The write's measures (``residlab.audit.measures``, the audit tool's own), and the lesson's probabilities."""
    clean = runs["clean"]
    w = _query_vector(getattr(clean.trace, write_name))  # (d,)

    def readout_metric(state: torch.Tensor) -> float:  # one state (d,) read out at the query position
        return _logit_difference(model.readout(state.reshape(1, 1, -1)), target, rival)

    measures = measure_write(
        w, _query_vector(clean.trace.resid_post), [_query_vector(getattr(clean.trace, name)) for name in later_write_names],
        direction, readout_metric=readout_metric,
        **{case: _logit_difference(runs[run].logits, target, rival)
           for case, run in (("clean", "clean"), ("corrupt", "corrupt"), ("ablated", ablated), ("patched", patched))},
    )  # fmt: skip
    return ComponentAudit(
        component=label,
        write_norm=measures.norm,
        direct_projection=measures.direct_projection,
        direct_effect_exact=measures.direct_effect_exact,
        total_effect_p_target=_p(clean.logits, target) - _p(runs[ablated].logits, target),
        total_effect=measures.total_effect,
        patched_p_target=_p(runs[patched].logits, target),
        patch_recovery=measures.patch_recovery,
        survival_cosine=measures.survival_cosine,
        retained_fraction=measures.retained_fraction,
        centred_fraction=((w - w.mean()).norm() / w.norm()).item(),
    )

# --------------------------------------------------------------------------------------------------------------
# The whole lesson computation and its report
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LessonResult:
    training_log: tuple[TrainingRecord, ...]
    # how often the clean and the corrupt sequence occur among the training batches (replayed from the seed)
    training_counts: tuple[int, int]
    audit: AuditResult
    profile: GradientProfile | None


def run_lesson(include_profile: bool = True) -> LessonResult:
    """Train (once per process), audit, and optionally profile: everything the lesson page shows."""
    model, log = default_training()
    return LessonResult(
        training_log=log,
        training_counts=training_sequence_counts((CLEAN_TOKENS, CORRUPT_TOKENS)),
        audit=audit_model(model),
        profile=gradient_profile() if include_profile else None,
    )


def format_report(result: LessonResult) -> str:
    """The plain-text report the runner prints."""
    audit = result.audit
    lines = ["Training (batch of 128, before each update)"]
    lines += [f"step={r.step:3d} loss={r.loss:.4f} batch_accuracy={r.batch_accuracy:.3f}" for r in result.training_log]
    clean_count, corrupt_count = result.training_counts
    lines += [
        "",
        f"In the {TRAINING_STEPS * BATCH_SIZE} training sequences: clean {list(audit.clean_tokens)} {clean_count} "
        f"times, corrupt {list(audit.corrupt_tokens)} {corrupt_count} times",
    ]
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
    lines.append("(direct, total dP and total dLD: what the write adds, the clean run minus the run without it)")
    header = ("component", "norm", "d^T w", "direct", "total dP", "total dLD", "patch P", "recovery",
              "cos(w,out)", "retained", "centred")  # fmt: skip
    lines.append(f"{header[0]:16s}" + "".join(f"{h:>11s}" for h in header[1:]))
    for c in audit.components:
        values = (c.write_norm, c.direct_projection, c.direct_effect_exact, c.total_effect_p_target,
                  c.total_effect, c.patched_p_target, c.patch_recovery, c.survival_cosine,
                  c.retained_fraction, c.centred_fraction)  # fmt: skip
        lines.append(f"{c.component:16s}" + "".join(f"{'undefined':>11s}" if v is None else f"{v:11.3f}" for v in values))
    attribution = audit.attribution
    lines += ["", f"Direct logit attribution, final LayerNorm scale frozen at {attribution.scale:.4f} (query position)"]
    lines += [f"{name:22s} {value:+.3f}" for name, value in {**attribution.terms, **attribution.bias_terms}.items()]
    lines.append(f"{'sum':22s} {attribution.total:+.3f}  logit difference {attribution.logit_difference:+.3f}")
    if result.profile is not None:
        profile = result.profile
        lines += [
            "",
            f"Median gradient profiles ({profile.depth} blocks of width {profile.width}, {profile.seeds} seeds; "
            "first block first)",
        ]
        width = max(len(name) for name in profile.medians)
        lines += [f"{name:{width}s} " + " ".join(f"{v:.5f}" for v in values) for name, values in profile.medians.items()]
    return "\n".join(lines)


def result_as_json(result: LessonResult) -> str:
    return json.dumps(asdict(result), indent=2)


# --------------------------------------------------------------------------------------------------------------
# The audit as a packet: written and verified (the runner's `packet DIR` and `verify DIR`; `residlab audit
# --copy-model` through copy_audit). Verifying retrains the model from its seed.
# --------------------------------------------------------------------------------------------------------------


def copy_model_subject(model=None) -> Subject:
    """The lesson's trained copy model (700 steps, seed 7): ``model`` if given (a page passes the one its render
    trained), else trained once per process."""
    source = {
        "kind": "copy_model",
        "training": {"seed": TRAINING_SEED, "steps": TRAINING_STEPS, "batch": BATCH_SIZE,
                     "learning_rate": LEARNING_RATE},  # fmt: skip
        "code": "residlab.course.models.copy_model.train_copy_model",
    }
    model = default_training()[0] if model is None else model
    return Subject(model, COPY_MODEL, source, fixed_length=SEQUENCE_LENGTH)


def lesson_audit_input(subject: Subject) -> AuditInput:
    """The lesson's clean and corrupt sequences, target, and the rival its rule picks for the subject's model."""
    audited = audit_model(subject.model)
    return AuditInput(audited.clean_tokens, audited.corrupt_tokens, audited.target, audited.rival)


def lesson_sites() -> list[DeclaredSite]:
    """Both writes of the one block, at the query position."""
    query = SEQUENCE_LENGTH - 1
    return [DeclaredSite("attn", 0, query), DeclaredSite("mlp", 0, query)]


def write_copy_model_packet(output_dir: Path, model=None) -> dict:
    """The lesson's audit as a packet (one thread, as the lesson computes it); ``model`` as ``copy_model_subject``."""
    subject = copy_model_subject(model)
    return audit_to_directory(subject, lesson_audit_input(subject), lesson_sites(), output_dir, threads=1)


def verify_copy_model_packet(packet_dir: Path, model=None):
    return verify_packet(packet_dir, copy_model_subject(model))


def packet_command(command: str, directory: Path) -> int:
    """``packet DIR``: write the packet (DIR new or empty, checked before training); ``verify DIR``: retrain the
    model from its seed and check the packet against it. Prints what the audit command prints; 0, or 1 when the
    packet is not verified."""
    if command == "packet":
        check_output_directory(directory)
        for line in summary_lines(write_copy_model_packet(directory)):
            print(line)
        print(f"wrote model.json, input.json, intervention.json, measurement.json into {directory}")
        return 0
    report = verify_copy_model_packet(directory)
    print("\n".join(report.printed()))
    return 0 if report.passed else 1


def main(argv: list[str] | None = None, prog: str = "residual_stream_lab") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,  # the runner's name, or the command's (`residlab ...`) when it runs this
        description="Lesson 2.1: train the copy model, audit its residual writes, profile pre-LN vs post-LN.",
    )
    parser.add_argument("--json", action="store_true", help="print the results as one JSON document")
    parser.add_argument("--skip-profile", action="store_true", help="leave out the gradient profile")
    parser.epilog = (f"{prog} packet DIR: write the audit of the copy model as a packet; "
                     f"{prog} verify DIR: retrain the model from its seed and verify that packet")  # fmt: skip
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["packet"], ["verify"]):
        return _packet_main(argv, prog)
    args = parser.parse_args(argv)
    result = run_lesson(include_profile=not args.skip_profile)
    print(result_as_json(result) if args.json else format_report(result))
    return 0


def _packet_main(argv: list[str], prog: str) -> int:
    parser = argparse.ArgumentParser(prog=f"{prog} {argv[0]}", description="The copy model's audit packet.")
    parser.add_argument("directory", help="the packet directory (for packet: new or empty)")
    args = parser.parse_args(argv[1:])
    try:
        return packet_command(argv[0], Path(args.directory))
    except (AuditError, OutputDirectoryError) as refused:  # a refusal: one line, nothing written
        print(f"{prog}: {refused}", file=sys.stderr)
        return 1

if __name__ == "__main__":
    sys.exit(main())
