"""Exact patching on the induction model: activation patching over every block x position cell of every site
kind (denoising and noising), per head, and path patching of block 0's attention write into block 1's queries,
keys or values only.

Every effect has one orientation (the course's convention): a share of the clean-corrupt gap G = M(clean) -
M(corrupt) that the *clean* site carries, positive when the clean activation pushes M towards the clean answer.

- denoising (clean into corrupt): (M(corrupt, site from clean) - M(corrupt)) / G, the recovery;
- noising (corrupt into clean): (M(clean) - M(clean, site from corrupt)) / G.

A ``Pair`` holds both runs of one design on one model, recorded once at every site (the capture floor's
``record_sites`` at the sites its block table names, plus the points inside the attention this module names,
``attention_points``); each patched run is the capture floor's patching primitive (``run_patched``) with one edit,
made for a batch: row i of the batch is cell i of a grid row, so a row of cells costs one forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from residlab.capture.blocks import block_type_for
from residlab.audit.measures import metric_tensor
from residlab.capture.patching import run_patched
from residlab.capture.recording import record_sites
from residlab.capture.sites import block_path, resolve_paths, resolve_sites, site_name
from residlab.course.lab07.designs import Design
from residlab.course.models.threads import single_thread

KINDS = ("resid_pre", "attn_write", "mlp_write", "resid_post")  # the site kinds, in the order a block runs
DIRECTIONS = ("denoising", "noising")
STREAMS = ("queries", "keys", "values")

FINAL_INPUT = "final_norm.in"  # the final normaliser's input: the last state, after every edit


def attention_points(model) -> dict:
    """The block table's points inside the model's attention (``residlab.capture.blocks``): "norm" its normaliser,
    "qkv" the fused projection of every head's [query | key | value], "heads_out" the output projection."""
    block_type = block_type_for(model.config)
    if not block_type.attention_points:
        raise ValueError(f"the block table names no points inside {block_type.name}'s attention")
    return dict(block_type.attention_points)


def _readout_metric(logits: torch.Tensor, design: Design) -> torch.Tensor:
    """(batch,): M at the readout of every row."""
    return metric_tensor(logits[:, -1], design.target, design.rival)


@dataclass
class Pair:
    """Both runs of ``design`` on ``model``: every block site's tensor (n, d) and every block's heads' outputs
    (n, d), the attention weights (blocks, heads, n, n) and the metrics."""

    model: object
    design: Design
    sites: list  # (name, module, kind): the block table's sites, then each block's fused q/k/v projection
    clean: dict
    corrupt: dict
    clean_metric: float
    corrupt_metric: float
    clean_attention: torch.Tensor
    corrupt_attention: torch.Tensor

    @property
    def depth(self) -> int:
        return self.model.config.num_hidden_layers

    @property
    def positions(self) -> int:
        return len(self.design.clean)

    @property
    def gap(self) -> float:
        return self.clean_metric - self.corrupt_metric

    def block(self, block: int):
        return resolve_paths(self.model, [("block", block_path(block_type_for(self.model.config), block), "output")])[0][1]

    def output_weight(self, block: int) -> torch.Tensor:
        """(d, d): the attention's output projection of ``block`` (columns per head)."""
        return self.block(block).get_submodule(attention_points(self.model)["heads_out"]).weight.detach()

    def run(self, corrupt: bool, edits: dict | None = None, *, batch: int = 1, attention: bool = False):
        """M (one per batch row, a list) of the clean or corrupt prompt repeated ``batch`` times, patched by
        ``edits`` (site name -> edit, the capture floor's ``run_patched``); with ``attention`` also the attention
        weights (batch, blocks, heads, n, n) and the final state at the readout (batch, d)."""
        ids = torch.tensor([self.design.corrupt if corrupt else self.design.clean] * batch)

        def forward():
            return self.model(input_ids=ids, use_cache=False, output_attentions=attention)

        block_type = block_type_for(self.model.config)
        final = resolve_paths(self.model, [(FINAL_INPUT, block_type.final_norm, "input")])
        with single_thread(), torch.inference_mode(), record_sites(final if attention else []) as recorder:
            output = run_patched(forward, self.sites, edits or {})
        metric = _readout_metric(output.logits.float(), self.design).tolist()
        if not attention:
            return metric
        weights = torch.stack([layer.float() for layer in output.attentions], dim=1)
        return metric, weights, recorder.records[FINAL_INPUT][:, -1]


