"""The Residual Contribution Audit as a tool: audit declared residual writes of a causal decoder and write a
verifiable packet of four linked records; re-run a packet and check it.

    python3 audit_residual_writes.py --specimen gpt2 --clean-ids 5,17,3,40 --corrupt-ids 9,17,3,40 \\
        --target-id 12 --rival-id 30 --output packet-01
    python3 audit_residual_writes.py verify packet-01
    python3 audit_residual_writes.py --model pythia-artifacts --clean " The cat sat" --corrupt " The dog sat" \\
        --target " on" --rival " down" --site attn:5:-1 --site mlp:5:-1 --output packet-02

For each declared write w (a block's attention or MLP write at one position), with the metric M = logit(target)
- logit(rival) read at the last position: its norm; the direct projection d.w onto d = u_target - u_rival (the
unembedding rows); the exact direct effect M(N(r_final)) - M(N(r_final - w)) through the final normaliser N;
survival (cosine with the final state, and the share of w that w and every later write keep along w); the
ablation effect (w zeroed at its position in the clean run); and the clean-into-corrupt patch recovery.

The packet (model.json, input.json, intervention.json, measurement.json) is written atomically into an empty
directory. Each record names the other three by the SHA-256 of their canonical JSON (keys sorted, no spaces,
ASCII) taken without their own ``links`` entry, plus one digest per top-level field, so a changed record is
named down to the field. Every run hashes all parameter tensors before and after it, and every intervened run
is compared site by site with the run it came from.

The model runs in float32 on the CPU with eager attention, in ``torch.inference_mode``, loaded offline from a
local directory (config.json and safetensors, a built-in transformers class, no remote code) or built as a
random-weight specimen from a small configuration. Specimen numbers are NOT those of any trained model.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from residlab.capture.blocks import SPECIMEN_CONFIGS, ArchitectureError, BlockType, block_type_for, canonical_path  # bundled
from residlab.capture.blocks import supported_list  # bundled
from residlab.capture.recording import SiteFiredTwice, library_versions, record_sites  # bundled

SCHEMA = "residlab-audit-packet/1"
RECORDS = ("model", "input", "intervention", "measurement")
BLOCK_SITES = ("resid_in", "attn_write", "mlp_write", "resid_out")
COMPONENTS = {"attn": "attn_write", "mlp": "mlp_write"}
LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors")
MAX_RECORD_BYTES = 64 * 2**20  # a record larger than this is refused unread
MAX_CONFIG_BYTES = 2**20
MAX_THREADS = 1024
HASH_THREADS = min(4, os.cpu_count() or 1)  # parameter hashing only; the forwards use --threads
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "model.safetensors.index.json")  # fmt: skip
# Reproduction tolerance per quantity: |re-run - recorded| <= absolute + relative * |recorded|. Re-runs in one
# environment agree exactly; the margin admits another thread count or library build (float32 rounding).
TOLERANCES = {
    "metric": {"absolute": 1e-5, "relative": 1e-5},
    "norm": {"absolute": 1e-5, "relative": 1e-5},
    "direct_projection": {"absolute": 1e-5, "relative": 1e-5},
    "direct_effect_exact": {"absolute": 1e-5, "relative": 1e-5},
    "survival_cosine": {"absolute": 1e-5, "relative": 0.0},
    "retained_fraction": {"absolute": 1e-5, "relative": 1e-5},
    "ablation_effect": {"absolute": 1e-5, "relative": 1e-5},
    "patch_recovery": {"absolute": 1e-4, "relative": 1e-5},
    "replacement": {"absolute": 1e-5, "relative": 1e-5},
    "block_identity": {"absolute": 1e-4, "relative": 0.0},
}
# The block identity out = in + attn_write + mlp_write holds up to float32 rounding of the regrouped sum.
IDENTITY_ABSOLUTE = 1e-5
IDENTITY_RELATIVE = 1e-6


class AuditError(RuntimeError):
    """The audit cannot run as asked; the message names the problem. Nothing was written."""


# ---------------------------------------------------------------------------------------------------------
# What is audited.


@dataclass
class Subject:
    """A model ready to audit: the module, its block type and how to rebuild it (the model record's source)."""

    model: object
    block_type: BlockType
    source: dict
    tokenizer: object = None
    fixed_length: int | None = None  # the copy model reads exactly 5 tokens

    @property
    def blocks(self) -> list:
        import torch

        layers = self.model.get_submodule(self.block_type.layers)
        return list(layers) if isinstance(layers, torch.nn.ModuleList) else [layers]

    @property
    def head(self):
        if self.block_type.model_type is None:
            return self.model.unembed
        return self.model.get_output_embeddings()

    @property
    def final_norm(self):
        return self.model.get_submodule(self.block_type.final_norm)

    @property
    def vocab_size(self) -> int:
        return int(self.head.weight.shape[0])

    def last_logits(self, input_ids):
        """input_ids (1, n) -> logits (vocab,) at the last position."""
        if self.block_type.model_type is None:
            return self.model(input_ids)[0]
        return self.model(input_ids=input_ids, use_cache=False).logits[0, -1]

    def readout(self, state):
        """One residual vector (d,) -> logits (vocab,): the final normaliser, then the unembedding."""
        return self.head(self.final_norm(state.unsqueeze(0)))[0]


def _import_torch():
    try:
        import torch
    except ImportError:
        raise AuditError("torch is not installed: install residual-requirements.txt first") from None
    return torch


def _import_transformers():
    try:
        import transformers
    except ImportError:
        raise AuditError("transformers is not installed: install residual-requirements.txt first") from None
    return transformers


def _finish_model(model, block_type: BlockType):
    """float32, CPU, eval mode, eager attention, no cache; refuse anything else."""
    torch = _import_torch()
    model = model.to(device="cpu", dtype=torch.float32).eval()
    model.config.use_cache = False
    if model.config._attn_implementation != "eager":
        raise AuditError(f"attention implementation is {model.config._attn_implementation}, not eager")
    if type(model).__name__ != block_type.model_class:
        raise AuditError(f"loaded {type(model).__name__}, expected {block_type.model_class}")
    return model


def build_specimen(name: str, seed: int = 0) -> Subject:
    """A random-weight model of one supported block type, from ``SPECIMEN_CONFIGS[name]``. Every parameter is
    drawn in registration order from one seeded generator (not transformers' own initialisation), so the
    weights depend only on the name and the seed."""
    if name not in SPECIMEN_CONFIGS:
        raise AuditError(f"unknown specimen {name!r}; supported block types: {supported_list()}")
    torch = _import_torch()
    transformers = _import_transformers()
    values = dict(SPECIMEN_CONFIGS[name])
    config = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    config._attn_implementation = "eager"
    block_type = block_type_for(config)
    model = getattr(transformers, block_type.model_class)(config)
    generator = torch.Generator().manual_seed(seed)
    scale = 1.0 / math.sqrt(model.config.hidden_size)
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
            if parameter.ndim == 1:  # normaliser gains near 1; biases small
                values_ = 1.0 + 0.1 * noise if parameter_name.endswith("weight") else 0.1 * noise
            else:
                values_ = scale * noise
            parameter.copy_(values_)
    source = {"kind": "specimen", "name": name, "seed": seed, "config": dict(SPECIMEN_CONFIGS[name]),
              "note": "random weights: these numbers describe no trained model"}  # fmt: skip
    return Subject(_finish_model(model, block_type), block_type, source)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(2**20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def model_directory_files(directory: Path) -> list[dict]:
    """Name, size and sha256 of every file the load reads: config, weights, tokenizer."""
    names = sorted(
        path.name
        for path in directory.iterdir()
        if path.is_file() and (path.name in MODEL_FILES or path.suffix == ".safetensors")
    )
    return [{"name": n, "size": (directory / n).stat().st_size, "sha256": _sha256_file(directory / n)} for n in names]


@contextlib.contextmanager
def _quiet_transformers(transformers):
    """No progress bar and no load report while loading; the previous settings restored afterwards."""
    logging = transformers.utils.logging
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def read_json_object(path: Path, limit: int, what: str) -> dict:
    """A JSON object from a file of at most ``limit`` bytes (checked before reading), or a clear error."""
    if not path.is_file():
        raise AuditError(f"{what}: {path} is missing")
    if path.stat().st_size > limit:
        raise AuditError(f"{what}: {path} is larger than {limit} bytes")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AuditError(f"{what}: {path} is not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise AuditError(f"{what}: {path} does not hold a JSON object")
    return value


def load_model_directory(directory: Path) -> Subject:
    """A built-in transformers causal LM from ``directory`` alone: config.json and safetensors weights, no remote
    code, no download; every weight tensor present (none left to random initialisation), none unused."""
    directory = Path(directory)
    if not directory.is_dir():
        raise AuditError(f"{directory} is not a directory")
    config_path = directory / "config.json"
    config_data = read_json_object(config_path, MAX_CONFIG_BYTES, "the model config")
    if "auto_map" in config_data:
        raise AuditError(f"{config_path} asks for remote code (auto_map); only built-in classes are loaded")
    if not any(path.suffix == ".safetensors" for path in directory.iterdir()):
        raise AuditError(f"{directory} holds no .safetensors weights (other weight formats are not loaded)")
    files = model_directory_files(directory)
    torch = _import_torch()
    transformers = _import_transformers()
    try:
        config = transformers.AutoConfig.for_model(
            config_data.get("model_type", ""), **{k: v for k, v in config_data.items() if k != "model_type"}
        )
    except (ValueError, KeyError) as error:
        raise AuditError(
            f"{config_path}: model_type {config_data.get('model_type')!r} is not usable ({error}); "
            f"supported block types: {supported_list()}"
        ) from None
    try:
        block_type = block_type_for(config)
    except ArchitectureError as error:
        raise AuditError(f"{config_path}: {error}") from None
    model_class = getattr(transformers, block_type.model_class)
    try:
        with _quiet_transformers(transformers):  # the audit reports missing and unused tensors itself
            model, info = model_class.from_pretrained(
            str(directory), local_files_only=True, use_safetensors=True, trust_remote_code=False,
                attn_implementation="eager", dtype=torch.float32, output_loading_info=True,
            )  # fmt: skip
    except Exception as error:  # transformers and safetensors raise many kinds; all mean "does not load"
        first_line = (str(error).splitlines() or [""])[0]
        raise AuditError(f"{directory}: the weights do not load ({type(error).__name__}: {first_line})") from None
    problems = {key: sorted(info.get(key) or []) for key in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    problems = {key: value for key, value in problems.items() if value}
    if problems:
        details = "; ".join(f"{key}: {', '.join(map(str, value[:5]))}" for key, value in problems.items())
        raise AuditError(f"{directory}: the weights do not match {block_type.model_class} ({details})")
    tokenizer = None
    if (directory / "tokenizer.json").is_file():
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            str(directory), local_files_only=True, use_fast=True, trust_remote_code=False
        )
    source = {"kind": "directory", "files": files}
    return Subject(_finish_model(model, block_type), block_type, source, tokenizer=tokenizer)


# ---------------------------------------------------------------------------------------------------------
# Hashes and canonical JSON.


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
        hashes = list(pool.map(tensor_sha256, (parameter for _, parameter in named)))
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


def _parameter_digest(model) -> str:
    return parameter_digests(model)["digest"]


# ---------------------------------------------------------------------------------------------------------
# Runs: one forward with every site recorded, optionally with one declared write replaced.


@dataclass(frozen=True)
class DeclaredSite:
    component: str  # "attn" or "mlp"
    block: int
    position: int  # 0-based, already resolved

    @property
    def name(self) -> str:
        return f"blocks.{self.block}.{COMPONENTS[self.component]}"

    @property
    def label(self) -> str:
        return f"{self.name}@{self.position}"


@dataclass
class Run:
    run_id: str
    input_name: str  # "clean" or "corrupt"
    sites: dict  # site name -> tensor (n, d), in forward order
    logits: object  # (vocab,) at the last position
    digest_before: str
    digest_after: str
    site: DeclaredSite | None = None
    replacement: object = None  # (d,)
    source_run: str | None = None
    replacement_kind: str | None = None


def site_order(blocks: int) -> list[str]:
    return [f"blocks.{b}.{site}" for b in range(blocks) for site in BLOCK_SITES]


def _hook_targets(subject: Subject) -> list[tuple[str, object, str]]:
    """(site name, module, "input" | "output") for every site, from the block type's table."""
    targets = []
    for index, block in enumerate(subject.blocks):
        for site in BLOCK_SITES:
            relative, kind = getattr(subject.block_type.sites, site)
            targets.append((f"blocks.{index}.{site}", block.get_submodule(relative) if relative else block, kind))
    return targets


def execute(subject: Subject, run_id: str, input_name: str, ids: list[int], before: str | None = None,
            **intervention) -> Run:
    """One recorded forward, the parameter digest taken before and after it. ``before`` may be the digest the
    previous run ended with: nothing runs in between, so hashing again would re-read the same tensors."""
    torch = _import_torch()
    site = intervention.get("site")
    replace = None if site is None else (site.name, site.position, intervention["replacement"])
    before = before or _parameter_digest(subject.model)
    try:
        with record_sites(_hook_targets(subject), replace) as recorder, torch.inference_mode():
            logits = subject.last_logits(torch.tensor([ids], dtype=torch.long)).detach().clone()
    except SiteFiredTwice as error:  # one run = one forward: the table misreads the model
        raise AuditError(str(error)) from None
    missing = recorder.missing()
    if missing:
        raise AuditError(f"sites never fired (the site table does not match the model): {', '.join(missing)}")
    return Run(
        run_id=run_id, input_name=input_name, sites={name: recorder.records[name][0] for name in recorder.names},
        logits=logits,
        digest_before=before, digest_after=_parameter_digest(subject.model), site=site,
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


def check_input(subject: Subject, audit_input: AuditInput) -> None:
    clean, corrupt = audit_input.clean_ids, audit_input.corrupt_ids
    if len(clean) != len(corrupt):
        raise AuditError(
            f"the clean prompt is {len(clean)} tokens and the corrupt prompt {len(corrupt)}: "
            "they must have the same token length"
        )
    if subject.fixed_length is not None and len(clean) != subject.fixed_length:
        raise AuditError(f"this model reads exactly {subject.fixed_length} tokens, got {len(clean)}")
    vocab = subject.vocab_size
    for what, ids in (("clean", clean), ("corrupt", corrupt), ("target", [audit_input.target]),
                      ("rival", [audit_input.rival])):  # fmt: skip
        bad = [i for i in ids if not 0 <= i < vocab]
        if bad:
            raise AuditError(f"{what}: token ids {bad} are outside the vocabulary (0..{vocab - 1})")
    if audit_input.target == audit_input.rival:
        raise AuditError("the target and the rival are the same token: the metric would be zero")
    limit = getattr(subject.model.config, "max_position_embeddings", None) if hasattr(subject.model, "config") else None
    if limit is not None and len(clean) > limit:
        raise AuditError(f"the prompts are {len(clean)} tokens, more than the model's {limit} positions")


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


# ---------------------------------------------------------------------------------------------------------
# The audit and its four records.


def _measured(value, quantity: str) -> dict:
    return {"value": value, "tolerance": dict(TOLERANCES[quantity])}


def _float(tensor) -> float:
    return float(tensor.item())


def _vector_values(vector) -> list[float]:
    return [float(f"{v:.9g}") for v in vector.tolist()]  # 9 significant digits round-trip float32


@contextlib.contextmanager
def torch_threads(threads: int):
    torch = _import_torch()
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _normaliser_epsilon(module) -> float:
    for attribute in ("eps", "variance_epsilon"):
        value = getattr(module, attribute, None)
        if value is not None:
            return float(value)
    raise AuditError(f"the final normaliser {type(module).__name__} exposes no epsilon")


def _module_path(model, target) -> str:
    return canonical_path(next(path for path, module in model.named_modules() if module is target))


def model_record(subject: Subject, threads: int) -> dict:
    kind = subject.block_type
    blocks = subject.blocks
    return {
        "source": subject.source,
        "block_type": kind.name,
        "model_class": type(subject.model).__name__,
        "block_class": type(blocks[0]).__name__,
        "blocks": len(blocks),
        "width": int(subject.head.weight.shape[1]),
        "vocab_size": subject.vocab_size,
        "residual_kind": kind.sites.residual_kind,
        "mlp": kind.mlp,
        "site_table": {
            "layers": kind.layers,
            "per_block": {site: dict(zip(("module", "kind"), getattr(kind.sites, site))) for site in BLOCK_SITES},
            "mlp_reads": kind.sites.mlp_reads,
            "identity": kind.sites.identity,
        },
        "normaliser": {
            "type": kind.normaliser,
            "final_module": kind.final_norm,
            "final_class": type(subject.final_norm).__name__,
            "epsilon": _normaliser_epsilon(subject.final_norm),
            "placement": kind.placement,
        },
        "output_embedding": _module_path(subject.model, subject.head),
        "parameters": parameter_digests(subject.model),
        "execution": {"dtype": "float32", "device": "cpu", "threads": threads, "attention": "eager",
                      "gradients": "off (torch.inference_mode)", "mode": "eval"},  # fmt: skip
        "libraries": library_versions(LIBRARIES),
    }


def input_record(audit_input: AuditInput, sites: list[DeclaredSite]) -> dict:
    clean, corrupt = list(audit_input.clean_ids), list(audit_input.corrupt_ids)
    return {
        "clean": {"ids": clean, "text": audit_input.clean_text},
        "corrupt": {"ids": corrupt, "text": audit_input.corrupt_text},
        "length": len(clean),
        "attention_mask": [1] * len(clean),
        "differing_positions": [p for p, (a, b) in enumerate(zip(clean, corrupt)) if a != b],
        "target": {"id": audit_input.target, "text": audit_input.target_text},
        "rival": {"id": audit_input.rival, "text": audit_input.rival_text},
        "readout_position": len(clean) - 1,
        "written_positions": sorted({site.position for site in sites}),
    }


def _run_entry(run: Run) -> dict:
    entry = {"id": run.run_id, "input": run.input_name}
    if run.site is None:
        return entry | {"intervention": None}
    replacement = {"kind": run.replacement_kind, "values": _vector_values(run.replacement),
                   "sha256": tensor_sha256(run.replacement), "tolerance": dict(TOLERANCES["replacement"])}  # fmt: skip
    if run.replacement_kind == "clean write":
        replacement["from_run"] = "clean"
    return entry | {
        "intervention": {"site": run.site.name, "position": run.site.position, "source_run": run.source_run,
                         "replacement": replacement}  # fmt: skip
    }


def intervention_record(runs: list[Run], sites: list[DeclaredSite], blocks: int) -> dict:
    return {
        "declared_sites": [
            {"name": s.name, "component": s.component, "block": s.block, "position": s.position} for s in sites
        ],
        "recorded_sites": site_order(blocks),
        "runs": [_run_entry(run) for run in runs],
        "held_fixed": [
            "every parameter tensor (model record digest, checked before and after every run)",
            "the input ids and attention mask of the run the intervention is applied to",
            "every other position of the declared site",
            "every site upstream of the declared site (checked bit-identical to the source run)",
        ],
        "recomputed": "every site downstream of the declared site, by the model's own forward",
    }


def _metric(logits, audit_input: AuditInput) -> float:
    return _float(logits[audit_input.target] - logits[audit_input.rival])


def _cosine(a, b):
    denominator = float(a.norm()) * float(b.norm())
    return None if denominator == 0.0 else _float(a @ b) / denominator


def _write_result(subject, audit_input, site, runs_by_id, direction) -> dict:
    torch = _import_torch()
    clean = runs_by_id["clean"]
    last_block = len(subject.blocks) - 1
    w = clean.sites[site.name][site.position]
    final_state = clean.sites[f"blocks.{last_block}.resid_out"][site.position]
    readout_position = len(audit_input.clean_ids) - 1
    direct_effect = None
    if site.position == readout_position:  # elsewhere the write has no direct path to the readout
        with torch.inference_mode():
            direct_effect = _metric(subject.readout(final_state), audit_input) - _metric(
                subject.readout(final_state - w), audit_input
            )
    later = [f"blocks.{site.block}.mlp_write"] if site.component == "attn" else []
    later += [f"blocks.{b}.{c}" for b in range(site.block + 1, last_block + 1) for c in ("attn_write", "mlp_write")]
    carried = w + sum((clean.sites[name][site.position] for name in later), torch.zeros_like(w))
    norm = float(w.norm())
    ld_clean = _metric(clean.logits, audit_input)
    ld_corrupt = _metric(runs_by_id["corrupt"].logits, audit_input)
    ablated = _metric(runs_by_id[f"ablate {site.label}"].logits, audit_input)
    patched = _metric(runs_by_id[f"patch {site.label}"].logits, audit_input)
    gap = ld_clean - ld_corrupt
    return {
        "site": site.name,
        "position": site.position,
        "norm": _measured(norm, "norm"),
        "direct_projection": _measured(_float(direction @ w), "direct_projection"),
        "direct_effect_exact": _measured(direct_effect, "direct_effect_exact"),
        "survival_cosine": _measured(_cosine(w, final_state), "survival_cosine"),
        "retained_fraction": _measured(None if norm == 0 else _float(carried @ w) / norm**2, "retained_fraction"),
        "ablation_effect": _measured(ablated - ld_clean, "ablation_effect"),
        "patch_recovery": _measured(None if gap == 0 else (patched - ld_corrupt) / gap, "patch_recovery"),
    }


def block_identity_excesses(subject: Subject, run: Run) -> list[float]:
    """Per block: |resid_out - (resid_in + attn_write + mlp_write)| at its largest, less the float32 allowance
    for the block's scale (IDENTITY_RELATIVE x its largest entry); at most IDENTITY_ABSOLUTE when the site
    table matches the block."""
    excesses = []
    for b in range(len(subject.blocks)):
        parts = [run.sites[f"blocks.{b}.{s}"] for s in BLOCK_SITES]
        error = float((parts[3] - (parts[0] + parts[1] + parts[2])).abs().max())
        excesses.append(error - IDENTITY_RELATIVE * max(float(p.abs().max()) for p in parts))
    return excesses


def invariant_problems(subject: Subject, runs: list[Run], comparisons: list[dict]) -> list[str]:
    """What breaks the packet's invariants: the block identity, frozen parameters, interventions confined."""
    problems = [f"block {b}: output differs from input + attention write + MLP write by more than float32 rounding"
                for b, excess in enumerate(block_identity_excesses(subject, runs[0])) if excess > IDENTITY_ABSOLUTE]
    problems += [f"run {run.run_id}: the parameters changed during the run" for run in runs
                 if run.digest_before != run.digest_after]  # fmt: skip
    for c in comparisons:
        if c["upstream_identical"] != c["upstream_sites"]:
            problems.append(f"run {c['run']}: a site upstream of the declared one differs from run {c['source_run']}")
        if not (c["declared_equals_replacement"] and c["other_positions_identical"]):
            problems.append(f"run {c['run']}: the declared site does not hold exactly its replacement")
    return problems


def measurement_record(subject, audit_input, sites, runs, comparisons) -> dict:
    runs_by_id = {run.run_id: run for run in runs}
    direction = (subject.head.weight[audit_input.target] - subject.head.weight[audit_input.rival]).detach()
    clean, corrupt = runs_by_id["clean"], runs_by_id["corrupt"]
    return {
        "metric": "logit(target) - logit(rival) at the readout position",
        "readout": (
            f"{subject.block_type.final_norm} then {_module_path(subject.model, subject.head)}, applied to "
            f"blocks.{len(subject.blocks) - 1}.resid_out at the readout position"
        ),
        "direction": "u_target - u_rival: rows of the output embedding",
        "direct_effect_rule": "M(N(r_final)) - M(N(r_final - w)) for a write at the readout position; null elsewhere, "
        "where the write reaches the readout only through later attention",
        "survival_rule": "cosine of w with the final state at w's position; retained = (w + every later write) . w / |w|^2",
        "tolerance_rule": "reproduced when |re-run - recorded| <= absolute + relative * |recorded|",
        "baseline": {
            "clean": _measured(_metric(clean.logits, audit_input), "metric"),
            "corrupt": _measured(_metric(corrupt.logits, audit_input), "metric"),
        },
        "results": [_write_result(subject, audit_input, site, runs_by_id, direction) for site in sites],
        "checks": {
            "parameter_digest_per_run": [
                {"run": run.run_id, "before": run.digest_before, "after": run.digest_after} for run in runs
            ],
            "intervened_runs": comparisons,
            "block_identity": {
                "what": "max over blocks of |resid_out - (resid_in + attn_write + mlp_write)| in the clean run, "
                f"less {IDENTITY_RELATIVE:g} x the block's largest entry; at most {IDENTITY_ABSOLUTE:g}",
                "excess": _measured(max(block_identity_excesses(subject, clean)), "block_identity"),
            },
        },
    }


def run_audit(subject: Subject, audit_input: AuditInput, sites: list[DeclaredSite], threads: int = 1):
    """Every run the audit needs, each compared with its source; returns (runs, comparisons)."""
    torch = _import_torch()
    check_input(subject, audit_input)
    if not sites:
        raise AuditError("no sites declared")
    if len(set(sites)) != len(sites):
        raise AuditError("a site is declared twice")
    with torch_threads(threads):
        clean = execute(subject, "clean", "clean", list(audit_input.clean_ids))
        corrupt = execute(subject, "corrupt", "corrupt", list(audit_input.corrupt_ids), clean.digest_after)
        runs = [clean, corrupt]
        for site in sites:
            width = clean.sites[site.name].shape[1]
            runs.append(execute(subject, f"ablate {site.label}", "clean", list(audit_input.clean_ids),
                                runs[-1].digest_after, site=site, replacement=torch.zeros(width),
                                source_run="clean", kind="zero"))  # fmt: skip
            runs.append(execute(subject, f"patch {site.label}", "corrupt", list(audit_input.corrupt_ids),
                                runs[-1].digest_after, site=site,
                                replacement=clean.sites[site.name][site.position].clone(), source_run="corrupt",
                                kind="clean write"))  # fmt: skip
    by_id = {run.run_id: run for run in runs}
    comparisons = [compare_to_source(run, by_id[run.source_run]) for run in runs if run.site is not None]
    return runs, comparisons


def linked_records(bodies: dict) -> dict:
    """Add to each record its links: the other records' SHA-256 and one digest per top-level field."""
    digests = {
        name: {"sha256": sha256_json(body), "fields": {key: sha256_json(value) for key, value in body.items()}}
        for name, body in bodies.items()
    }
    return {
        name: {"record": name, "schema": SCHEMA, **body, "links": {other: digests[other] for other in RECORDS if other != name}}
        for name, body in bodies.items()
    }


def build_packet(subject: Subject, audit_input: AuditInput, sites: list[DeclaredSite], threads: int = 1) -> dict:
    """The four linked records of one audit."""
    runs, comparisons = run_audit(subject, audit_input, sites, threads)
    problems = invariant_problems(subject, runs, comparisons)
    if problems:  # the site table does not describe this model: no packet
        raise AuditError("the audit's own checks failed: " + "; ".join(problems))
    bodies = {
        "model": model_record(subject, threads),
        "input": input_record(audit_input, sites),
        "intervention": intervention_record(runs, sites, len(subject.blocks)),
        "measurement": measurement_record(subject, audit_input, sites, runs, comparisons),
    }
    return linked_records(bodies)


def record_body(record: dict) -> dict:
    """A record without its links and envelope: what the others' links hash."""
    return {key: value for key, value in record.items() if key not in ("links", "record", "schema")}


# ---------------------------------------------------------------------------------------------------------
# Writing a packet.


def check_output_directory(output_dir: Path) -> Path:
    output_dir = Path(output_dir)
    if output_dir.exists():
        if not output_dir.is_dir():
            raise AuditError(f"{output_dir} exists and is not a directory; choose a new output directory")
        if any(output_dir.iterdir()):
            raise AuditError(f"{output_dir} is not empty; packets are never overwritten: choose a new directory")
    return output_dir


def write_packet(packet: dict, output_dir: Path) -> Path:
    """Write the four records into a hidden sibling, then rename it into place: all four or nothing."""
    output_dir = check_output_directory(output_dir)
    parent = output_dir.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = parent / f".{output_dir.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        for name in RECORDS:
            (staging / f"{name}.json").write_text(json.dumps(packet[name], indent=1, sort_keys=True) + "\n", "utf-8")
        check_output_directory(output_dir)  # again: something may have written there meanwhile
        if output_dir.exists():
            output_dir.rmdir()
        os.replace(staging, output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output_dir


def audit_to_directory(subject, audit_input, sites, output_dir: Path, threads: int = 1) -> dict:
    check_output_directory(output_dir)  # before any work
    packet = build_packet(subject, audit_input, sites, threads)
    write_packet(packet, output_dir)
    return packet


def summary_lines(packet: dict) -> list[str]:
    model, measurement, inputs = packet["model"], packet["measurement"], packet["input"]
    lines = []
    if model["source"]["kind"] == "specimen":
        lines.append(f"WARNING: random-weight {model['source']['name']} specimen: these numbers describe no trained model")
    lines.append(
        f"{model['model_class']} ({model['block_type']}, {model['blocks']} blocks, width {model['width']}); "
        f"parameters {model['parameters']['digest'][:16]}..."
    )
    lines.append(
        f"metric logit({inputs['target']['id']}) - logit({inputs['rival']['id']}) at position "
        f"{inputs['readout_position']}: clean {measurement['baseline']['clean']['value']:.3f}, "
        f"corrupt {measurement['baseline']['corrupt']['value']:.3f}"
    )
    header = ("write", "norm", "d.w", "direct", "ablation", "recovery", "cos", "retained")
    lines.append(f"{header[0]:<24}" + "".join(f"{h:>10}" for h in header[1:]))
    for row in measurement["results"]:
        values = [row[key]["value"] for key in ("norm", "direct_projection", "direct_effect_exact", "ablation_effect",
                                                 "patch_recovery", "survival_cosine", "retained_fraction")]  # fmt: skip
        cells = "".join(f"{'n/a':>10}" if v is None else f"{v:10.3f}" for v in values)
        lines.append(f"{row['site'] + '@' + str(row['position']):<24}{cells}")
    return lines


# ---------------------------------------------------------------------------------------------------------
# Verifying a packet.


@dataclass
class Verification:
    lines: list = field(default_factory=list)
    failures: list = field(default_factory=list)

    def check(self, label: str, passed: int, total: int, detail: str = "") -> None:
        number = len([line for line in self.lines if line.startswith("check ")]) + 1
        verdict = "ok" if passed == total else "FAIL"
        self.lines.append(f"check {number}: {label}: {passed} of {total}{detail} [{verdict}]")

    def fail(self, message: str) -> None:
        self.failures.append(message)

    @property
    def passed(self) -> bool:
        return not self.failures


def read_packet(packet_dir: Path) -> dict:
    packet_dir = Path(packet_dir)
    if not packet_dir.is_dir():
        raise AuditError(f"{packet_dir} is not a directory")
    records = {}
    for name in RECORDS:
        value = read_json_object(packet_dir / f"{name}.json", MAX_RECORD_BYTES, f"record {name}")
        if value.get("record") != name or value.get("schema") != SCHEMA:
            raise AuditError(f"record {name}: {name}.json is not a {SCHEMA} {name} record")
        records[name] = value
    return records


def check_links(records: dict, report: Verification) -> None:
    """Every link against the record it names. A record all others disagree with was edited (named down to
    the field by the per-field digests); a link only one record gets wrong was itself changed."""
    actual = {name: sha256_json(record_body(records[name])) for name in RECORDS}
    matched = total = 0
    for name in RECORDS:
        body = record_body(records[name])
        doubters = []
        for other in RECORDS:
            if other == name:
                continue
            total += 1
            link = (records[other].get("links") or {}).get(name) or {}
            if link.get("sha256") == actual[name]:
                matched += 1
            else:
                doubters.append((other, link))
        if len(doubters) == len(RECORDS) - 1:
            fields = doubters[0][1].get("fields") or {}
            changed = sorted(k for k in set(fields) | set(body) if fields.get(k) != (sha256_json(body[k]) if k in body else None))
            report.fail(f"record {name} was changed: field(s) {', '.join(changed) or '(unknown)'} no longer match the "
                        f"digests the other three records hold")  # fmt: skip
        else:
            for other, _ in doubters:
                report.fail(f"record {other}, field links.{name}: names a SHA-256 that is not record {name}'s")
    report.check("links between the records match", matched, total)


def _close(recorded, rerun, tolerance: dict) -> bool:
    if recorded is None or rerun is None:
        return recorded is None and rerun is None
    return abs(rerun - recorded) <= tolerance["absolute"] + tolerance["relative"] * abs(recorded)


def compare_values(recorded, rerun, path: str, report: Verification, counts: dict) -> None:
    """Recorded against re-run: nodes with a tolerance compare numerically, everything else exactly."""
    if isinstance(recorded, dict) and "tolerance" in recorded and isinstance(rerun, dict):
        counts["tolerances"] += 1
        if recorded["tolerance"] != rerun.get("tolerance"):
            report.fail(f"{path}.tolerance: {recorded['tolerance']} is not the tool's {rerun.get('tolerance')}")
            return
        counts["tolerances_ok"] += 1
        for key in set(recorded) | set(rerun):
            if key in ("tolerance", "sha256"):
                continue  # hashes of floats may differ across builds; the values are compared instead
            if key in ("value", "values"):
                a, b = recorded.get(key), rerun.get(key)
                pairs = list(zip(a, b)) if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) else [(a, b)]
                counts["numbers"] += 1
                if all(_close(x, y, recorded["tolerance"]) for x, y in pairs):
                    counts["numbers_ok"] += 1
                else:
                    report.fail(f"{path}.{key}: the packet says {_short(a)}, the re-run gives {_short(b)} "
                                f"(tolerance {recorded['tolerance']['absolute']:g} + "
                                f"{recorded['tolerance']['relative']:g} x |value|)")  # fmt: skip
            else:
                compare_values(recorded.get(key), rerun.get(key), _child(path, key), report, counts)
        return
    if isinstance(recorded, dict) and isinstance(rerun, dict):
        for key in sorted(set(recorded) | set(rerun)):
            if key not in rerun:
                report.fail(f"{_child(path, key)}: in the packet, but not part of a {SCHEMA} record")
            elif key not in recorded:
                report.fail(f"{_child(path, key)}: missing from the packet")
            else:
                compare_values(recorded[key], rerun[key], _child(path, key), report, counts)
        return
    if isinstance(recorded, list) and isinstance(rerun, list) and len(recorded) == len(rerun):
        for index, (a, b) in enumerate(zip(recorded, rerun)):
            compare_values(a, b, f"{path}[{index}]", report, counts)
        return
    counts["exact"] += 1
    if recorded == rerun:
        counts["exact_ok"] += 1
    else:
        report.fail(f"{path}: the packet says {_short(recorded)}, the re-run gives {_short(rerun)}")


def _child(path: str, key: str) -> str:
    """'record model, field ' + 'parameters' -> '... field parameters'; then dotted."""
    return f"{path}{key}" if path.endswith(" ") else f"{path}.{key}"


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _input_from_record(record: dict) -> AuditInput:
    try:
        for what in ("clean", "corrupt"):
            if not isinstance(record[what]["ids"], list) or not all(_is_int(i) for i in record[what]["ids"]):
                raise AuditError(f"record input: field {what}.ids is not a list of token ids")
        for what in ("target", "rival"):
            if not _is_int(record[what]["id"]):
                raise AuditError(f"record input: field {what}.id is not a token id")
        return AuditInput(
            clean_ids=tuple(record["clean"]["ids"]), corrupt_ids=tuple(record["corrupt"]["ids"]),
            target=record["target"]["id"], rival=record["rival"]["id"], clean_text=record["clean"]["text"],
            corrupt_text=record["corrupt"]["text"], target_text=record["target"]["text"],
            rival_text=record["rival"]["text"],
        )  # fmt: skip
    except (KeyError, TypeError) as error:
        raise AuditError(f"record input: field {error} is missing or malformed") from None


def _sites_from_record(record: dict) -> list[DeclaredSite]:
    try:
        sites = [DeclaredSite(s["component"], s["block"], s["position"]) for s in record["declared_sites"]]
    except (KeyError, TypeError) as error:
        raise AuditError(f"record intervention: field declared_sites is malformed ({error})") from None
    if not sites or not all(_is_int(site.block) and _is_int(site.position) for site in sites):
        raise AuditError("record intervention: field declared_sites needs sites with integer block and position")
    return sites


def verify_packet(packet_dir: Path, subject: Subject) -> Verification:
    """Re-run the audit a packet records on ``subject`` and check every record, link, digest and result."""
    records = read_packet(packet_dir)
    report = Verification()
    check_links(records, report)
    try:
        threads = records["model"]["execution"]["threads"]
    except (KeyError, TypeError):
        threads = None
    if not (_is_int(threads) and 1 <= threads <= MAX_THREADS):
        raise AuditError(f"record model: field execution.threads is not a thread count from 1 to {MAX_THREADS}")
    audit_input = _input_from_record(records["input"])
    sites = _sites_from_record(records["intervention"])
    length, blocks = len(audit_input.clean_ids), len(subject.blocks)
    for site in sites:
        if site.component not in COMPONENTS or not (0 <= site.block < blocks and 0 <= site.position < length):
            raise AuditError(f"record intervention: declared site {site} lies outside this model or input")
    if subject.tokenizer is not None:
        for what in ("clean", "corrupt"):
            text = records["input"][what]["text"]
            if text is not None and tokenize_prompt(subject, text, what) != list(records["input"][what]["ids"]):
                report.fail(f"record input, field {what}.ids: not what the tokenizer makes of {what}.text")
    runs, comparisons = run_audit(subject, audit_input, sites, threads)
    recorded_digest = records["model"].get("parameters", {}).get("digest")
    digests = [d for run in runs for d in (run.digest_before, run.digest_after)]
    report.check("parameter digest before and after every run equals the model record's",
                 sum(d == recorded_digest for d in digests), len(digests))  # fmt: skip
    if any(d != recorded_digest for d in digests):
        report.fail("record model, field parameters.digest: the model's parameters hash differently")
    upstream = sum(c["upstream_identical"] for c in comparisons)
    upstream_total = sum(c["upstream_sites"] for c in comparisons)
    report.check("recorded sites upstream of the declared site bit-identical to the source run", upstream,
                 upstream_total, f" sites, over {len(comparisons)} intervened runs")  # fmt: skip
    replaced = sum(c["declared_equals_replacement"] and c["other_positions_identical"] for c in comparisons)
    report.check("declared site equal to its replacement, its other positions untouched", replaced, len(comparisons))
    changed = sum(c["downstream_changed"] for c in comparisons)
    stray = (upstream_total - upstream) + (len(comparisons) - replaced)
    report.check("changed sites that lie downstream of the declared site", changed, changed + stray,
                 f" ({changed} of {sum(c['downstream_sites'] for c in comparisons)} downstream sites changed)")  # fmt: skip
    if upstream != upstream_total or replaced != len(comparisons):
        report.fail("an intervention changed a site other than its declared one and those downstream of it")
    excesses = block_identity_excesses(subject, runs[0])
    identity_holds = sum(excess <= IDENTITY_ABSOLUTE for excess in excesses)
    report.check("blocks whose output is input + attention write + MLP write within float32 rounding",
                 identity_holds, len(excesses))  # fmt: skip
    if identity_holds != len(excesses):
        report.fail("the block identity fails: the site table does not describe this model")
    rerun = {name: record_body(record) for name, record in linked_records({
        "model": model_record(subject, threads),
        "input": input_record(audit_input, sites),
        "intervention": intervention_record(runs, sites, blocks),
        "measurement": measurement_record(subject, audit_input, sites, runs, comparisons),
    }).items()}  # fmt: skip
    environment = record_body(records["model"]).get("libraries")
    for name in RECORDS:
        counts = dict.fromkeys(("exact", "exact_ok", "numbers", "numbers_ok", "tolerances", "tolerances_ok"), 0)
        recorded = record_body(records[name])
        if name == "model":  # another environment may run the check: report, do not fail
            recorded = {key: value for key, value in recorded.items() if key != "libraries"}
            rerun[name] = {key: value for key, value in rerun[name].items() if key != "libraries"}
        compare_values(recorded, rerun[name], f"record {name}, field ", report, counts)
        detail = f" fields exact; {counts['numbers_ok']} of {counts['numbers']} numbers within tolerance"
        report.check(f"record {name} reproduced", counts["exact_ok"] + counts["numbers_ok"] + counts["tolerances_ok"],
                     counts["exact"] + counts["numbers"] + counts["tolerances"], detail)  # fmt: skip
    current = library_versions(LIBRARIES)
    if environment != current:
        report.lines.append(f"note: the packet was written with {environment}; this check ran with {current}")
    return report


# ---------------------------------------------------------------------------------------------------------
# Sources: rebuild the model a packet names.


def subject_from_packet(packet_dir: Path) -> Subject:
    """The specimen a packet names (a model directory must be given with --model)."""
    source = read_packet(packet_dir)["model"].get("source") or {}
    if source.get("kind") == "specimen":
        return build_specimen(source.get("name", ""), int(source.get("seed", 0)))
    raise AuditError(f"record model, field source.kind is {source.get('kind')!r}: give the model with --model DIR")
