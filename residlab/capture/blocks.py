"""Declarative site tables: where each residual quantity lives in each supported decoder block.

Every table was read from the block's ``forward`` in transformers 4.57.1 and 5.24.0 (both supported), not
from a generic recipe. Site paths are module paths relative to one block ('' = the block itself); "input"
means the block's first positional argument (read by a pre-hook), "output" a module's return value (a tuple
whose first entry is the tensor, or the tensor itself). Each block adds exactly two writes to its input:

- GPT-NeoX (``GPTNeoXLayer``): ``attn_write = post_attention_dropout(attention(input_layernorm(x))[0])``;
  parallel: ``mlp_write = post_mlp_dropout(mlp(post_attention_layernorm(x)))``, ``out = mlp_write + attn_write + x``;
  sequential: the MLP reads ``post_attention_layernorm(x + attn_write)``, ``out = mlp_write + (attn_write + x)``.
- GPT-2 (``GPT2Block``): ``h = attn(ln_1(x))[0] + x`` (the dropout is inside ``attn``), then
  ``out = h + mlp(ln_2(h))`` (``mlp`` ends in its own dropout).
- Llama (``LlamaDecoderLayer``): ``h = x + self_attn(input_layernorm(x))[0]``, then
  ``out = h + mlp(post_attention_layernorm(h))``, with RMSNorm and the gated MLP ``down(silu(gate(.)) * up(.))``.
- The Lesson 2.1 copy model (``PreNormBlock`` in ``residlab.course``):
  ``resid_mid = resid_pre + attention(LN1(resid_pre))[0]``, ``resid_post = resid_mid + mlp(LN2(resid_mid))``,
  each value passed through a named hook point where it is made (``hook_resid_pre``,
  ``hook_attn_out``, ``hook_resid_mid``, ``hook_mlp_out``, ``hook_resid_post``).

Standard library only: the runners bundle this module and import torch and transformers where they need them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class BlockSiteMap:
    """Hook sites of one block, as module paths relative to the block ('' = the block itself)."""

    residual_kind: str  # "parallel" (both branches read the block input) or "sequential"
    resid_pre: tuple[str, str]  # (module, "input"): the block's first positional argument, via a pre-hook
    attn_write: tuple[str, str]  # (module, "output")
    mlp_write: tuple[str, str]
    resid_post: tuple[str, str]  # the block's return value: a tensor, or a tuple whose [0] is it
    mlp_reads: str  # what the MLP branch normalises: the difference between the two kinds
    identity: str  # the addition the captured sites must satisfy


@dataclass(frozen=True)
class BlockType:
    """One supported block type: its site map and everything an audit packet records about it."""

    name: str
    model_type: str | None  # config.model_type (None: not a transformers model)
    model_class: str  # the built-in causal-LM class that holds it
    block_class: str
    layers: str  # module path of the block list (or of the single block)
    final_norm: str  # module path of the normaliser applied before the unembedding
    normaliser: str  # "LayerNorm" or "RMSNorm"
    placement: str
    mlp: str
    sites: BlockSiteMap
    stacked: bool = True  # ``layers`` names a list of blocks (False: the one block itself)
    # Points inside the attention, relative to the block, where a block type names them (Lab 07's path patching):
    # "norm" its input normaliser, "qkv" the fused projection computing every head's [query | key | value] (one
    # slice of 3 x head size per head, in that order), "heads_out" the output projection, whose input is the heads'
    # outputs side by side. Empty: the block type does not name them.
    attention_points: tuple[tuple[str, str], ...] = ()  # (point, module path) pairs: the table stays hashable


PRE_NORM = "pre-norm: each branch reads a normalised copy of the residual; one final normaliser before the unembedding"
SEQUENTIAL_IDENTITY = "resid_post = resid_pre + attn_write + mlp_write"
# The identity holds up to float32 rounding of the regrouped sum: |resid_post - (resid_pre + attn_write + mlp_write)|
# at most an absolute floor plus a few ulps of the block's largest entry. One allowance for every check of it.
IDENTITY_ABSOLUTE = 1e-5
IDENTITY_RELATIVE = 1e-6

_NEOX_PARALLEL = BlockSiteMap(
    residual_kind="parallel",
    resid_pre=("", "input"),
    attn_write=("post_attention_dropout", "output"),
    mlp_write=("post_mlp_dropout", "output"),
    resid_post=("", "output"),
    mlp_reads="resid_pre",
    identity=SEQUENTIAL_IDENTITY,
)
_NEOX_SEQUENTIAL = replace(_NEOX_PARALLEL, residual_kind="sequential", mlp_reads="resid_pre + attn_write")


def _sequential_sites(attention: str, mlp: str) -> BlockSiteMap:
    """A sequential block whose two writes are the outputs of these submodules."""
    return replace(_NEOX_SEQUENTIAL, attn_write=(attention, "output"), mlp_write=(mlp, "output"))


_NEOX = BlockType(
    name="gpt_neox",
    model_type="gpt_neox",
    model_class="GPTNeoXForCausalLM",
    block_class="GPTNeoXLayer",
    layers="gpt_neox.layers",
    final_norm="gpt_neox.final_layer_norm",
    normaliser="LayerNorm",
    placement=PRE_NORM,
    mlp="GELU MLP",
    sites=_NEOX_PARALLEL,
    attention_points=(("norm", "input_layernorm"), ("qkv", "attention.query_key_value"), ("heads_out", "attention.dense")),
)
BLOCK_TYPES = {
    "gpt_neox": _NEOX,
    "gpt_neox_sequential": replace(_NEOX, name="gpt_neox_sequential", sites=_NEOX_SEQUENTIAL),
    "gpt2": BlockType(
        name="gpt2",
        model_type="gpt2",
        model_class="GPT2LMHeadModel",
        block_class="GPT2Block",
        layers="transformer.h",
        final_norm="transformer.ln_f",
        normaliser="LayerNorm",
        placement=PRE_NORM,
        mlp="GELU MLP",
        sites=_sequential_sites("attn", "mlp"),
    ),
    "llama": BlockType(
        name="llama",
        model_type="llama",
        model_class="LlamaForCausalLM",
        block_class="LlamaDecoderLayer",
        layers="model.layers",
        final_norm="model.norm",
        normaliser="RMSNorm",
        placement=PRE_NORM,
        mlp="gated SiLU MLP",
        sites=_sequential_sites("self_attn", "mlp"),
    ),
}

COPY_MODEL = BlockType(
    name="copy_model",
    model_type=None,
    model_class="CopyModel",
    block_class="PreNormBlock",
    layers="block",
    final_norm="final_norm",
    normaliser="LayerNorm",
    placement=PRE_NORM,
    mlp="GELU MLP",
    # The copy model names each residual value where its block makes it, as TransformerLens' blocks do.
    sites=replace(
        _sequential_sites("hook_attn_out", "hook_mlp_out"),
        resid_pre=("hook_resid_pre", "output"),
        resid_post=("hook_resid_post", "output"),
    ),
    stacked=False,
)

# Small configurations the random-weight specimens are built from (transformers config keys). Widths and
# depths are tiny so every test runs in seconds; each keeps its family's defining features.
_BASE_SPECIMEN_CONFIGS = {
    "gpt_neox": {
        "model_type": "gpt_neox", "vocab_size": 96, "bos_token_id": 0, "eos_token_id": 0, "hidden_size": 64,
        "intermediate_size": 256,
        "num_hidden_layers": 3, "num_attention_heads": 4, "max_position_embeddings": 64, "rotary_pct": 0.25,
        "rotary_emb_base": 10000, "use_parallel_residual": True, "layer_norm_eps": 1e-5, "hidden_act": "gelu",
        "attention_bias": True, "attention_dropout": 0.0, "hidden_dropout": 0.0, "tie_word_embeddings": False,
    },
    "gpt2": {
        "model_type": "gpt2", "vocab_size": 96, "bos_token_id": 0, "eos_token_id": 0, "n_embd": 64, "n_inner": 256, "n_layer": 3, "n_head": 4,
        "n_positions": 64, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "resid_pdrop": 0.0,
        "embd_pdrop": 0.0, "attn_pdrop": 0.0, "tie_word_embeddings": True,
    },
    "llama": {
        "model_type": "llama", "vocab_size": 96, "bos_token_id": 0, "eos_token_id": 0, "hidden_size": 64, "intermediate_size": 160,
        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu", "attention_bias": False,
        "mlp_bias": False, "tie_word_embeddings": False,
    },
}


SPECIMEN_CONFIGS = {
    "gpt_neox": _BASE_SPECIMEN_CONFIGS["gpt_neox"],
    "gpt_neox_sequential": {**_BASE_SPECIMEN_CONFIGS["gpt_neox"], "use_parallel_residual": False},
    "gpt2": _BASE_SPECIMEN_CONFIGS["gpt2"],
    "llama": _BASE_SPECIMEN_CONFIGS["llama"],
}


# Modules a Transformers release renamed: old name -> the name packets record, so a packet written under one
# supported release verifies under the other. GPTNeoXForCausalLM's untied head is embed_out in 4.57.1 and
# lm_head in 5.x (the same tensor).
RENAMED_MODULES = {"embed_out": "lm_head"}


def canonical_path(path: str) -> str:
    """A module or parameter path under the names packets record."""
    first, dot, rest = path.partition(".")
    return RENAMED_MODULES.get(first, first) + dot + rest


class ArchitectureError(ValueError):
    """The model is not one of the supported block types; the message lists those."""


def supported_list() -> str:
    return ", ".join(f"{name} ({kind.block_class})" for name, kind in BLOCK_TYPES.items())


def block_type_for(config) -> BlockType:
    """The block type of a transformers config, or an error listing the supported ones."""
    model_type = getattr(config, "model_type", None)
    if model_type == "gpt_neox":
        return BLOCK_TYPES["gpt_neox" if config.use_parallel_residual else "gpt_neox_sequential"]
    for kind in BLOCK_TYPES.values():
        if kind.model_type == model_type:
            return kind
    raise ArchitectureError(f"model_type {model_type!r} is not supported; supported block types: {supported_list()}")