def prepare(model, design: Design) -> Pair:
    """Record both runs of ``design`` at every block site and at every block's heads' outputs."""
    depth = model.config.num_hidden_layers
    block_type = block_type_for(model.config)
    sites = resolve_sites(model, block_type, depth)
    heads = resolve_paths(model, [(site_name(b, "heads_out"), f"{block_path(block_type, b)}.{attention_points(model)['heads_out']}",
                                   "input") for b in range(depth)])  # fmt: skip
    qkv = resolve_paths(model, [(site_name(b, "qkv"), f"{block_path(block_type, b)}.{attention_points(model)['qkv']}", "output")
                                for b in range(depth)])  # fmt: skip
    with single_thread(), record_sites(sites + heads) as recorder, torch.inference_mode():  # both runs, one batch
        output = model(input_ids=torch.tensor([design.clean, design.corrupt]), use_cache=False, output_attentions=True)
    recorded, metrics, attentions = {}, {}, {}
    for row, which in enumerate(("clean", "corrupt")):
        recorded[which] = {name: tensor[row] for name, tensor in recorder.records.items()}
        metrics[which] = float(_readout_metric(output.logits.float(), design)[row])
        attentions[which] = torch.stack([layer[row].float() for layer in output.attentions])
    pair = Pair(model, design, sites + qkv, recorded["clean"], recorded["corrupt"], metrics["clean"],
                metrics["corrupt"], attentions["clean"], attentions["corrupt"])  # fmt: skip
    for block in range(1, depth):  # one tensor, two names: the patch of one is the patch of the other
        same = site_name(block, "resid_pre"), site_name(block - 1, "resid_post")
        if not torch.equal(pair.clean[same[0]], pair.clean[same[1]]):
            raise RuntimeError(f"{same[0]} differs from {same[1]}: the block table no longer matches the model")
    return pair


def share(pair: Pair, direction: str, patched: float) -> float | None:
    """The patched run's M as the share of the gap the clean site carries (None when the gap is zero)."""
    if pair.gap == 0:
        return None
    if direction == "denoising":
        return (patched - pair.corrupt_metric) / pair.gap
    return (pair.clean_metric - patched) / pair.gap


def _replace_cells(positions: list[int], vectors: torch.Tensor, first_row: int = 0):
    """An edit of a batch: row ``first_row`` + i's tensor with ``vectors[i]`` at ``positions[i]``."""

    def edit(tensor):
        tensor = tensor.clone()
        tensor[torch.arange(first_row, first_row + len(positions)), torch.tensor(positions)] = vectors
        return tensor

    return edit


def _add_rows(delta: torch.Tensor, rows: slice):
    """An edit of a batch: ``delta`` added to the rows ``rows`` (a (n, d) delta to one row, or one per row)."""

    def edit(tensor):
        tensor = tensor.clone()
        tensor[rows] = tensor[rows] + delta
        return tensor

    return edit


def activation_cells(pair: Pair, direction: str, kind: str, block: int, positions: list[int], *,
                     attention: bool = False):  # fmt: skip
    """The patched runs of the cells at ``positions`` of the site ``blocks.{block}.{kind}``, one batch row each:
    the site at that position replaced by the other run's tensor."""
    name = site_name(block, kind)
    source = pair.clean if direction == "denoising" else pair.corrupt
    edit = {name: _replace_cells(positions, source[name][positions])}
    return pair.run(direction == "denoising", edit, batch=len(positions), attention=attention)


def activation_grids(pair: Pair, direction: str) -> dict[str, list[list[float | None]]]:
    """kind -> (blocks x positions) shares: every cell one patched run, all of them rows of one batched forward
    (each site's edit touches only its own rows, so the runs stay apart; this tiny model's forward costs about the
    same for one row as for a hundred, so one forward instead of one per site)."""
    every = list(range(pair.positions))
    source = pair.clean if direction == "denoising" else pair.corrupt
    sites = [(kind, block) for kind in KINDS for block in range(pair.depth)]
    edits = {site_name(block, kind): _replace_cells(every, source[site_name(block, kind)][every], first_row=index * len(every))
             for index, (kind, block) in enumerate(sites)}  # fmt: skip
    values = pair.run(direction == "denoising", edits, batch=len(sites) * len(every))
    grids = {kind: [None] * pair.depth for kind in KINDS}
    for index, (kind, block) in enumerate(sites):
        grids[kind][block] = [share(pair, direction, v) for v in values[index * len(every):(index + 1) * len(every)]]
    return grids


