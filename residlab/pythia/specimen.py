"""A synthetic stand-in for Pythia-14M: the same architecture, seeded random weights.

No machine of this project reaches the Hugging Face Hub, so tests (and the site's cached capture) run the
real download, verification, load and capture code on this specimen instead. It copies the pinned
``config.json`` values, stores its 76 tensors as F16 under the checkpoint's own tensor names (``embed_out``
for the untied LM head, as at the pinned revision), and uses the GPT-NeoX-20B tokenizer shipped in
``residlab/data``. Its numbers are NOT Pythia's: every lock it writes says ``"synthetic": true``.

Package only (never bundled into a runner): it needs torch, transformers and safetensors.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from residlab.capture.blocks import BLOCK_TYPES
from residlab.capture.sites import block_path
from residlab.pythia.lock import ALLOWED_FILES, default_lock_path

SPECIMEN_REPOSITORY = "residlab/synthetic-gpt-neox-specimen"
TOKENIZER_SOURCE = Path(__file__).resolve().parent.parent / "data" / "gpt-neox-20b-tokenizer.json"
END_OF_TEXT = "<|endoftext|>"

# config.json of EleutherAI/pythia-14m at 94f7c35d... (values from ../facts: a third-party record of the Hub
# file). Legacy keys (rotary_pct, rotary_emb_base) as in the real file: transformers 4.57 reads them directly
# and 5.x converts them into config.rope_parameters (partial_rotary_factor, rope_theta).
PINNED_CONFIG: dict = {
    "architectures": ["GPTNeoXForCausalLM"],
    "attention_bias": True,
    "attention_dropout": 0.0,
    "bos_token_id": 0,
    "classifier_dropout": 0.1,
    "eos_token_id": 0,
    "hidden_act": "gelu",
    "hidden_dropout": 0.0,
    "hidden_size": 128,
    "initializer_range": 0.02,
    "intermediate_size": 512,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "gpt_neox",
    "num_attention_heads": 4,
    "num_hidden_layers": 6,
    "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "use_cache": True,
    "use_parallel_residual": True,
    "vocab_size": 50304,
}

PARAMETER_COUNT = 14_067_712
TENSOR_COUNT = 76

TOKENIZER_CONFIG: dict = {
    "add_bos_token": False,
    "add_eos_token": False,
    "bos_token": END_OF_TEXT,
    "clean_up_tokenization_spaces": False,
    "eos_token": END_OF_TEXT,
    "model_max_length": 2048,
    "tokenizer_class": "GPTNeoXTokenizerFast",
    "unk_token": END_OF_TEXT,
}
SPECIAL_TOKENS_MAP: dict = {"bos_token": END_OF_TEXT, "eos_token": END_OF_TEXT, "unk_token": END_OF_TEXT}
GENERATION_CONFIG: dict = {"_from_model_config": True, "bos_token_id": 0, "eos_token_id": 0}


def checkpoint_tensor_shapes(config: dict = PINNED_CONFIG) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape as stored in the checkpoint (transformers 4.x names), in a fixed order."""
    width, inner, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    shapes: dict[str, tuple[int, ...]] = {"gpt_neox.embed_in.weight": (vocab, width)}
    for layer in range(config["num_hidden_layers"]):
        prefix = f"{block_path(BLOCK_TYPES['gpt_neox'], layer)}."  # a module's path is its tensors' prefix
        for norm in ("input_layernorm", "post_attention_layernorm"):
            shapes[prefix + norm + ".weight"] = (width,)
            shapes[prefix + norm + ".bias"] = (width,)
        shapes[prefix + "attention.query_key_value.weight"] = (3 * width, width)
        shapes[prefix + "attention.query_key_value.bias"] = (3 * width,)
        shapes[prefix + "attention.dense.weight"] = (width, width)
        shapes[prefix + "attention.dense.bias"] = (width,)
        shapes[prefix + "mlp.dense_h_to_4h.weight"] = (inner, width)
        shapes[prefix + "mlp.dense_h_to_4h.bias"] = (inner,)
        shapes[prefix + "mlp.dense_4h_to_h.weight"] = (width, inner)
        shapes[prefix + "mlp.dense_4h_to_h.bias"] = (width,)
    shapes[f"{BLOCK_TYPES['gpt_neox'].final_norm}.weight"] = (width,)
    shapes[f"{BLOCK_TYPES['gpt_neox'].final_norm}.bias"] = (width,)
    shapes["embed_out.weight"] = (vocab, width)
    return shapes


