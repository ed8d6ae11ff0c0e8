"""The model the page describes, exported to ONNX once per weights digest, for the page's "Run it in the page".

What the graph computes, for ``input_ids`` (1, T) with T dynamic:

- inputs: ``input_ids`` (int64) and one additive input per write, ``delta_name(site)`` for ``attn_write`` and
  ``mlp_write``, each (blocks, 1, T, width) float32: block ``b``'s write becomes ``write + delta[b]`` before anything
  downstream reads it. All zeros is the clean run; ``delta = -write`` at one position zeroes that write there.
- outputs: ``logits`` (1, T, vocabulary); every block's input ``blocks.N.resid_pre``, both writes of every block
  ``blocks.N.attn_write`` / ``blocks.N.mlp_write`` (as the run carried them, delta included) and the final state
  ``blocks.{L-1}.resid_post``, each (1, T, width), named by the capture floor's ``site_name``; the logit lens at every
  boundary H_0..H_L (the final normaliser then the unembedding, as the model applies them to its last state):
  ``lens.top_ids`` (int64) and ``lens.top_logits``, each (L+1, T, ``LENS_TOP_K``).

The sites are read and edited by the capture floor's one recording mechanism (``record_sites`` with edits), from
the block table (``resolve_sites``), inside the traced forward: the graph records exactly what a capture records,
and no module path is written here. Example inputs are distinct tensors: two inputs that are the same tensor object
are merged into one graph input by the exporter, and the second write's delta would be silently ignored; the
export refuses a graph whose inputs are not exactly the ones named above.

The folder (``model.onnx``, its weights as external data ``model.onnx.data``, the ``tokenizer.json`` the model
came with, and ``manifest.json``) lives under ``<cache root>/<first 16 hex digits of the weights' sha256>``, the
cache root being ``RESIDLAB_ONNX_CACHE`` or ``.residlab-onnx/`` in the project: an unchanged model is never exported
twice, and a folder whose files no longer match its manifest (or an older format's) is exported again. The manifest
records which model it is (name and revision, or the synthetic specimen and its seed), the weights' sha256, and each
file's size and sha256.

Which model: ``page_model_source()`` takes the verified files of the lock a build uses (``residlab.pythia.cache``:
the publish workflow fetches them), else the synthetic specimen (random weights, seed 0), labelled as such.

torch, transformers and onnx are imported inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from residlab.capture.blocks import block_type_for
from residlab.capture.recording import record_sites
from residlab.capture.sites import FINAL_NORM_SITE, resolve_paths, resolve_sites, site_name
from residlab.capture.versions import library_versions

# 1: logits, block inputs, writes, final state and the logit lens' top tokens; one additive input per write.
EXPORT_FORMAT = 1
WRITE_SITES = ("attn_write", "mlp_write")
LENS_TOP_K = 5
GRAPH_FILE, DATA_FILE, TOKENIZER_FILE, MANIFEST_FILE = "model.onnx", "model.onnx.data", "tokenizer.json", "manifest.json"
EXPORTED_FILES = (GRAPH_FILE, DATA_FILE, TOKENIZER_FILE)
CACHE_ENV = "RESIDLAB_ONNX_CACHE"
DEFAULT_CACHE_ROOT = Path(__file__).resolve().parents[2] / ".residlab-onnx"
DIGEST_DIGITS = 16
# Another process exporting the same weights holds the folder's lock for about 20 s; wait at most this long.
LOCK_WAIT_SECONDS = 300
LIBRARIES = ("torch", "transformers", "onnx", "onnxscript")


class ExportError(RuntimeError):
    """The export cannot run or produced a graph that is not the one described; the message says which."""


def delta_name(site: str) -> str:
    """The graph input that is added to every block's ``site`` write, e.g. ``attn_write.delta``."""
    return f"{site}.delta"


def exported_sites(depth: int) -> list[str]:
    """The site outputs in forward order: each block's input and two writes, then the final state."""
    names = [site_name(block, site) for block in range(depth) for site in ("resid_pre", *WRITE_SITES)]
    return names + [site_name(depth - 1, "resid_post")]


def output_names(depth: int) -> list[str]:
    return ["logits", *exported_sites(depth), "lens.top_ids", "lens.top_logits"]


def input_names() -> list[str]:
    return ["input_ids", *(delta_name(site) for site in WRITE_SITES)]


