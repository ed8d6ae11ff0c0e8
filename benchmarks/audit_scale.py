"""The audit at scale: a GPT-NeoX specimen of about a billion parameters, audited on the CPU in float32, in
bfloat16, and dispatched by accelerate with half of its blocks offloaded to disk.

    .venv/bin/python benchmarks/audit_scale.py [--folder DIR] [--tokens 16] [--rounds 1] [--threads 1]
    .venv/bin/python benchmarks/audit_scale.py --width 256 --blocks 12    # a small trial of the script itself
    .venv/bin/python benchmarks/audit_scale.py --whole [--rounds 3]       # whole processes, as a user waits for them

The specimen has Pythia-1B's shape (width 2048, 16 blocks, MLP 8192, 8 heads, vocabulary 50304: 1.01 billion
parameters) and random weights, written once as float32 safetensors shards (about 4 GB) into ``--folder`` (a new
temporary directory by default; a folder that already holds it is reused), one tensor at a time, so building it
never holds the model; then a bfloat16 copy, shard by shard (about 2 GB), which the bfloat16 case loads as a
learner with a bfloat16 checkpoint would (loading the float32 files and converting would count the mapped float32
pages in that case's memory). The three cases run one after another, each alone in its own process (peak
memory is a process's): each loads the directory as ``residlab audit --model DIR`` does
(``loading.place_directory``), then times side by side, in a random order each round, one whole audit of 12
writes (both writes of the last 6 blocks at the last position: ``audit.build_packet``) and the 26 plain
forwards it needs. Printed per case: the audit over its forwards (goal: at most 1.5x), the peak resident
memory over the model's size in its dtype (goal: at most 1.3x; the whole process, torch and transformers
included), and the measurement compared with float32's: the disk case's byte for byte, bfloat16's value by value
within the tolerance it declares. Random weights: the numbers are a cost measurement, not a finding about any
model.

``--whole`` measures what a user waits for and holds instead: the whole ``residlab audit`` process (start,
imports, loading, digests, the audit, writing the packet) against a plain process that loads the same float32 files
with Transformers and runs the same 26 forwards, each alone, side by side in a seeded random order per round, in
float32 and in bfloat16 (both load the float32 files and convert). Memory from /proc/<pid>/status, sampled: the
peaks of anonymous memory (what the process allocated) and of file-backed pages (the mapped weights, which the
kernel can drop and read again) apart, beside the kernel's peak of their sum, against the model's bytes in the
dtype it runs in (goal: the audit within 1.3x the plain process's time).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure import median_ms, ratio_text, side_by_side



def neox_shape(width: int = 2048, blocks: int = 16) -> dict:
    """Pythia-1B's configuration by default."""
    return {"hidden_size": width, "num_hidden_layers": blocks, "intermediate_size": 4 * width, "num_attention_heads": 8,
            "vocab_size": 50304, "max_position_embeddings": 2048, "rotary_pct": 0.25, "use_parallel_residual": True,
            "layer_norm_eps": 1e-5, "tie_word_embeddings": False}  # fmt: skip


CASES = ("float32", "bfloat16", "float32, half the blocks on disk")  # float32 is the reference
WRITES = 12


def build_directory(folder: Path, width: int, blocks: int) -> Path:
    """The specimen as a model directory: config.json and one safetensors shard per block, each tensor drawn from
    one seeded generator as it is written (normaliser gains near 1, biases small, matrices scaled by 1/sqrt(d))."""
    import torch
    from accelerate import init_empty_weights
    from safetensors.torch import save_file
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    directory = folder / f"gpt-neox-random-w{width}-b{blocks}"
    if (directory / "model.safetensors.index.json").is_file():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    config = GPTNeoXConfig(**neox_shape(width, blocks))
    with init_empty_weights():
        skeleton = GPTNeoXForCausalLM(config)
    generator = torch.Generator().manual_seed(0)
    shards: dict[str, dict] = {}
    for name, tensor in skeleton.state_dict().items():
        part = name.split(".")
        shard = f"block-{int(part[2]):02}" if part[1:2] == ["layers"] else "outer"
        shards.setdefault(shard, {})[name] = tensor.shape
    weight_map = {}
    for shard, tensors in shards.items():
        values = {}
        for name, shape in tensors.items():
            noise = torch.randn(shape, generator=generator)
            if len(shape) == 1:
                values[name] = 1.0 + 0.1 * noise if name.endswith("weight") else 0.1 * noise
            else:
                values[name] = noise.mul_(1.0 / width**0.5)
        save_file(values, directory / f"{shard}.safetensors", metadata={"format": "pt"})
        weight_map |= {name: f"{shard}.safetensors" for name in values}
        del values
    config.save_pretrained(directory)
    _write_index(directory, weight_map)
    return directory


