"""Lesson 2.1's copy model: the model, its named hook points, its training and the identity of its weights.

The copy task: a sequence of 5 tokens from a 12-token vocabulary whose last position holds the query marker 0;
the model must predict the FIRST token at that last position. One pre-LN block (causal multi-head attention and
a GELU MLP, each adding its write to the residual stream), a final LayerNorm and an unembedding tied to the token
embedding. Everything runs on the CPU in one thread and is deterministic for a given torch build.

The block passes each residual value through a named identity module where it makes it, as TransformerLens'
blocks do, under TransformerLens' names: ``hook_resid_pre`` (the block input), ``hook_attn_out`` (the attention
write), ``hook_resid_mid`` (the state between the two writes), ``hook_mlp_out`` (the MLP write),
``hook_resid_post`` (the block output). Whoever reads or changes a value does so with a hook
on its hook point (``residlab.capture.recording.record_sites``); the forward itself takes no such arguments.

The random-number stream is part of the experiment: the modules are created in a fixed order right after
``torch.manual_seed(7)`` and every training step draws one batch with ``torch.randint``. Reordering either
changes the trained weights and therefore every figure the lesson prints. The hook points own no parameters and
draw no random numbers, so they change neither the stream nor the state dict.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from residlab.course.models.threads import single_thread

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


# --------------------------------------------------------------------------------------------------------------
# The copy model
# --------------------------------------------------------------------------------------------------------------


def _causal_mask(length: int) -> torch.Tensor:
    """(length, length) bool; True above the diagonal = that key position is hidden from the query."""
    return torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)


class HookPoint(nn.Identity):
    """Returns its input unchanged: a named place in the forward where a hook can read or replace a value."""


class PreNormBlock(nn.Module):
    """resid_mid = resid_pre + Attn(LN1(resid_pre)); resid_post = resid_mid + MLP(LN2(resid_mid)).

    Submodules are created in this order on purpose."""

    def __init__(self, d_model: int = D_MODEL, n_heads: int = N_HEADS) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(d_model)
        self.attention = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.mlp_norm = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        # Created after every parametered submodule; they own no parameters and draw no random numbers.
        self.hook_resid_pre = HookPoint()  # the block input
        self.hook_attn_out = HookPoint()  # the attention write
        self.hook_resid_mid = HookPoint()  # between the two writes
        self.hook_mlp_out = HookPoint()  # the MLP write
        self.hook_resid_post = HookPoint()  # the block output

    def forward(self, resid_pre: torch.Tensor) -> torch.Tensor:
        """resid_pre: (batch, seq, d) -> resid_post: (batch, seq, d), each value passed through its hook point."""
        resid_pre = self.hook_resid_pre(resid_pre)
        read = self.attention_norm(resid_pre)
        attn_write, _ = self.attention(
            read, read, read, attn_mask=_causal_mask(resid_pre.shape[1]), need_weights=False
        )
        attn_write = self.hook_attn_out(attn_write)
        resid_mid = self.hook_resid_mid(resid_pre + attn_write)
        mlp_write = self.hook_mlp_out(self.mlp(self.mlp_norm(resid_mid)))
        return self.hook_resid_post(resid_mid + mlp_write)


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
        """tokens: (batch, seq) long -> resid_pre: (batch, seq, d)."""
        if tokens.ndim != 2 or tokens.shape[1] != SEQUENCE_LENGTH:
            raise ValueError(f"tokens must have shape (batch, {SEQUENCE_LENGTH}), got {tuple(tokens.shape)}")
        return self.token_embedding(tokens) + self.position_embedding

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: (batch, 5) -> logits (batch, 12) at the query position."""
        return self.readout(self.block(self.embed(tokens)))

    def readout(self, residual: torch.Tensor) -> torch.Tensor:
        """residual: (batch, seq, d) -> logits (batch, vocab): unembed(final_norm(last position))."""
        return self.unembed(self.final_norm(residual[:, -1, :]))


# --------------------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------------------


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
        model = _seeded_model(seed)
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


def _seeded_model(seed: int) -> CopyModel:
    """Seed the global generator and create the untrained model: the start of training's random-number stream."""
    torch.manual_seed(seed)
    return CopyModel()


def training_sequence_counts(
    sequences: tuple[tuple[int, ...], ...], steps: int = TRAINING_STEPS, seed: int = TRAINING_SEED
) -> tuple[int, ...]:
    """How often each of ``sequences`` (5 token ids each) occurs among the ``steps`` training batches.

    Replays the training's random-number stream (seed, model creation, one ``synthetic_batch`` per step; the
    forward, backward and AdamW step draw none), so these are the very batches ``train_copy_model`` trained on.
    The caller's generator state is restored afterwards.
    """
    wanted = torch.tensor(sequences, dtype=torch.long)  # (n, 5)
    if wanted.ndim != 2 or wanted.shape[1] != SEQUENCE_LENGTH:
        raise ValueError(f"each sequence must hold {SEQUENCE_LENGTH} token ids, got {sequences}")
    counts = torch.zeros(len(sequences), dtype=torch.long)
    with single_thread(), torch.random.fork_rng(devices=[]):
        _seeded_model(seed)
        for _ in range(steps):
            tokens, _ = synthetic_batch()
            counts += (tokens.unsqueeze(0) == wanted.unsqueeze(1)).all(-1).sum(-1)
    return tuple(int(count) for count in counts)


@functools.lru_cache(maxsize=1)
def default_training() -> tuple[CopyModel, tuple[TrainingRecord, ...]]:
    """(model, logged steps) of the default training (700 steps, seed 7), trained once per process."""
    log: list[TrainingRecord] = []
    model = train_copy_model(log=log)
    return model, tuple(log)


def weights_sha256(model: nn.Module) -> str:
    """SHA-256 over every state-dict entry (name, dtype, shape, raw bytes) in name order: the weights' identity
    (of the copy model and of the induction model alike)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        flat = tensor.detach().contiguous().reshape(-1)
        digest.update(f"{name}|{flat.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
