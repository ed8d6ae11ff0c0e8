"""Observe the specimen's residual stream: capture every residual boundary and branch write, check them,
observe every position, and write the three result files.

The sites are the GPT-NeoX block table's (``residlab.capture.blocks``, read from ``GPTNeoXLayer.forward`` in
both supported releases, 4.57.1 and 5.24.0): the block input is the layer's first positional argument, the
two branch writes at the addition boundary are the outputs of ``post_attention_dropout`` and
``post_mlp_dropout`` (identities in evaluation mode), and the block output is the layer's return value, a
tuple ``(hidden_states, ...)`` in 4.57.1, a bare tensor in 5.x. The model's own ``output_hidden_states``
replaces its last entry by ``final_layer_norm`` of the last block's output, so the raw last state is captured
from the last layer itself. Site names and their resolution are the capture floor's (``residlab.capture.sites``),
the hooks its ``record_sites``, the output rule its ``outdir``.

torch and transformers are imported inside the functions that need them, so the runner's ``--plan`` works
before anything is installed. Every tensor shape is documented as (batch, positions, width) = (1, n, d).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from residlab.capture.vectors import cosine
from residlab.capture.blocks import IDENTITY_ABSOLUTE, IDENTITY_RELATIVE, block_type_for
from residlab.capture.outdir import check_output_directory, write_directory
from residlab.capture.recording import SiteFiredTwice, hook_snapshot, record_sites
from residlab.capture.versions import library_versions
from residlab.capture.sites import (
    EMBEDDING_SITE, FINAL_NORM_SITE, SiteError, block_site_names, module_path, resolve_sites, site_name, site_table,
)
from residlab.pythia.artifacts import OBSERVE_READS, VerifiedArtifacts
from residlab.pythia.load import ObservationError, load_offline

FIXED_TEXT = "The small red boat crossed the lake."
TOP_K = 5
RESULT_FILES = ("manifest.json", "observations.json", "captures.json")
# observations.json's layout; a reader of the files refuses any other, naming the command that refreshes them.
# 2: every position observed ("positions"), not the selected one alone. 3: the block boundaries renamed to the
# names TransformerLens and the lesson use (blocks.i.resid_pre, blocks.i.resid_post).
OBSERVATIONS_SCHEMA = 3
OBSERVATIONS_LAYOUT = "every position observed, block boundaries named resid_pre and resid_post"  # as refusals say
# The libraries whose versions the manifest records: what the observation ran on.
LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors", "huggingface_hub")


@contextlib.contextmanager
def capture_sites(model):
    """Record every site of the model's block table and its final normaliser's output during the block
    (``recording.record_sites``): yield the ``SiteRecorder``, whose records are detached CPU clones (1, n, d);
    exactly its hooks are removed on exit, also when the forward raised. Hooks other code registered are left
    as they were. A site the model lacks is named before any hook is registered."""
    try:
        sites = resolve_sites(model, block_type_for(model.config), model.config.num_hidden_layers, final_norm=True)
        with record_sites(sites) as recorder:
            yield recorder
    except SiteError as error:
        raise ObservationError(str(error)) from None
    except SiteFiredTwice as error:
        # One capture = one forward: a site firing twice means the table no longer matches the model.
        raise ObservationError(f"hook {error}") from None


# ---------------------------------------------------------------------------------------------------------
# The capture itself.


@dataclass
class ResidualCapture:
    """One forward's raw residual boundaries and branch writes; every tensor (1, n, d), float32, on CPU."""

    block_input: object  # H_0 = blocks.0.resid_pre (the embedding, as the first block receives it)
    block_inputs: list  # blocks.i.resid_pre for every block (for the continuity check)
    block_outputs: list  # raw H_1..H_L = blocks.i.resid_post
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
        return [EMBEDDING_SITE] + [site_name(i, "resid_post") for i in range(len(self.block_outputs))]


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
    names = block_site_names(model.config.num_hidden_layers)
    return_kinds = {recorder.return_kinds[name] for name in names["resid_post"]}
    if len(return_kinds) != 1:
        raise ObservationError(f"blocks returned mixed kinds: {sorted(return_kinds)}")
    sites = {name: recorder.records[name] for name in recorder.names}
    block_inputs = [sites[name] for name in names["resid_pre"]]
    return ResidualCapture(
        block_input=block_inputs[0],
        block_inputs=block_inputs,
        block_outputs=[sites[name] for name in names["resid_post"]],
        final_norm_output=sites[FINAL_NORM_SITE],
        attention_writes=[sites[name] for name in names["attn_write"]],
        mlp_writes=[sites[name] for name in names["mlp_write"]],
        block_return_kind=return_kinds.pop(),
        residual_kind=block_type_for(model.config).sites.residual_kind,
        sites=sites,
    )


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

    sites = block_type_for(model.config).sites
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
        tolerance = IDENTITY_ABSOLUTE + IDENTITY_RELATIVE * largest
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
            "equation": sites.identity,
            "mlp_reads": sites.mlp_reads,
            "tolerance_rule": (
                f"{IDENTITY_ABSOLUTE:g} plus {IDENTITY_RELATIVE:g} times the largest absolute "
                "entry of the block's input, writes and output"
            ),
            "blocks": identity_rows,
            "max_abs_error": max(row["max_abs_error"] for row in identity_rows),
            "max_abs_error_in_source_order": max(row["max_abs_error_in_source_order"] for row in identity_rows),
            "all_within_tolerance": all(row["within_tolerance"] for row in identity_rows),
        },
        "continuity": {
            "what": "max |blocks.(i+1).resid_pre - blocks.i.resid_post|",
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


def logit_lens(model, tokenizer, state, k: int = TOP_K) -> list[dict]:
    """Top-k next-token readout of one residual vector (d,): output embedding of final_layer_norm(state)."""
    import torch

    norm = model.get_submodule(block_type_for(model.config).final_norm)
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
                "cosine_consecutive": cosine(before, after),
                # ~0 when the update is unrelated to the state it lands on; +-1 when it scales the state
                "cosine_update_with_incoming": cosine(after - before, before),
                "attn_write_norm": float(attn.norm().item()),
                "mlp_write_norm": float(mlp.norm().item()),
                "cosine_attn_mlp_writes": cosine(attn, mlp),
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
            "cosine": cosine(raw_last, normalised),
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
    """The full cloned raw states and branch writes (everything but the duplicated resid_pre of blocks 1..L-1,
    which equal the previous block's resid_post: the continuity check records that)."""
    names = [EMBEDDING_SITE]
    for block in range(len(capture.block_outputs)):
        names += [site_name(block, "attn_write"), site_name(block, "mlp_write"), site_name(block, "resid_post")]
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
    block_type = block_type_for(model.config)
    try:
        output_embeddings = module_path(model, model.get_output_embeddings())
    except SiteError as error:
        raise ObservationError(f"the output embedding: {error}") from None
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
        "output_embeddings": output_embeddings,
        "residual_kind": capture.residual_kind,
        "block_return_kind": capture.block_return_kind,
        "site_map": {
            "layers": block_type.layers,
            "final_norm": block_type.final_norm,
            "per_block": site_table(block_type),
        },
    }


