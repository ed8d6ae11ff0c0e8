"""The audit at scale (issue 41): ``--device``, ``--dtype`` and accelerate's ``--device-map auto`` with
``--max-memory``. A dispatched model's packet equals the undispatched one's; a bfloat16 packet verifies under its
declared tolerance and is refused beyond it; bad placement arguments are one line and write nothing. The cuda and
mps variants run where that device is present and are skipped elsewhere."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from residlab import audit
from residlab.audit import loading
from residlab.audit.loading import Placement, place_specimen
from residlab.capture.recording import hook_snapshot
from residlab.course.lab06 import copy_audit

ROOT = Path(__file__).resolve().parents[3]
PROMPTS = ["--clean-ids", "5,17,3,40,2", "--corrupt-ids", "9,17,3,40,2", "--target-id", "12", "--rival-id", "30"]
NO_CUDA = "no CUDA device on this machine: the cuda variant runs where torch.cuda.is_available()"
NO_MPS = "no MPS device on this machine: the mps variant runs on Apple silicon"
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
mps = pytest.mark.skipif(not (torch.backends.mps.is_available()), reason=NO_MPS)


def run_cli(argv, capsys):
    code = copy_audit.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def records(packet: Path) -> dict:
    return {name: json.loads((packet / f"{name}.json").read_text()) for name in audit.RECORDS}


def budget(name: str, dtype: str = "float32", blocks_in_memory: int = 1) -> int:
    """A CPU budget that holds the embeddings, the final normaliser and ``blocks_in_memory`` blocks: the rest of
    the specimen's blocks go to disk."""
    subject = audit.build_specimen(name, 0, dtype)
    return loading.cpu_budget(subject.model, subject.block_type, blocks_in_memory, dtype)


@pytest.fixture(scope="module")
def plain_packet(tmp_path_factory):
    directory = tmp_path_factory.mktemp("plain") / "gpt_neox"
    assert copy_audit.main(["--specimen", "gpt_neox", *PROMPTS, "--output", str(directory)]) == 0
    return directory


def test_a_tiny_max_memory_spreads_the_specimen_over_cpu_and_disk_and_leaves_no_hook():
    subject = place_specimen("gpt_neox", 0, Placement(device_map="auto", max_memory={"cpu": budget("gpt_neox")}))
    where = {name: str(device) for name, device in subject.model.hf_device_map.items()}
    assert {"cpu", "disk"} <= set(where.values()), where
    assert where["gpt_neox.final_layer_norm"] == where["lm_head"] == where["gpt_neox.embed_in"] == "cpu"
    offloaded = [name for name, p in subject.model.named_parameters() if p.is_meta]
    assert offloaded and len(offloaded) < len(list(subject.model.parameters()))
    before = hook_snapshot(subject.model)
    sites = [audit.DeclaredSite(c, b, 4) for b in range(len(subject.blocks)) for c in ("attn", "mlp")]
    audit.build_packet(subject, audit.AuditInput((5, 17, 3, 40, 2), (9, 17, 3, 40, 2), 12, 30), sites)
    assert hook_snapshot(subject.model) == before  # the recording's hooks are gone; accelerate's stay its own
    assert all(p.is_meta for name, p in subject.model.named_parameters() if name in offloaded)


@pytest.mark.parametrize("name", ["gpt_neox", "gpt2", "llama"])
def test_a_dispatched_packet_is_the_undispatched_packet(name, tmp_path, capsys, monkeypatch):
    plain, dispatched, scratch = tmp_path / "plain", tmp_path / "dispatched", tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the offload folder is made
    assert run_cli(["--specimen", name, *PROMPTS, "--output", plain], capsys)[0] == 0
    code, out, err = run_cli(["--specimen", name, *PROMPTS, "--device-map", "auto", "--max-memory",
                              f"cpu={budget(name)}B", "--output", dispatched], capsys)  # fmt: skip
    assert code == 0, err
    assert "ran in float32 on a device map: blocks on cpu 1, disk 2; the rest on cpu" in out, out
    for record in audit.RECORDS:  # every digest, value and link: the same bytes
        assert (dispatched / f"{record}.json").read_bytes() == (plain / f"{record}.json").read_bytes(), record
    assert not list(scratch.glob("residlab-offload-*"))  # the offload folder removed when the audit ended
    code, out, _ = run_cli(["verify", plain, "--device-map", "auto", "--max-memory", f"cpu={budget(name)}B"], capsys)
    assert code == 0 and "verified: every check passed" in out, out


def test_a_model_directory_loads_straight_into_its_device_map(tmp_path, capsys):
    """from_pretrained places each tensor as it loads; the packet equals the plain load's."""
    directory = tmp_path / "model"
    audit.build_specimen("gpt_neox", 3).model.save_pretrained(directory)
    plain, dispatched = tmp_path / "plain", tmp_path / "dispatched"
    assert run_cli(["--model", directory, *PROMPTS, "--output", plain], capsys)[0] == 0
    code, out, err = run_cli(["--model", directory, *PROMPTS, "--device-map", "auto", "--max-memory",
                              f"cpu={budget('gpt_neox')}B", "--output", dispatched], capsys)  # fmt: skip
    assert code == 0, err
    assert "disk" in out
    assert records(dispatched) == records(plain)


