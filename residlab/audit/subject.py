"""What is audited: a model ready to audit (``Subject``: the module, its block type, its source, the dtype and
device it was placed in), what the audit refuses with (``AuditError``), and what is read from disk without
loading a model: the model files' names, sizes and digests (``model_directory_files``) and JSON read under a size
limit (``read_json_object``). Building, loading and placing a model is ``loading``'s alone; this module imports no
transformers and decides no dtype or device.

A subject's dtype is one of ``DTYPES``: float32, or bfloat16 and float16 as declared approximations, whose
tolerances are float32's constants times ``tolerance_scale(dtype)``, the dtype's unit roundoff over float32's,
divided by 16 (bfloat16: 4096, float16: 512). A parameter accelerate offloaded stays on the meta device between
forwards; its values are read from accelerate's offload store one tensor at a time (``parameter_value``), never
gathered. torch is imported when a model is used, with a clear ``AuditError`` when it is missing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import stat
from dataclasses import dataclass
from pathlib import Path

from residlab.capture.blocks import BlockType

MAX_CONFIG_BYTES = 2**20
MAX_SEED = 2**64 - 1  # the largest seed torch's generator takes
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "model.safetensors.index.json")  # fmt: skip
DTYPES = ("float32", "bfloat16", "float16")  # float32 is exact to its rounding; the others declared approximations
UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11}


def tolerance_scale(dtype: str) -> int:
    """How many times float32's tolerance constants a packet measured in ``dtype`` declares."""
    return max(1, int(UNIT_ROUNDOFF[dtype] / UNIT_ROUNDOFF["float32"]) // 16)


class AuditError(RuntimeError):
    """The audit cannot run as asked; the message names the problem. Nothing was written."""


@dataclass
class Subject:
    """A model ready to audit: the module, its block type and how to rebuild it (the model record's source)."""

    model: object
    block_type: BlockType
    source: dict
    tokenizer: object = None
    fixed_length: int | None = None  # the copy model reads exactly 5 tokens
    dtype: str = "float32"  # one of DTYPES: what every parameter holds and every forward computes in
    device: str = "cpu"  # where the input ids go (a dispatched model's hooks move them on)
    placement: str = "cpu"  # for the terminal: the device, or the device map's devices
    offload_folder: object = None  # a dispatched model's temporary offload folder, kept while the model lives

    @property
    def blocks(self) -> list:
        layers = self.model.get_submodule(self.block_type.layers)
        return list(layers) if self.block_type.stacked else [layers]

    @property
    def head(self):
        if self.block_type.model_type is None:
            return self.model.unembed
        return self.model.get_output_embeddings()

    @property
    def final_norm(self):
        return self.model.get_submodule(self.block_type.final_norm)

    @property
    def vocab_size(self) -> int:
        return int(self.head.weight.shape[0])

    def last_logits(self, input_ids):
        """input_ids (1, n) -> logits (vocab,) at the last position."""
        input_ids = input_ids.to(self.device)
        if self.block_type.model_type is None:
            return self.model(input_ids)[0]
        return self.model(input_ids=input_ids, use_cache=False).logits[0, -1]

    def readout(self, state):
        """One residual vector (d,) -> logits (vocab,): the final normaliser, then the unembedding, in the model's
        own dtype and device; the logits come back as float32 on the CPU, as every record."""
        torch = _import_torch()
        state = state.to(device=self.device, dtype=getattr(torch, self.dtype))
        return self.head(self.final_norm(state.unsqueeze(0)))[0].to(device="cpu", dtype=torch.float32)


def seed_argument(text: str) -> int:
    """An argparse type for a seed of torch's generator (what ``--seed`` takes in the audit and in ``residlab
    induction``)."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
    if not 0 <= seed <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text[:40]} is outside 0 to 2**64 - 1, the seeds torch's generator takes")
    return seed


def _import_torch():
    try:
        import torch
    except ImportError:
        raise AuditError("torch is not installed: install residual-requirements.txt first") from None
    return torch


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(2**20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def model_directory_files(directory: Path) -> list[dict]:
    """Name, size and sha256 of every file the load reads: config, weights, tokenizer."""
    names = sorted(
        path.name
        for path in directory.iterdir()
        if path.is_file() and (path.name in MODEL_FILES or path.suffix == ".safetensors")
    )
    return [{"name": n, "size": (directory / n).stat().st_size, "sha256": _sha256_file(directory / n)} for n in names]


def read_json_object(path: Path, limit: int, what: str) -> dict:
    """A JSON object from a file of at most ``limit`` bytes (checked before reading), or a clear error."""
    try:
        status = path.stat()  # a link is followed: a model directory may be a Hub cache snapshot of links
    except FileNotFoundError:
        raise AuditError(f"{what}: {path} is missing") from None
    except OSError as error:
        raise AuditError(f"{what}: {path} cannot be read ({error.strerror})") from None
    if not stat.S_ISREG(status.st_mode):
        raise AuditError(f"{what}: {path} is not a regular file")
    if status.st_size > limit:
        raise AuditError(f"{what}: {path} is larger than {limit} bytes")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AuditError(f"{what}: {path} is not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise AuditError(f"{what}: {path} does not hold a JSON object")
    return value


def parameter_value(model, name: str, parameter):
    """The values of the parameter ``name``: the tensor itself where it lives (a CPU or accelerator tensor), or,
    for a parameter accelerate offloaded (on the meta device between forwards), the tensor its offload store
    holds, read alone (a memory-mapped file, a safetensors file or a CPU state dict): from the nearest enclosing
    module whose accelerate hook holds a weights map, under the name relative to that module."""
    if not parameter.is_meta:
        return parameter
    path = name.split(".")
    for depth in range(len(path) - 1, -1, -1):
        module = model.get_submodule(".".join(path[:depth]))
        hooks = [getattr(module, "_hf_hook", None)]
        hooks = getattr(hooks[0], "hooks", hooks)  # a SequentialHook holds several
        for hook in hooks:
            weights = getattr(hook, "weights_map", None)
            if weights is not None and getattr(hook, "offload", False):
                value = weights[".".join(path[depth:])]
                if value.shape != parameter.shape or value.dtype != parameter.dtype:
                    raise AuditError(f"parameter {name}: its offloaded values are {value.dtype} {list(value.shape)}, "
                                     f"not {parameter.dtype} {list(parameter.shape)}")  # fmt: skip
                return value
    raise AuditError(f"parameter {name} is on the meta device and no offload hook holds its values")