def _lock_label(origin: str) -> str:
    """Where the lock came from, without this machine's directories: a file name or the runner's copy."""
    return Path(origin).name if Path(origin).is_file() else origin


def observe(model, tokenizer, *, text: str = FIXED_TEXT, position: int | None = None) -> dict:
    """Tokens first, then the capture, the checks and the observation of every position; ``position`` (default:
    the last) is the one selected for the summary and the page's tables."""
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
        "schema": OBSERVATIONS_SCHEMA,
        "text": text,
        "tokens": tokens,
        "selected_position": chosen,
        "selected_token": tokens[chosen],
        "position_rule": "the last token unless --position chose another; every position is observed",
        "checks": checks,
        "positions": [observe_position(model, tokenizer, capture, position) for position in range(len(tokens))],
    }
    return {"observations": observations, "capture": capture, "tokens": tokens}


def observations_schema_problem(observations: dict, manifest: dict) -> str | None:
    """Why ``observations`` is not of this layout (written by an older observation: before every position was
    observed, or before the boundaries took their present names), saying how to write it afresh: the command its
    manifest records, into an empty folder; None when it is."""
    found, command = observations.get("schema", 1), manifest.get("command")
    command = " ".join(map(str, command)) if isinstance(command, list) else "the observation"
    return None if found == OBSERVATIONS_SCHEMA else (
        f"schema {found}, not {OBSERVATIONS_SCHEMA} ({OBSERVATIONS_LAYOUT}): refresh it by running `{command}` "
        "again into an empty folder")


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

    An unusable ``output_dir`` is refused before anything is loaded; the files are written all at once or not
    at all (``capture.outdir.write_directory``)."""
    output_dir = check_output_directory(output_dir)
    model, tokenizer = load_offline(verified)
    result = observe(model, tokenizer, position=position)
    manifest = build_manifest(verified, model, result["capture"], command)
    texts = result_texts(manifest, result["observations"], capture_tensors_json(result["capture"], result["tokens"]))
    write_directory(output_dir, {name: texts[name] for name in RESULT_FILES})
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
    for row in observations["positions"][observations["selected_position"]]["boundaries"]:
        top = row["logit_lens_top"][0]
        lines.append(f"  {row['label']:<4} norm {row['norm']:9.4f}  top {top['piece']!r} p={top['probability']:.3g}")
    lines.append(f"wrote {', '.join(RESULT_FILES)} into {output_dir}")
    return lines


def print_summary(result: dict, output_dir: Path) -> None:
    for line in summary_lines(result, output_dir):
        print(line, file=sys.stdout)

