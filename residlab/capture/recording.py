"""Recording: one mechanism for every capture, a forward hook (or pre-hook) per named site, each keeping a
detached CPU copy of what its site carried at the moment it fired, all removed on exit.

Every capture in residlab records through ``record_sites``: Lab 05's observation, the audit, the Lesson 2.1
copy model's trace and interventions, Lab 04's post-LN block and the glossary's cache layouts. They differ
only in where their sites come from (``residlab.capture.sites`` resolves them from a block table, or a caller
names its own modules) and in the edits some runs make (an ablation, a patch: ``edits``). As in
baukit's ``TraceDict``, hooks are registered on enter and exactly these handles are removed in ``finally``, also
when the forward raised; hooks that other code registered are left as they were.

A site is ``(name, module, kind)``, resolved by the caller before the first hook is registered, so a bad site
registers nothing. ``kind`` "input" reads the module's first positional argument (or its ``hidden_states``
keyword) with a pre-hook; "output" reads its return value, the tensor itself or the first entry of a tuple.
Every record is copied when its hook fires, outside inference mode, so it is an ordinary tensor that its user
may modify in place without touching the model or another record. torch is imported when a recording starts,
so the runners' ``--plan`` works before anything is installed. This is the hot path of every captured forward:
each hook makes one copy and two dictionary writes, nothing more.
"""

from __future__ import annotations

import contextlib


class SiteFiredTwice(RuntimeError):
    """A site fired twice in one recording: the site table no longer matches the model (one recording is one
    forward). Callers re-raise it as their own error type."""


class SiteRecorder:
    """What one ``record_sites`` block recorded.

    ``records``: site name -> detached CPU copy, the shape the site carried (batch kept), in firing order.
    ``return_kinds``: output-site name -> "tuple" or "tensor", what the module returned.
    ``handles``: the (module, handle) pairs this recorder registered.
    """

    def __init__(self, names: list[str]) -> None:
        import torch

        self.names = names  # every site, in forward order
        self.records: dict = {}
        self.return_kinds: dict = {}
        self.handles: list = []
        # One reusable guard: building a new context manager at every hook costs more.
        self._ordinary = torch.inference_mode(False)

    def keep(self, name: str, tensor) -> None:
        if name in self.records:
            raise SiteFiredTwice(f"site {name} fired twice in one forward")
        if tensor.requires_grad:  # never inside inference_mode or no_grad, where detach() would only cost
            tensor = tensor.detach()
        # Copied now, so a later in-place write in the model cannot change the record, and outside inference
        # mode, so the record is an ordinary tensor. clone() dispatches faster than .to("cpu", copy=True).
        with self._ordinary:
            self.records[name] = tensor.clone() if tensor.is_cpu else tensor.to("cpu")

    def missing(self) -> list[str]:
        """The sites that never fired."""
        return [name for name in self.names if name not in self.records]

    def handles_still_attached(self) -> int:
        """How many of this recorder's handles are still registered on their modules."""
        return sum(
            1
            for module, handle in self.handles
            if handle.id in module._forward_hooks or handle.id in module._forward_pre_hooks
        )


def _input_hook(recorder: SiteRecorder, name: str):
    def hook(module, args, kwargs):
        recorder.keep(name, args[0] if args else kwargs["hidden_states"])

    return hook


def _output_hook(recorder: SiteRecorder, name: str):
    def hook(module, args, output):
        if isinstance(output, tuple):
            recorder.return_kinds[name] = "tuple"
            recorder.keep(name, output[0])
        else:
            recorder.return_kinds[name] = "tensor"
            recorder.keep(name, output)

    return hook


def _editing_hook(recorder: SiteRecorder, name: str, edit):
    """Replace the site's tensor by ``edit(tensor)`` before anything downstream reads it, and record the edited
    tensor. ``edit`` receives the module's own tensor and must return a new one (never write into it)."""

    def hook(module, args, output):
        is_tuple = isinstance(output, tuple)
        tensor = edit(output[0] if is_tuple else output)
        recorder.return_kinds[name] = "tuple" if is_tuple else "tensor"
        recorder.keep(name, tensor)
        return (tensor, *output[1:]) if is_tuple else tensor

    return hook


def at_position(position: int, vector):
    """An edit for ``record_sites``: the site's tensor (1, n, d) with ``vector`` (d,) at ``position``."""

    def edit(tensor):
        tensor = tensor.clone()
        # The vector may be a CPU float32 record and the tensor another device's or dtype's: converted (no-op when
        # they match), so the site holds the vector rounded to the run's dtype.
        tensor[0, position] = vector.to(device=tensor.device, dtype=tensor.dtype)
        return tensor

    return edit


@contextlib.contextmanager
def record_sites(sites, edits: dict | None = None):
    """Register one hook per ``(name, module, kind)`` of ``sites``; yield the ``SiteRecorder``; remove exactly
    these handles on exit. ``edits`` maps output-site names to functions tensor -> new tensor that intervene at
    that site (``at_position`` puts one vector at one position)."""
    sites = list(sites)
    edits = edits or {}
    recorder = SiteRecorder([name for name, _, _ in sites])
    output_sites = {name for name, _, kind in sites if kind == "output"}
    stray = sorted(set(edits) - output_sites)
    if stray:
        raise ValueError(f"edited site(s) {', '.join(map(repr, stray))} are not among the output sites recorded")
    try:
        for name, module, kind in sites:
            if kind == "input":
                handle = module.register_forward_pre_hook(_input_hook(recorder, name), with_kwargs=True)
            elif name in edits:
                handle = module.register_forward_hook(_editing_hook(recorder, name, edits[name]))
            else:
                handle = module.register_forward_hook(_output_hook(recorder, name))
            recorder.handles.append((module, handle))
        yield recorder
    finally:
        for _, handle in recorder.handles:
            handle.remove()


def hook_snapshot(model) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Module path -> (forward hook ids, forward pre-hook ids) for every module that has any: equal before and
    after a recording when the recording left nothing behind."""
    snapshot = {}
    for path, module in model.named_modules():
        forward_ids = tuple(module._forward_hooks.keys())
        pre_ids = tuple(module._forward_pre_hooks.keys())
        if forward_ids or pre_ids:
            snapshot[path] = (forward_ids, pre_ids)
    return snapshot

