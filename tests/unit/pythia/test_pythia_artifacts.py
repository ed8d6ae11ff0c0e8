"""The lock, the synthetic specimen, the plan, the pinned fetch against the fake hub, and the instructors' pin."""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import re
import time
from pathlib import Path

import pytest

from residlab.pythia import pin
from residlab.pythia.artifacts import (
    OBSERVE_READS,
    RETIRED_RECORD_FILE,
    ArtifactError,
    fetch_artifacts,
    plan_text,
    verify_artifacts,
)
from residlab.pythia.lock import ALLOWED_FILES, LockError, load_lock, parse_lock
from residlab.pythia.specimen import (
    PARAMETER_COUNT,
    PINNED_CONFIG,
    SPECIMEN_REPOSITORY,
    TENSOR_COUNT,
    build_specimen_model,
    specimen_files,
    write_specimen,
    write_specimen_lock,
)

ROOT = Path(__file__).resolve().parents[3]
PINNED_LOCK = ROOT / "residlab" / "locks" / "pythia-14m.lock.json"
# The sizes the Lab 05 document and the third-party records give (see the lock's sources).
PUBLISHED_SIZES = {
    "model.safetensors": 28_143_920,
    "tokenizer.json": 2_114_042,
    "tokenizer_config.json": 4_834,
    "config.json": 698,
    "special_tokens_map.json": 441,
    "generation_config.json": 111,
}


def quiet(_message: str) -> None:
    pass


# ---- the lock -----------------------------------------------------------------------------------------------


def test_pinned_lock_holds_the_six_files_and_their_published_total():
    lock = load_lock()
    assert lock.repository == "EleutherAI/pythia-14m"
    assert lock.revision == "94f7c35d5e9f2e9bac8ca839329f505b4d007d5d"
    assert lock.synthetic is False
    assert lock.names == tuple(sorted(ALLOWED_FILES))
    assert {entry.name: entry.size for entry in lock.files} == PUBLISHED_SIZES
    assert lock.total_bytes == 30_264_046 == sum(PUBLISHED_SIZES.values())
    assert lock.file("model.safetensors").sha256 == "116a02532db461f91386a5b20f942ff2c8d4de7341e21b55caafc3d7b25f49a1"
    assert lock.missing_hashes == ("generation_config.json",)
    assert all(entry.source.strip() for entry in lock.files)


def test_lock_module_reads_the_embedded_lock_only_where_a_runner_defines_it(monkeypatch):
    from residlab.pythia import lock as lock_module

    # The package never binds the name; a runner's data section does, and load_lock() then reads it.
    assert not hasattr(lock_module, "EMBEDDED_LOCK_JSON") and lock_module.embedded_lock_json() is None
    data = _pinned_data()
    data["revision"] = "0" * 40
    monkeypatch.setattr(lock_module, "EMBEDDED_LOCK_JSON", json.dumps(data), raising=False)
    assert lock_module.embedded_lock_json() == json.dumps(data)
    assert lock_module.load_lock().revision == "0" * 40
    assert lock_module.load_lock(PINNED_LOCK).revision == _pinned_data()["revision"]


def _pinned_data() -> dict:
    return json.loads(PINNED_LOCK.read_text(encoding="utf-8"))


def _file(data: dict, name: str) -> dict:
    return next(entry for entry in data["files"] if entry["name"] == name)


def _break(change):
    data = _pinned_data()
    change(data)
    return data


