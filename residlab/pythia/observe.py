"""Observe Pythia-14M's residual stream: offline load, capture of every residual boundary and branch write,
numerical checks, per-position observations, and the three result files.

Where the hooks go comes from reading ``transformers/models/gpt_neox/modeling_gpt_neox.py`` in both
supported releases (4.57.1 and 5.24.0), not from a generic recipe. ``GPTNeoXLayer.forward`` computes

    attn_write = post_attention_dropout(attention(input_layernorm(x))[0])
    parallel:    mlp_write = post_mlp_dropout(mlp(post_attention_layernorm(x)))
                 out = (mlp_write + attn_write) + x
    sequential:  mlp_write = post_mlp_dropout(mlp(post_attention_layernorm(x + attn_write)))
                 out = mlp_write + (attn_write + x)

so the branch writes at the addition boundary are the outputs of the two dropout modules (identities in
evaluation mode), the block input is the layer's first positional argument, and the block output is the
layer's return value: a tuple ``(hidden_states, ...)`` in 4.57.1, a bare tensor in 5.x. The model's own
``output_hidden_states`` replaces its last entry by ``final_layer_norm`` of the last block's output, so the
raw last state is captured from the last layer itself. ``SITE_MAPS`` (residlab/capture/blocks.py) records exactly this.

torch and transformers are imported inside the functions that need them, so the runner's ``--plan`` works
before anything is installed. Every tensor shape is documented as (batch, positions, width) = (1, n, d).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import json
import os
import platform
import secrets
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from residlab.capture.blocks import SITE_MAPS, BlockSiteMap  # bundled
from residlab.pythia.artifacts import OBSERVE_READS, ArtifactError, VerifiedArtifacts  # bundled
from residlab.capture.recording import SiteFiredTwice, library_versions, record_sites  # bundled

FIXED_TEXT = "The small red boat crossed the lake."
TOP_K = 5
# The parallel identity out = in + attn_write + mlp_write, regrouped, differs from transformers' own
# evaluation order only by float32 rounding: allow an absolute floor plus a few ulps of the largest term.
IDENTITY_ABSOLUTE_TOLERANCE = 1e-5
IDENTITY_RELATIVE_TOLERANCE = 1e-6
RESULT_FILES = ("manifest.json", "observations.json", "captures.json")
LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors", "huggingface_hub")


class ObservationError(RuntimeError):
    """The observation cannot run or its checks failed; the message names the problem."""


class OutputDirectoryError(ObservationError):
    """The output directory is unusable (not empty, or not a directory); nothing was written."""


# ---------------------------------------------------------------------------------------------------------
# The site map: where each named quantity lives, per block type (read from the transformers source).


LAYERS_PATH = "gpt_neox.layers"
FINAL_NORM_PATH = "gpt_neox.final_layer_norm"
FINAL_NORM_SITE = "final_norm.out"
BLOCK_SITES = ("resid_in", "attn_write", "mlp_write", "resid_out")


def site_name(block: int, site: str) -> str:
    """Stable dotted name of a per-block site, e.g. ``blocks.3.attn_write``."""
    return f"blocks.{block}.{site}"


def site_map_for(model) -> BlockSiteMap:
    return SITE_MAPS["parallel" if model.config.use_parallel_residual else "sequential"]


def hook_sites(model) -> list[tuple[str, str, str]]:
    """Every (site name, module path in the model, "input" | "output"), in forward order."""
    return list(_hook_sites(site_map_for(model), model.config.num_hidden_layers))


@functools.lru_cache(maxsize=16)
def _hook_sites(site_map: BlockSiteMap, layers: int) -> tuple[tuple[str, str, str], ...]:
    # Built once per (map, depth): every capture asks for the same list.
    sites = []
    for block in range(layers):
        layer_path = f"{LAYERS_PATH}.{block}"
        for site in BLOCK_SITES:
            relative, kind = getattr(site_map, site)
            path = f"{layer_path}.{relative}" if relative else layer_path
            sites.append((site_name(block, site), path, kind))
    sites.append((FINAL_NORM_SITE, FINAL_NORM_PATH, "output"))
    return tuple(sites)


# ---------------------------------------------------------------------------------------------------------
# The capture context manager.


def hook_snapshot(model) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Module path -> (forward hook ids, forward pre-hook ids) for every module that has any."""
    snapshot = {}
    for path, module in model.named_modules():
        forward_ids = tuple(module._forward_hooks.keys())
        pre_ids = tuple(module._forward_pre_hooks.keys())
        if forward_ids or pre_ids:
            snapshot[path] = (forward_ids, pre_ids)
    return snapshot