def _write_index(directory: Path, weight_map: dict) -> None:
    total = sum((directory / shard).stat().st_size for shard in set(weight_map.values()))
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                        "weight_map": weight_map}))  # fmt: skip


def bfloat16_copy(directory: Path) -> Path:
    """The float32 directory's weights rounded to bfloat16, one shard at a time, beside it (reused when there)."""
    import torch
    from safetensors.torch import load_file, save_file

    copy = directory.with_name(f"{directory.name}-bfloat16")
    if (copy / "model.safetensors.index.json").is_file():
        return copy
    copy.mkdir(exist_ok=True)
    weight_map = json.loads((directory / "model.safetensors.index.json").read_text())["weight_map"]
    for shard in sorted(set(weight_map.values())):
        values = {name: tensor.to(torch.bfloat16) for name, tensor in load_file(directory / shard).items()}
        save_file(values, copy / shard, metadata={"format": "pt"})
        del values
    config = json.loads((directory / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps(config | {"torch_dtype": "bfloat16"}, indent=2))
    _write_index(copy, weight_map)
    return copy


def run_case(args) -> dict:
    """One case in this process: load, then the audit and its forwards side by side. Returns what it measured."""
    import torch

    from residlab import audit
    from residlab.audit.loading import Placement, place_directory

    torch.set_num_threads(args.threads)
    dtype = "bfloat16" if args.case == "bfloat16" else "float32"
    placement = Placement(dtype=dtype)
    blocks, vocab = args.blocks, 50304
    if args.case.endswith("disk"):  # half the blocks in memory, the rest on disk
        from accelerate import init_empty_weights
        from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

        from residlab.audit.loading import cpu_budget
        from residlab.capture.blocks import block_type_for

        config = GPTNeoXConfig(**neox_shape(args.width, args.blocks))
        with init_empty_weights():
            skeleton = GPTNeoXForCausalLM(config)
        budget = cpu_budget(skeleton, block_type_for(config), blocks // 2, dtype)
        placement = Placement(dtype=dtype, device_map="auto", max_memory={"cpu": budget})
    started = time.perf_counter()
    subject = place_directory(Path(args.model), placement)
    load_s = time.perf_counter() - started
    on_disk = sum(str(where) == "disk" for where in getattr(subject.model, "hf_device_map", {}).values())
    ids = [(7 * i + 3) % vocab for i in range(args.tokens)]
    corrupt = [ids[0] + 1] + ids[1:]
    audit_input = audit.AuditInput(tuple(ids), tuple(corrupt), ids[-1], ids[0])
    sites = [audit.DeclaredSite(c, b, args.tokens - 1) for b in range(blocks - WRITES // 2, blocks) for c in ("attn", "mlp")]
    packets = []

    def forwards():
        with torch.inference_mode():
            for run in range(2 + 2 * WRITES):
                subject.last_logits(torch.tensor([corrupt if run % 2 else ids]))

    times = side_by_side({"audit": lambda: packets.append(audit.build_packet(subject, audit_input, sites, args.threads)),
                          "forwards": forwards}, args.rounds, warmup=0, seed=0)  # fmt: skip
    measurement = audit.record_body(packets[-1]["measurement"])
    model_bytes = sum(p.numel() * p.element_size() for p in subject.model.parameters())
    return {
        "case": args.case, "load_s": load_s, "times": times, "blocks_on_disk": on_disk, "model_bytes": model_bytes,
        "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "parameters": sum(p.numel() for p in subject.model.parameters()),
        "measurement_sha256": hashlib.sha256(json.dumps(measurement, sort_keys=True).encode()).hexdigest(),
        "measurement": measurement, "digest": packets[-1]["model"]["parameters"]["digest"],
    }  # fmt: skip


# ---- whole processes: what a user waits for and holds ---------------------------------------------------------

# What a user without residlab runs to get the same 26 forwards: Transformers loads the same files, and the clean
# and corrupt prompts go through the model one after the other, as many times as the audit runs them.
PLAIN_PROCESS = """
import sys, torch
from transformers import AutoModelForCausalLM
folder, dtype, threads, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
clean, corrupt = ([int(t) for t in argument.split(",")] for argument in sys.argv[5:7])
torch.set_num_threads(threads)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype), attn_implementation="eager").eval()
with torch.inference_mode():
    for run in range(runs):
        model(torch.tensor([corrupt if run % 2 else clean])).logits[0, -1].float()
"""
STATUS_FIELDS = ("RssAnon", "RssFile", "VmHWM")
SAMPLE_SECONDS = 0.02


def watched(command: list[str], limit: float) -> dict:
    """Run ``command``, sampling /proc/<pid>/status every SAMPLE_SECONDS: its wall time and the peaks of its
    anonymous and file-backed resident memory (the kernel keeps only the total's peak, VmHWM), in bytes."""
    peaks = dict.fromkeys(STATUS_FIELDS, 0)
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        status = Path(f"/proc/{child.pid}/status")
        while child.poll() is None:
            if time.perf_counter() - started > limit:
                child.kill()
                raise SystemExit(f"{command[:4]} did not finish within {limit:.0f} s")
            try:
                for line in status.read_text().splitlines():
                    name, _, value = line.partition(":")
                    if name in peaks:
                        peaks[name] = max(peaks[name], int(value.split()[0]) * 1024)
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
            time.sleep(SAMPLE_SECONDS)
        out, err = child.communicate()
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} failed (exit {child.returncode}): {err.strip()[-2000:]}")
    return {"seconds": time.perf_counter() - started, **{name: peaks[name] for name in STATUS_FIELDS}}


def whole_processes(directory: Path, dtype: str, args, scratch: Path) -> dict:
    """``residlab audit`` of 12 writes and the plain process of its 26 forwards on the same float32 files, in
    ``dtype``, side by side: per round in a seeded random order, each alone. Returns the wall times, the memory
    peaks of the last round and the audit's measurement."""
    import random

    from residlab import audit

    blocks, last = args.blocks, args.tokens - 1
    ids = [(7 * i + 3) % 50304 for i in range(args.tokens)]
    corrupt = [ids[0] + 1] + ids[1:]
    sites = [f"{component}:{block}:{last}" for block in range(blocks - WRITES // 2, blocks) for component in ("attn", "mlp")]
    as_text = (",".join(map(str, ids)), ",".join(map(str, corrupt)))
    limit = 3600.0
    times, memory, measurement = {"audit": [], "plain": []}, {}, None
    shuffler = random.Random(0)
    for round_index in range(args.rounds):
        order = ["audit", "plain"]
        shuffler.shuffle(order)
        for name in order:
            if name == "audit":
                output = scratch / f"packet-{dtype}-{round_index}"
                command = [sys.executable, "-m", "residlab", "audit", "--model", str(directory), "--clean-ids", as_text[0],
                           "--corrupt-ids", as_text[1], "--target-id", str(ids[-1]), "--rival-id", str(ids[0]),
                           *(f"--site={site}" for site in sites), "--dtype", dtype, "--threads", str(args.threads),
                           "--output", str(output)]  # fmt: skip
            else:
                command = [sys.executable, "-c", PLAIN_PROCESS, str(directory), dtype, str(args.threads),
                           str(2 + 2 * WRITES), *as_text]  # fmt: skip
            result = watched(command, limit)
            times[name].append(result["seconds"])
            memory[name] = result
            if name == "audit":
                measurement = audit.record_body(audit.read_packet(output)["measurement"])
    return {"times": times, "memory": memory, "measurement": measurement}


def whole_line(dtype: str, result: dict, model_bytes: int) -> str:
    times, memory = result["times"], result["memory"]

    def held(name: str) -> str:
        peak = memory[name]
        return (f"anonymous {peak['RssAnon'] / 1e9:.2f} GB ({peak['RssAnon'] / model_bytes:.2f}x), file-backed "
                f"{peak['RssFile'] / 1e9:.2f} GB, peak {peak['VmHWM'] / 1e9:.2f} GB")

    return (f"{dtype:<9} residlab audit {median_ms(times, 'audit') / 1e3:6.1f} s = {ratio_text(times, 'audit', 'plain')} the "
            f"plain process ({median_ms(times, 'plain') / 1e3:.1f} s; goal at most 1.3x); the model {model_bytes / 1e9:.2f} GB "
            f"in {dtype}; audit: {held('audit')}; plain: {held('plain')}")  # fmt: skip


def case_line(case: str, result: dict) -> str:
    times = result["times"]
    return (f"{case:<33} load {result['load_s']:6.1f} s; audit {median_ms(times, 'audit') / 1e3:7.1f} s = "
            f"{ratio_text(times, 'audit', 'forwards')} its {2 + 2 * WRITES} forwards "
            f"({median_ms(times, 'forwards') / 1e3:.1f} s; goal at most 1.5x); peak memory "
            f"{result['peak_bytes'] / 1e9:.2f} GB = {result['peak_bytes'] / result['model_bytes']:.2f}x the model's "
            f"{result['model_bytes'] / 1e9:.2f} GB (goal at most 1.3x)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, help="where the specimen directory is written (or found)")
    parser.add_argument("--tokens", type=int, default=16, help="prompt length (default 16)")
    parser.add_argument("--rounds", type=int, default=1, help="timed rounds of each case (default 1)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1, the audit's)")
    parser.add_argument("--width", type=int, default=2048, help="the specimen's width (default 2048, Pythia-1B's)")
    parser.add_argument("--blocks", type=int, default=16, help="its blocks (default 16, Pythia-1B's)")
    parser.add_argument("--whole", action="store_true", help="instead: whole processes side by side, residlab audit "
                        "against a plain Transformers load and its 26 forwards, float32 and bfloat16, memory split")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # one case, in a child process
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args)))
        return 0
    from residlab.audit.verify import within_declared

    folder = args.folder or Path(tempfile.mkdtemp(prefix="residlab-1b-"))
    started = time.perf_counter()
    directory = build_directory(folder, args.width, args.blocks)
    print(f"specimen: {directory.name} (random weights, GPT-NeoX width {args.width}, {args.blocks} blocks), "
          f"ready in {time.perf_counter() - started:.0f} s", flush=True)
    if args.whole:
        return whole(directory, args, folder)
    directories = {case: directory for case in CASES} | {"bfloat16": bfloat16_copy(directory)}
    # The cases run one after another, each in its own process (each measures its own side-by-side ratios and
    # peak): run at once, a case's audit and forwards met different contention as the others ended (on 2 cores
    # that alone put bfloat16's audit at 1.71x its forwards). Each case's line is printed as it ends, the
    # comparisons with float32 when every case has.
    results = {}
    for case in CASES:
        child = subprocess.run([sys.executable, __file__, "--case", case, "--model", str(directories[case]),
                                "--tokens", str(args.tokens), "--rounds", str(args.rounds), "--threads",
                                str(args.threads), "--width", str(args.width), "--blocks", str(args.blocks)],
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
        if child.returncode != 0:
            raise SystemExit(f"case {case} failed (exit {child.returncode})")
        results[case] = json.loads(child.stdout)
        print(f"  done: {case_line(case, results[case])}", flush=True)
    exact = results["float32"]
    print(f"{exact['parameters'] / 1e9:.2f}B parameters, {WRITES} writes, {args.tokens} tokens, {args.threads} thread(s), "
          f"{args.rounds} round(s) per case, the cases one after another, each in its own process")  # fmt: skip
    for case in CASES:
        result, times = results[case], results[case]["times"]
        line = f"  {case_line(case, result)}"
        if case.endswith("disk"):
            same = result["measurement_sha256"] == exact["measurement_sha256"] and result["digest"] == exact["digest"]
            cost = median_ms(times, "forwards") / median_ms(exact["times"], "forwards")
            line += (f"; {result['blocks_on_disk']} of {args.blocks} blocks on disk; measurement and "
                     f"parameter digest {'IDENTICAL to' if same else 'DIFFER from'} float32's; its forwards "
                     f"{cost:.2f}x the in-memory ones (separate processes)")  # fmt: skip
        if case == "bfloat16":
            held, total = within_declared(result["measurement"], exact["measurement"])  # residlab.audit.verify's
            line += (f"; memory {result['peak_bytes'] / exact['peak_bytes']:.2f}x float32's; {held} of {total} values "
                     f"within their declared tolerance of float32's")  # fmt: skip
        print(line)
    return 0


def whole(directory: Path, args, folder: Path) -> int:
    """Whole processes on the float32 files, in float32 and in bfloat16: the ratio, the memory split, and bfloat16's
    measurement against float32's within the tolerance it declares."""
    from residlab.audit.verify import within_declared

    parameters = json.loads((directory / "model.safetensors.index.json").read_text())["metadata"]["total_size"] // 4  # float32
    results = {}
    for dtype in ("float32", "bfloat16"):
        results[dtype] = whole_processes(directory, dtype, args, folder)
        print(f"  done: {whole_line(dtype, results[dtype], parameters * (4 if dtype == 'float32' else 2))}", flush=True)
    print(f"{parameters / 1e9:.2f}B parameters (float32 files), {WRITES} writes, {args.tokens} tokens, {args.threads} "
          f"thread(s), {args.rounds} round(s): whole processes, each alone, in a seeded random order per round")  # fmt: skip
    for dtype, result in results.items():
        line = f"  {whole_line(dtype, result, parameters * (4 if dtype == 'float32' else 2))}"
        if dtype == "bfloat16":
            held, total = within_declared(result["measurement"], results["float32"]["measurement"])
            line += f"; {held} of {total} values within their declared tolerance of float32's"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