def head_delta(pair: Pair, block: int, head: int, source: dict, target: dict) -> torch.Tensor:
    """(n, d): what head ``head`` of ``block`` adds to the attention write when its output (every position) is
    taken from ``source`` instead of ``target``: W_O's head columns times the difference of the head's outputs
    (the output projection is linear, so this is exact)."""
    size = pair.model.config.hidden_size // pair.model.config.num_attention_heads
    columns = slice(head * size, (head + 1) * size)
    name = site_name(block, "heads_out")
    return (source[name][:, columns] - target[name][:, columns]) @ pair.output_weight(block)[:, columns].T


def head_grid(pair: Pair, direction: str) -> list[list[float | None]]:
    """(blocks x heads): each head's output at every position patched, as a share of the gap (one batched forward,
    a head of a block per row)."""
    source, target = (pair.clean, pair.corrupt) if direction == "denoising" else (pair.corrupt, pair.clean)
    heads = pair.model.config.num_attention_heads
    edits = {site_name(block, "attn_write"): _add_rows(torch.stack([head_delta(pair, block, head, source, target)
                                                                    for head in range(heads)]),
                                                       slice(block * heads, (block + 1) * heads))
             for block in range(pair.depth)}  # fmt: skip
    patched = pair.run(direction == "denoising", edits, batch=pair.depth * heads)
    return [[share(pair, direction, value) for value in patched[block * heads:(block + 1) * heads]]
            for block in range(pair.depth)]  # fmt: skip


def _stream_edits(pair: Pair, receiver: int, rows: list[tuple[str, torch.Tensor]]):
    """An edit of block ``receiver``'s fused q/k/v output for a batch: in row i, the ``rows[i][0]`` stream slice of
    every head recomputed from the corrupt block input plus ``rows[i][1]`` (n, d); the other slices, and the rows
    after these, left as the corrupt run computes them."""
    layer = pair.block(receiver)
    points = attention_points(pair.model)
    norm, qkv = layer.get_submodule(points["norm"]), layer.get_submodule(points["qkv"])
    heads = pair.model.config.num_attention_heads
    size = pair.model.config.hidden_size // heads
    corrupt_input = pair.corrupt[site_name(receiver, "resid_pre")]
    with torch.inference_mode():  # one row at a time, as a run of that row alone computes it
        replacements = [(STREAMS.index(stream), qkv(norm(corrupt_input + delta)).view(-1, heads, 3 * size))
                        for stream, delta in rows]  # fmt: skip

    def edit(tensor):
        shaped = tensor.clone().view(tensor.shape[0], -1, heads, 3 * size)
        for row, (index, replacement) in enumerate(replacements):
            part = slice(index * size, (index + 1) * size)
            shaped[row, :, :, part] = replacement[:, :, part]
        return shaped.view(tensor.shape)

    return edit


def path_patching(pair: Pair, sender: int = 0, receiver: int = 1) -> dict[str, float | None]:
    """Block ``sender``'s attention write (clean, every position) into block ``receiver``'s queries, keys or values
    only (the direct path: nothing else sees the clean write), and into everything downstream (the write itself
    patched); each the denoising share of the gap, each a row of one batched forward."""
    name = site_name(sender, "attn_write")
    delta = pair.clean[name] - pair.corrupt[name]
    edits = {site_name(receiver, "qkv"): _stream_edits(pair, receiver, [(stream, delta) for stream in STREAMS]),
             name: _add_rows(delta, slice(len(STREAMS), len(STREAMS) + 1))}  # the last row: the write itself
    values = pair.run(True, edits, batch=len(STREAMS) + 1)
    return {key: share(pair, "denoising", value) for key, value in zip((*STREAMS, "everything"), values)}


def head_path_patching(pair: Pair, sender: int = 0, receiver: int = 1) -> list[float | None]:
    """Per head of block ``sender``: its output's clean-minus-corrupt difference (every position, through the
    output projection) sent into block ``receiver``'s keys only; the denoising share of the gap (a head per row of
    one batched forward)."""
    heads = pair.model.config.num_attention_heads
    deltas = [("keys", head_delta(pair, sender, head, pair.clean, pair.corrupt)) for head in range(heads)]
    values = pair.run(True, {site_name(receiver, "qkv"): _stream_edits(pair, receiver, deltas)}, batch=heads)
    return [share(pair, "denoising", value) for value in values]