def resolve_sites(model) -> list[tuple[str, object, str]]:
    """(site name, module, "input" | "output") for every site of ``hook_sites(model)``; an error naming the
    first path the model lacks. Each path is looked up from its parent's, so every prefix is walked once
    (``get_submodule`` per path, or a ``named_modules`` dict, costs several times more per capture)."""
    found = {"": model}

    def module_at(path: str):
        if path not in found:
            parent_path, _, leaf = path.rpartition(".")
            parent = module_at(parent_path)
            found[path] = None if parent is None else parent._modules.get(leaf)
        return found[path]

    resolved = []
    for name, path, kind in hook_sites(model):
        module = module_at(path)
        if module is None:
            raise ObservationError(f"hook site {name}: the model has no module {path!r}")
        resolved.append((name, module, kind))
    return resolved


@contextlib.contextmanager
def capture_sites(model):
    """Record every site of ``hook_sites(model)`` during the block (``recording.record_sites``): yield the
    ``SiteRecorder``, whose records are detached CPU clones (1, n, d); exactly its hooks are removed on exit,
    also when the forward raised. Hooks other code registered are left as they were."""
    try:
        with record_sites(resolve_sites(model)) as recorder:
            yield recorder
    except SiteFiredTwice as error:
        # One capture = one forward: a site firing twice means the map no longer matches the model.
        raise ObservationError(f"hook {error}") from None


# ---------------------------------------------------------------------------------------------------------
# The capture itself.


@dataclass
class ResidualCapture:
    """One forward's raw residual boundaries and branch writes; every tensor (1, n, d), float32, on CPU."""

    block_input: object  # H_0 = blocks.0.resid_in (the embedding, as the first block receives it)
    block_inputs: list  # blocks.i.resid_in for every block (for the continuity check)
    block_outputs: list  # raw H_1..H_L = blocks.i.resid_out
    final_norm_output: object  # final_layer_norm(H_L): NOT a residual state
    attention_writes: list  # blocks.i.attn_write
    mlp_writes: list  # blocks.i.mlp_write
    block_return_kind: str  # "tuple" (transformers 4.57) or "tensor" (5.x)
    residual_kind: str  # "parallel" or "sequential"
    sites: dict  # stable name -> tensor, every captured site

    def boundaries(self):
        """Raw H_0..H_L with the batch removed: (L+1, n, d)."""
        import torch

        return torch.cat([self.block_input] + list(self.block_outputs), dim=0)

    def boundary_names(self) -> list[str]:
        return ["blocks.0.resid_in"] + [site_name(i, "resid_out") for i in range(len(self.block_outputs))]


def _forward(model, input_ids, **kwargs):
    import torch

    with torch.inference_mode():
        return model(input_ids=input_ids, use_cache=False, **kwargs)


def capture_residuals(model, input_ids) -> ResidualCapture:
    """Run one forward of ``input_ids`` (1, n) and return every captured site."""
    with capture_sites(model) as recorder:
        _forward(model, input_ids)
    if recorder.handles_still_attached():
        raise ObservationError("capture hooks are still attached after the capture")
    missing = recorder.missing()
    if missing:
        raise ObservationError(f"hook sites never fired: {', '.join(missing)}")
    names = _block_site_names(model.config.num_hidden_layers)
    return_kinds = {recorder.return_kinds[name] for name in names["resid_out"]}
    if len(return_kinds) != 1:
        raise ObservationError(f"blocks returned mixed kinds: {sorted(return_kinds)}")
    sites = {name: recorder.records[name] for name in recorder.names}
    block_inputs = [sites[name] for name in names["resid_in"]]
    return ResidualCapture(
        block_input=block_inputs[0],
        block_inputs=block_inputs,
        block_outputs=[sites[name] for name in names["resid_out"]],
        final_norm_output=sites[FINAL_NORM_SITE],
        attention_writes=[sites[name] for name in names["attn_write"]],
        mlp_writes=[sites[name] for name in names["mlp_write"]],
        block_return_kind=return_kinds.pop(),
        residual_kind=site_map_for(model).residual_kind,
        sites=sites,
    )


