"""The pre-LN versus post-LN gradient profile of Lesson 2.1 (the lesson's Figure 5).

Matched stacks of small blocks, each two feed-forward operators with a LayerNorm either before each operator
(pre-LN: ``x + F(N(x))``, an identity route around every normaliser) or after each residual add (post-LN:
``N(x + F(x))``). The lesson's source document compares those two stacks, and its pre-LN stack has no final
normaliser: its output is the raw running sum, which grows with depth and raises every pre-LN gradient. The
third stack is the matched control: the same pre-LN stack, with the same weights for every seed, and a final
LayerNorm before the head, as pre-LN language models have. For each seed, one MSE backward pass through a
freshly seeded stack gives each block's mean parameter-gradient norm; the profile is the median over seeds,
first block first. Lab 04 shows the same profile
from this module. Everything runs on the CPU in one thread (``single_thread``) and is deterministic for a given
torch build.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from residlab.course.models.threads import single_thread


PROFILE_DEPTH = 18
PROFILE_WIDTH = 48
PROFILE_SEEDS = 30
PROFILE_BATCH = (8, 6)  # (batch, positions) of the random inputs and targets
BLOCK_ARRANGEMENTS = ("pre-LN", "post-LN")
# stack -> (its blocks' arrangement, whether a LayerNorm sits between the last block and the head)
STACKS = {
    "pre-LN": ("pre-LN", False),
    "post-LN": ("post-LN", False),
    "pre-LN + final LN": ("pre-LN", True),
}
ARRANGEMENTS = tuple(STACKS)


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
        if arrangement not in BLOCK_ARRANGEMENTS:
            raise ValueError(f"arrangement must be one of {BLOCK_ARRANGEMENTS}, got {arrangement!r}")
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
    # stack (ARRANGEMENTS) -> per-depth (first block first) median over seeds of the block's mean
    # parameter-gradient norm
    medians: dict[str, list[float]] = field(default_factory=dict)


def _depth_gradient_norms(arrangement: str, seed: int, depth: int, width: int) -> list[float]:
    """One seeded stack, one MSE backward pass: mean gradient norm over each block's parameter tensors."""
    block_arrangement, final_norm = STACKS[arrangement]
    torch.manual_seed(seed)
    blocks = nn.ModuleList([ProfileBlock(width, block_arrangement) for _ in range(depth)])
    head = nn.Linear(width, width)
    inputs = torch.randn(*PROFILE_BATCH, width)  # (batch, positions, width)
    targets = torch.randn_like(inputs)
    # A LayerNorm draws no random numbers, so the control's blocks, head and data are the pre-LN stack's.
    normaliser = nn.LayerNorm(width) if final_norm else nn.Identity()
    hidden = inputs
    for block in blocks:
        hidden = block(hidden)
    F.mse_loss(head(normaliser(hidden)), targets).backward()
    return [
        statistics.mean(p.grad.norm().item() for p in block.parameters() if p.grad is not None) for block in blocks
    ]


def gradient_profile(
    seeds: int = PROFILE_SEEDS, depth: int = PROFILE_DEPTH, width: int = PROFILE_WIDTH
) -> GradientProfile:
    """Median over seeds 0..seeds-1 of the per-depth gradient norm, for the matched stacks of ``STACKS``.
    The lesson and Lab 04 show the same profile (pages read it once per render: ``residlab.course.shared``)."""
    if seeds < 1 or depth < 1 or width < 1:
        raise ValueError(f"seeds, depth and width must be positive, got {seeds}, {depth}, {width}")
    medians: dict[str, list[float]] = {}
    with single_thread():
        for arrangement in ARRANGEMENTS:
            runs = [_depth_gradient_norms(arrangement, seed, depth, width) for seed in range(seeds)]
            medians[arrangement] = [statistics.median(run[layer] for run in runs) for layer in range(depth)]
    return GradientProfile(depth=depth, width=width, seeds=seeds, medians=medians)