@dataclass(frozen=True)
class ModelSource:
    """Which model is exported, how to build it, and what its manifest says it is."""

    name: str  # the repository
    revision: str | None
    synthetic: bool
    seed: int | None  # the synthetic specimen's seed
    weights_sha256: str
    config_sha256: str
    tokenizer_json: bytes
    build: Callable[[], object]  # the model, float32, eval mode, CPU

    @property
    def label(self) -> str:
        """What the page's first line says the model is."""
        if self.synthetic:
            seed = f"seed {self.seed}" if self.seed is not None else "seed not recorded"
            return f"{self.name}: synthetic specimen, random weights ({seed}), not Pythia-14M"
        return f"{self.name} at revision {self.revision}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def specimen_source(seed: int = 0) -> ModelSource:
    """The synthetic specimen: Pythia-14M's architecture and tokenizer, seeded random weights."""
    from residlab.pythia.specimen import SPECIMEN_REPOSITORY, build_specimen_model, specimen_files

    files = specimen_files(seed)
    return ModelSource(
        name=SPECIMEN_REPOSITORY, revision=None, synthetic=True, seed=seed,
        weights_sha256=_sha256(files["model.safetensors"]), config_sha256=_sha256(files["config.json"]),
        tokenizer_json=files["tokenizer.json"], build=lambda: build_specimen_model(seed),
    )  # fmt: skip


def verified_source(artifacts) -> ModelSource:
    """The model of verified files (``residlab.pythia.artifacts.VerifiedArtifacts``), loaded offline."""
    from residlab.pythia.load import load_offline

    lock = artifacts.lock
    return ModelSource(
        name=lock.repository, revision=lock.revision, synthetic=lock.synthetic, seed=None,
        weights_sha256=artifacts.sha256["model.safetensors"], config_sha256=artifacts.sha256["config.json"],
        tokenizer_json=artifacts.bytes_for("tokenizer.json"), build=lambda: load_offline(artifacts)[0],
    )  # fmt: skip


def page_model_source(environ: dict | None = None) -> ModelSource:
    """The verified files of the lock a build uses, when it has them; else the synthetic specimen (seed 0)."""
    from residlab.pythia.cache import active_lock, verified_files

    verified = verified_files(active_lock(environ), environ)
    return specimen_source(0) if verified is None else verified_source(verified)


def _adding(delta):
    """An edit adding ``delta`` (1, T, width) to a write: a new tensor, the model's own left as it was."""
    return lambda tensor: tensor + delta


def exportable(model):
    """``model`` wrapped as the module the graph is traced from (see the module's manual)."""
    import torch

    block_type = block_type_for(model.config)
    depth = model.config.num_hidden_layers
    sites = resolve_sites(model, block_type, depth)
    [(_, final_norm, _)] = resolve_paths(model, [(FINAL_NORM_SITE, block_type.final_norm, "output")])
    unembedding = model.get_output_embeddings()
    kept = exported_sites(depth)

    class Exportable(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attn_delta, mlp_delta):
            deltas = dict(zip(WRITE_SITES, (attn_delta, mlp_delta)))
            edits = {site_name(block, site): _adding(deltas[site][block]) for block in range(depth) for site in WRITE_SITES}
            with record_sites(sites, edits) as recorder:
                logits = self.model(input_ids=input_ids, use_cache=False).logits
            records = [recorder.records[name] for name in kept]
            boundaries = torch.cat([records[3 * block] for block in range(depth)] + [records[-1]], dim=0)
            lens = unembedding(final_norm(boundaries))
            top = torch.topk(lens, LENS_TOP_K, dim=-1)
            return (logits, *records, top.indices, top.values)

    return Exportable().eval()


@contextlib.contextmanager
def _quiet_exporter():
    """The exporter's progress lines, its notes that torchvision is absent and its deprecation warnings say nothing
    about the graph; a page render prints no warning of any kind."""
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "torch.onnx._internal.exporter._registration")]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        with warnings.catch_warnings(), open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def export_graph(model, folder: Path) -> None:
    """Write ``model.onnx`` and ``model.onnx.data`` for ``model`` into ``folder``; refuse a graph whose inputs or
    outputs are not the ones described."""
    import onnx
    import torch

    depth, width = model.config.num_hidden_layers, model.config.hidden_size
    steps = 7  # any length above 1 traces the same graph; T stays symbolic
    ids = torch.zeros((1, steps), dtype=torch.int64)
    zeros = torch.zeros((depth, 1, steps, width), dtype=torch.float32)
    length = torch.export.Dim("T", min=1, max=getattr(model.config, "max_position_embeddings", None) or 2048)
    with _quiet_exporter():
        # Distinct tensors: the same object passed twice becomes one graph input (the second delta ignored).
        torch.onnx.export(
            exportable(model), (ids, zeros, zeros.clone()), str(folder / GRAPH_FILE), dynamo=True, external_data=True,
            input_names=input_names(), output_names=output_names(depth),
            dynamic_shapes=({1: length}, {2: length}, {2: length}), verbose=False,
        )  # fmt: skip
    graph = onnx.load(str(folder / GRAPH_FILE), load_external_data=False).graph
    found = ([value.name for value in graph.input], [value.name for value in graph.output])
    if found != (input_names(), output_names(depth)):
        raise ExportError(f"the exported graph's inputs {found[0]} and outputs are not the ones described")
    if not (folder / DATA_FILE).is_file():
        raise ExportError(f"the exporter wrote no {DATA_FILE}: the weights were not stored as external data")


