"""Which cells of a Lab 07 design's grids are one tensor or one intervention under two names, fixed by
construction (an identity, ``identities``, checked on every pair: ``check_identities``, ``check_mirror``) or a hybrid
prompt's run: what every sentence and figure must mark before reading a cell's value as a finding."""

from __future__ import annotations

import torch

from residlab.capture.sites import site_name
from residlab.course.lab07.patching import DIRECTIONS, KINDS


# ---- identities: cells the construction fixes --------------------------------------------------------------


def identities(design: dict, depth: int) -> list[dict]:
    """Every cell whose value is fixed by construction, whatever the model: the cells before the first changed
    position (0: attention is causal), block b's input (one tensor with block b-1's output), block 0's attention
    write where the prompts agree (the same patching intervention as block 0's output there), block 0's input at
    the only changed position (1: patching it makes one run the other), the last block's output at the readout
    (1: all the metric reads) and the last block's writes and output at every other position (0: nothing downstream
    reads them). Each: site, kind, block, position (None: every position), value, why; an identity whose value is
    another cell's has ``equals`` (that cell's kind and block) instead of a value."""
    first = min(design["changed"])
    cells = [{"site": f"every site at positions 0 to {first - 1}", "kind": None, "block": None, "position": None,
              "value": 0.0, "why": "before the first position where the prompts differ: attention is causal"}] if first else []  # fmt: skip
    for block in range(1, depth):
        cells.append({"site": f"{site_name(block, 'resid_pre')} = {site_name(block - 1, 'resid_post')}", "kind": "resid_pre",
                      "block": block, "position": None, "value": None, "equals": ["resid_post", block - 1],
                      "why": "one tensor under two names: block input is the block before's output"})  # fmt: skip
    if "clean" in design:
        agree = [p for p in range(first, len(design["clean"])) if design["clean"][p] == design["corrupt"][p]]
        cells.append({"site": site_name(0, "resid_pre"), "kind": "resid_pre", "block": 0, "position": None,
                      "positions": agree, "value": 0.0,
                      "why": "block 0's input where the prompts agree: the same token, so the same tensor in both runs"})  # fmt: skip
        everywhere = [p for p in range(len(design["clean"])) if design["clean"][p] == design["corrupt"][p]]
        cells.append({"site": f"{site_name(0, 'attn_write')} = {site_name(0, 'resid_post')}", "kind": "attn_write",
                      "block": 0, "position": None, "positions": everywhere, "value": None, "equals": ["resid_post", 0],
                      "why": "where the prompts agree block 0's input is the same in both runs, so patching its attention "
                             "write there patches its output there too (its MLP reads that position only): one "
                             "intervention under two names, whose patching shares are block 0's output's (an attribution "
                             "estimate of each stays its own)"})  # fmt: skip
    if is_swap(design):
        a, b = design["changed"]
        cells.append({"site": site_name(0, "resid_pre"), "kind": "resid_pre", "block": 0, "position": None,
                      "positions": [a, b], "value": None, "mirror": True,
                      "why": f"the swap mirrors it: each run's tensor at position {a} is the other's at {b} and the "
                             "reverse (block 0's input is the token's embedding alone; positions enter inside attention), so "
                             "patching one of them runs a hybrid prompt: its share is that prompt's behaviour (Part 3's table)"})  # fmt: skip
    if len(design["changed"]) == 1:
        cells.append({"site": site_name(0, "resid_pre"), "kind": "resid_pre", "block": 0, "position": design["changed"][0],
                      "value": 1.0, "why": "the prompts differ only there: patching it makes one run the other"})  # fmt: skip
    cells.append({"site": site_name(depth - 1, "resid_post"), "kind": "resid_post", "block": depth - 1,
                  "position": design["readout"], "value": 1.0, "why": "the final state at the readout: all the metric reads"})  # fmt: skip
    unread = [p for p in range(first, design["readout"])]
    for kind in ("attn_write", "mlp_write", "resid_post"):
        cells.append({"site": site_name(depth - 1, kind), "kind": kind, "block": depth - 1, "position": None,
                      "positions": unread, "value": 0.0,
                      "why": "the last block at a position other than the readout: nothing downstream reads it"})  # fmt: skip
    return cells


def is_swap(design: dict) -> bool:
    """Whether the corrupt prompt swaps the clean prompt's tokens at its two changed positions."""
    changed = design["changed"]
    if len(changed) != 2 or "clean" not in design:
        return False
    a, b = changed
    return design["clean"][a] == design["corrupt"][b] and design["clean"][b] == design["corrupt"][a]


def check_mirror(design: dict, pair) -> None:
    """Raise unless, for a swap, block 0's input at each swapped position of one run is the other run's at the other
    position, bit for bit (the identity ``identities`` names)."""
    if not is_swap(design):
        return
    a, b = design["changed"]
    name = site_name(0, "resid_pre")
    for first, second in ((a, b), (b, a)):
        if not torch.equal(pair.clean[name][first], pair.corrupt[name][second]):
            raise AssertionError(f"{design.get('name', 'design')}: {name} at {first} (clean) is not the corrupt run's at {second}")


def check_identities(design: dict, grids: dict, where: str, tolerance: float = 1e-4) -> None:
    """Raise if a grid (direction -> kind -> blocks x positions) breaks an identity of ``identities``."""
    depth = len(grids[DIRECTIONS[0]]["resid_pre"])
    for identity in identities(design, depth):
        for direction in DIRECTIONS:
            rows = grids[direction]
            if identity["kind"] is None:
                moved = [kind for kind in KINDS for row in rows[kind] for v in row[: min(design["changed"])] if v != 0.0]
                if moved:
                    raise AssertionError(f"{where} {direction}: a cell before {min(design['changed'])} moved ({moved[0]})")
            elif identity.get("mirror"):
                continue  # a tensor identity, checked on the runs' tensors (check_mirror)
            elif identity.get("equals"):
                kind, block = identity["kind"], identity["block"]
                other, other_block = identity["equals"]
                mine, theirs = rows[kind][block], rows[other][other_block]
                for position in identity.get("positions") or range(len(mine)):
                    if (mine[position] is None) != (theirs[position] is None) or (
                            mine[position] is not None and abs(mine[position] - theirs[position]) > tolerance):
                        raise AssertionError(f"{where} {direction}: {kind} {block} at {position} ({mine[position]}) is not "
                                             f"{other} {other_block}'s ({theirs[position]}): the same intervention")  # fmt: skip
            elif identity["position"] is None:
                for position in identity["positions"]:
                    value = rows[identity["kind"]][identity["block"]][position]
                    if value is None or abs(value - identity["value"]) > tolerance:
                        raise AssertionError(f"{where} {direction} {identity['site']} at {position}: {value}, not "
                                             f"{identity['value']:g} by construction")  # fmt: skip
            else:
                value = rows[identity["kind"]][identity["block"]][identity["position"]]
                if value is None or abs(value - identity["value"]) > tolerance:
                    raise AssertionError(f"{where} {direction} {identity['site']} at {identity['position']}: {value}, "
                                         f"not {identity['value']:g} by construction")  # fmt: skip


# ---- what the sentences and figures mark -------------------------------------------------------------------


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
