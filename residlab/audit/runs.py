"""The runs of an audit: what is declared (``DeclaredSite``, ``AuditInput``, parsed from the command line), one
recorded forward (``execute``: every site of every block recorded, optionally one declared write replaced at its
position, the parameters proven unchanged across it by ``ParameterWatch``), each intervened run compared site by
site with the run it came from (``compare_to_source``), and ``run_audit``, every run one audit needs.

The parameters are hashed twice per audit, before the first run and after the last, whatever the number of runs:
between the two, each tensor's version counter (which every in-place write bumps, under ``torch.inference_mode``
too) and its storage address show whether a run wrote to it. A run that did is re-hashed at once and its digest
recorded, so the packet names it. A write that bypasses the counter (through ``tensor.data`` or a NumPy view)
is caught by the closing hash when it persists; one undone before the audit ends is invisible to any
before-and-after hash, as it was when every run was hashed. A parameter made under ``inference_mode`` keeps no
version counter: while the model has one, every run is hashed. Every tensor is hashed where it lives, one at a
time (an accelerator's tensor copied alone to the host, an offloaded one read alone from accelerate's offload
store: ``subject.parameter_value``), so no hash gathers the model. An offloaded parameter (on the meta device
between forwards) is never written by a forward, which works on a copy its hook loads: it is carried between
the two hashes while it stays offloaded, and a change to its store is caught by the closing hash.

Sites are named and found by the capture floor (``site_name``, ``resolve_sites``) and recorded by its one
mechanism (``record_sites``; an intervened run's edit is ``residlab.capture.patching.set_to``); the hashes here
(canonical JSON, tensor bytes) are what the packet's records and links are made of.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from residlab.capture.blocks import canonical_path
from residlab.capture.patching import set_to
from residlab.capture.recording import SiteFiredTwice, record_sites
from residlab.capture.sites import SiteError, resolve_sites, site_name
from residlab.audit.subject import AuditError, Subject, _import_torch, parameter_value

COMPONENTS = {"attn": "attn_write", "mlp": "mlp_write"}
MAX_THREADS = 1024
HASH_THREADS = min(4, os.cpu_count() or 1)  # parameter hashing only; the forwards use --threads


def canonical_json(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def sha256_json(value) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def tensor_sha256(tensor) -> str:
    """sha256 of the tensor's bytes in row-major order, read in place (no copy) when it is contiguous on the CPU."""
    torch = _import_torch()
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return hashlib.sha256(flat.view(torch.uint8).numpy()).hexdigest()


def parameter_digests(model) -> dict:
    """sha256 of every parameter tensor in registration order (the model's own canonical order), and one
    digest over their shapes, dtypes and hashes (names left out: releases rename some tensors)."""
    named = list(model.named_parameters())
    # hashlib releases the GIL on large buffers, so the tensors hash in parallel; each digest is still its
    # tensor's own bytes, and the total is taken in registration order.
    with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
        hashes = list(pool.map(lambda item: tensor_sha256(parameter_value(model, *item)), named))
    tensors = []
    total = hashlib.sha256()
    for (name, parameter), digest in zip(named, hashes):
        shape, dtype = list(parameter.shape), str(parameter.dtype)
        tensors.append({"name": canonical_path(name), "shape": shape, "dtype": dtype, "sha256": digest})
        total.update(f"{list(parameter.shape)}|{parameter.dtype}|{digest}\n".encode())
    return {
        "order": "registration order (named_parameters)",
        "count": len(tensors),
        "elements": sum(math.prod(t["shape"]) for t in tensors),
        "digest": total.hexdigest(),
        "tensors": tensors,
    }


class ParameterWatch:
    """The model's parameter digest, measured once and carried from run to run while no parameter is written.

    ``digest`` is the current one; ``after_run()`` returns it after a run: carried when every parameter is the
    same tensor at the same storage address with the same version counter as when last hashed, measured again
    otherwise. ``close()`` hashes once more and returns the full ``parameter_digests``."""

    def __init__(self, model):
        self.model = model
        self.parameters = parameter_digests(model)
        self.digest = self.parameters["digest"]
        self._state = self._versions()

    def _versions(self) -> list:
        # The tensors themselves are held (not only their ids), so a replaced one cannot hand its id on.
        # An inference tensor (made under inference_mode) keeps no version counter: None, and it is re-hashed.
        # An offloaded one (meta) is replaced by its hook at every forward: only its staying offloaded is compared.
        return [(name, None, "offloaded", p.dtype, p.shape) if p.is_meta else
                (name, p, id(p), p.data_ptr(), None if p.is_inference() else p._version)
                for name, p in self.model.named_parameters()]  # fmt: skip

    def _unchanged(self, state: list) -> bool:
        return len(state) == len(self._state) and all(
            now[0] == then[0] and now[2:] == then[2:] and now[4] is not None for now, then in zip(state, self._state)
        )

    def after_run(self) -> str:
        state = self._versions()
        if not self._unchanged(state):  # a write, a swapped tensor or a moved storage: measure, never assume
            self.parameters, self._state = parameter_digests(self.model), state
            self.digest = self.parameters["digest"]
        return self.digest

    def close(self) -> dict:
        carried = self.digest
        self.parameters = parameter_digests(self.model)
        if self.parameters["digest"] != carried:
            raise AuditError(
                "the parameters changed during the audit by a write no version counter saw (through .data or a "
                "NumPy view): no run can be trusted to have seen the recorded weights"
            )
        return self.parameters


