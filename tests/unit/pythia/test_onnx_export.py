"""The page's ONNX export against the capture floor's own recording: every site, the logits and the logit lens, on
the clean run and with each kind of write zeroed at one position through its additive input; float32 within 1e-5.

The export of the specimen (Pythia-14M's shape, random weights) is made once and cached by its weights' digest in
the project's ``.residlab-onnx`` (``RESIDLAB_ONNX_CACHE``), so a second suite or a second run reuses it. The planted
fault (block 0's MLP delta ignored, the symptom of the same-tensor trap) is exported from a small GPT-NeoX in a
folder of its own and must fail the same comparison.
"""

from __future__ import annotations

import itertools
import json
import shutil

import numpy as np
import pytest
import torch

from residlab.capture.blocks import SPECIMEN_CONFIGS, block_type_for
from residlab.capture.patching import zeroed
from residlab.capture.recording import record_sites
from residlab.capture.sites import FINAL_NORM_SITE, resolve_paths, resolve_sites, site_name
from residlab.pythia import onnx_export
from residlab.pythia.observe import capture_residuals

TOLERANCE = 1e-5
# Held out: none of these is the observation's fixed text or a glossary example; lengths 1 to about 20 tokens.
PROMPTS = (
    "Paris",
    "The cat sat on the mat because it was warm.",
    "In 1987, 3 × 4 = 12 — naïve café owners said “nope”.",
    "def add(a, b):\n    return a + b  # two spaces, then a tab:\t",
)


@pytest.fixture(scope="session")
def specimen_export():
    """The page's export of the specimen (seed 0): its folder, the model and its tokenizer."""
    from tokenizers import Tokenizer

    source = onnx_export.specimen_source(0)
    folder = onnx_export.exported(source)
    return folder, source.build(), Tokenizer.from_str(source.tokenizer_json.decode("utf-8"))


def ort_session(folder):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(str(folder / onnx_export.GRAPH_FILE), options, providers=["CPUExecutionProvider"])


def run_graph(session, ids, deltas):
    names = [output.name for output in session.get_outputs()]
    feeds = {"input_ids": ids.numpy(), **{onnx_export.delta_name(site): deltas[site] for site in onnx_export.WRITE_SITES}}
    return dict(zip(names, session.run(None, feeds)))


def recorded(model, ids, edits=None):
    """The capture floor's recording of every site (edited where ``edits`` says), the logits and the lens."""
    block_type = block_type_for(model.config)
    depth = model.config.num_hidden_layers
    sites = resolve_sites(model, block_type, depth)
    with torch.inference_mode(), record_sites(sites, edits) as recorder:
        logits = model(input_ids=ids, use_cache=False).logits
    values = {name: recorder.records[name] for name in onnx_export.exported_sites(depth)}
    [(_, final_norm, _)] = resolve_paths(model, [(FINAL_NORM_SITE, block_type.final_norm, "output")])
    boundaries = [recorder.records[site_name(block, "resid_pre")] for block in range(depth)]
    boundaries.append(recorder.records[site_name(depth - 1, "resid_post")])
    with torch.inference_mode():
        lens = model.get_output_embeddings()(final_norm(torch.cat(boundaries)))
    return {"logits": logits, **values, "lens": lens}


def largest_differences(graph: dict, reference: dict) -> dict:
    """Output name -> largest |graph - reference|; the lens compared at the ids the graph chose."""
    differences = {name: float(np.abs(graph[name] - reference[name].numpy()).max()) for name in reference if name != "lens"}
    chosen = np.take_along_axis(reference["lens"].numpy(), graph["lens.top_ids"], axis=-1)
    differences["lens.top_logits"] = float(np.abs(graph["lens.top_logits"] - chosen).max())
    best = reference["lens"].numpy().max(axis=-1)
    differences["lens.top_ids"] = float(np.abs(graph["lens.top_logits"][..., 0] - best).max())  # the top one is the best
    return differences


