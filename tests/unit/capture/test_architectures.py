"""The site tables of residlab/capture/blocks.py against the blocks themselves, for every supported block type.

Each specimen is built from its small configuration with seeded random weights; per block, the recorded
output must equal input + attention write + MLP write within capture.blocks' allowance (IDENTITY_ABSOLUTE +
IDENTITY_RELATIVE x the largest entry), and the GPT-2 specimen's recorded sites and logits must equal an
independent forward written here from its weights alone. Runs under Transformers 5.x (.venv) and 4.57.1
(.venv-compat).
"""

from __future__ import annotations

import math

import pytest
import torch

from residlab.capture import blocks
from residlab import audit
from residlab.pythia import observe

# float32 regrouping of a three-term sum: an absolute floor plus a few ulps of the largest term (one allowance
# for every check of the identity, capture.blocks').
IDENTITY_ABSOLUTE = blocks.IDENTITY_ABSOLUTE
IDENTITY_RELATIVE = blocks.IDENTITY_RELATIVE
IDS = [5, 17, 3, 40, 2, 8, 61]


def recorded_clean_run(name: str) -> tuple[audit.Subject, audit.Run]:
    subject = audit.build_specimen(name, seed=0)
    return subject, audit.execute(subject, "clean", "clean", IDS)


@pytest.mark.parametrize("name", list(blocks.SPECIMEN_CONFIGS))
def test_every_block_adds_exactly_its_two_writes(name):
    subject, run = recorded_clean_run(name)
    assert subject.block_type.name == name
    assert type(subject.blocks[0]).__name__ == subject.block_type.block_class
    for block in range(len(subject.blocks)):
        resid_pre, attn, mlp, resid_post = (run.sites[f"blocks.{block}.{s}"] for s in audit.BLOCK_SITES)
        assert resid_pre.shape == (len(IDS), subject.model.config.hidden_size)
        # Both writes are real contributions, not zeros a wrong site would also satisfy the identity with.
        assert attn.abs().max() > 0.1 and mlp.abs().max() > 0.1
        scale = max(t.abs().max().item() for t in (resid_pre, attn, mlp, resid_post))
        error = (resid_post - (resid_pre + attn + mlp)).abs().max().item()
        assert error <= IDENTITY_ABSOLUTE + IDENTITY_RELATIVE * scale, (name, block, error)
        if block + 1 < len(subject.blocks):
            assert torch.equal(run.sites[f"blocks.{block + 1}.resid_pre"], resid_post)


@pytest.mark.parametrize("name", list(blocks.SPECIMEN_CONFIGS))
def test_logits_are_the_final_normaliser_and_unembedding_of_the_last_output(name):
    subject, run = recorded_clean_run(name)
    last = run.sites[f"blocks.{len(subject.blocks) - 1}.resid_post"][-1]
    with torch.inference_mode():
        assert torch.allclose(subject.readout(last), run.logits, atol=1e-5, rtol=0)


def test_the_sequential_and_parallel_neox_specimens_differ_only_in_the_mlp_read():
    parallel, sequential = (blocks.BLOCK_TYPES[n].sites for n in ("gpt_neox", "gpt_neox_sequential"))
    assert parallel.mlp_reads == "resid_pre" and sequential.mlp_reads == "resid_pre + attn_write"
    assert (parallel.attn_write, parallel.mlp_write) == (sequential.attn_write, sequential.mlp_write)
    # Lab 05's observation reads the same tables: it asks block_type_for with the model's own config.
    for use_parallel_residual, table in ((True, parallel), (False, sequential)):
        config = type("Config", (), {"model_type": "gpt_neox", "use_parallel_residual": use_parallel_residual})()
        assert blocks.block_type_for(config).sites is table
    assert observe.block_type_for is blocks.block_type_for


def test_an_unknown_architecture_is_refused_naming_the_supported_ones():
    class Config:
        model_type = "mistral"

    with pytest.raises(blocks.ArchitectureError) as error:
        blocks.block_type_for(Config())
    for name in ("gpt_neox", "gpt_neox_sequential", "gpt2", "llama"):
        assert name in str(error.value)


def _layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias


def _gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def test_gpt2_sites_equal_an_independent_forward():
    """GPT-2 computed here from the state dict alone (no transformers module is called)."""
    subject, run = recorded_clean_run("gpt2")
    config = subject.model.config
    weights = {k: v.detach() for k, v in subject.model.state_dict().items()}
    heads, width, eps = config.n_head, config.n_embd, config.layer_norm_epsilon
    n = len(IDS)
    ids = torch.tensor(IDS)
    x = weights["transformer.wte.weight"][ids] + weights["transformer.wpe.weight"][torch.arange(n)]
    causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    for block in range(config.n_layer):
        p = f"transformer.h.{block}."
        assert torch.allclose(run.sites[f"blocks.{block}.resid_pre"], x, atol=1e-5, rtol=0)
        read = _layer_norm(x, weights[p + "ln_1.weight"], weights[p + "ln_1.bias"], eps)
        qkv = read @ weights[p + "attn.c_attn.weight"] + weights[p + "attn.c_attn.bias"]  # Conv1D: (in, out)
        q, k, v = (t.reshape(n, heads, width // heads).transpose(0, 1) for t in qkv.split(width, dim=-1))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(width // heads)
        mixed = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1) @ v
        attn = mixed.transpose(0, 1).reshape(n, width) @ weights[p + "attn.c_proj.weight"] + weights[p + "attn.c_proj.bias"]
        assert torch.allclose(run.sites[f"blocks.{block}.attn_write"], attn, atol=1e-4, rtol=0)
        x = x + attn
        read = _layer_norm(x, weights[p + "ln_2.weight"], weights[p + "ln_2.bias"], eps)
        hidden = _gelu_new(read @ weights[p + "mlp.c_fc.weight"] + weights[p + "mlp.c_fc.bias"])
        mlp = hidden @ weights[p + "mlp.c_proj.weight"] + weights[p + "mlp.c_proj.bias"]
        assert torch.allclose(run.sites[f"blocks.{block}.mlp_write"], mlp, atol=1e-4, rtol=0)
        x = x + mlp
        assert torch.allclose(run.sites[f"blocks.{block}.resid_post"], x, atol=1e-4, rtol=0)
    final = _layer_norm(x[-1], weights["transformer.ln_f.weight"], weights["transformer.ln_f.bias"], eps)
    logits = final @ weights["transformer.wte.weight"].T  # tied unembedding
    assert torch.allclose(run.logits, logits, atol=1e-4, rtol=0)


def test_packets_record_the_gpt_neox_head_under_one_name_in_both_releases():
    """4.57.1 names GPTNeoXForCausalLM's head embed_out, 5.x lm_head: packets record lm_head either way, so a
    packet written under one release verifies under the other."""
    assert blocks.canonical_path("embed_out.weight") == "lm_head.weight"
    assert blocks.canonical_path("gpt_neox.layers.0.mlp.embed_out.weight").startswith("gpt_neox.")
    subject = audit.build_specimen("gpt_neox")
    record = audit.model_record(subject, threads=1)
    assert record["output_embedding"] == "lm_head"
    assert record["parameters"]["tensors"][-1]["name"] == "lm_head.weight"
