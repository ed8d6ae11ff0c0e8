"""Lab 07's four methods, one cell each, recomputed by code that shares nothing with residlab: a forward of the
induction model written here from its weights alone (embedding, pre-LN blocks with rotary attention and a GELU
MLP, sequential residual, final LayerNorm, unembedding), with its own patching, path patching and gradient.

The weights are a random-weight model of the recipe's shape (seed 5): the arithmetic is what is checked, and a
random model makes every cell move a little, so no cell is trivially zero. Shares are compared with a tolerance
far below any value the page prints."""

from __future__ import annotations

import math

import pytest
import torch

TOLERANCE = 2e-3  # shares of the gap; float32 paths differ in summation order only


@pytest.fixture(scope="module")
def setting():
    from residlab.course.lab07.designs import make_design
    from residlab.course.lab07.lab import measure_design
    from residlab.course.models.induction.recipe import new_model

    model = new_model(5).eval()
    results = {}
    for name in ("copied_token", "matched_position"):
        design = make_design(name)
        results[name] = (design, measure_design(model, design))
    weights = {key: value.detach().clone().double() for key, value in model.state_dict().items()}
    return model.config, weights, results


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias


def rotate(x, theta):
    """Rotary embedding on every coordinate of each head (pairs i and i + half)."""
    n, size = x.shape[-2], x.shape[-1]
    half = size // 2
    frequencies = 1.0 / theta ** (torch.arange(0, size, 2, dtype=torch.float64) / size)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * frequencies[None, :]
    cos, sin = torch.cat([angles.cos(), angles.cos()], -1), torch.cat([angles.sin(), angles.sin()], -1)
    rotated_half = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated_half * sin


class HandForward:
    """The model's forward from its state dict, with hooks of its own: ``replace`` maps (block, site) to a function
    of the site's tensor (n, d) returning the one the rest of the forward reads; ``key_input`` gives, per block, the
    residual its attention computes keys from (default: its own input)."""

    def __init__(self, config, weights):
        self.w, self.heads = weights, config.num_attention_heads
        self.eps, self.theta = config.layer_norm_eps, float(config.rope_parameters["rope_theta"])
        self.depth = config.num_hidden_layers

    def p(self, name):
        return self.w[name]

    def attention(self, block, x, key_x):
        prefix = f"gpt_neox.layers.{block}."
        n, d = x.shape
        size = d // self.heads

        def qkv(source):
            normed = layer_norm(source, self.p(prefix + "input_layernorm.weight"), self.p(prefix + "input_layernorm.bias"), self.eps)
            out = normed @ self.p(prefix + "attention.query_key_value.weight").T + self.p(prefix + "attention.query_key_value.bias")
            return out.view(n, self.heads, 3 * size).transpose(0, 1)  # (heads, n, 3 size)

        own, keyed = qkv(x), qkv(key_x)
        q, v = own[..., :size], own[..., 2 * size :]
        k = keyed[..., size : 2 * size]
        q, k = rotate(q, self.theta), rotate(k, self.theta)
        scores = q @ k.transpose(-1, -2) / math.sqrt(size)
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        z = scores.softmax(-1) @ v  # (heads, n, size)
        z = z.transpose(0, 1).reshape(n, d)
        return z @ self.p(prefix + "attention.dense.weight").T + self.p(prefix + "attention.dense.bias")

    def mlp(self, block, x):
        prefix = f"gpt_neox.layers.{block}."
        normed = layer_norm(x, self.p(prefix + "post_attention_layernorm.weight"), self.p(prefix + "post_attention_layernorm.bias"), self.eps)
        hidden = normed @ self.p(prefix + "mlp.dense_h_to_4h.weight").T + self.p(prefix + "mlp.dense_h_to_4h.bias")
        hidden = 0.5 * hidden * (1 + torch.erf(hidden / math.sqrt(2)))
        return hidden @ self.p(prefix + "mlp.dense_4h_to_h.weight").T + self.p(prefix + "mlp.dense_4h_to_h.bias")

    def run(self, ids, target, rival, replace=None, key_input=None, record=None):
        replace, key_input = replace or {}, key_input or {}
        hook = lambda block, site, t: replace.get((block, site), lambda v: v)(t)  # noqa: E731
        x = self.p("gpt_neox.embed_in.weight")[torch.tensor(ids)]
        for block in range(self.depth):
            x = hook(block, "resid_pre", x)
            if record is not None:
                record[(block, "resid_pre")] = x
            attn = hook(block, "attn_write", self.attention(block, x, key_input.get(block, lambda v: v)(x)))
            if record is not None:
                record[(block, "attn_write")] = attn
            mid = x + attn
            mlp = hook(block, "mlp_write", self.mlp(block, mid))
            if record is not None:
                record[(block, "mlp_write")] = mlp
            x = hook(block, "resid_post", mid + mlp)
            if record is not None:
                record[(block, "resid_post")] = x
        final = layer_norm(x[-1], self.p("gpt_neox.final_layer_norm.weight"), self.p("gpt_neox.final_layer_norm.bias"), self.eps)
        logits = final @ self.p("lm_head.weight").T
        return logits[target] - logits[rival]


