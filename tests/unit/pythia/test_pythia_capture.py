"""The residual capture on the synthetic GPT-NeoX specimen: hook sites, shapes, the addition identity, the
model's own hidden_states, and hook removal (also when the forward raises).

These tests run under the project's transformers pin and, in CI's second environment, under 4.57.1: every
assertion that differs between the two (tuple vs tensor block outputs, embed_out vs lm_head) asks the
installed version which it should see.
"""

from __future__ import annotations

import inspect
import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from residlab.capture.vectors import cosine
from residlab.capture import sites as capture_sites_module  # noqa: E402
from residlab.capture.blocks import BLOCK_TYPES  # noqa: E402
from residlab.capture.recording import hook_snapshot  # noqa: E402
from residlab.capture.sites import BLOCK_SITES, module_path  # noqa: E402
from residlab.pythia import observe  # noqa: E402
from residlab.pythia.artifacts import verify_artifacts  # noqa: E402
from residlab.pythia.load import load_offline  # noqa: E402
from residlab.pythia.lock import load_lock  # noqa: E402
from residlab.pythia.specimen import PINNED_CONFIG, build_specimen_model  # noqa: E402

TRANSFORMERS_MAJOR = int(transformers.__version__.split(".")[0])
EXPECTED_RETURN_KIND = "tuple" if TRANSFORMERS_MAJOR < 5 else "tensor"
EXPECTED_HEAD = "embed_out" if TRANSFORMERS_MAJOR < 5 else "lm_head"


@pytest.fixture(scope="module")
def specimen_model():
    return build_specimen_model(seed=0)


@pytest.fixture(scope="module")
def tokenizer(specimen_dir, specimen_lock_path):
    _, tokenizer = load_offline(verify_artifacts(specimen_dir, load_lock(specimen_lock_path)))
    return tokenizer


@pytest.fixture(scope="module")
def input_ids(tokenizer):
    tokens = observe.tokenize(tokenizer)
    return torch.tensor([[token["id"] for token in tokens]])  # (1, n)