@functools.lru_cache(maxsize=16)
def _block_site_names(layers: int) -> dict[str, tuple[str, ...]]:
    """Per-block site -> its name in every block, e.g. "attn_write" -> ("blocks.0.attn_write", ...)."""
    return {site: tuple(site_name(block, site) for block in range(layers)) for site in BLOCK_SITES}


def prove_hooks_removed(model, input_ids) -> dict:
    """Capture once more and show afterwards: the model's hook tables equal what they were before, none of
    the recorder's handles remain, and a later forward adds nothing to the recorder."""
    before = hook_snapshot(model)
    with capture_sites(model) as recorder:
        registered = len(recorder.handles)
        during = sum(len(forward) + len(pre) for forward, pre in hook_snapshot(model).values())
        _forward(model, input_ids)
    after = hook_snapshot(model)
    recorded = len(recorder.records)
    _forward(model, input_ids)
    return {
        "handles_registered": registered,
        "hooks_on_model_during_capture": during,
        "handles_left_after_exit": recorder.handles_still_attached(),
        "hook_tables_equal_to_before": before == after,
        "sites_recorded_during_capture": recorded,
        "sites_recorded_by_a_later_forward": len(recorder.records) - recorded,
    }


# ---------------------------------------------------------------------------------------------------------
# Loading, offline.


