"""Lesson 2.1 lab: train a one-block copy model, audit its residual writes, and profile pre-LN vs post-LN gradients.

The copy task: a sequence of 5 tokens from a 12-token vocabulary whose last position holds the query marker 0;
the model must predict the FIRST token at that last position. One pre-LN block (causal multi-head attention and
a GELU MLP, each adding its write to the residual stream), a final LayerNorm and an unembedding tied to the token
embedding. Everything runs on the CPU in one thread and is deterministic for a given torch build.

Run it as ``residlab lesson`` or, standalone, ``python3 residual_stream_lab.py`` (needs only torch):

    python3 residual_stream_lab.py                 # training log, readouts, interventions, audit, profiles
    python3 residual_stream_lab.py --json          # the same results as one JSON document
    python3 residual_stream_lab.py --skip-profile  # leave out the pre-LN/post-LN gradient profile

The random-number stream is part of the experiment: the modules are created in a fixed order right after
``torch.manual_seed(7)`` and every training step draws one batch with ``torch.randint``. Reordering either
changes the trained weights and therefore every figure the lesson prints.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import statistics
import sys
from dataclasses import asdict, dataclass, field
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

VOCAB_SIZE = 12
SEQUENCE_LENGTH = 5
D_MODEL = 32
N_HEADS = 4
QUERY_MARKER = 0

TRAINING_SEED = 7
TRAINING_STEPS = 700
BATCH_SIZE = 128
LEARNING_RATE = 2e-3
LOGGED_STEPS = (1, 100, 300)  # 1-based; the last step is always logged as well

CLEAN_TOKENS = (7, 3, 9, 5, 0)
CORRUPT_TOKENS = (2, 3, 9, 5, 0)
TARGET_TOKEN = 7

PROFILE_DEPTH = 18
PROFILE_WIDTH = 48
PROFILE_SEEDS = 30
PROFILE_BATCH = (8, 6)  # (batch, positions) of the random inputs and targets
ARRANGEMENTS = ("pre-LN", "post-LN")


# --------------------------------------------------------------------------------------------------------------
# The copy model
# --------------------------------------------------------------------------------------------------------------


def _causal_mask(length: int) -> torch.Tensor:
    """(length, length) bool; True above the diagonal = that key position is hidden from the query."""
    return torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)


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


class PreNormBlock(nn.Module):
    """r1 = r0 + Attn(LN1(r0)); r2 = r1 + MLP(LN2(r1)). Submodules are created in this order on purpose."""

    def __init__(self, d_model: int = D_MODEL, n_heads: int = N_HEADS) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(d_model)
        self.attention = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.mlp_norm = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(
        self,
        r0: torch.Tensor,
        *,
        ablate_attn: bool = False,
        ablate_mlp: bool = False,
        patch_attn: torch.Tensor | None = None,
        patch_mlp: torch.Tensor | None = None,
        trace: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """r0: (batch, seq, d) -> r2: (batch, seq, d). Patches are (batch, d), placed at the last position."""
        read = self.attention_norm(r0)
        attn_write, _ = self.attention(
            read, read, read, attn_mask=_causal_mask(r0.shape[1]), need_weights=False
        )
        attn_write = _position_write(attn_write, patch_attn, ablate_attn)
        r1 = r0 + attn_write
        mlp_write = _position_write(self.mlp(self.mlp_norm(r1)), patch_mlp, ablate_mlp)
        r2 = r1 + mlp_write
        if trace is not None:
            trace.update(
                r0=r0.detach(),
                attn_write=attn_write.detach(),
                r1=r1.detach(),
                mlp_write=mlp_write.detach(),
                r2=r2.detach(),
            )
        return r2


class CopyModel(nn.Module):
    """Token + positional embedding, one pre-LN block, final LayerNorm, unembedding tied to the embedding."""

    def __init__(self) -> None:
        super().__init__()
        # Creation order fixes which random numbers each parameter receives; keep it.
        self.token_embedding = nn.Embedding(VOCAB_SIZE, D_MODEL)
        self.position_embedding = nn.Parameter(torch.randn(SEQUENCE_LENGTH, D_MODEL) * 0.02)
        self.block = PreNormBlock()
        self.final_norm = nn.LayerNorm(D_MODEL)
        self.unembed = nn.Linear(D_MODEL, VOCAB_SIZE, bias=False)
        self.unembed.weight = self.token_embedding.weight  # tied: W_U is the (vocab, d) embedding table

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: (batch, seq) long -> r0: (batch, seq, d)."""
        if tokens.ndim != 2 or tokens.shape[1] != SEQUENCE_LENGTH:
            raise ValueError(f"tokens must have shape (batch, {SEQUENCE_LENGTH}), got {tuple(tokens.shape)}")
        return self.token_embedding(tokens) + self.position_embedding

    def forward(self, tokens: torch.Tensor, **interventions) -> torch.Tensor:
        """tokens: (batch, 5) -> logits (batch, 12) at the query position.

        Keyword arguments go to the block: ablate_attn, ablate_mlp, patch_attn (batch, d), patch_mlp (batch, d),
        trace (a dict that receives r0, attn_write, r1, mlp_write, r2, each (batch, 5, d), detached).
        """
        return self.readout(self.block(self.embed(tokens), **interventions))

    def readout(self, residual: torch.Tensor) -> torch.Tensor:
        """residual: (batch, seq, d) -> logits (batch, vocab): unembed(final_norm(last position))."""
        return self.unembed(self.final_norm(residual[:, -1, :]))


# --------------------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run the enclosed torch work on one CPU thread (the configured experiment), then restore the setting."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass(frozen=True)
class TrainingRecord:
    step: int  # 1-based
    loss: float  # cross-entropy of that step's batch, before the update
    batch_accuracy: float  # fraction of that batch predicted correctly, before the update