# ---------------------------------------------------------------------------------------------------------
# Runs: one forward with every site recorded, optionally with one declared write replaced.


@dataclass(frozen=True)
class DeclaredSite:
    component: str  # "attn" or "mlp"
    block: int
    position: int  # 0-based, already resolved

    @property
    def name(self) -> str:
        return site_name(self.block, COMPONENTS[self.component])

    @property
    def label(self) -> str:
        return f"{self.name}@{self.position}"


@dataclass
class Run:
    run_id: str
    input_name: str  # "clean" or "corrupt"
    sites: dict  # site name -> tensor (n, d), in forward order; emptied once an intervened run is compared
    logits: object  # (vocab,) at the last position
    digest_before: str
    digest_after: str
    site: DeclaredSite | None = None
    replacement: object = None  # (d,)
    source_run: str | None = None
    replacement_kind: str | None = None


def execute(subject: Subject, run_id: str, input_name: str, ids: list[int], watch: ParameterWatch | None = None,
            **intervention) -> Run:
    """One recorded forward, with the parameter digest before and after it from ``watch`` (one the previous runs
    shared, or a new one: then the parameters are hashed before and after this run alone)."""
    torch = _import_torch()
    alone = watch is None
    site = intervention.get("site")
    edits = None if site is None else {site.name: set_to(intervention["replacement"], site.position)}
    try:
        sites = resolve_sites(subject.model, subject.block_type, len(subject.blocks))
    except SiteError as error:  # the table names a module this model lacks
        raise AuditError(str(error)) from None
    watch = watch or ParameterWatch(subject.model)
    before = watch.digest
    try:
        with record_sites(sites, edits=edits) as recorder, torch.inference_mode():
            logits = subject.last_logits(torch.tensor([ids], dtype=torch.long)).detach()
            logits = logits.to(device="cpu", dtype=torch.float32).clone()
    except SiteFiredTwice as error:  # one run = one forward: the table misreads the model
        raise AuditError(str(error)) from None
    missing = recorder.missing()
    if missing:
        raise AuditError(f"sites never fired (the site table does not match the model): {', '.join(missing)}")
    after = watch.after_run()
    if alone:
        after = watch.close()["digest"]
    return Run(
        # Records are measured in float32 (a no-op for a float32 run): the dtype approximates the forward only.
        run_id=run_id, input_name=input_name,
        sites={name: recorder.records[name][0].float() for name in recorder.names},
        logits=logits,
        digest_before=before, digest_after=after, site=site,
        replacement=intervention.get("replacement"), source_run=intervention.get("source_run"),
        replacement_kind=intervention.get("kind"),
    )  # fmt: skip


def compare_to_source(run: Run, source: Run) -> dict:
    """Site by site against the run the intervened run came from: upstream of the declared site bit-identical,
    the declared position equal to the replacement, its other positions untouched, which later sites changed."""
    torch = _import_torch()
    names = list(run.sites)
    index = names.index(run.site.name)
    upstream, downstream = names[:index], names[index + 1 :]
    declared, original = run.sites[run.site.name], source.sites[run.site.name]
    others = [p for p in range(declared.shape[0]) if p != run.site.position]
    return {
        "run": run.run_id,
        "source_run": source.run_id,
        "upstream_sites": len(upstream),
        "upstream_identical": sum(torch.equal(run.sites[n], source.sites[n]) for n in upstream),
        "declared_equals_replacement": bool(torch.equal(declared[run.site.position], run.replacement)),
        "other_positions_identical": bool(torch.equal(declared[others], original[others])),
        "downstream_sites": len(downstream),
        "downstream_changed": sum(not torch.equal(run.sites[n], source.sites[n]) for n in downstream),
    }


# ---------------------------------------------------------------------------------------------------------
# Inputs.


@dataclass(frozen=True)
class AuditInput:
    clean_ids: tuple[int, ...]
    corrupt_ids: tuple[int, ...]
    target: int
    rival: int
    clean_text: str | None = None
    corrupt_text: str | None = None
    target_text: str | None = None
    rival_text: str | None = None