def test_an_offloaded_parameter_changed_in_its_store_is_caught_by_the_closing_hash():
    subject = place_specimen("gpt2", 0, Placement(device_map="auto", max_memory={"cpu": budget("gpt2")}))
    watch = audit.ParameterWatch(subject.model)
    offloaded = sorted(Path(subject.offload_folder.name).glob("*.weight.dat"))
    assert offloaded
    data = bytearray(offloaded[0].read_bytes())
    data[0] ^= 1
    offloaded[0].write_bytes(bytes(data))
    assert watch.after_run() == watch.digest  # carried: no forward writes an offloaded store
    with pytest.raises(audit.AuditError, match="the parameters changed during the audit"):
        watch.close()


@pytest.fixture(scope="module")
def bfloat16_packet(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bf16") / "gpt_neox"
    assert copy_audit.main(["--specimen", "gpt_neox", *PROMPTS, "--dtype", "bfloat16", "--output", str(directory)]) == 0
    return directory


def test_a_bfloat16_packet_declares_its_dtype_and_tolerance_and_verifies(bfloat16_packet, plain_packet, capsys):
    packet = records(bfloat16_packet)
    scale = audit.tolerance_scale("bfloat16")
    assert packet["model"]["execution"]["dtype"] == "bfloat16"
    assert packet["model"]["execution"]["tolerance_scale"] == scale == 4096
    assert {t["dtype"] for t in packet["model"]["parameters"]["tensors"]} == {"torch.bfloat16"}
    row = packet["measurement"]["results"][0]
    assert row["norm"]["tolerance"] == {k: v * scale for k, v in audit.TOLERANCES["norm"].items()}
    assert "times 4096" in packet["measurement"]["quantities"]["metric"]["tolerance"]
    # an approximation of the float32 numbers, within what it declares
    exact = records(plain_packet)["measurement"]["baseline"]["clean"]["value"]
    approximate = packet["measurement"]["baseline"]["clean"]
    assert approximate["value"] != exact
    assert abs(approximate["value"] - exact) <= approximate["tolerance"]["absolute"] + approximate["tolerance"]["relative"] * abs(exact)
    code, out, _ = run_cli(["verify", bfloat16_packet], capsys)
    assert code == 0, out
    assert "re-run in bfloat16, the packet's dtype: its declared tolerances, float32's x 4096" in out.splitlines()


def _edited(packet: Path, target: Path, edit) -> Path:
    shutil.copytree(packet, target)
    values = records(target)
    edit(values["measurement"])
    values = audit.linked_records({name: audit.record_body(value) for name, value in values.items()})
    for name, value in values.items():
        (target / f"{name}.json").write_text(json.dumps(value))
    return target


@pytest.mark.parametrize(("shift", "accepted"), [(0.5, True), (1.5, False)])
def test_a_bfloat16_packet_changed_beyond_its_tolerance_is_refused(bfloat16_packet, tmp_path, capsys, shift, accepted):
    """A value moved by ``shift`` times its declared tolerance (re-linked, as a careful forger would)."""
    def edit(measurement):
        node = measurement["results"][1]["norm"]
        tolerance = node["tolerance"]["absolute"] + node["tolerance"]["relative"] * abs(node["value"])
        node["value"] += shift * tolerance

    code, out, _ = run_cli(["verify", _edited(bfloat16_packet, tmp_path / "edited", edit)], capsys)
    assert (code == 0) == accepted, out
    if not accepted:
        assert "FAIL record measurement, field results[1].norm.value" in out


def test_a_float32_packet_relabelled_bfloat16_is_refused(plain_packet, tmp_path, capsys):
    """A forger who declares the looser dtype for float32 numbers: the re-run in bfloat16 hashes other weights."""
    shutil.copytree(plain_packet, tmp_path / "relabelled")
    values = records(tmp_path / "relabelled")
    values["model"]["execution"].update(dtype="bfloat16", tolerance_scale=4096)
    values = audit.linked_records({name: audit.record_body(value) for name, value in values.items()})
    for name, value in values.items():
        (tmp_path / "relabelled" / f"{name}.json").write_text(json.dumps(value))
    code, out, _ = run_cli(["verify", tmp_path / "relabelled"], capsys)
    assert code == 1
    assert "FAIL record model, field parameters.digest" in out


def test_a_schema_4_packet_is_refused_in_one_line(plain_packet, tmp_path, capsys):
    shutil.copytree(plain_packet, tmp_path / "old")
    model = json.loads((tmp_path / "old" / "model.json").read_text())
    model["schema"] = "residlab-audit-packet/4"
    (tmp_path / "old" / "model.json").write_text(json.dumps(model))
    code, out, err = run_cli(["verify", tmp_path / "old"], capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "'residlab-audit-packet/4'; this tool reads residlab-audit-packet/5" in err


BAD = [
    (["--device", "tpu"], "--device 'tpu': give cpu, cuda, cuda:N or mps"),
    (["--dtype", "float64"], "--dtype 'float64': give one of float32, bfloat16, float16"),
    (["--device-map", "auto", "--max-memory", "cpu=lots"], "--max-memory 'cpu=lots': write DEVICE=SIZE"),
    (["--device-map", "auto", "--max-memory", "cpu=1GB,cpu=2GB"], "cpu is given twice"),
    (["--device-map", "auto", "--max-memory", "disk=1GB"], "'disk' is not cpu, mps or a cuda index"),
    (["--device-map", "auto", "--max-memory", "cpu=0MB"], "cpu is given no memory"),
    (["--device-map", "auto", "--max-memory", "cpu=100B"], "cpu must hold the embeddings and the final normaliser"),
    (["--max-memory", "cpu=1GB"], "--max-memory applies only with --device-map auto"),
    (["--device-map", "sequential"], "--device-map 'sequential': the one device map is auto"),
    (["--device-map", "auto", "--device", "cpu:0"], "--device 'cpu:0'"),
]
if not torch.cuda.is_available():
    BAD += [(["--device", "cuda"], "--device cuda: no cuda device is present here (present: cpu"),
            (["--device-map", "auto", "--max-memory", "0=1GB"], "--max-memory cuda:0: no cuda device is present")]
if not torch.backends.mps.is_available():
    BAD += [(["--device", "mps"], "--device mps: no mps device is present here")]


@pytest.mark.parametrize(("arguments", "named"), BAD)
def test_a_bad_placement_is_one_line_and_writes_nothing(arguments, named, tmp_path, capsys):
    output = tmp_path / "packet"
    code, out, err = run_cli(["--specimen", "gpt2", *PROMPTS, *arguments, "--output", output], capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and named in err, err
    assert not output.exists()


def test_a_device_map_without_accelerate_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "accelerate", None)  # what an environment without it raises: ImportError
    code, _, err = run_cli(["--specimen", "gpt2", *PROMPTS, "--device-map", "auto", "--output", tmp_path / "p"], capsys)
    assert code == 1 and err == f"error: --device-map needs accelerate, which is not installed: pip install {loading.ACCELERATE_PIN}\n"
    assert not (tmp_path / "p").exists()


def test_the_accelerate_pin_is_the_projects():
    pins = (ROOT / "requirements.txt").read_text().splitlines()
    assert loading.ACCELERATE_PIN in pins


def test_the_copy_model_runs_in_float32_on_the_cpu_only(tmp_path, capsys):
    code, _, err = run_cli(["--copy-model", "--clean-ids", "1,2,3,4,5", "--corrupt-ids", "1,2,3,4,6", "--target-id", "1",
                            "--rival-id", "2", "--dtype", "bfloat16", "--output", tmp_path / "p"], capsys)  # fmt: skip
    assert code == 1 and "--copy-model runs in float32 on the CPU only" in err


# ---------------------------------------------------------------------------------------------------------
# The same on an accelerator, where one is present: its packet verifies on the CPU, and the CPU's on it.


def _on_accelerator(device: str, tmp_path, capsys, plain_packet, extra: list):
    packet = tmp_path / device
    code, out, err = run_cli(["--specimen", "gpt_neox", *PROMPTS, *extra, "--output", packet], capsys)
    assert code == 0, err
    assert records(packet)["model"]["parameters"] == records(plain_packet)["model"]["parameters"]
    assert run_cli(["verify", packet], capsys)[0] == 0  # on the CPU
    code, out, _ = run_cli(["verify", plain_packet, *extra], capsys)
    assert code == 0, out


@cuda
def test_the_audit_on_cuda_verifies_on_the_cpu(tmp_path, capsys, plain_packet):
    _on_accelerator("cuda", tmp_path, capsys, plain_packet, ["--device", "cuda"])


@cuda
def test_a_device_map_over_cuda_cpu_and_disk_equals_the_plain_packet(tmp_path, capsys, plain_packet):
    size = budget("gpt_neox", blocks_in_memory=0)
    _on_accelerator("cuda", tmp_path, capsys, plain_packet, ["--device-map", "auto", "--max-memory", f"0={size}B,cpu={size}B"])


@cuda
def test_a_bfloat16_packet_made_on_cuda_verifies_on_the_cpu(tmp_path, capsys):
    packet = tmp_path / "bf16"
    assert run_cli(["--specimen", "gpt_neox", *PROMPTS, "--dtype", "bfloat16", "--device", "cuda", "--output", packet],
                   capsys)[0] == 0  # fmt: skip
    code, out, _ = run_cli(["verify", packet], capsys)
    assert code == 0, out


@mps
def test_the_audit_on_mps_verifies_on_the_cpu(tmp_path, capsys, plain_packet):
    _on_accelerator("mps", tmp_path, capsys, plain_packet, ["--device", "mps"])
