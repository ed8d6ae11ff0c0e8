"""Loading: the one place a model is placed and loaded. ``place_specimen(name, seed, placement)`` and
``place_directory(directory, placement)`` each turn a source (a random-weight specimen's name and seed, or a local
model directory) and a ``Placement`` (device, dtype, device map, max memory) into a placed, loaded ``Subject`` in
one call; ``build_specimen`` and ``load_model_directory`` are the same calls for a dtype and device alone. Every
decision on the way lives here: the dtype the weights are held in, the device they go to, the device map and the
offload folder, eager attention, the built-in class a config names, and the checks that the model loaded is the
one asked for (``_finish_model``). ``subject`` holds what a loaded model IS (``Subject``) and what is read from
disk without loading one (file digests, JSON); the rest of the audit and the course ask this module, once.

Where and in what the audit runs: the device (``--device``: cpu, cuda, mps where present), the dtype
(``--dtype``: float32, or bfloat16 and float16 as declared approximations) and, for a model larger than one
device, accelerate's big-model dispatch (``--device-map auto`` with ``--max-memory``), which spreads the blocks
over the accelerators, the CPU and a disk offload folder.

A specimen is built from ``capture.blocks.SPECIMEN_CONFIGS`` with every parameter drawn from one seeded generator;
a directory is loaded as a built-in transformers class from config.json and safetensors alone (no remote code, no
download, every weight tensor present and used). Either way the model runs in eval mode with eager attention, in
float32 on the CPU unless the placement asks otherwise. torch, transformers and accelerate are imported when a
model is built or loaded (accelerate only when a device map is asked for), with a clear ``AuditError`` (one line
saying how to install it) when they are missing.

A dispatched model runs through accelerate's own hooks (``AlignDevicesHook``: each block's weights brought to its
execution device for its forward, an offloaded block's read from the offload folder and dropped afterwards);
the audit's recording and patching hooks are ordinary forward hooks on the same modules, registered and removed
by ``capture.recording`` as for any model, so the numbers are the undispatched run's: the same operations on the
same values, only their storage moves. Everything outside the blocks (the embedding, the final normaliser and
the output embedding) stays on the main device (the first accelerator, else the CPU), inside its
``--max-memory`` budget, because the measures read the last two's weights directly; accelerate places the
blocks, each whole, in what remains, keeping room for one block to load an offloaded one. The offload folder is a
new temporary directory, removed when the audit ends. A parameter accelerate offloads stays on the meta device
between forwards; its values are read from accelerate's offload store one tensor at a time
(``subject.parameter_value``), never gathered.

A dtype other than float32 is an approximation the packet declares (``subject.tolerance_scale``); the measures
themselves are computed in float32 from the records the run made in its dtype.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from residlab.capture.blocks import SPECIMEN_CONFIGS, ArchitectureError, BlockType, block_type_for, supported_list
from residlab.audit.subject import (
    DTYPES, MAX_CONFIG_BYTES, MAX_SEED, AuditError, Subject, _import_torch, model_directory_files, read_json_object,
)  # fmt: skip

ACCELERATE_PIN = "accelerate==1.16.0"  # requirements.txt pins the same release (tests/unit/audit checks)
DEVICE_MAPS = ("auto",)
_SIZE = re.compile(r"^([0-9]{1,15})(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30,
          "TiB": 2**40}  # fmt: skip


def present_devices() -> list[str]:
    """The device kinds this machine has: cpu, and cuda and mps where torch sees them."""
    torch = _import_torch()
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    return devices


def check_device(text: str, option: str = "--device") -> str:
    """``cpu``, ``cuda``, ``cuda:N`` or ``mps``, present on this machine; else one line naming what is present."""
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (index and (kind != "cuda" or not index.isdigit())):
        raise AuditError(f"{option} {text[:40]!r}: give cpu, cuda, cuda:N or mps")
    present = present_devices()
    if kind not in present:
        raise AuditError(f"{option} {text}: no {kind} device is present here (present: {', '.join(present)})")
    if index and int(index) >= _import_torch().cuda.device_count():
        raise AuditError(f"{option} {text}: this machine has {_import_torch().cuda.device_count()} cuda device(s)")
    return text


def parse_max_memory(text: str) -> dict:
    """``DEVICE=SIZE[,DEVICE=SIZE...]`` -> accelerate's max_memory: DEVICE cpu, mps or a cuda index (0, cuda:0),
    SIZE an integer with a unit (B, KB, MB, GB, TB or KiB, MiB, GiB, TiB), e.g. ``cpu=200MB`` or ``0=20GiB,cpu=64GiB``.
    What no budget covers goes to the disk offload folder."""
    budgets: dict = {}
    for part in text.split(","):
        device, equals, size = part.strip().partition("=")
        match = _SIZE.match(size.strip())
        if not equals or match is None:
            raise AuditError(f"--max-memory {text[:60]!r}: write DEVICE=SIZE[,DEVICE=SIZE...], e.g. cpu=200MB "
                             "(units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)")  # fmt: skip
        device = device.strip().removeprefix("cuda:")
        key = int(device) if device.isdigit() else device
        if key in budgets:
            raise AuditError(f"--max-memory {text[:60]!r}: {device} is given twice")
        if isinstance(key, int):
            check_device(f"cuda:{key}", "--max-memory")
        elif key in ("cpu", "mps"):
            check_device(key, "--max-memory")
        else:
            raise AuditError(f"--max-memory {text[:60]!r}: {device[:20]!r} is not cpu, mps or a cuda index")
        budgets[key] = int(match.group(1)) * _UNITS[match.group(2)]
        if budgets[key] == 0:
            raise AuditError(f"--max-memory {text[:60]!r}: {device} is given no memory")
    return budgets


@dataclass(frozen=True)
class Placement:
    """Where and in what the audit runs; ``max_memory`` only with ``device_map``."""

    device: str = "cpu"
    dtype: str = "float32"
    device_map: str | None = None
    max_memory: dict | None = None

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise AuditError(f"--dtype {str(self.dtype)[:40]!r}: give one of {', '.join(DTYPES)}")
        if self.device_map is not None and self.device_map not in DEVICE_MAPS:
            raise AuditError(f"--device-map {str(self.device_map)[:40]!r}: the one device map is auto")
        if self.max_memory is not None and self.device_map is None:
            raise AuditError("--max-memory applies only with --device-map auto")
        if self.device_map is not None and self.device != "cpu":
            raise AuditError("--device-map auto places the model itself: give --max-memory, not --device")


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


def build_specimen(name: str, seed: int = 0, dtype: str = "float32", device: str = "cpu") -> Subject:
    """A random-weight model of one supported block type, from ``SPECIMEN_CONFIGS[name]``. Every parameter is
    drawn in registration order from one seeded generator (not transformers' own initialisation), in float32, so
    the weights depend only on the name and the seed; then rounded to ``dtype`` and moved to ``device``."""
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
    return Subject(_finish_model(model, block_type, dtype, device), block_type, source, dtype=dtype, device=device,
                   placement=device)


@contextlib.contextmanager
def _quiet_transformers(transformers):
    """No progress bar and no load report while loading; the previous settings restored afterwards."""
    log = transformers.utils.logging
    verbosity, bars = log.get_verbosity(), log.is_progress_bar_enabled()
    log.set_verbosity_error()
    log.disable_progress_bar()
    try:
        yield
    finally:
        log.set_verbosity(verbosity)
        if bars:
            log.enable_progress_bar()


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
    ``place_directory`` computed) as it loads, so no device holds more than the map gives it."""
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


def import_accelerate():
    try:
        import accelerate
    except ImportError:
        raise AuditError(f"--device-map needs accelerate, which is not installed: pip install {ACCELERATE_PIN}") from None
    return accelerate


@contextlib.contextmanager
def _quiet_accelerate():
    """accelerate's notes on offloaded parameters kept off the terminal while it dispatches; restored after."""
    loggers = [logging.getLogger(name) for name in ("accelerate", "accelerate.big_modeling", "accelerate.utils.modeling")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _main_device(max_memory: dict):
    """The device the embedding, the final normaliser and the output embedding stay on: the first accelerator."""
    accelerators = sorted(key for key in max_memory if isinstance(key, int))
    return accelerators[0] if accelerators else ("mps" if "mps" in max_memory else "cpu")


def _tensor_bytes(module, dtype: str | None = None) -> int:
    """The bytes of a module's tensors, as held or (``dtype``) in that dtype."""
    size = None if dtype is None else torch_dtype(dtype).itemsize
    return sum(t.numel() * (size or t.element_size()) for t in (*module.parameters(), *module.buffers()))


def _outer_bytes(model, block_type, dtype: str | None = None) -> int:
    """The bytes of every tensor outside the blocks: the embeddings, the final normaliser, position tables."""
    return _tensor_bytes(model, dtype) - _tensor_bytes(model.get_submodule(block_type.layers), dtype)


def cpu_budget(model, block_type, blocks_in_memory: int, dtype: str = "float32") -> int:
    """The ``--max-memory cpu=`` budget (bytes) that holds everything outside the blocks and ``blocks_in_memory``
    blocks of ``model`` in ``dtype``, beside the one block accelerate keeps room for to load an offloaded block:
    with it, the other blocks go to disk."""
    block = _tensor_bytes(model.get_submodule(block_type.layers)[0], dtype)
    return _outer_bytes(model, block_type, dtype) + (blocks_in_memory + 1) * block


def device_map_for(model, block_type, placement: Placement) -> dict:
    """accelerate's map for ``model`` (real or on the meta device) under ``placement.max_memory`` (every device
    present when none is given): everything outside the blocks (the embeddings, the final normaliser, the output
    embedding) on the main device, counted against its budget; the blocks, each kept whole, placed by
    accelerate's ``infer_auto_device_map`` in the rest, over the devices in order and then the disk."""
    accelerate = import_accelerate()
    budgets = dict(placement.max_memory or accelerate.utils.get_max_memory())
    main = _main_device(budgets)
    outer = _outer_bytes(model, block_type, placement.dtype)
    if budgets[main] <= outer:
        raise AuditError(f"--max-memory: {main} must hold the embeddings and the final normaliser "
                         f"({outer:,} bytes in {placement.dtype}) and room for the blocks")  # fmt: skip
    budgets[main] -= outer
    layers = model.get_submodule(block_type.layers)
    blocks = accelerate.infer_auto_device_map(layers, max_memory=budgets, dtype=torch_dtype(placement.dtype),
                                              no_split_module_classes=[type(layers[0]).__name__])  # fmt: skip
    device_map = _split_for(model, {"": main}, block_type.layers)
    del device_map[block_type.layers]
    return device_map | {f"{block_type.layers}.{name}".rstrip("."): where for name, where in blocks.items()}


def _split_for(model, device_map: dict, kept: str) -> dict:
    """``device_map`` with the entry that holds module ``kept`` (an ancestor of it) replaced by its children, down
    to ``kept``, each child keeping the entry's device."""
    holder = next((name for name in device_map if name == "" or kept == name or kept.startswith(name + ".")), None)
    if holder is None or holder == kept:
        return device_map
    where = device_map.pop(holder)
    prefix = f"{holder}." if holder else ""
    for child, _ in model.get_submodule(holder).named_children():
        device_map[prefix + child] = where
    for name, parameter in model.get_submodule(holder).named_parameters(recurse=False):
        device_map[prefix + name] = where
    return _split_for(model, device_map, kept)


def _describe(device_map: dict, model, block_type) -> str:
    """'a device map: blocks on cpu 1, disk 2; the rest on cpu', for the terminal."""
    blocks, rest = {}, set()
    count = len(model.get_submodule(block_type.layers))
    for name, where in device_map.items():
        if name == block_type.layers or name.startswith(block_type.layers + "."):
            blocks[str(where)] = blocks.get(str(where), 0) + (count if name == block_type.layers else 1)
        else:
            rest.add(str(where))
    return (f"a device map: blocks on {', '.join(f'{where} {n}' for where, n in blocks.items())}; "
            f"the rest on {', '.join(sorted(rest))}")


def place_specimen(name: str, seed: int = 0, placement: Placement = Placement()) -> Subject:
    """A specimen built (float32, seeded, then rounded to the dtype) and placed as asked."""
    if placement.device_map is None:
        return build_specimen(name, seed, placement.dtype, placement.device)
    accelerate = import_accelerate()
    subject = build_specimen(name, seed, placement.dtype, "cpu")
    device_map = device_map_for(subject.model, subject.block_type, placement)
    folder = tempfile.TemporaryDirectory(prefix="residlab-offload-")
    with _quiet_accelerate():
        subject.model = accelerate.dispatch_model(subject.model, device_map, offload_dir=folder.name)
    subject.offload_folder, subject.placement = folder, _describe(device_map, subject.model, subject.block_type)
    return subject


def place_directory(directory: Path, placement: Placement = Placement()) -> Subject:
    """A model directory loaded as asked: with a device map, each tensor goes where the map puts it as it loads."""
    if placement.device_map is None:
        return load_model_directory(directory, placement.dtype, placement.device)
    accelerate = import_accelerate()
    config, block_type = model_config(directory)
    transformers = _import_transformers()
    with accelerate.init_empty_weights():
        skeleton = getattr(transformers, block_type.model_class)(config).to(torch_dtype(placement.dtype))
    device_map = device_map_for(skeleton, block_type, placement)
    folder = tempfile.TemporaryDirectory(prefix="residlab-offload-")
    with _quiet_accelerate():
        subject = load_model_directory(directory, placement.dtype, "cpu",
                                       dispatch={"device_map": device_map, "offload_folder": folder.name})  # fmt: skip
    subject.offload_folder, subject.placement = folder, _describe(device_map, skeleton, block_type)
    return subject
