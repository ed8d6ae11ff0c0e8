"""Patching: zero or replace what a named site carries, at chosen positions, in one forward or over a grid of
(site, position) cells. The one intervention mechanism of the package; the lesson's interventions, the audit's
ablate and patch runs and the induction model's patching heatmap are all written with it.

Sites are the capture floor's ``(name, module, kind)`` triples (``residlab.capture.sites.resolve_sites`` reads
them from a block table: every block's input ``resid_pre`` (a pre-hook on the block), its two writes and its
output ``resid_post``). An *edit* is a function ``tensor -> new tensor`` applied to the site's tensor as the
forward passes it, before anything downstream reads it; the hooks are ``record_sites``' own
(``residlab.capture.recording``), registered on enter and removed in ``finally``, and the tensor the model made is
never written into: every edit here returns a new tensor, so a recording of another run used as the source
stays as it was. An "input" site is edited through its module's forward pre-hook (the first positional argument,
or the ``hidden_states`` keyword), an "output" site through its forward hook (the tensor, or a tuple's first
entry).

Positions: ``None`` (every position), an int, a sequence of ints or a slice, along dimension 1 of a
(batch, positions, ...) tensor; every batch row is edited alike.

    sites = resolve_sites(model, block_type, depth)      # residlab.capture.sites; record_sites: .recording
    with record_sites(sites) as clean:                    # (a) a recording of another run is the source
        model(input_ids=clean_ids)
    name = site_name(1, "resid_pre")                      # block 1's input, patched like any other site
    logits = run_patched(lambda: model(input_ids=corrupt_ids).logits, sites,
                         {name: taken_from(clean.records[name], positions=3)})        # denoising, one cell
    logits = run_patched(run, sites, {site_name(0, "attn_write"): zeroed()})          # (b) zero a whole write
    grid = patch_grid(lambda: metric(model(input_ids=corrupt_ids).logits), sites,     # (c) sites x positions
                      names, range(n), lambda name, p: taken_from(clean.records[name], positions=p))

Noising is the same call with the roles of the runs exchanged (a corrupt recording into the clean run). For path
patching, an edit may be any function of the site's tensor: a site whose module is the one reader (e.g. a block's
attention input, or the key projection when a block table names it) can be given a tensor computed from another
run, leaving every other reader of the same residual as it was. For attribution patching, an edit may keep the
live tensor (``lambda t: kept.append(t) or t``) to read its gradient after a backward pass: edits run on the
tensor the forward carries, with autograd on unless the caller turned it off.

Standard library only; torch is imported when an edit first runs.
"""

from __future__ import annotations

from typing import Callable, Sequence

from residlab.capture.recording import record_sites

Edit = Callable[[object], object]


def _index(positions):
    """The index along the position dimension: ``slice(None)`` for None, a list for an int or a sequence."""
    if positions is None:
        return slice(None)
    if isinstance(positions, slice):
        return positions
    if isinstance(positions, int):
        return [positions]
    return list(positions)


def zeroed(positions=None) -> Edit:
    """An edit: the site's tensor with zeros at ``positions`` (every position when None)."""
    index = _index(positions)

    def edit(tensor):
        tensor = tensor.clone()
        tensor[:, index] = 0
        return tensor

    return edit


def set_to(value, positions=None) -> Edit:
    """An edit: the site's tensor with ``value`` at ``positions``, broadcast over the batch and the positions
    (e.g. one vector of the width of the site)."""
    index = _index(positions)

    def edit(tensor):
        tensor = tensor.clone()
        tensor[:, index] = value.to(dtype=tensor.dtype, device=tensor.device)
        return tensor

    return edit


def taken_from(source, positions=None) -> Edit:
    """An edit: the site's tensor with ``source``'s values at ``positions``, ``source`` being what the same site
    carried in another run (a ``record_sites`` record: the site's shape, batch kept; or one row without it)."""
    index = _index(positions)

    def edit(tensor):
        values = source if source.dim() == tensor.dim() else source.unsqueeze(0)
        if values.shape[1:] != tensor.shape[1:]:
            raise ValueError(f"a patch source of shape {tuple(source.shape)} does not fit a site of shape "
                             f"{tuple(tensor.shape)}")  # fmt: skip
        tensor = tensor.clone()
        tensor[:, index] = values[:, index].to(dtype=tensor.dtype, device=tensor.device)
        return tensor

    return edit


def run_patched(run: Callable[[], object], sites, edits: dict[str, Edit]):
    """``run()`` with each site named in ``edits`` edited as the forward passes it; returns what ``run`` returns.
    Only the edited sites are hooked (a name the sites lack is refused before any hook is registered)."""
    sites = list(sites)
    named = {name for name, _, _ in sites}
    unknown = sorted(set(edits) - named)
    if unknown:
        raise ValueError(f"patched site(s) {', '.join(map(repr, unknown))} are not among the sites given")
    with record_sites([site for site in sites if site[0] in edits], edits=edits):
        return run()


def patch_grid(run: Callable[[], object], sites, names: Sequence[str], positions: Sequence,
               edit_for: Callable[[str, object], Edit]) -> list[list]:
    """For every site name of ``names`` (rows) and every entry of ``positions`` (columns): ``run()`` with that one
    site edited by ``edit_for(name, position)``. Returns the rows of what ``run`` returned (e.g. a metric)."""
    return [[run_patched(run, sites, {name: edit_for(name, position)}) for position in positions] for name in names]