BROKEN_LOCKS = {
    "unknown key": (lambda d: d.update(mirror="x"), "unknown key(s) mirror"),
    "missing key": (lambda d: d.pop("revision"), "missing key(s) revision"),
    "branch revision": (lambda d: d.update(revision="main"), "not an immutable 40-hex commit id"),
    "bin weights": (
        lambda d: d["files"].append({"name": "pytorch_model.bin", "size": 1, "sha256": None, "source": "x"}),
        "not allowed: pytorch_model.bin",
    ),
    "a file missing": (lambda d: d["files"].pop(0), "missing: config.json"),
    "file listed twice": (lambda d: d["files"].__setitem__(1, dict(d["files"][0])), "listed twice: config.json"),
    "zero size": (lambda d: _file(d, "config.json").update(size=0), "size 0 is not a positive integer"),
    "size as text": (lambda d: _file(d, "config.json").update(size="698"), "size '698' is not a positive integer"),
    "size as bool": (lambda d: _file(d, "config.json").update(size=True), "size True is not a positive integer"),
    "short sha256": (lambda d: _file(d, "config.json").update(sha256="abc"), "neither 64 lowercase hex digits nor null"),
    "unknown file key": (lambda d: _file(d, "config.json").update(md5="x"), "unknown key(s) md5"),
    "no source": (lambda d: _file(d, "config.json").update(source=" "), "source must say where"),
    "total disagrees": (lambda d: d.update(total_bytes=30_264_047), "the plan and the lock disagree"),
    "schema": (lambda d: d.update(schema=2), "schema 2"),
    # Every field of the wrong JSON type: a LockError naming the field, never a TypeError.
    "schema as text": (lambda d: d.update(schema="1"), "schema '1'"),
    "schema as list": (lambda d: d.update(schema=[1]), "schema [1]"),
    "repository as number": (lambda d: d.update(repository=7), "repository 7"),
    "revision as null": (lambda d: d.update(revision=None), "revision None"),
    "synthetic as text": (lambda d: d.update(synthetic="no"), "synthetic 'no'"),
    "files as object": (lambda d: d.update(files={}), "files must be a list of objects"),
    "file as list": (lambda d: d["files"].append(["config.json"]), "files must be a list of objects"),
    "name as number": (lambda d: _file(d, "config.json").update(name=5), "files[0]: name 5 is not a string"),
    "name as list": (lambda d: _file(d, "config.json").update(name=["config.json"]), "files[0]: name ['config.json']"),
    "name absent": (lambda d: _file(d, "config.json").pop("name"), "files[0]: name None is not a string"),
    "sha256 as number": (lambda d: _file(d, "config.json").update(sha256=1), "sha256 1 is neither"),
    "source as number": (lambda d: _file(d, "config.json").update(source=3), "source must say where"),
    "total as text": (lambda d: d.update(total_bytes="30264046"), "total_bytes '30264046' is not an integer"),
    "libraries as list": (lambda d: d.update(libraries=["torch"]), "libraries ['torch'] must map"),
    "library version as number": (lambda d: d["libraries"].update(torch=2), "libraries {"),
    "also_tested as text": (lambda d: d.update(also_tested="4.57.1"), "also_tested '4.57.1' must map"),
    "revision_source empty": (lambda d: d.update(revision_source=""), "revision_source '' must be a non-empty string"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_LOCKS))
