"""Lab 04, sections 1-2: the base model's sizes from "Attention Is All You Need" (Vaswani et al., 2017) and its
sinusoidal positional encoding, with a check of the property the paper states: for a fixed offset k,
PE(pos + k) is a linear function of PE(pos) (one rotation per pair of dimensions, the same for every pos).

Everything is in float64 so the check's tolerance can be tight. ``residlab.course.lab04.paper_lab`` prints the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# The base model of the paper's Table 3 (section 3 states the same values).
PAPER_BASE = {"N": 6, "d_model": 512, "h": 8, "d_ff": 2048, "P_drop": 0.1}
PAPER_HEAD_WIDTH = PAPER_BASE["d_model"] // PAPER_BASE["h"]  # d_k = d_v = d_model / h

# Sinusoidal encoding: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
PE_BASE = 10000.0
PE_POSITIONS = 100  # positions 0..99 are checked and drawn
PE_OFFSETS = (1, 7, 50)
PE_TOLERANCE = 1e-10  # float64; the rounding of sin/cos at arguments up to ~150 is about 1e-13

# --------------------------------------------------------------------------------------------------------------
# 2. Sinusoidal positional encoding
# --------------------------------------------------------------------------------------------------------------


def encoding_frequencies(d_model: int, base: float = PE_BASE) -> torch.Tensor:
    """(d_model / 2,) float64: omega_i = base^(-2i / d_model), the angular frequency of dimension pair i."""
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be a positive even number, got {d_model}")
    pair = torch.arange(d_model // 2, dtype=torch.float64)
    return base ** (-2.0 * pair / d_model)


def sinusoidal_encoding(positions: int, d_model: int, base: float = PE_BASE) -> torch.Tensor:
    """(positions, d_model) float64: row pos is PE(pos); even columns are sines, odd columns cosines."""
    if positions < 1:
        raise ValueError(f"positions must be at least 1, got {positions}")
    angles = torch.arange(positions, dtype=torch.float64)[:, None] * encoding_frequencies(d_model, base)[None, :]
    encoding = torch.empty(positions, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angles)
    encoding[:, 1::2] = torch.cos(angles)
    return encoding


def offset_map(offset: int, d_model: int, base: float = PE_BASE) -> torch.Tensor:
    """(d_model, d_model) float64 M_k with PE(pos + k) = M_k PE(pos) for every pos.

    For pair i, sin(w(p+k)) = cos(wk) sin(wp) + sin(wk) cos(wp) and cos(w(p+k)) = -sin(wk) sin(wp) + cos(wk) cos(wp):
    a 2x2 rotation by wk that depends on k but not on p. M_k is block-diagonal with those rotations.
    """
    angles = offset * encoding_frequencies(d_model, base)
    cos, sin = torch.cos(angles), torch.sin(angles)
    matrix = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    matrix[even, even], matrix[even, even + 1] = cos, sin
    matrix[even + 1, even], matrix[even + 1, even + 1] = -sin, cos
    return matrix


@dataclass(frozen=True)
class OffsetCheck:
    offset: int
    max_error: float  # max |PE(pos + k) - M_k PE(pos)| over pos = 0..positions-1 and every dimension
    wrong_map_error: float  # the same with M_(k+1): what a map that is not the right one scores
    orthogonality_error: float  # max |M_k^T M_k - I|: the map is a rotation, so it keeps norms


@dataclass(frozen=True)
class PositionalCheck:
    d_model: int
    positions: int
    tolerance: float
    shortest_wavelength: float  # 2 pi / omega_0 = 2 pi
    longest_wavelength: float  # 2 pi / omega_(d/2 - 1), just under 2 pi * base
    first_rows: tuple[tuple[float, ...], ...]  # PE(0) and PE(1), first 6 dimensions
    offsets: tuple[OffsetCheck, ...]

    @property
    def max_error(self) -> float:
        return max(check.max_error for check in self.offsets)

    @property
    def passed(self) -> bool:
        return self.max_error <= self.tolerance


def check_positional_encoding(
    d_model: int = PAPER_BASE["d_model"], positions: int = PE_POSITIONS, offsets: tuple[int, ...] = PE_OFFSETS
) -> PositionalCheck:
    """Check PE(pos + k) = M_k PE(pos) for pos = 0..positions-1 and each offset k, in float64."""
    if not offsets or min(offsets) < 1:
        raise ValueError(f"offsets must be positive integers, got {offsets}")
    encoding = sinusoidal_encoding(positions + max(offsets) + 1, d_model)
    identity = torch.eye(d_model, dtype=torch.float64)
    checks = []
    for k in offsets:
        later = encoding[k : k + positions]  # rows PE(pos + k)
        rotation = offset_map(k, d_model)
        checks.append(
            OffsetCheck(
                offset=k,
                max_error=(later - encoding[:positions] @ rotation.T).abs().max().item(),
                wrong_map_error=(later - encoding[:positions] @ offset_map(k + 1, d_model).T).abs().max().item(),
                orthogonality_error=(rotation.T @ rotation - identity).abs().max().item(),
            )
        )
    frequencies = encoding_frequencies(d_model)
    return PositionalCheck(
        d_model=d_model,
        positions=positions,
        tolerance=PE_TOLERANCE,
        shortest_wavelength=(2 * math.pi / frequencies[0]).item(),
        longest_wavelength=(2 * math.pi / frequencies[-1]).item(),
        first_rows=tuple(tuple(encoding[row, :6].tolist()) for row in (0, 1)),
        offsets=tuple(checks),
    )