def small_model(parallel: bool, seed: int = 3):
    """A two-block GPT-NeoX (width 32) with random weights, to exercise both block types."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    config = GPTNeoXConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_hidden_layers=2,
        rotary_pct=0.25,
        use_parallel_residual=parallel,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    return GPTNeoXForCausalLM(config).eval()


def test_site_map_matches_the_installed_transformers_source():
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXLayer

    source = inspect.getsource(GPTNeoXLayer.forward)
    # The writes are the dropout outputs, added with the block input exactly as the site map's identity says.
    assert "attn_output = self.post_attention_dropout(attn_output)" in source
    assert "mlp_output = self.post_mlp_dropout(mlp_output)" in source
    assert "mlp_output + attn_output + hidden_states" in source  # parallel
    assert "self.mlp(self.post_attention_layernorm(hidden_states))" in source  # parallel MLP reads the input
    assert "attn_output = attn_output + hidden_states" in source  # sequential
    assert "self.mlp(self.post_attention_layernorm(attn_output))" in source  # sequential MLP reads in + attn
    layer = small_model(parallel=True).gpt_neox.layers[0]
    for site_map in (BLOCK_TYPES["gpt_neox"].sites, BLOCK_TYPES["gpt_neox_sequential"].sites):
        for site in BLOCK_SITES:
            relative, kind = getattr(site_map, site)
            assert kind in ("input", "output")
            assert relative == "" or isinstance(layer.get_submodule(relative), torch.nn.Dropout)


def test_load_offline_gives_float32_eager_eval_cpu_model_and_fast_tokenizer(specimen_dir, specimen_lock_path, specimen_model):
    model, tokenizer = load_offline(verify_artifacts(specimen_dir, load_lock(specimen_lock_path)))
    assert not model.training
    assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}
    assert {parameter.device.type for parameter in model.parameters()} == {"cpu"}
    assert model.config._attn_implementation == "eager"
    assert model.config.use_cache is False
    assert tokenizer.is_fast
    assert module_path(model, model.get_output_embeddings()) == EXPECTED_HEAD
    # The F16 file widened to float32 is exactly the in-memory specimen.
    ids = torch.tensor([[510, 1355, 2502]])
    with torch.inference_mode():
        assert torch.equal(model(ids).logits, specimen_model(ids).logits)


def test_tokens_are_recorded_with_ids_pieces_and_positions(tokenizer):
    tokens = observe.tokenize(tokenizer)
    assert [token["position"] for token in tokens] == list(range(len(tokens)))
    assert "".join(token["piece"] for token in tokens) == observe.FIXED_TEXT
    assert len(tokens) > len(observe.FIXED_TEXT.split())  # words are not tokens: "lake." is two
    assert tokens[-1]["piece"] == "."


def test_capture_has_every_site_with_shape_1_n_128_and_the_installed_return_kind(specimen_model, input_ids):
    capture = observe.capture_residuals(specimen_model, input_ids)
    n = input_ids.shape[1]
    layers = PINNED_CONFIG["num_hidden_layers"]
    assert len(capture.sites) == 4 * layers + 1
    assert all(tuple(t.shape) == (1, n, 128) for t in capture.sites.values())
    assert capture.block_return_kind == EXPECTED_RETURN_KIND
    assert capture.residual_kind == "parallel"
    assert tuple(capture.boundaries().shape) == (layers + 1, n, 128)
    assert capture.boundary_names()[0] == "blocks.0.resid_pre" and capture.boundary_names()[-1] == "blocks.5.resid_post"
    # Clones on the CPU, detached from autograd and from the model's own buffers.
    assert all(t.device.type == "cpu" and not t.requires_grad for t in capture.sites.values())
    embedding = specimen_model.gpt_neox.embed_in.weight[input_ids[0]]  # (n, 128)
    assert torch.equal(capture.block_input[0], embedding)
    capture.block_input.zero_()
    assert not torch.equal(specimen_model.gpt_neox.embed_in.weight[input_ids[0]], capture.block_input[0])


def test_checks_record_identity_repeat_and_hidden_states_as_numbers(specimen_model, input_ids):
    capture = observe.capture_residuals(specimen_model, input_ids)
    checks = observe.run_checks(specimen_model, input_ids, capture)
    assert checks["shapes_ok"] and not checks["shape_mismatches"]
    identity = checks["identity"]
    assert identity["all_within_tolerance"]
    assert 0.0 <= identity["max_abs_error"] <= min(row["tolerance"] for row in identity["blocks"])
    assert identity["max_abs_error_in_source_order"] == 0.0  # the captured writes are exactly the addends
    assert checks["continuity"]["max_abs_difference"] == 0.0
    assert checks["repeat"]["max_abs_difference"] == 0.0
    hidden = checks["model_hidden_states"]
    assert hidden["entries"] == hidden["expected_entries"] == 7
    assert hidden["entries_0_to_L_minus_1_vs_raw_boundaries_max_abs"] == 0.0
    assert hidden["last_entry_vs_final_norm_output_max_abs"] == 0.0
    assert hidden["last_entry_vs_raw_last_block_output_max_abs"] > 0.1  # final normalisation changed it
    assert checks["logits"]["max_abs_difference"] < 1e-5
    json.dumps(checks)  # plain numbers, booleans and strings only


@pytest.mark.parametrize("parallel", [True, False])
def test_branch_writes_are_what_each_block_type_adds(parallel):
    model = small_model(parallel)
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    capture = observe.capture_residuals(model, ids)
    assert capture.residual_kind == ("parallel" if parallel else "sequential")
    checks = observe.run_checks(model, ids, capture)
    assert checks["identity"]["all_within_tolerance"]
    assert checks["identity"]["max_abs_error_in_source_order"] == 0.0
    for block, layer in enumerate(model.gpt_neox.layers):
        x, attn, mlp = capture.block_inputs[block], capture.attention_writes[block], capture.mlp_writes[block]
        with torch.inference_mode():
            from_input = layer.mlp(layer.post_attention_layernorm(x))
            from_input_plus_attn = layer.mlp(layer.post_attention_layernorm(x + attn))
        # What the MLP reads is the one difference between the two block types.
        expected, other = (from_input, from_input_plus_attn) if parallel else (from_input_plus_attn, from_input)
        assert torch.allclose(mlp, expected, atol=1e-6)
        assert not torch.allclose(mlp, other, atol=1e-4)


def test_hooks_are_removed_when_the_forward_raises(specimen_model, input_ids):
    before = hook_snapshot(specimen_model)

    def explode(module, args, output):
        raise RuntimeError("boom inside block 2's MLP")

    saboteur = specimen_model.gpt_neox.layers[2].mlp.register_forward_hook(explode)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            with observe.capture_sites(specimen_model) as recorder:
                observe._forward(specimen_model, input_ids)
    finally:
        saboteur.remove()
    assert len(recorder.handles) == 25
    assert recorder.handles_still_attached() == 0
    assert hook_snapshot(specimen_model) == before
    recorded = dict(recorder.records)
    assert "blocks.1.resid_post" in recorded and "blocks.2.mlp_write" not in recorded  # it stopped mid-forward
    observe._forward(specimen_model, input_ids)
    assert recorder.records.keys() == recorded.keys()  # a later forward records nothing


def test_a_site_firing_twice_is_refused_and_still_unhooks(specimen_model, input_ids):
    before = hook_snapshot(specimen_model)
    with pytest.raises(observe.ObservationError, match="fired twice"):
        with observe.capture_sites(specimen_model):
            observe._forward(specimen_model, input_ids)
            observe._forward(specimen_model, input_ids)
    assert hook_snapshot(specimen_model) == before


def test_an_unknown_site_is_refused_and_the_hooks_already_registered_are_removed(specimen_model, monkeypatch):
    before = hook_snapshot(specimen_model)
    real_sites = capture_sites_module.site_paths(BLOCK_TYPES["gpt_neox"], PINNED_CONFIG["num_hidden_layers"], True)
    # What observe's capture resolves: the block table's site paths, looked up by the capture floor's resolver.
    monkeypatch.setattr(
        capture_sites_module, "site_paths",
        lambda block_type, depth, final_norm=False: real_sites[:3] + (("blocks.0.bogus", "gpt_neox.nope", "output"),),
    )
    with pytest.raises(observe.ObservationError, match="gpt_neox.nope"):
        with observe.capture_sites(specimen_model):
            pass
    assert hook_snapshot(specimen_model) == before


def test_hook_removal_is_proved_by_the_run(specimen_model, input_ids):
    proof = observe.prove_hooks_removed(specimen_model, input_ids)
    assert proof["handles_registered"] == 25
    assert proof["hooks_on_model_during_capture"] >= 25
    assert proof["handles_left_after_exit"] == 0
    assert proof["hook_tables_equal_to_before"] is True
    assert proof["sites_recorded_during_capture"] == 25
    assert proof["sites_recorded_by_a_later_forward"] == 0


def test_cosine_is_null_when_a_norm_is_zero():
    zero, vector = torch.zeros(4), torch.tensor([1.0, 2.0, 0.0, -1.0])
    assert cosine(zero, vector) is None
    assert cosine(vector, zero) is None
    assert cosine(vector, vector) == pytest.approx(1.0)
    assert cosine(vector, -vector) == pytest.approx(-1.0)
    assert json.dumps({"cosine": cosine(zero, zero)}) == '{"cosine": null}'


def test_observations_keep_final_normalisation_apart_and_read_every_boundary(specimen_model, tokenizer, input_ids):
    capture = observe.capture_residuals(specimen_model, input_ids)
    position = 3
    seen = observe.observe_position(specimen_model, tokenizer, capture, position)
    states = capture.boundaries()[:, position]  # (L+1, d)
    assert [row["norm"] for row in seen["boundaries"]] == pytest.approx([float(s.norm()) for s in states])
    assert len(seen["block_updates"]) == 6
    for row, before, after in zip(seen["block_updates"], states[:-1], states[1:]):
        assert row["difference_norm"] == pytest.approx(float((after - before).norm()))
        # float32 cosine against a float64 recomputation from the same states: 1e-6 covers the rounding.
        expected = torch.nn.functional.cosine_similarity(before.double(), after.double(), dim=0).item()
        assert row["cosine_consecutive"] == pytest.approx(expected, abs=1e-6)
    final = seen["final_normalisation"]
    assert final["from"] == "blocks.5.resid_post" and final["to"] == "final_norm.out"
    assert final["difference_norm"] == pytest.approx(float((capture.final_norm_output[0, position] - states[-1]).norm()))
    # The last boundary's logit-lens readout is the model's own prediction at that position.
    with torch.inference_mode():
        probabilities = torch.softmax(specimen_model(input_ids).logits[0, position], dim=-1)
    top = seen["boundaries"][-1]["logit_lens_top"]
    assert [entry["id"] for entry in top] == probabilities.topk(5).indices.tolist()
    assert [entry["probability"] for entry in top] == pytest.approx(probabilities.topk(5).values.tolist(), abs=1e-6)
    assert all(isinstance(entry["piece"], str) for entry in top)


def test_missing_libraries_give_a_clear_error(specimen_dir, specimen_lock_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `from transformers import ...` fail
    with pytest.raises(observe.ObservationError, match="transformers is not installed.*residual-requirements.txt"):
        load_offline(verify_artifacts(specimen_dir, load_lock(specimen_lock_path)))
