"""The traps the peer boxes list, each shown true: residlab.course.ui.peers.TRAPS on the synthetic specimen,
COPY_MODEL_TRAPS on Lesson 2.1's copy model."""

from __future__ import annotations

import torch

from residlab.course import peers
from residlab.pythia import observe


def test_the_boxes_list_four_traps():
    assert len(peers.TRAPS) == 3 and len(peers.COPY_MODEL_TRAPS) == 1  # one test below for each


def test_transformer_lens_caches_only_its_own_hook_points_and_the_snippet_leaves_the_model_as_it_was(
    trained_copy_model, lesson_tokens
):
    from transformer_lens import HookedRootModule

    from residlab.course.models import copy_model
    from snippet_runner import run_snippet

    class Unswapped(HookedRootModule):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.setup()

        def forward(self, tokens):
            return self.model(tokens)

    with torch.inference_mode():
        before = trained_copy_model(lesson_tokens)
        _, cache = Unswapped(trained_copy_model).run_with_cache(lesson_tokens)
    assert list(cache.keys()) == []  # residlab's hook points are not TransformerLens's
    found = run_snippet(peers.BOXES["lesson_capture"]["files"]["TransformerLens"], copy_model=trained_copy_model,
                        tokens=lesson_tokens)  # fmt: skip
    assert sorted(found["cache"].keys()) == sorted(f"model.block.{point}" for point in found["POINTS"])
    points = [getattr(trained_copy_model.block, point) for point in found["POINTS"]]
    assert all(type(point) is copy_model.HookPoint for point in points)  # the given model keeps its own
    with torch.inference_mode():
        assert torch.equal(trained_copy_model(lesson_tokens), before)


def test_processed_weights_change_the_residual_states_and_no_processing_keeps_hugging_faces(
    specimen_dir, specimen_model, fixed_sentence_ids
):
    import copy

    from transformer_lens import TransformerBridge

    expected = observe.capture_residuals(specimen_model, fixed_sentence_ids).sites
    depth = specimen_model.config.num_hidden_layers
    states = {}
    for mode, arguments in (("processed", {}), ("no_processing", {"no_processing": True})):
        bridge = TransformerBridge.boot_transformers(str(specimen_dir), hf_model=copy.deepcopy(specimen_model), device="cpu")
        bridge.enable_compatibility_mode(disable_warnings=True, **arguments)
        with torch.inference_mode():
            _, cache = bridge.run_with_cache(fixed_sentence_ids)
        states[mode] = [cache[f"blocks.{block}.hook_resid_post"] for block in range(depth)]
    for block in range(depth):
        raw = expected[f"blocks.{block}.resid_post"]
        torch.testing.assert_close(states["no_processing"][block], raw, rtol=1e-5, atol=1e-5)
        # Centred writing weights (and embeddings) leave every state without its mean: the processed state is the
        # raw one centred, so it and its norm differ from Hugging Face's by far more than rounding.
        centred = raw - raw.mean(dim=-1, keepdim=True)
        torch.testing.assert_close(states["processed"][block], centred, rtol=1e-5, atol=1e-5)
        assert float((states["processed"][block] - raw).abs().max()) > 1e-3, block
        assert float((states["processed"][block].norm(dim=-1) - raw.norm(dim=-1)).abs().max()) > 1e-3, block


def test_post_attention_layernorm_reads_the_block_input_in_a_parallel_block(specimen_model, fixed_sentence_ids):
    assert specimen_model.config.use_parallel_residual is True
    seen = {}
    handles = [
        layer.post_attention_layernorm.register_forward_pre_hook(lambda module, args, block=block: seen.__setitem__(block, args[0].clone()))
        for block, layer in enumerate(specimen_model.gpt_neox.layers)
    ]
    try:
        expected = observe.capture_residuals(specimen_model, fixed_sentence_ids).sites
    finally:
        for handle in handles:
            handle.remove()
    for block, value in seen.items():
        assert torch.equal(value, expected[f"blocks.{block}.resid_pre"]), block
        # ... and not block input + attention write, which a sequential block's second LayerNorm would read.
        assert not torch.allclose(value, expected[f"blocks.{block}.resid_pre"] + expected[f"blocks.{block}.attn_write"])
    assert len(seen) == specimen_model.config.num_hidden_layers


def test_the_last_hidden_state_is_normalised_not_the_last_block_output(specimen_model, fixed_sentence_ids):
    expected = observe.capture_residuals(specimen_model, fixed_sentence_ids).sites
    with torch.inference_mode():
        hidden = specimen_model(fixed_sentence_ids, output_hidden_states=True, use_cache=False).hidden_states
    last_block = specimen_model.config.num_hidden_layers - 1
    assert len(hidden) == specimen_model.config.num_hidden_layers + 1
    assert torch.equal(hidden[-1], expected[observe.FINAL_NORM_SITE])
    assert not torch.allclose(hidden[-1], expected[f"blocks.{last_block}.resid_post"], atol=1e-3)