def _json_object(artifacts: VerifiedArtifacts, name: str) -> dict:
    try:
        value = json.loads(artifacts.bytes_for(name))
    except (ValueError, UnicodeDecodeError) as error:
        raise ObservationError(f"{name}: verified against the lock but not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise ObservationError(f"{name}: verified against the lock but not a JSON object")
    return value


def _special_token(value):
    """A special token as tokenizer_config.json / special_tokens_map.json store it: a string or an object."""
    return value.get("content") if isinstance(value, dict) else value


def _tokenizer_from_bytes(artifacts: VerifiedArtifacts):
    """The fast tokenizer built from the verified tokenizer.json text and the special tokens and decoding
    settings of tokenizer_config.json and special_tokens_map.json (read from the verified bytes, not by path)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    try:
        backend = Tokenizer.from_str(artifacts.bytes_for("tokenizer.json").decode("utf-8"))
    except Exception as error:  # noqa: BLE001 - tokenizers raises its own exception type
        raise ObservationError(f"tokenizer.json: verified against the lock but not a tokenizer ({error})") from None
    settings = _json_object(artifacts, "tokenizer_config.json")
    special = {**settings, **_json_object(artifacts, "special_tokens_map.json")}
    options = {key: _special_token(special[key]) for key in ("bos_token", "eos_token", "unk_token", "pad_token") if special.get(key)}
    for key in ("clean_up_tokenization_spaces", "model_max_length"):
        if key in settings:
            options[key] = settings[key]
    return PreTrainedTokenizerFast(tokenizer_object=backend, **options)


def _checkpoint_state(artifacts: VerifiedArtifacts, model) -> dict:
    """The weights from the verified bytes, under the model's own parameter names, exactly its tensors."""
    from safetensors.torch import load

    try:
        stored = load(artifacts.bytes_for("model.safetensors"))
    except Exception as error:  # noqa: BLE001 - safetensors raises its own exception type
        raise ObservationError(f"model.safetensors: verified against the lock but unreadable ({error})") from None
    own = model.state_dict()
    # transformers 5.x names the untied head lm_head; the checkpoint (and 4.x) call it embed_out.
    state = {("lm_head.weight" if name == "embed_out.weight" and name not in own else name): t for name, t in stored.items()}
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise ObservationError(
            f"model.safetensors: its tensors do not match GPTNeoXForCausalLM (missing: {', '.join(missing) or 'none'}; "
            f"unexpected: {', '.join(unexpected) or 'none'})"
        )
    wrong = [name for name in own if tuple(state[name].shape) != tuple(own[name].shape)]
    if wrong:
        raise ObservationError(f"model.safetensors: tensors of the wrong shape: {', '.join(wrong)}")
    return state


def load_offline(artifacts: VerifiedArtifacts):
    """The built-in GPTNeoXForCausalLM and a fast tokenizer, built from the bytes verification hashed (never
    re-read by path; a file changed since is refused): no network, safetensors only, no remote code, eager
    attention, float32 (the file stores F16, widened exactly), eval mode, CPU. generation_config.json is not
    read: it only configures text generation, which the observation never does."""
    try:
        import torch
        from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    except ImportError as error:
        raise ObservationError(
            f"{error.name} is not installed: install the pinned requirements (residual-requirements.txt) first"
        ) from None
    try:
        for name in OBSERVE_READS:
            artifacts.bytes_for(name)  # every file it needs is pinned and unchanged, before any work
        config_values = _json_object(artifacts, "config.json")
        if config_values.get("model_type") != "gpt_neox":
            raise ObservationError(f"config.json: model_type {config_values.get('model_type')!r}, not 'gpt_neox'")
        config = GPTNeoXConfig.from_dict(config_values, attn_implementation="eager")
        model = GPTNeoXForCausalLM(config).to(device="cpu", dtype=torch.float32)
        model.load_state_dict(_checkpoint_state(artifacts, model), strict=True)
        tokenizer = _tokenizer_from_bytes(artifacts)
    except ArtifactError as error:
        raise ObservationError(str(error)) from None
    model = model.eval()
    model.config.use_cache = False
    if not tokenizer.is_fast:
        raise ObservationError("tokenizer.json: the tokenizer built is not a fast tokenizer")
    dtypes = sorted({str(p.dtype) for p in model.parameters()})
    if dtypes != ["torch.float32"]:
        raise ObservationError(f"the model computes in {dtypes}, not float32")
    if model.config._attn_implementation != "eager":
        raise ObservationError(f"attention implementation is {model.config._attn_implementation}, not eager")
    return model, tokenizer


# ---------------------------------------------------------------------------------------------------------
# Tokens, checks and observations.


def tokenize(tokenizer, text: str = FIXED_TEXT) -> list[dict]:
    """Token ids, vocabulary strings, decoded pieces and positions, recorded before any position is chosen."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    return [
        {"position": position, "id": int(token_id), "token": token, "piece": tokenizer.decode([token_id])}
        for position, (token_id, token) in enumerate(zip(ids, tokens))
    ]


def _max_abs(a, b) -> float:
    return float((a - b).abs().max().item())


def run_checks(model, input_ids, capture: ResidualCapture) -> dict:
    """Every numerical check, as numbers with the thresholds they are judged against."""
    import torch

    n = input_ids.shape[1]
    width = model.config.hidden_size
    expected_shape = [1, n, width]
    shapes = {name: list(tensor.shape) for name, tensor in capture.sites.items()}
    bad_shapes = {name: shape for name, shape in shapes.items() if shape != expected_shape}

    # The addition identity, per block: transformers' own order, and regrouped (differs by rounding only).
    identity_rows = []
    for block, (x, attn, mlp, out) in enumerate(
        zip(capture.block_inputs, capture.attention_writes, capture.mlp_writes, capture.block_outputs)
    ):
        if capture.residual_kind == "parallel":
            source_order = (mlp + attn) + x
        else:
            source_order = mlp + (attn + x)
        largest = max(float(t.abs().max().item()) for t in (x, attn, mlp, out))
        tolerance = IDENTITY_ABSOLUTE_TOLERANCE + IDENTITY_RELATIVE_TOLERANCE * largest
        regrouped_error = _max_abs(out, x + attn + mlp)
        identity_rows.append(
            {
                "block": block,
                "max_abs_error": regrouped_error,
                "max_abs_error_in_source_order": _max_abs(out, source_order),
                "largest_term": largest,
                "tolerance": tolerance,
                "within_tolerance": regrouped_error <= tolerance,
            }
        )
    continuity = [
        _max_abs(capture.block_inputs[i + 1], capture.block_outputs[i]) for i in range(len(capture.block_outputs) - 1)
    ]

    repeat = capture_residuals(model, input_ids)
    repeat_diff = max(_max_abs(capture.sites[name], repeat.sites[name]) for name in capture.sites)

    own = _forward(model, input_ids, output_hidden_states=True)
    hidden_states = own.hidden_states
    raw = capture.boundaries()  # (L+1, n, d)
    layers = len(capture.block_outputs)
    first_entries = [_max_abs(hidden_states[i][0], raw[i]) for i in range(min(layers, len(hidden_states)))]
    last = hidden_states[-1][0]
    head = model.get_output_embeddings()
    with torch.inference_mode():
        head_logits = head(capture.final_norm_output)
    return {
        "expected_shape": expected_shape,
        "shapes": shapes,
        "shapes_ok": not bad_shapes,
        "shape_mismatches": bad_shapes,
        "identity": {
            "equation": site_map_for(model).identity,
            "mlp_reads": site_map_for(model).mlp_reads,
            "tolerance_rule": (
                f"{IDENTITY_ABSOLUTE_TOLERANCE:g} plus {IDENTITY_RELATIVE_TOLERANCE:g} times the largest absolute "
                "entry of the block's input, writes and output"
            ),
            "blocks": identity_rows,
            "max_abs_error": max(row["max_abs_error"] for row in identity_rows),
            "max_abs_error_in_source_order": max(row["max_abs_error_in_source_order"] for row in identity_rows),
            "all_within_tolerance": all(row["within_tolerance"] for row in identity_rows),
        },
        "continuity": {
            "what": "max |blocks.(i+1).resid_in - blocks.i.resid_out|",
            "max_abs_difference": max(continuity) if continuity else 0.0,
        },
        "repeat": {
            "what": "the unchanged input captured a second time: max |difference| over every site",
            "max_abs_difference": repeat_diff,
        },
        "model_hidden_states": {
            "entries": len(hidden_states),
            "expected_entries": layers + 1,
            "entries_0_to_L_minus_1_vs_raw_boundaries_max_abs": max(first_entries) if first_entries else None,
            "last_entry_vs_final_norm_output_max_abs": _max_abs(last, capture.final_norm_output[0]),
            "last_entry_vs_raw_last_block_output_max_abs": _max_abs(last, capture.block_outputs[-1][0]),
            "conclusion": "the last hidden_states entry is final_layer_norm(raw H_L), not the raw residual state",
        },
        "logits": {
            "what": "max |model logits - output embedding(final_norm.out)|: the readout the logit lens uses",
            "max_abs_difference": _max_abs(own.logits, head_logits),
        },
    }


def cosine_or_none(a, b) -> float | None:
    """Cosine similarity of two vectors (d,), or None (JSON null) when either norm is zero."""
    norm_a = float(a.norm().item())
    norm_b = float(b.norm().item())
    if norm_a == 0.0 or norm_b == 0.0:
        return None
    return float((a @ b).item()) / (norm_a * norm_b)


def logit_lens(model, tokenizer, state, k: int = TOP_K) -> list[dict]:
    """Top-k next-token readout of one residual vector (d,): output embedding of final_layer_norm(state)."""
    import torch

    norm = model.gpt_neox.final_layer_norm
    head = model.get_output_embeddings()
    with torch.inference_mode():
        probabilities = torch.softmax(head(norm(state)), dim=-1)
    values, indices = probabilities.topk(k)
    return [
        {"id": int(i), "piece": tokenizer.decode([int(i)]), "probability": float(p)}
        for p, i in zip(values.tolist(), indices.tolist())
    ]


def observe_position(model, tokenizer, capture: ResidualCapture, position: int) -> dict:
    """Norms, consecutive differences, cosines and logit-lens readouts at one position; the final
    normalisation kept apart from the block updates."""
    names = capture.boundary_names()
    states = capture.boundaries()[:, position, :]  # (L+1, d)
    boundaries = []
    for index, (name, state) in enumerate(zip(names, states)):
        boundaries.append(
            {
                "index": index,
                "name": name,
                "label": f"H_{index}",
                "norm": float(state.norm().item()),
                "logit_lens_top": logit_lens(model, tokenizer, state),
            }
        )
    updates = []
    for block in range(len(capture.block_outputs)):
        before, after = states[block], states[block + 1]
        attn = capture.attention_writes[block][0, position]
        mlp = capture.mlp_writes[block][0, position]
        before_norm = float(before.norm().item())
        difference_norm = float((after - before).norm().item())
        updates.append(
            {
                "block": block,
                "from": names[block],
                "to": names[block + 1],
                "difference_norm": difference_norm,
                "relative_difference": difference_norm / before_norm if before_norm > 0 else None,
                "cosine_consecutive": cosine_or_none(before, after),
                # ~0 when the update is unrelated to the state it lands on; +-1 when it scales the state
                "cosine_update_with_incoming": cosine_or_none(after - before, before),
                "attn_write_norm": float(attn.norm().item()),
                "mlp_write_norm": float(mlp.norm().item()),
                "cosine_attn_mlp_writes": cosine_or_none(attn, mlp),
            }
        )
    raw_last = states[-1]
    normalised = capture.final_norm_output[0, position]
    return {
        "position": position,
        "boundaries": boundaries,
        "block_updates": updates,
        "final_normalisation": {
            "what": "final_layer_norm applied to the raw last state: a readout step, not a block update",
            "from": names[-1],
            "to": FINAL_NORM_SITE,
            "raw_norm": float(raw_last.norm().item()),
            "normalised_norm": float(normalised.norm().item()),
            "difference_norm": float((normalised - raw_last).norm().item()),
            "cosine": cosine_or_none(raw_last, normalised),
        },
    }


# ---------------------------------------------------------------------------------------------------------
# Result files.


def _float32_list(tensor) -> list:
    """Nested lists of floats printed with 9 significant digits: enough to round-trip float32 exactly."""
    flat = [float(f"{value:.9g}") for value in tensor.reshape(-1).tolist()]
    rows = tensor.shape[-1]
    table = [flat[i : i + rows] for i in range(0, len(flat), rows)]
    for size in reversed(tensor.shape[:-1]):
        table = [table[i : i + size] for i in range(0, len(table), size)] if size else []
    return table[0]


def capture_tensors_json(capture: ResidualCapture, tokens: list[dict]) -> dict:
    """The full cloned raw states and branch writes (everything but the duplicated resid_in of blocks 1..L-1,
    which equal the previous block's resid_out: the continuity check records that)."""
    names = ["blocks.0.resid_in"]
    for block in range(len(capture.block_outputs)):
        names += [site_name(block, "attn_write"), site_name(block, "mlp_write"), site_name(block, "resid_out")]
    names.append(FINAL_NORM_SITE)
    return {
        "layout": "each tensor: (batch, positions, width) nested lists; float32 values to 9 significant digits",
        "token_ids": [token["id"] for token in tokens],
        "tensors": [
            {"name": name, "shape": list(capture.sites[name].shape), "values": _float32_list(capture.sites[name])}
            for name in names
        ],
    }


def build_manifest(artifacts: VerifiedArtifacts, model, capture: ResidualCapture, command: list[str]) -> dict:
    import torch

    lock = artifacts.lock
    return {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": list(command),
        "synthetic": lock.synthetic,
        "repository": lock.repository,
        "revision": lock.revision,
        "lock": _lock_label(lock.origin),
        "files": [
            {
                "name": entry.name,
                "size": entry.size,
                "sha256": artifacts.sha256[entry.name],
                # hashed and loaded from one in-memory read; the others were checked but not read by observe
                "loaded": entry.name in OBSERVE_READS,
                "sha256_pinned_by_lock": entry.sha256 is not None,
            }
            for entry in lock.files
        ],
        "versions": library_versions(LIBRARIES),
        "platform": platform.platform(),
        "device": "cpu",
        "dtype": "float32",
        "torch_threads": torch.get_num_threads(),
        "attn_implementation": model.config._attn_implementation,
        "model_class": type(model).__name__,
        "output_embeddings": _module_path(model, model.get_output_embeddings()),
        "residual_kind": capture.residual_kind,
        "block_return_kind": capture.block_return_kind,
        "site_map": {
            "layers": LAYERS_PATH,
            "final_norm": FINAL_NORM_PATH,
            "per_block": {
                site: dict(zip(("module", "kind"), getattr(site_map_for(model), site))) for site in BLOCK_SITES
            },
        },
    }


def _lock_label(origin: str) -> str:
    """Where the lock came from, without this machine's directories: a file name or the runner's copy."""
    return Path(origin).name if Path(origin).is_file() else origin


def _module_path(model, target) -> str:
    for path, module in model.named_modules():
        if module is target:
            return path
    raise ObservationError("the output embedding is not a submodule of the model")


def check_output_directory(output_dir: Path) -> Path:
    """Refuse, before any work and without touching anything, every output path that is not a new name or an
    empty real directory: a file, a non-empty directory, a symbolic link (to anything, or dangling), a path
    whose parent is not a directory."""
    output_dir = Path(output_dir)
    try:
        status = os.lstat(output_dir)
    except (FileNotFoundError, NotADirectoryError):
        parent = Path(os.path.abspath(output_dir)).parent
        if any(os.path.lexists(above) and not above.is_dir() for above in (parent, *parent.parents)):
            raise OutputDirectoryError(f"{output_dir}: its parent {parent} is not a directory") from None
        return output_dir
    except OSError as error:
        raise OutputDirectoryError(f"{output_dir}: cannot be inspected ({error.strerror})") from None
    if stat.S_ISLNK(status.st_mode):
        raise OutputDirectoryError(
            f"{output_dir} is a symbolic link (to {os.readlink(output_dir)}); results are written only into a new "
            "name or an empty directory, never through a link: choose a new output directory"
        )
    if not stat.S_ISDIR(status.st_mode):
        raise OutputDirectoryError(f"{output_dir} exists and is not a directory; choose a new output directory")
    with os.scandir(output_dir) as entries:
        if next(entries, None) is not None:
            raise OutputDirectoryError(
                f"{output_dir} is not empty; results are never overwritten: choose a new output directory"
            )
    return output_dir


def _place(staging: Path, output_dir: Path) -> None:
    """Rename the finished staging directory to ``output_dir``: atomic, and it never replaces anything but an
    empty directory. Losing a race to another run is a clear error, never a traceback."""
    try:
        os.rename(staging, output_dir)  # POSIX: replaces an empty directory, fails on anything else
        return
    except OSError as first:
        error = first
    try:  # Windows refuses to rename onto any existing directory: remove an empty one, then rename
        check_output_directory(output_dir)
        if os.path.lexists(output_dir):
            os.rmdir(output_dir)
        os.rename(staging, output_dir)
        return
    except OutputDirectoryError as refused:
        reason = str(refused)
    except OSError as second:
        reason = f"{output_dir}: {second.strerror or error.strerror}"
    raise OutputDirectoryError(
        f"{reason} (another run wrote there first?); the results of this run were discarded and nothing there changed"
    )


def observe(model, tokenizer, *, text: str = FIXED_TEXT, position: int | None = None) -> dict:
    """Tokens first, then the capture, the checks and the observations at ``position`` (default: last)."""
    import torch

    tokens = tokenize(tokenizer, text)
    if not tokens:
        raise ObservationError("the text produced no tokens")
    chosen = len(tokens) - 1 if position is None else position
    if not -len(tokens) <= chosen < len(tokens):
        raise ObservationError(
            f"position {position} is outside the {len(tokens)} tokens (0..{len(tokens) - 1}) of {text!r}"
        )
    chosen %= len(tokens)
    input_ids = torch.tensor([[token["id"] for token in tokens]], dtype=torch.long)  # (1, n)
    capture = capture_residuals(model, input_ids)
    checks = run_checks(model, input_ids, capture)
    checks["hook_removal"] = prove_hooks_removed(model, input_ids)
    observations = {
        "text": text,
        "tokens": tokens,
        "selected_position": chosen,
        "selected_token": tokens[chosen],
        "position_rule": "the last token unless --position chose another",
        "checks": checks,
        "observation": observe_position(model, tokenizer, capture, chosen),
    }
    return {"observations": observations, "capture": capture, "tokens": tokens}


def _json_text(value: dict, compact: bool = False) -> bytes:
    text = json.dumps(value, separators=(",", ":")) if compact else json.dumps(value, indent=2)
    return (text + "\n").encode("utf-8")


def result_texts(manifest: dict, observations: dict, captures: dict) -> dict[str, bytes]:
    """The three result files' bytes. The manifest records the size and sha256 of the other two, so a reader
    can tell that the three belong to one run (the site refuses to publish them otherwise)."""
    texts = {"observations.json": _json_text(observations), "captures.json": _json_text(captures, compact=True)}
    manifest = dict(manifest, results={
        name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in texts.items()
    })
    return {"manifest.json": _json_text(manifest), **texts}


def observe_to_directory(
    verified: VerifiedArtifacts, output_dir: Path, *, command: list[str], position: int | None = None
) -> dict:
    """Load offline, capture, check and write manifest.json, observations.json and captures.json.

    An unusable ``output_dir`` is refused before anything is loaded. The files are written into a fresh
    hidden sibling directory and renamed into place, so a failure leaves no half-written result."""
    output_dir = check_output_directory(output_dir)
    model, tokenizer = load_offline(verified)
    result = observe(model, tokenizer, position=position)
    manifest = build_manifest(verified, model, result["capture"], command)
    texts = result_texts(manifest, result["observations"], capture_tensors_json(result["capture"], result["tokens"]))
    parent = Path(os.path.abspath(output_dir)).parent
    parent.mkdir(parents=True, exist_ok=True)
    # A fresh hidden sibling (mkdir honours the umask, unlike mkdtemp's private 0700 directory).
    staging = parent / f".{output_dir.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        for name in RESULT_FILES:
            (staging / name).write_bytes(texts[name])
        _place(staging, output_dir)  # refuses, naming the cause, if another run got there meanwhile
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {"manifest": json.loads(texts["manifest.json"]), "observations": result["observations"]}


def summary_lines(result: dict, output_dir: Path) -> list[str]:
    """A short human-readable account of a written result."""
    observations = result["observations"]
    checks = observations["checks"]
    manifest = result["manifest"]
    lines = []
    if manifest["synthetic"]:
        lines.append("WARNING: synthetic specimen (random weights): these are NOT Pythia-14M's numbers")
    lines.append(f"specimen {manifest['repository']} @ {manifest['revision']}")
    lines.append("tokens: " + " ".join(f"{t['position']}:{t['piece']!r}" for t in observations["tokens"]))
    lines.append(f"selected position {observations['selected_position']} {observations['selected_token']['piece']!r}")
    lines.append(
        f"identity max abs error {checks['identity']['max_abs_error']:.3g} "
        f"(within tolerance: {checks['identity']['all_within_tolerance']}); "
        f"repeat max diff {checks['repeat']['max_abs_difference']:.3g}; "
        f"block return kind {manifest['block_return_kind']}"
    )
    for row in observations["observation"]["boundaries"]:
        top = row["logit_lens_top"][0]
        lines.append(f"  {row['label']:<4} norm {row['norm']:9.4f}  top {top['piece']!r} p={top['probability']:.3g}")
    lines.append(f"wrote {', '.join(RESULT_FILES)} into {output_dir}")
    return lines


def print_summary(result: dict, output_dir: Path) -> None:
    for line in summary_lines(result, output_dir):
        print(line, file=sys.stdout)

