"""Which cells of a Lab 07 design's grids are one tensor or one intervention under two names, fixed by
construction (an identity, ``distribution.identities``) or a hybrid prompt's run: what every sentence and figure
must mark before reading a cell's value as a finding."""

from __future__ import annotations

from residlab.capture.sites import site_name
from residlab.course.lab07.distribution import identities
from residlab.course.lab07.patching import KINDS


def distinct_cells(design: dict, patching: bool = True) -> list[tuple[str, int, str, int]]:
    """(site, position, kind, block) of every distinct cell of a design's grids, in the order the model runs. Block
    b's input is block b-1's output (an identity, checked when the report is built), so that tensor is one cell,
    named by both sites. ``patching``: also one cell for two sites that are one patching intervention (block 0's
    attention write and output where the prompts agree: ``distribution.identities``); an attribution estimate tells
    them apart, so attribution's cells keep both."""
    grids = design["activation"]["denoising"]
    depth = len(grids["resid_pre"])
    merged = set()  # (kind, block, position) of the sites named with the cell they equal
    if patching:
        for identity in identities(design, depth):
            if identity.get("equals") and identity.get("positions") is not None:
                merged |= {(identity["kind"], identity["block"], position) for position in identity["positions"]}
    cells = []
    for block in range(depth):
        for kind in KINDS:
            if kind == "resid_pre" and block > 0:
                continue  # named with the block before's output
            site = site_name(block, kind)
            if kind == "resid_post" and block < depth - 1:
                site += f" = {site_name(block + 1, 'resid_pre')}"
            for position in range(len(grids[kind][block])):
                if (kind, block, position) in merged:
                    continue  # named with the cell it equals
                same = [k for k in KINDS if (k, block, position) in merged] if kind == "resid_post" else []
                cells.append((site + "".join(f" = {site_name(block, k)}" for k in same), position, kind, block))
    return cells


def same_intervention(design: dict, kind: str, block: int, position: int) -> bool:
    """Whether this cell's patching is another cell's intervention under another name (an identity with ``equals``
    that names positions): its patching shares are fixed to that cell's, its attribution estimate is not."""
    identity = _identity(design, kind, block, position)
    return bool(identity and identity.get("equals"))


def _identity(design: dict, kind: str, block: int, position: int, mirror: bool = False) -> dict | None:
    """The identity (``distribution.identities``) that names this cell, or None; ``mirror``: a swap's mirrored input
    cells (a tensor identity whose cells are hybrid prompts, observed) instead of the value identities."""
    depth = len(design["activation"]["denoising"]["resid_pre"])
    for identity in identities(design, depth):
        if (identity["kind"], identity["block"]) != (kind, block) or bool(identity.get("mirror")) != mirror:
            continue
        if (identity["value"] is not None and identity["position"] == position) or position in identity.get("positions", []):
            return identity
    return None


def by_construction(design: dict, kind: str, block: int, position: int) -> str:
    """Why a cell's value is fixed whatever the model (``distribution.identities``: the only changed input position,
    the readout's final state, block 0's input where the prompts agree, the last block where nothing reads it), or ""
    for a cell whose share is observed (a hybrid prompt's included: ``hybrid``)."""
    identity = _identity(design, kind, block, position)
    # one intervention under two names fixes that the two cells are equal, not the value: observed, marked apart
    return "an identity: " + identity["why"] if identity and not identity.get("equals") else ""


HYBRID = "hybrid prompt, observed"


def hybrid(design: dict, kind: str, block: int, position: int) -> str:
    """HYBRID for a cell that runs a hybrid prompt (a swap's mirrored input cell: fixed by construction is only that
    the patched run is that prompt's run; its value is observed), or ""."""
    return HYBRID if _identity(design, kind, block, position, mirror=True) else ""


def zero_identity(design: dict, kind: str, block: int, position: int) -> str:
    """The reason a cell is 0 by an identity (before the first changed position, or a value identity of 0), or ""."""
    if position < min(design["changed"]):
        return "before the first position where the prompts differ: attention is causal"
    identity = _identity(design, kind, block, position)
    return identity["why"] if identity and identity["value"] == 0.0 else ""


def same_prompt_pairs(hybrids: list[dict]) -> list[tuple[dict, dict]]:
    """(denoising cell, noising cell) of a swap's hybrid cells that run the same prompt (denoising at one swapped
    position, noising at the other): their shares sum to 1 by construction."""
    return [(a, b) for a in hybrids for b in hybrids
            if a["prompt"] == b["prompt"] and (a["direction"], b["direction"]) == ("denoising", "noising")]