def test_a_malformed_lock_is_refused_naming_the_problem(case, tmp_path):
    change, message = BROKEN_LOCKS[case]
    path = tmp_path / "broken.lock.json"
    path.write_text(json.dumps(_break(change)), encoding="utf-8")
    with pytest.raises(LockError) as error:
        load_lock(path)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def test_a_missing_or_unparseable_lock_file_is_refused(tmp_path):
    with pytest.raises(LockError, match="no such lock file"):
        load_lock(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(LockError, match="not valid JSON"):
        load_lock(tmp_path / "bad.json")


def test_plan_lists_six_files_and_the_total_without_the_network():
    text = plan_text(load_lock())
    for name, size in PUBLISHED_SIZES.items():
        assert any(name in line and f"{size:,} bytes" in line for line in text.splitlines())
    assert "6 files, 30,264,046 bytes in all" in text
    # Learners read the plan: it says what the unpinned file means for them, and asks for no instructor's command.
    assert "generation_config.json: the lock has no sha256 for it" in text and "nothing for you to do" in text
    assert "residlab pythia" not in text


# ---- the synthetic specimen ------------------------------------------------------------------------------------


def test_specimen_copies_the_pinned_config(specimen_dir):
    config = json.loads((specimen_dir / "config.json").read_text(encoding="utf-8"))
    assert config == PINNED_CONFIG
    expected = {
        "hidden_size": 128, "intermediate_size": 512, "num_attention_heads": 4, "num_hidden_layers": 6,
        "hidden_act": "gelu", "layer_norm_eps": 1e-5, "max_position_embeddings": 2048, "rotary_pct": 0.25,
        "rotary_emb_base": 10000, "use_parallel_residual": True, "tie_word_embeddings": False, "vocab_size": 50304,
        "bos_token_id": 0, "eos_token_id": 0, "attention_bias": True, "attention_dropout": 0.0, "hidden_dropout": 0.0,
    }  # fmt: skip
    assert {key: config[key] for key in expected} == expected
    assert config["architectures"] == ["GPTNeoXForCausalLM"]


def test_specimen_weights_have_the_checkpoint_layout(specimen_dir):
    from safetensors import safe_open

    with safe_open(specimen_dir / "model.safetensors", "pt") as weights:
        names = list(weights.keys())
        dtypes = {weights.get_slice(name).get_dtype() for name in names}
        count = 0
        for name in names:
            shape = weights.get_slice(name).get_shape()
            count += shape[0] * (shape[1] if len(shape) > 1 else 1)
    assert len(names) == TENSOR_COUNT == 76
    assert dtypes == {"F16"}
    assert count == PARAMETER_COUNT == 14_067_712
    assert "embed_out.weight" in names  # the untied head, under the pinned checkpoint's name


def test_transformers_loads_the_specimen_files_like_the_in_memory_model(specimen_dir):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(specimen_dir, local_files_only=True)
    rope = getattr(config, "rope_parameters", None)
    if rope is not None:  # transformers 5.x moves the legacy keys here
        assert rope["partial_rotary_factor"] == 0.25 and rope["rope_theta"] == 10000
    else:
        assert config.rotary_pct == 0.25 and config.rotary_emb_base == 10000
    loaded = AutoModelForCausalLM.from_pretrained(
        specimen_dir, local_files_only=True, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    built = build_specimen_model(seed=0)
    assert sum(parameter.numel() for parameter in built.parameters()) == 14_067_712
    assert not built.training
    token_ids = torch.tensor([[510, 1355, 2502, 9735, 13405, 253, 14593, 15]])  # (1, 8)
    with torch.inference_mode():
        assert torch.equal(loaded(token_ids).logits, built(token_ids).logits)
    tokenizer = AutoTokenizer.from_pretrained(specimen_dir, local_files_only=True)
    assert tokenizer("The small red boat crossed the lake.").input_ids == token_ids[0].tolist()
    assert tokenizer.bos_token == tokenizer.eos_token == tokenizer.unk_token == "<|endoftext|>"


def test_specimen_is_byte_identical_for_a_seed_and_differs_across_seeds(tmp_path, specimen_dir, specimen_lock_data):
    again = write_specimen(tmp_path / "again", seed=0)
    assert again == specimen_lock_data
    for name in ALLOWED_FILES:
        assert (tmp_path / "again" / name).read_bytes() == (specimen_dir / name).read_bytes()
    other = specimen_files(seed=1)
    assert other["model.safetensors"] != (specimen_dir / "model.safetensors").read_bytes()
    assert other["config.json"] == (specimen_dir / "config.json").read_bytes()


def test_specimen_lock_describes_its_bytes(specimen_dir, specimen_lock_data, specimen_lock_path):
    lock = load_lock(specimen_lock_path)
    assert lock.synthetic is True and lock.repository == SPECIMEN_REPOSITORY
    assert len(lock.revision) == 40
    for entry in lock.files:
        data = (specimen_dir / entry.name).read_bytes()
        assert entry.size == len(data) and entry.sha256 == hashlib.sha256(data).hexdigest()
    assert lock.libraries == load_lock().libraries
    assert verify_artifacts(specimen_dir, lock).sha256 == {entry.name: entry.sha256 for entry in lock.files}


def test_write_specimen_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        write_specimen(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["keep.txt"]


# ---- fetch against the fake hub --------------------------------------------------------------------------------


def test_fetch_downloads_exactly_the_six_files_once(tmp_path, fake_hub_server, specimen_lock_path, specimen_lock_data):
    lock = load_lock(specimen_lock_path)
    target = tmp_path / "artifacts"
    verified = fetch_artifacts(target, lock, endpoint=fake_hub_server.endpoint, report=quiet)
    assert sorted(path.name for path in target.iterdir()) == sorted(ALLOWED_FILES)  # no .cache, no staging
    assert verified.sha256 == {entry["name"]: entry["sha256"] for entry in specimen_lock_data["files"]}
    resolved = fake_hub_server.resolved_files()
    assert sorted(set(resolved)) == sorted(ALLOWED_FILES)  # never pytorch_model.bin or modeling_custom.py
    assert sorted(resolved) == sorted(ALLOWED_FILES)  # one GET each, nothing else
    assert all(lock.revision in path for _, path in fake_hub_server.requests)
    requests_made = len(fake_hub_server.requests)
    fetch_artifacts(target, lock, endpoint=fake_hub_server.endpoint, report=quiet)
    verify_artifacts(target, lock)
    assert len(fake_hub_server.requests) == requests_made  # verified files are never fetched again


def test_fetch_completes_a_partial_directory_without_touching_verified_files(
    tmp_path, fake_hub_server, specimen_dir, specimen_lock_path
):
    target = tmp_path / "artifacts"
    target.mkdir()
    for name in ("config.json", "model.safetensors"):
        (target / name).write_bytes((specimen_dir / name).read_bytes())
    before = {name: (target / name).stat().st_mtime_ns for name in ("config.json", "model.safetensors")}
    fetch_artifacts(target, load_lock(specimen_lock_path), endpoint=fake_hub_server.endpoint, report=quiet)
    assert sorted(set(fake_hub_server.resolved_files())) == sorted(set(ALLOWED_FILES) - set(before))
    assert {name: (target / name).stat().st_mtime_ns for name in before} == before


def _lock_without_hash(specimen_lock_data: dict, tmp_path: Path, name: str = "generation_config.json") -> Path:
    data = copy.deepcopy(specimen_lock_data)
    _file(data, name)["sha256"] = None
    return write_specimen_lock(data, tmp_path / "incomplete.lock.json")


def test_a_file_without_a_locked_hash_is_checked_against_the_hub_never_recorded_and_never_loaded(
    tmp_path, fake_hub_server, specimen_lock_data
):
    lock = load_lock(_lock_without_hash(specimen_lock_data, tmp_path))
    target = tmp_path / "artifacts"
    messages = []
    fetch_artifacts(target, lock, endpoint=fake_hub_server.endpoint, report=messages.append)
    text = "\n".join(messages)
    assert f"Checked against the Hub's metadata for revision {lock.revision}: generation_config.json: the lock has no sha256" in text
    assert "never reads it" in text and "residlab pythia pin" not in text
    assert any("/paths-info/" in path for method, path in fake_hub_server.requests if method == "POST")
    assert sorted(path.name for path in target.iterdir()) == sorted(ALLOWED_FILES)  # no record of its own

    # Offline, only its size can be checked: it is reported as unpinned, and the observation never reads it.
    verified = verify_artifacts(target, lock)
    assert verified.unpinned == ("generation_config.json",)
    assert "generation_config.json" not in OBSERVE_READS
    with pytest.raises(ArtifactError, match="generation_config.json: the lock .* records no sha256 .* never loaded"):
        verified.bytes_for("generation_config.json")
    assert verified.bytes_for("config.json") == (target / "config.json").read_bytes()


def test_offline_verification_says_what_an_unpinned_file_gets(tmp_path, copy_specimen, specimen_lock_data, capsys):
    from residlab.pythia import cli

    lock_path = _lock_without_hash(specimen_lock_data, tmp_path)
    directory = copy_specimen()
    assert cli.main(["verify", "--artifacts", str(directory), "--lock", str(lock_path)]) == 0
    out = capsys.readouterr().out
    assert "generation_config.json: the lock has no sha256 for it" in out and "an offline run checks only its size" in out
    assert "never reads it" in out and "residlab pythia pin" not in out
    with open(directory / "generation_config.json", "ab") as handle:
        handle.write(b" ")  # its size is still checked
    assert cli.main(["verify", "--artifacts", str(directory), "--lock", str(lock_path)]) == 1
    assert "generation_config.json: 76 bytes, more than the 75 allowed; not read" in capsys.readouterr().err


def test_a_hand_written_record_does_not_vouch_for_anything(tmp_path, copy_specimen, specimen_lock_data):
    lock = load_lock(_lock_without_hash(specimen_lock_data, tmp_path))
    directory = copy_specimen()
    (directory / RETIRED_RECORD_FILE).write_text(
        json.dumps({"repository": lock.repository, "revision": lock.revision, "files": {"generation_config.json": {"sha256": "0" * 64}}})
    )
    with pytest.raises(ArtifactError, match=f"{RETIRED_RECORD_FILE}: .*no longer trusted or used"):
        verify_artifacts(directory, lock)
    (directory / RETIRED_RECORD_FILE).unlink()
    (directory / RETIRED_RECORD_FILE).symlink_to("/dev/zero")  # read before any rule once; now never read
    with pytest.raises(ArtifactError, match=f"{RETIRED_RECORD_FILE}: is a symbolic link"):
        verify_artifacts(directory, lock)


def test_an_unlocked_file_that_disagrees_with_the_hub_metadata_is_refused(
    tmp_path, fake_hub_server, specimen_lock_data
):
    lock = load_lock(_lock_without_hash(specimen_lock_data, tmp_path))
    fake_hub_server.faults["generation_config.json"] = "flip"  # served bytes differ from the API's blob id
    target = tmp_path / "artifacts"
    with pytest.raises(ArtifactError, match="generation_config.json: git blob id .* the Hub's metadata says"):
        fetch_artifacts(target, lock, endpoint=fake_hub_server.endpoint, report=quiet)
    assert not (target / "generation_config.json").exists()


def test_an_existing_unlocked_file_is_checked_against_the_hub_before_it_is_kept(
    tmp_path, fake_hub_server, specimen_dir, specimen_lock_data
):
    lock = load_lock(_lock_without_hash(specimen_lock_data, tmp_path))
    target = tmp_path / "artifacts"
    target.mkdir()
    original = (specimen_dir / "generation_config.json").read_bytes()
    changed = bytearray(original)
    changed[3] ^= 0x01  # same size, different bytes
    (target / "generation_config.json").write_bytes(bytes(changed))
    with pytest.raises(ArtifactError, match="generation_config.json: git blob id .* the Hub's metadata says"):
        fetch_artifacts(target, lock, endpoint=fake_hub_server.endpoint, report=quiet)
    (target / "generation_config.json").write_bytes(original)
    fetch_artifacts(target, lock, endpoint=fake_hub_server.endpoint, report=quiet)
    assert "generation_config.json" not in fake_hub_server.resolved_files()  # checked, never downloaded


# ---- pin -------------------------------------------------------------------------------------------------------


def test_pin_rewrites_a_lock_from_the_hub_api(tmp_path, fake_hub_server, specimen_lock_data, capsys):
    stale = copy.deepcopy(specimen_lock_data)
    stale["libraries"]["torch"] = "9.9.9"  # pin keeps library versions: they are not the Hub's to say
    _file(stale, "generation_config.json")["sha256"] = None
    _file(stale, "model.safetensors")["sha256"] = "0" * 64
    lock_path = write_specimen_lock(stale, tmp_path / "lock.json")
    status = pin.main(
        ["--revision", specimen_lock_data["revision"], "--lock", str(lock_path), "--endpoint", fake_hub_server.endpoint],
        today=datetime.date(2026, 11, 30),
    )
    output = capsys.readouterr().out
    assert status == 0
    new = json.loads(lock_path.read_text(encoding="utf-8"))
    parse_lock(new, "pinned")
    assert [(e["name"], e["size"], e["sha256"]) for e in new["files"]] == [
        (e["name"], e["size"], e["sha256"]) for e in specimen_lock_data["files"]
    ]
    read = f"read from the Hub API at revision {specimen_lock_data['revision']} on 2026-11-30"
    assert all(read in entry["source"] for entry in new["files"])
    assert "LFS sha256" in _file(new, "model.safetensors")["source"]
    assert "git blob id" in _file(new, "config.json")["source"]
    assert new["libraries"]["torch"] == "9.9.9"
    assert "model.safetensors sha256" in output and "residlab sync" in output and "make test" in output
    # Only the small non-LFS files were downloaded to hash them; the weights' sha256 came from the API.
    assert "model.safetensors" not in fake_hub_server.resolved_files()
    assert not list(tmp_path.glob(".pin-*"))


def test_pin_refuses_a_branch_name_and_a_revision_the_hub_lacks(tmp_path, fake_hub_server, specimen_lock_path, capsys):
    lock_path = tmp_path / "lock.json"
    lock_path.write_bytes(specimen_lock_path.read_bytes())
    with pytest.raises(SystemExit):
        pin.main(["--revision", "main", "--lock", str(lock_path), "--endpoint", fake_hub_server.endpoint])
    status = pin.main(["--revision", "f" * 40, "--lock", str(lock_path), "--endpoint", fake_hub_server.endpoint])
    assert status == 1
    assert "the Hub has no such revision (HTTP 404" in capsys.readouterr().err
    assert lock_path.read_bytes() == specimen_lock_path.read_bytes()


def test_pin_refuses_when_the_hub_lacks_one_of_the_six(tmp_path, fake_hub_server, specimen_lock_path, capsys):
    del fake_hub_server.files["special_tokens_map.json"]
    lock_path = tmp_path / "lock.json"
    lock_path.write_bytes(specimen_lock_path.read_bytes())
    revision = load_lock(specimen_lock_path).revision
    status = pin.main(["--revision", revision, "--lock", str(lock_path), "--endpoint", fake_hub_server.endpoint])
    assert status == 1
    assert "lists no special_tokens_map.json" in capsys.readouterr().err
    assert lock_path.read_bytes() == specimen_lock_path.read_bytes()


@pytest.mark.parametrize(
    "fault, timeout, message",
    [
        # a server that trickles one byte at a time is cut off at the pin's deadline
        ("trickle", "2", r"config\.json: download .* failed .*the fetch's deadline of 2 s passed"),
        # a body longer than the API's size is refused from its Content-Length
        ("resize", "60", r"config\.json: .*announces [0-9,]+ bytes \(Content-Length\), the Hub API says [0-9,]+"),
        # an endless body without a length stops one byte past the API's size
        ("oversize_unframed", "60", r"config\.json: .*sent more than the Hub API's [0-9,]+ bytes"),
    ],
)
def test_pin_downloads_within_the_fetch_bounds_and_keeps_the_lock(fault, timeout, message, tmp_path, fake_hub_server,
                                                                  specimen_lock_path, capsys):  # fmt: skip
    fake_hub_server.faults["config.json"] = fault
    lock_path = tmp_path / "lock.json"
    lock_path.write_bytes(specimen_lock_path.read_bytes())
    revision = load_lock(specimen_lock_path).revision
    started = time.monotonic()
    status = pin.main(["--revision", revision, "--lock", str(lock_path), "--endpoint", fake_hub_server.endpoint,
                       "--timeout", timeout])  # fmt: skip
    assert status == 1 and time.monotonic() - started < 30
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert "the lock was not changed" in err
    assert lock_path.read_bytes() == specimen_lock_path.read_bytes()
    assert not list(tmp_path.glob(".pin-*"))


def test_pin_refuses_a_huge_size_claimed_for_a_plain_git_file_without_downloading_it(
    tmp_path, fake_hub_server, specimen_lock_path, monkeypatch, capsys
):
    true_record = fake_hub_server.file_record
    monkeypatch.setattr(fake_hub_server, "file_record",
                        lambda name: {**true_record(name), "size": 50_000_000} if name == "tokenizer.json" else true_record(name))  # fmt: skip
    lock_path = tmp_path / "lock.json"
    lock_path.write_bytes(specimen_lock_path.read_bytes())
    revision = load_lock(specimen_lock_path).revision
    assert pin.main(["--revision", revision, "--lock", str(lock_path), "--endpoint", fake_hub_server.endpoint]) == 1
    assert "tokenizer.json: the Hub API reports 50,000,000 bytes for a file outside LFS" in capsys.readouterr().err
    assert "tokenizer.json" not in fake_hub_server.resolved_files()
    assert lock_path.read_bytes() == specimen_lock_path.read_bytes()


def test_pin_refuses_a_timeout_that_is_not_a_positive_number(tmp_path, specimen_lock_path, capsys):
    with pytest.raises(SystemExit):
        pin.main(["--revision", "f" * 40, "--lock", str(specimen_lock_path), "--timeout", "0"])
    assert "is not a positive number of seconds" in capsys.readouterr().err


# ---- the package commands -----------------------------------------------------------------------------------


def test_package_commands_import_nothing_heavy():
    import subprocess
    import sys

    code = (
        "import sys, residlab.pythia, residlab.pythia.cli, residlab.pythia.runner, residlab.pythia.pin\n"
        "from residlab.pythia import cli\n"
        "assert cli.main(['plan']) == 0\n"
        "heavy = sorted({'torch', 'transformers', 'huggingface_hub', 'safetensors'} & set(sys.modules))\n"
        "print('heavy:', heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "heavy: []" in result.stdout


def test_residlab_pythia_fetch_and_verify(tmp_path, fake_hub_server, specimen_lock_path, capsys):
    from residlab.pythia import cli

    target = tmp_path / "artifacts"
    common = ["--artifacts", str(target), "--lock", str(specimen_lock_path)]
    assert cli.main(["fetch", *common, "--endpoint", fake_hub_server.endpoint]) == 0
    assert "six files verified" in capsys.readouterr().out
    requests_made = len(fake_hub_server.requests)
    assert cli.main(["verify", *common]) == 0
    assert len(fake_hub_server.requests) == requests_made
    (target / "config.json").unlink()
    assert cli.main(["verify", *common]) == 1
    assert "config.json: missing" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["fetch", "--lock", str(specimen_lock_path)])  # no --artifacts
    assert cli.main(["nonsense"]) == 2