def parse_ids(text: str, what: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise AuditError(f"{what}: {text!r} is not a comma-separated list of token ids") from None
    if not ids:
        raise AuditError(f"{what}: no token ids given")
    return ids


def tokenize_prompt(subject: Subject, text: str, what: str) -> list[int]:
    if subject.tokenizer is None:
        raise AuditError(f"{what}: this model has no tokenizer (no tokenizer.json): give token ids instead")
    ids = subject.tokenizer(text, add_special_tokens=False)["input_ids"]
    if not ids:
        raise AuditError(f"{what}: {text!r} produced no tokens")
    return list(ids)


def single_token(subject: Subject, text: str, what: str) -> int:
    ids = tokenize_prompt(subject, text, what)
    if len(ids) != 1:
        pieces = [subject.tokenizer.decode([i]) for i in ids]
        raise AuditError(f"{what}: {text!r} is {len(ids)} tokens {pieces}, not one token")
    return ids[0]


class InputError(AuditError):
    """An audit input the model cannot take; ``field`` names it as the input record does (clean.ids, ...)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def check_input(subject: Subject, audit_input: AuditInput) -> None:
    clean, corrupt = audit_input.clean_ids, audit_input.corrupt_ids
    if len(clean) != len(corrupt):
        raise InputError("corrupt.ids", f"the clean prompt is {len(clean)} tokens and the corrupt prompt "
                         f"{len(corrupt)}: they must have the same token length")  # fmt: skip
    if subject.fixed_length is not None and len(clean) != subject.fixed_length:
        raise InputError("clean.ids", f"this model reads exactly {subject.fixed_length} tokens, got {len(clean)}")
    vocab = subject.vocab_size
    for what, ids in (("clean.ids", clean), ("corrupt.ids", corrupt), ("target.id", [audit_input.target]),
                      ("rival.id", [audit_input.rival])):  # fmt: skip
        bad = [i for i in ids if not 0 <= i < vocab]
        if bad:
            raise InputError(what, f"{what.split('.')[0]}: token ids {bad} are outside the vocabulary (0..{vocab - 1})")
    if audit_input.target == audit_input.rival:
        raise InputError("rival.id", "the target and the rival are the same token: the metric would be zero")
    limit = getattr(subject.model.config, "max_position_embeddings", None) if hasattr(subject.model, "config") else None
    if limit is not None and len(clean) > limit:
        raise InputError("clean.ids", f"the prompts are {len(clean)} tokens, more than the model's {limit} positions")


def parse_site(text: str, blocks: int, length: int) -> DeclaredSite:
    """'attn:BLOCK:POSITION' or 'mlp:BLOCK:POSITION'; negative block or position counts from the end."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in COMPONENTS:
        raise AuditError(f"site {text!r}: write it as COMPONENT:BLOCK:POSITION with COMPONENT attn or mlp")
    try:
        block, position = int(parts[1]), int(parts[2])
    except ValueError:
        raise AuditError(f"site {text!r}: block and position must be integers") from None
    if not -blocks <= block < blocks:
        raise AuditError(f"site {text!r}: block {block} is out of range: the model has {blocks} blocks (0..{blocks - 1})")
    if not -length <= position < length:
        raise AuditError(
            f"site {text!r}: position {position} is out of range: the prompts have {length} tokens (0..{length - 1})"
        )
    return DeclaredSite(parts[0], block % blocks, position % length)



@contextlib.contextmanager
def torch_threads(threads: int):
    torch = _import_torch()
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def run_audit(subject: Subject, audit_input: AuditInput, sites: list[DeclaredSite], threads: int = 1):
    """Every run the audit needs, each compared with its source; returns (runs, comparisons). The clean and corrupt
    runs come first with their site records; each intervened run comes back with ``sites == {}``, its comparison
    taken when it ended."""
    runs, comparisons, _ = run_audit_measured(subject, audit_input, sites, threads)
    return runs, comparisons


def run_audit_measured(subject: Subject, audit_input: AuditInput, sites: list[DeclaredSite], threads: int = 1):
    """``run_audit`` and the ``parameter_digests`` measured after its last run (what the model record holds):
    returns (runs, comparisons, parameters)."""
    torch = _import_torch()
    check_input(subject, audit_input)
    if not sites:
        raise AuditError("no sites declared")
    if len(set(sites)) != len(sites):
        raise AuditError("a site is declared twice")
    with torch_threads(threads):
        watch = ParameterWatch(subject.model)
        clean = execute(subject, "clean", "clean", list(audit_input.clean_ids), watch)
        corrupt = execute(subject, "corrupt", "corrupt", list(audit_input.corrupt_ids), watch)
        runs, comparisons = [clean, corrupt], []

        def compared(run: Run) -> Run:
            # An intervened run is compared with its source as it ends and kept without its site records: the
            # audit holds at most three runs' records (clean, corrupt and the one just ended), whatever the
            # number of writes.
            comparisons.append(compare_to_source(run, clean if run.source_run == "clean" else corrupt))
            return replace(run, sites={})

        for site in sites:
            width = clean.sites[site.name].shape[1]
            interventions = ((f"ablate {site.label}", "clean", torch.zeros(width), "zero"),
                             (f"patch {site.label}", "corrupt", clean.sites[site.name][site.position].clone(), "clean write"))
            for run_id, source, replacement, kind in interventions:  # each on its source run's input
                ids = audit_input.clean_ids if source == "clean" else audit_input.corrupt_ids
                runs.append(compared(execute(subject, run_id, source, list(ids), watch, site=site,
                                             replacement=replacement, source_run=source, kind=kind)))
        parameters = watch.close()
    return runs, comparisons, parameters