def _identity(source: ModelSource) -> dict:
    """Which model the manifest says it is: the graph depends on the weights and the configuration alone, so the
    same weights reached another way (the specimen built in memory, or its six files verified) share one export,
    and this part of its manifest follows the source that asked last."""
    return {"name": source.name, "revision": source.revision, "synthetic": source.synthetic, "seed": source.seed,
            "label": source.label}  # fmt: skip


def _manifest(source: ModelSource, model, folder: Path) -> dict:
    files = []
    for name in EXPORTED_FILES:
        data = (folder / name).read_bytes()
        files.append({"name": name, "size": len(data), "sha256": _sha256(data)})
    config = model.config
    return {
        "format": EXPORT_FORMAT,
        "model": _identity(source),
        "weights_sha256": source.weights_sha256,
        "config_sha256": source.config_sha256,
        "files": files,
        "depth": config.num_hidden_layers,
        "width": config.hidden_size,
        "vocabulary": config.vocab_size,
        "lens_top_k": LENS_TOP_K,
        "inputs": input_names(),
        "outputs": output_names(config.num_hidden_layers),
        "versions": library_versions(LIBRARIES),
    }


def manifest_problem(folder: Path, source: ModelSource) -> str | None:
    """Why ``folder`` is not this model's current export (None when it is): a missing or changed file, or a
    manifest of another model or format."""
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return f"{MANIFEST_FILE} unreadable ({error})"
    expected = {"format": EXPORT_FORMAT, "weights_sha256": source.weights_sha256, "config_sha256": source.config_sha256}
    for key, value in expected.items():
        if manifest.get(key) != value:
            return f"{MANIFEST_FILE} records {key} {manifest.get(key)!r}, not {value!r}"
    for entry in manifest.get("files", []):
        path = folder / str(entry.get("name"))
        if not path.is_file() or path.stat().st_size != entry.get("size") or _sha256(path.read_bytes()) != entry.get("sha256"):
            return f"{entry.get('name')} differs from its manifest entry"
    if sorted(entry.get("name") for entry in manifest.get("files", [])) != sorted(EXPORTED_FILES):
        return f"{MANIFEST_FILE} does not list {', '.join(EXPORTED_FILES)}"
    return None


def cache_root(environ: dict | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(environ[CACHE_ENV]) if environ.get(CACHE_ENV) else DEFAULT_CACHE_ROOT


@contextlib.contextmanager
def _held(lock_path: Path):
    """An exclusive lock on ``lock_path``, waited for at most ``LOCK_WAIT_SECONDS``: two test suites or a render
    and a test asking for the same export at once export it once."""
    with open(lock_path, "a") as handle:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ExportError(f"{lock_path} stayed locked for {LOCK_WAIT_SECONDS} s: another export is stuck") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def exported(source: ModelSource, environ: dict | None = None) -> Path:
    """The folder holding ``source``'s export, exported now only if no current one is cached (see the manual)."""
    root = cache_root(environ)
    root.mkdir(parents=True, exist_ok=True)
    folder = root / source.weights_sha256[:DIGEST_DIGITS]
    with _held(root / f"{folder.name}.lock"):
        if folder.is_dir() and manifest_problem(folder, source) is None:
            manifest = read_manifest(folder)
            if manifest["model"] != _identity(source):
                _write_manifest(folder, {**manifest, "model": _identity(source)})
            return folder
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root))
        try:
            model = source.build()
            export_graph(model, staging)
            (staging / TOKENIZER_FILE).write_bytes(source.tokenizer_json)
            _write_manifest(staging, _manifest(source, model, staging))
            if folder.exists():
                shutil.rmtree(folder)  # a stale export of the same weights: an older format, or changed files
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return folder


def _write_manifest(folder: Path, manifest: dict) -> None:
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def read_manifest(folder: Path) -> dict:
    return json.loads((Path(folder) / MANIFEST_FILE).read_text(encoding="utf-8"))