def compare_zeroed(session, model, ids, block, site, position):
    clean = recorded(model, ids)
    depth, width = model.config.num_hidden_layers, model.config.hidden_size
    deltas = {name: np.zeros((depth, 1, ids.shape[1], width), dtype=np.float32) for name in onnx_export.WRITE_SITES}
    name = site_name(block, site)
    deltas[site][block, 0, position] = -clean[name][0, position].numpy()
    patched = recorded(model, ids, {name: zeroed(position)})
    return largest_differences(run_graph(session, ids, deltas), patched), clean, patched


def test_every_site_and_the_lens_match_the_recording_on_prompts_of_several_lengths(specimen_export):
    folder, model, tokenizer = specimen_export
    session = ort_session(folder)
    lengths = set()
    for prompt in PROMPTS:
        ids = torch.tensor([tokenizer.encode(prompt, add_special_tokens=False).ids])
        lengths.add(ids.shape[1])
        depth, width = model.config.num_hidden_layers, model.config.hidden_size
        zeros = {site: np.zeros((depth, 1, ids.shape[1], width), dtype=np.float32) for site in onnx_export.WRITE_SITES}
        graph = run_graph(session, ids, zeros)
        differences = largest_differences(graph, recorded(model, ids))
        assert max(differences.values()) <= TOLERANCE, (prompt, {k: v for k, v in differences.items() if v > TOLERANCE})
        # The observation's own capture (the one Part 4 shows) agrees too: the same recording, the same sites.
        capture = capture_residuals(model, ids)
        for name in onnx_export.exported_sites(depth):
            assert np.abs(graph[name] - capture.sites[name].numpy()).max() <= TOLERANCE, (prompt, name)
    assert len(lengths) == len(PROMPTS) and min(lengths) == 1


@pytest.mark.parametrize("site", onnx_export.WRITE_SITES)
def test_a_write_zeroed_through_its_additive_input_matches_the_patched_recording(specimen_export, site):
    folder, model, tokenizer = specimen_export
    session = ort_session(folder)
    ids = torch.tensor([tokenizer.encode(PROMPTS[1], add_special_tokens=False).ids])
    for block, position in ((0, 0), (2, 4), (model.config.num_hidden_layers - 1, ids.shape[1] - 1)):
        differences, clean, patched = compare_zeroed(session, model, ids, block, site, position)
        assert max(differences.values()) <= TOLERANCE, (site, block, position, differences)
        # The intervention did something the comparison could miss: its effect is far above the tolerance.
        assert (patched["logits"] - clean["logits"]).abs().max() > 1e3 * TOLERANCE


def test_the_manifest_says_which_model_and_pins_every_file(specimen_export):
    folder, _, _ = specimen_export
    manifest = onnx_export.read_manifest(folder)
    source = onnx_export.specimen_source(0)
    assert manifest["model"] == {
        "name": "residlab/synthetic-gpt-neox-specimen", "revision": None, "synthetic": True, "seed": 0,
        "label": "residlab/synthetic-gpt-neox-specimen: synthetic specimen, random weights (seed 0), not Pythia-14M",
    }  # fmt: skip
    assert manifest["weights_sha256"] == source.weights_sha256 and folder.name == source.weights_sha256[:16]
    assert [entry["name"] for entry in manifest["files"]] == list(onnx_export.EXPORTED_FILES)
    assert onnx_export.manifest_problem(folder, source) is None
    assert manifest["inputs"] == ["input_ids", "attn_write.delta", "mlp_write.delta"]
    assert manifest["outputs"][:4] == ["logits", "blocks.0.resid_pre", "blocks.0.attn_write", "blocks.0.mlp_write"]
    assert manifest["outputs"][-3:] == ["blocks.5.resid_post", "lens.top_ids", "lens.top_logits"]


