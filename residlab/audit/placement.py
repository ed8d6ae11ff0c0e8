"""Where and in what the audit runs: the device (``--device``: cpu, cuda, mps where present), the dtype
(``--dtype``: float32, or bfloat16 and float16 as declared approximations) and, for a model larger than one
device, accelerate's big-model dispatch (``--device-map auto`` with ``--max-memory``), which spreads the blocks
over the accelerators, the CPU and a disk offload folder.

A dispatched model runs through accelerate's own hooks (``AlignDevicesHook``: each block's weights brought to its
execution device for its forward, an offloaded block's read from the offload folder and dropped afterwards);
the audit's recording and patching hooks are ordinary forward hooks on the same modules, registered and removed
by ``capture.recording`` as for any model, so the numbers are the undispatched run's: the same operations on the
same values, only their storage moves. Everything outside the blocks (the embedding, the final normaliser and
the output embedding) stays on the main device (the first accelerator, else the CPU), inside its
``--max-memory`` budget, because the measures read the last two's weights directly; accelerate places the
blocks, each whole, in what remains, keeping room for one block to load an offloaded one. The offload folder is a new temporary directory, removed when the audit ends.

A dtype other than float32 is an approximation the packet declares: every tolerance is float32's constants
times ``tolerance_scale(dtype)``, the dtype's unit roundoff over float32's, divided by 16 (bfloat16: 4096,
float16: 512); the measures themselves are computed in float32 from the records the run made in its dtype.
accelerate is imported only when a device map is asked for; without it, one line says how to install it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from residlab.audit.subject import (
    DTYPES, AuditError, Subject, _import_torch, _import_transformers, build_specimen, load_model_directory, model_config,
    torch_dtype,
)  # fmt: skip

ACCELERATE_PIN = "accelerate==1.16.0"  # requirements.txt pins the same release (tests/unit/audit checks)
DEVICE_MAPS = ("auto",)
UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11}
_SIZE = re.compile(r"^([0-9]{1,15})(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30,
          "TiB": 2**40}  # fmt: skip


def tolerance_scale(dtype: str) -> int:
    """How many times float32's tolerance constants a packet measured in ``dtype`` declares."""
    return max(1, int(UNIT_ROUNDOFF[dtype] / UNIT_ROUNDOFF["float32"]) // 16)


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


def place_specimen(name: str, seed: int, placement: Placement) -> Subject:
    """A specimen built (float32, seeded, then rounded to the dtype) and placed as asked."""
    if placement.device_map is None:
        return build_specimen(name, seed, placement.dtype, placement.device)
    accelerate = import_accelerate()
    subject = build_specimen(name, seed, placement.dtype, None)
    device_map = device_map_for(subject.model, subject.block_type, placement)
    folder = tempfile.TemporaryDirectory(prefix="residlab-offload-")
    with _quiet_accelerate():
        subject.model = accelerate.dispatch_model(subject.model, device_map, offload_dir=folder.name)
    subject.offload_folder, subject.placement = folder, _describe(device_map, subject.model, subject.block_type)
    return subject


def place_directory(directory: Path, placement: Placement) -> Subject:
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
