"""What is audited: a model ready to audit (``Subject``), built as a random-weight specimen or loaded offline
from a local model directory, and the model files such a load reads.

A specimen is built from ``capture.blocks.SPECIMEN_CONFIGS`` with every parameter drawn from one seeded generator;
a directory is loaded as a built-in transformers class from config.json and safetensors alone (no remote code, no
download, every weight tensor present and used). Either way the model runs in eval mode with eager attention, in
float32 on the CPU unless asked otherwise: another device (``device``), a narrower dtype (``dtype``: bfloat16 or
float16, declared approximations), or placed by accelerate over devices, CPU and disk (``placement``, which
passes ``device_map`` here). A parameter accelerate offloads stays on the meta device between forwards; its values
are read from accelerate's offload store one tensor at a time (``parameter_value``), never gathered. torch and
transformers are imported when a model is built or loaded, with a clear ``AuditError`` when they are missing.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import stat
from dataclasses import dataclass
from pathlib import Path

from residlab.capture.blocks import SPECIMEN_CONFIGS, ArchitectureError, BlockType, block_type_for, supported_list

MAX_CONFIG_BYTES = 2**20
MAX_SEED = 2**64 - 1  # the largest seed torch's generator takes
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "model.safetensors.index.json")  # fmt: skip
DTYPES = ("float32", "bfloat16", "float16")  # float32 is exact to its rounding; the others declared approximations


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
        state = state.to(device=self.device, dtype=torch_dtype(self.dtype))
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


def _import_transformers():
    try:
        import transformers
    except ImportError:
        raise AuditError("transformers is not installed: install residual-requirements.txt first") from None
    return transformers


def torch_dtype(name: str):
    """The torch dtype of one of ``DTYPES``."""
    if name not in DTYPES:
        raise AuditError(f"dtype {str(name)[:40]!r} is not one the audit runs in ({', '.join(DTYPES)})")
    return getattr(_import_torch(), name)


def _finish_model(model, block_type: BlockType, dtype: str = "float32", device: str | None = "cpu"):
    """The dtype and device asked for (``device`` None: placed already, by a device map), eval mode, eager
    attention, no cache; refuse anything else."""
    if device is not None:
        model = model.to(device=device, dtype=torch_dtype(dtype))
    model = model.eval()
    held = sorted({str(parameter.dtype).removeprefix("torch.") for parameter in model.parameters()})
    if held != [dtype]:
        raise AuditError(f"the model holds {', '.join(held)} parameters, not {dtype} as asked")
    model.config.use_cache = False
    if model.config._attn_implementation != "eager":
        raise AuditError(f"attention implementation is {model.config._attn_implementation}, not eager")
    if type(model).__name__ != block_type.model_class:
        raise AuditError(f"loaded {type(model).__name__}, expected {block_type.model_class}")
    return model


def build_specimen(name: str, seed: int = 0, dtype: str = "float32", device: str | None = "cpu") -> Subject:
    """A random-weight model of one supported block type, from ``SPECIMEN_CONFIGS[name]``. Every parameter is
    drawn in registration order from one seeded generator (not transformers' own initialisation), in float32, so
    the weights depend only on the name and the seed; then rounded to ``dtype`` and moved to ``device`` (None:
    left on the CPU for a device map to place)."""
    if name not in SPECIMEN_CONFIGS:
        raise AuditError(f"unknown specimen {name!r}; supported block types: {supported_list()}")
    if not 0 <= seed <= MAX_SEED:
        raise AuditError(f"seed {seed} is outside 0 to 2**64 - 1, the seeds a specimen takes")
    torch = _import_torch()
    transformers = _import_transformers()
    values = dict(SPECIMEN_CONFIGS[name])
    config = transformers.AutoConfig.for_model(values.pop("model_type"), **values)
    config._attn_implementation = "eager"
    block_type = block_type_for(config)
    model = getattr(transformers, block_type.model_class)(config)
    generator = torch.Generator().manual_seed(seed)
    scale = 1.0 / math.sqrt(model.config.hidden_size)
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
            if parameter.ndim == 1:  # normaliser gains near 1; biases small
                values_ = 1.0 + 0.1 * noise if parameter_name.endswith("weight") else 0.1 * noise
            else:
                values_ = scale * noise
            parameter.copy_(values_)
    source = {"kind": "specimen", "name": name, "seed": seed, "config": dict(SPECIMEN_CONFIGS[name]),
              "note": "random weights: these numbers describe no trained model"}  # fmt: skip
    return Subject(_finish_model(model, block_type, dtype, device or "cpu"), block_type, source, dtype=dtype,
                   device=device or "cpu", placement=device or "cpu")  # fmt: skip


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


@contextlib.contextmanager
def _quiet_transformers(transformers):
    """No progress bar and no load report while loading; the previous settings restored afterwards."""
    logging = transformers.utils.logging
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


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


def _first_line(error: Exception) -> str:
    """The error's kind and the start of its first line (a library's message may list hundreds of names)."""
    line = (str(error).splitlines() or [""])[0]
    return f"{type(error).__name__}: {line if len(line) <= 160 else line[:157] + '...'}"


def model_config(directory: Path):
    """(config, block type) of a model directory: config.json alone, a built-in class, no remote code."""
    directory = Path(directory)
    if not directory.is_dir():
        raise AuditError(f"{directory} is not a directory")
    config_path = directory / "config.json"
    config_data = read_json_object(config_path, MAX_CONFIG_BYTES, "the model config")
    if "auto_map" in config_data:
        raise AuditError(f"{config_path} asks for remote code (auto_map); only built-in classes are loaded")
    if not any(path.suffix == ".safetensors" for path in directory.iterdir()):
        raise AuditError(f"{directory} holds no .safetensors weights (other weight formats are not loaded)")
    transformers = _import_transformers()
    try:
        config = transformers.AutoConfig.for_model(
            config_data.get("model_type", ""), **{k: v for k, v in config_data.items() if k != "model_type"}
        )
        block_type = block_type_for(config)
    except ArchitectureError as error:
        raise AuditError(f"{config_path}: {error}") from None
    except Exception as error:  # transformers and its config validation raise many kinds; all mean "not usable"
        raise AuditError(
            f"{config_path}: model_type {str(config_data.get('model_type'))[:40]!r} with these values is not usable "
            f"({_first_line(error)}); supported block types: {supported_list()}"
        ) from None
    config._attn_implementation = "eager"
    return config, block_type


def load_model_directory(directory: Path, dtype: str = "float32", device: str = "cpu",
                         dispatch: dict | None = None) -> Subject:
    """A built-in transformers causal LM from ``directory`` alone: config.json and safetensors weights, no remote
    code, no download; every weight tensor present (none left to random initialisation), none unused. Loaded in
    ``dtype`` onto ``device``, or placed by ``dispatch`` (``device_map``, ``offload_folder``: what
    ``placement`` computed) as it loads, so no device holds more than the map gives it."""
    directory = Path(directory)
    _, block_type = model_config(directory)
    files = model_directory_files(directory)
    transformers = _import_transformers()
    model_class = getattr(transformers, block_type.model_class)
    try:
        with _quiet_transformers(transformers):  # the audit reports missing and unused tensors itself
            model, info = model_class.from_pretrained(
            str(directory), local_files_only=True, use_safetensors=True, trust_remote_code=False,
                attn_implementation="eager", dtype=torch_dtype(dtype), output_loading_info=True, **(dispatch or {}),
            )  # fmt: skip
    except Exception as error:  # transformers and safetensors raise many kinds; all mean "does not load"
        raise AuditError(f"{directory}: the weights do not load ({_first_line(error)})") from None
    problems = {key: sorted(info.get(key) or []) for key in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    problems = {key: value for key, value in problems.items() if value}
    if problems:
        details = "; ".join(f"{key}: {', '.join(map(str, value[:5]))}" for key, value in problems.items())
        raise AuditError(f"{directory}: the weights do not match {block_type.model_class} ({details})")
    tokenizer = None
    if (directory / "tokenizer.json").is_file():
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            str(directory), local_files_only=True, use_fast=True, trust_remote_code=False
        )
    source = {"kind": "directory", "files": files}
    placed = dispatch is not None
    return Subject(_finish_model(model, block_type, dtype, None if placed else device), block_type, source,
                   tokenizer=tokenizer, dtype=dtype, device="cpu" if placed else device,
                   placement="device map" if placed else device)  # fmt: skip


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