def test_an_unchanged_model_is_not_exported_again(specimen_export, monkeypatch):
    folder, _, _ = specimen_export
    before = (folder / onnx_export.GRAPH_FILE).stat().st_mtime_ns

    def refused(*args, **kwargs):
        raise AssertionError("exported again although the cached export is current")

    monkeypatch.setattr(onnx_export, "export_graph", refused)
    assert onnx_export.exported(onnx_export.specimen_source(0)) == folder
    assert (folder / onnx_export.GRAPH_FILE).stat().st_mtime_ns == before


def test_a_changed_file_or_other_weights_make_the_cached_export_stale(specimen_export, tmp_path):
    folder, _, _ = specimen_export
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    source = onnx_export.specimen_source(0)
    assert onnx_export.manifest_problem(copy, onnx_export.specimen_source(1)).startswith("manifest.json records weights_sha256")
    with open(copy / onnx_export.DATA_FILE, "r+b") as handle:
        handle.seek(4096)
        handle.write(b"\x7f")
    assert onnx_export.manifest_problem(copy, source) == "model.onnx.data differs from its manifest entry"
    manifest = json.loads((copy / onnx_export.MANIFEST_FILE).read_text())
    (copy / onnx_export.MANIFEST_FILE).write_text(json.dumps({**manifest, "format": 0}))
    assert onnx_export.manifest_problem(copy, source) == "manifest.json records format 0, not 1"