def specimen_tensors(seed: int = 0) -> dict:
    """name -> float16 tensor, drawn in the fixed order of ``checkpoint_tensor_shapes`` from one generator,
    so the weights depend only on the seed (not on the transformers version's own initialisation)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    std = PINNED_CONFIG["initializer_range"]
    tensors = {}
    for name, shape in checkpoint_tensor_shapes().items():
        noise = torch.randn(shape, generator=generator, dtype=torch.float32)
        if "layernorm" in name or "layer_norm" in name:
            # LayerNorm gains near 1 and small offsets, so normalised states keep their scale.
            values = 1.0 + 0.1 * noise if name.endswith(".weight") else std * noise
        else:
            values = std * noise
        tensors[name] = values.to(torch.float16).contiguous()
    return tensors


def _model_config():
    from transformers import GPTNeoXConfig

    # Eager attention: the path the observation runner selects explicitly, so both compute alike.
    return GPTNeoXConfig.from_dict(dict(PINNED_CONFIG), attn_implementation="eager")


def build_specimen_model(seed: int = 0):
    """The specimen as a ``GPTNeoXForCausalLM`` in memory: float32 (the F16-stored values, widened exactly,
    so it equals what loading ``write_specimen(seed)``'s files gives), eager attention, eval mode, CPU."""
    import torch
    from transformers import GPTNeoXForCausalLM

    from residlab.pythia.load import under_own_names

    model = GPTNeoXForCausalLM(_model_config()).to(torch.float32)
    # The checkpoint's names, as the offline load matches them (embed_out is lm_head in transformers 5.x).
    stored = {name: tensor.to(torch.float32) for name, tensor in specimen_tensors(seed).items()}
    model.load_state_dict(under_own_names(stored, set(model.state_dict())), strict=True)
    return model.eval()


def _json_bytes(value: dict) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8")


def specimen_files(seed: int = 0) -> dict[str, bytes]:
    """The six allowed files' exact bytes."""
    from safetensors.torch import save

    files = {
        "config.json": _json_bytes(PINNED_CONFIG),
        "generation_config.json": _json_bytes(GENERATION_CONFIG),
        "model.safetensors": save(specimen_tensors(seed), metadata={"format": "pt"}),
        "special_tokens_map.json": _json_bytes(SPECIAL_TOKENS_MAP),
        "tokenizer.json": TOKENIZER_SOURCE.read_bytes(),
        "tokenizer_config.json": _json_bytes(TOKENIZER_CONFIG),
    }
    assert sorted(files) == sorted(ALLOWED_FILES)
    return files


def specimen_lock(files: dict[str, bytes], seed: int) -> dict:
    """A lock (the pinned lock's schema) describing exactly these bytes."""
    pinned = json.loads(default_lock_path().read_text(encoding="utf-8"))
    hashes = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    # A commit-like 40-hex id derived from the content: the same bytes always get the same revision.
    revision = hashlib.sha1("".join(f"{name}:{hashes[name]}\n" for name in sorted(hashes)).encode()).hexdigest()
    source = f"computed by residlab.pythia.specimen.write_specimen(seed={seed}) from the bytes it wrote"
    return {
        "schema": pinned["schema"],
        "repository": SPECIMEN_REPOSITORY,
        "revision": revision,
        "revision_source": "sha1 of the six files' sha256 values (synthetic specimen, not a Hub commit)",
        "synthetic": True,
        "total_bytes": sum(len(data) for data in files.values()),
        "total_bytes_source": source,
        "files": [
            {"name": name, "size": len(files[name]), "sha256": hashes[name], "source": source}
            for name in sorted(files)
        ],
        "libraries": dict(pinned["libraries"]),
        "libraries_source": pinned["libraries_source"],
        "also_tested": dict(pinned["also_tested"]),
        "also_tested_source": pinned["also_tested_source"],
    }


def write_specimen(directory: Path, seed: int = 0) -> dict:
    """Write the six files into ``directory`` (created if absent, refused unless empty); return their lock."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise FileExistsError(f"{directory} is not empty: write_specimen only writes into an empty directory")
    files = specimen_files(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return specimen_lock(files, seed)


def write_specimen_lock(lock: dict, path: Path) -> Path:
    """Save a lock dict as JSON (the format ``load_lock`` reads)."""
    path = Path(path)
    path.write_text(json.dumps(lock, indent=2) + "\n", encoding="utf-8")
    return path