def synthetic_batch(size: int = BATCH_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
    """One training batch from the global torch generator: tokens (size, 5) with the query marker last,
    targets (size,) = the first token."""
    tokens = torch.randint(0, VOCAB_SIZE, (size, SEQUENCE_LENGTH))
    tokens[:, -1] = QUERY_MARKER
    return tokens, tokens[:, 0].clone()


def train_copy_model(
    steps: int = TRAINING_STEPS, seed: int = TRAINING_SEED, log: list | None = None
) -> CopyModel:
    """Train the copy model exactly as configured; append TrainingRecords to ``log`` if given. Eval mode."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    logged = {step for step in LOGGED_STEPS if step <= steps} | {steps}
    with single_thread():
        torch.manual_seed(seed)
        model = CopyModel()
        optimiser = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
        for step in range(1, steps + 1):
            tokens, targets = synthetic_batch()
            logits = model(tokens)
            loss = F.cross_entropy(logits, targets)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            if log is not None and step in logged:
                accuracy = (logits.argmax(-1) == targets).float().mean().item()
                log.append(TrainingRecord(step=step, loss=loss.item(), batch_accuracy=accuracy))
    return model.eval()


@functools.lru_cache(maxsize=1)
def _default_training() -> tuple[CopyModel, tuple[TrainingRecord, ...]]:
    log: list[TrainingRecord] = []
    model = train_copy_model(log=log)
    return model, tuple(log)


def trained_copy_model() -> CopyModel:
    """The default training (700 steps, seed 7), trained once per process."""
    return _default_training()[0]


def weights_sha256(model: nn.Module) -> str:
    """SHA-256 over every state-dict entry (name, dtype, shape, raw bytes) in name order: the weights' identity."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        flat = tensor.detach().contiguous().reshape(-1)
        digest.update(f"{name}|{flat.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(bytes(flat.view(torch.uint8).tolist()))
    return digest.hexdigest()


def training_log() -> tuple[TrainingRecord, ...]:
    """The logged steps of the default training (trains it if this process has not yet)."""
    return _default_training()[1]


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


def run_traced(model: CopyModel, tokens: tuple[int, ...] | torch.Tensor, **interventions) -> RunOutput:
    """One forward pass without gradients, returning the logits and the five hook points."""
    if not isinstance(tokens, torch.Tensor):
        tokens = torch.tensor([tokens], dtype=torch.long)
    trace: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        logits = model(tokens, trace=trace, **interventions)
    return RunOutput(logits=logits, trace=ResidualTrace(**trace))


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
# The pre-LN versus post-LN gradient profile (the lesson's Figure 5)
# --------------------------------------------------------------------------------------------------------------


class FeedForward(nn.Module):
    """x (..., d) -> (..., d): Linear(d, 4d), GELU, Linear(4d, d). Stands in for attention and for the MLP."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class ProfileBlock(nn.Module):
    """Two feed-forward operators with a normaliser before each (pre-LN) or after each residual add (post-LN)."""

    def __init__(self, width: int, arrangement: str) -> None:
        super().__init__()
        if arrangement not in ARRANGEMENTS:
            raise ValueError(f"arrangement must be one of {ARRANGEMENTS}, got {arrangement!r}")
        self.arrangement = arrangement
        self.norm_a, self.norm_b = nn.LayerNorm(width), nn.LayerNorm(width)
        self.op_a, self.op_b = FeedForward(width), FeedForward(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.arrangement == "pre-LN":  # x + F(N(x)): an identity route around every normaliser
            x = x + self.op_a(self.norm_a(x))
            return x + self.op_b(self.norm_b(x))
        x = self.norm_a(x + self.op_a(x))  # N(x + F(x)): every route passes through the normaliser
        return self.norm_b(x + self.op_b(x))


@dataclass(frozen=True)
class GradientProfile:
    depth: int
    width: int
    seeds: int
    # arrangement -> per-depth (first block first) median over seeds of the block's mean parameter-gradient norm
    medians: dict[str, list[float]] = field(default_factory=dict)


def _depth_gradient_norms(arrangement: str, seed: int, depth: int, width: int) -> list[float]:
    """One seeded stack, one MSE backward pass: mean gradient norm over each block's parameter tensors."""
    torch.manual_seed(seed)
    blocks = nn.ModuleList([ProfileBlock(width, arrangement) for _ in range(depth)])
    head = nn.Linear(width, width)
    inputs = torch.randn(*PROFILE_BATCH, width)  # (batch, positions, width)
    targets = torch.randn_like(inputs)
    hidden = inputs
    for block in blocks:
        hidden = block(hidden)
    F.mse_loss(head(hidden), targets).backward()
    return [
        statistics.mean(p.grad.norm().item() for p in block.parameters() if p.grad is not None) for block in blocks
    ]


def gradient_profile(
    seeds: int = PROFILE_SEEDS, depth: int = PROFILE_DEPTH, width: int = PROFILE_WIDTH
) -> GradientProfile:
    """Median over seeds 0..seeds-1 of the per-depth gradient norm, for matched pre-LN and post-LN stacks."""
    if seeds < 1 or depth < 1 or width < 1:
        raise ValueError(f"seeds, depth and width must be positive, got {seeds}, {depth}, {width}")
    medians: dict[str, list[float]] = {}
    with single_thread():
        for arrangement in ARRANGEMENTS:
            runs = [_depth_gradient_norms(arrangement, seed, depth, width) for seed in range(seeds)]
            medians[arrangement] = [statistics.median(run[layer] for run in runs) for layer in range(depth)]
    return GradientProfile(depth=depth, width=width, seeds=seeds, medians=medians)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="residual_stream_lab",
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