def _at(position, vector):
    def edit(tensor):
        tensor = tensor.clone()
        tensor[position] = vector
        return tensor

    return edit


def _runs(config, weights, design):
    forward = HandForward(config, weights)
    clean_record, corrupt_record = {}, {}
    clean = float(forward.run(design.clean, design.target, design.rival, record=clean_record))
    corrupt = float(forward.run(design.corrupt, design.target, design.rival, record=corrupt_record))
    return forward, clean, corrupt, clean_record, corrupt_record


def test_the_hand_forward_agrees_with_the_model_on_both_prompts(setting):
    config, weights, results = setting
    design, measured = results["copied_token"]
    _, clean, corrupt, _, _ = _runs(config, weights, design)
    assert clean == pytest.approx(measured["clean_metric"], abs=1e-4)
    assert corrupt == pytest.approx(measured["corrupt_metric"], abs=1e-4)


def test_one_denoising_cell(setting):
    config, weights, results = setting
    design, measured = results["matched_position"]
    forward, clean, corrupt, clean_record, _ = _runs(config, weights, design)
    position = design.changed[-1]
    patched = float(forward.run(design.corrupt, design.target, design.rival,
                                replace={(0, "attn_write"): _at(position, clean_record[(0, "attn_write")][position])}))
    expected = (patched - corrupt) / (clean - corrupt)
    assert abs(expected) > 0.01  # a cell that moves
    assert measured["activation"]["denoising"]["attn_write"][0][position] == pytest.approx(expected, abs=TOLERANCE)


def test_one_noising_cell(setting):
    config, weights, results = setting
    design, measured = results["matched_position"]
    forward, clean, corrupt, _, corrupt_record = _runs(config, weights, design)
    readout = len(design.clean) - 1
    patched = float(forward.run(design.clean, design.target, design.rival,
                                replace={(1, "mlp_write"): _at(readout, corrupt_record[(1, "mlp_write")][readout])}))
    expected = (clean - patched) / (clean - corrupt)
    assert abs(expected) > 0.01
    assert measured["activation"]["noising"]["mlp_write"][1][readout] == pytest.approx(expected, abs=TOLERANCE)


def test_path_patching_into_keys_only(setting):
    config, weights, results = setting
    design, measured = results["matched_position"]
    forward, clean, corrupt, clean_record, corrupt_record = _runs(config, weights, design)
    delta = clean_record[(0, "attn_write")] - corrupt_record[(0, "attn_write")]
    patched = float(forward.run(design.corrupt, design.target, design.rival, key_input={1: lambda x: x + delta}))
    expected = (patched - corrupt) / (clean - corrupt)
    assert abs(expected) > 0.01
    assert measured["path"]["keys"] == pytest.approx(expected, abs=TOLERANCE)
    everything = float(forward.run(design.corrupt, design.target, design.rival, replace={(0, "attn_write"): lambda t: t + delta}))
    assert measured["path"]["everything"] == pytest.approx((everything - corrupt) / (clean - corrupt), abs=TOLERANCE)


def test_one_attribution_cell(setting):
    config, weights, results = setting
    design, measured = results["copied_token"]
    forward, clean, corrupt, clean_record, corrupt_record = _runs(config, weights, design)
    position = design.changed[0]
    held = {}

    def hold(tensor):
        held["site"] = tensor.detach().clone().requires_grad_(True)
        return held["site"]

    metric = forward.run(design.corrupt, design.target, design.rival, replace={(0, "resid_post"): hold})
    (gradient,) = torch.autograd.grad(metric, [held["site"]])
    change = clean_record[(0, "resid_post")][position] - corrupt_record[(0, "resid_post")][position]
    expected = float(change @ gradient[position]) / (clean - corrupt)
    assert abs(expected) > 0.01
    assert measured["attribution"]["resid_post"][0][position] == pytest.approx(expected, abs=TOLERANCE)