def small_source(seed: int = 1):
    """A small GPT-NeoX (the capture tests' configuration), random weights: quick to export."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(seed)
    model = GPTNeoXForCausalLM(GPTNeoXConfig.from_dict(dict(SPECIMEN_CONFIGS["gpt_neox"]), attn_implementation="eager"))
    model = model.eval()
    return onnx_export.ModelSource(
        name="small GPT-NeoX", revision=None, synthetic=True, seed=seed, weights_sha256=f"{seed:064x}",
        config_sha256="0" * 64, tokenizer_json=b"{}", build=lambda: model,
    )  # fmt: skip


def test_a_planted_ignored_delta_fails_the_comparison(tmp_path, monkeypatch):
    """Block 0's MLP delta dropped from the graph (the input still there, used by the other blocks): the clean run
    still agrees, the zeroed write does not. The unplanted export passes the same comparison at every write
    (``test_a_write_zeroed_through_its_additive_input_matches_the_patched_recording``), so it is not exported again."""
    source = small_source()
    model = source.build()
    ids = torch.tensor([[5, 17, 3, 42, 8, 60]])
    original, calls = onnx_export._adding, itertools.count()
    # Edits are made block by block, attention then MLP: the second is block 0's MLP write.
    monkeypatch.setattr(onnx_export, "_adding", lambda delta: (lambda tensor: tensor) if next(calls) == 1 else original(delta))
    faulty = onnx_export.exported(source, {onnx_export.CACHE_ENV: str(tmp_path / "faulty")})
    session = ort_session(faulty)
    depth, width = model.config.num_hidden_layers, model.config.hidden_size
    zeros = {site: np.zeros((depth, 1, ids.shape[1], width), dtype=np.float32) for site in onnx_export.WRITE_SITES}
    assert max(largest_differences(run_graph(session, ids, zeros), recorded(model, ids)).values()) <= TOLERANCE
    differences, _, _ = compare_zeroed(session, model, ids, 0, "mlp_write", 2)
    assert differences["logits"] > 1e3 * TOLERANCE and differences["blocks.0.mlp_write"] > 1e3 * TOLERANCE


def test_zeroing_a_write_in_the_graph_removes_what_the_audit_says(specimen_export, specimen_dir):
    """The page's intervention is the audit's total effect, M(clean) - M(clean, w zeroed) with M the logit
    difference of two tokens at the last position: the graph's value agrees with ``residlab audit``'s within 1e-4."""
    from residlab import audit

    folder, model, tokenizer = specimen_export
    session = ort_session(folder)
    subject = audit.load_model_directory(specimen_dir)
    clean = tokenizer.encode("The capital of France is", add_special_tokens=False).ids
    corrupt = tokenizer.encode("The capital of Spain is", add_special_tokens=False).ids
    target, rival = (tokenizer.encode(word, add_special_tokens=False).ids[0] for word in (" Paris", " Madrid"))
    sites = [audit.DeclaredSite("attn", 1, 2), audit.DeclaredSite("mlp", 3, len(clean) - 1),
             audit.DeclaredSite("attn", 5, len(clean) - 1)]  # fmt: skip
    packet = audit.build_packet(subject, audit.AuditInput(tuple(clean), tuple(corrupt), target, rival), sites)
    results = {(result["site"], result["position"]): result["total_effect"]["value"]
               for result in packet["measurement"]["results"]}  # fmt: skip
    ids = torch.tensor([clean])
    depth, width = model.config.num_hidden_layers, model.config.hidden_size
    zeros = {site: np.zeros((depth, 1, len(clean), width), dtype=np.float32) for site in onnx_export.WRITE_SITES}
    graph_clean = run_graph(session, ids, zeros)

    def metric(logits):
        return float(logits[0, -1, target]) - float(logits[0, -1, rival])

    for declared in sites:
        site = declared.name.split(".")[-1]
        deltas = {name: values.copy() for name, values in zeros.items()}
        deltas[site][declared.block, 0, declared.position] = -graph_clean[declared.name][0, declared.position]
        effect = metric(graph_clean["logits"]) - metric(run_graph(session, ids, deltas)["logits"])
        assert abs(effect - results[(declared.name, declared.position)]) <= 1e-4, declared.label
        assert abs(effect) > 1e-3  # an effect the comparison could get wrong


def test_the_tokenizer_strings_hold_the_tokenizer_glossarys_own_examples():
    from residlab.pythia.onnx_reference import GLOSSARY_EXAMPLES, TOKENIZER_STRINGS

    page = (onnx_export.DEFAULT_CACHE_ROOT.parent / "glossary" / "tokenizer.qmd").read_text(encoding="utf-8")
    assert all(f'"{example}"' in page for example in GLOSSARY_EXAMPLES)
    assert set(GLOSSARY_EXAMPLES) <= set(TOKENIZER_STRINGS) and len(TOKENIZER_STRINGS) >= 300


def test_a_build_with_verified_files_exports_them_under_their_own_name(specimen_dir, specimen_lock_path, specimen_export):
    """The published build's path: the files of the lock the build uses, verified (here the specimen's six files
    under their own lock), found by ``page_model_source`` and keyed by their weights' digest, the same digest as
    the specimen built in memory, so those two share one export."""
    from residlab.pythia import cache

    environ = {cache.LOCK_ENV: str(specimen_lock_path), cache.ARTIFACTS_ENV: str(specimen_dir)}
    source = onnx_export.page_model_source(environ)
    lock = cache.active_lock(environ)
    assert (source.name, source.revision, source.synthetic) == (lock.repository, lock.revision, True)
    assert source.weights_sha256 == lock.file("model.safetensors").sha256 == onnx_export.specimen_source(0).weights_sha256
    folder, _, _ = specimen_export
    before = (folder / onnx_export.GRAPH_FILE).stat().st_mtime_ns
    try:
        assert onnx_export.exported(source) == folder  # cached: the same weights are not exported again
        assert onnx_export.read_manifest(folder)["model"]["revision"] == lock.revision  # but named as asked
    finally:
        onnx_export.exported(onnx_export.specimen_source(0))
    assert onnx_export.read_manifest(folder)["model"]["revision"] is None
    assert (folder / onnx_export.GRAPH_FILE).stat().st_mtime_ns == before
    real = onnx_export.ModelSource(name="EleutherAI/pythia-14m", revision="f" * 40, synthetic=False, seed=None,
                                   weights_sha256="0" * 64, config_sha256="0" * 64, tokenizer_json=b"{}",
                                   build=lambda: None)  # fmt: skip
    assert real.label == f"EleutherAI/pythia-14m at revision {'f' * 40}"
