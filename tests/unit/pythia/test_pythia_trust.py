"""What the tools trust and what they refuse: the one rule for reading a file, the model built from the bytes that
were hashed, and output paths refused before any work (the capture the site checks before showing it:
tests/unit/course/test_capture_page.py)."""

from __future__ import annotations

import builtins
import copy
import hashlib
import os
from pathlib import Path

import pytest

from residlab.pythia.artifacts import ArtifactError, verify_artifacts
from residlab.pythia.lock import LockError, UnsafeFileError, load_lock, read_file_bytes

torch = pytest.importorskip("torch")

from residlab.capture.outdir import OutputDirectoryError  # noqa: E402
from residlab.pythia import load, observe  # noqa: E402



def must_not_load(*args, **kwargs):
    raise AssertionError("the model was loaded before the output path was checked")


# ---- one rule for every file read ----------------------------------------------------------------------------


def test_the_read_rule_refuses_links_fifos_devices_and_oversized_files_without_reading_them(tmp_path):
    regular = tmp_path / "regular.json"
    regular.write_bytes(b'{"a": 1}')
    held = read_file_bytes(regular, 8)
    assert held.data == b'{"a": 1}' and held.sha256 == hashlib.sha256(held.data).hexdigest()
    (tmp_path / "link.json").symlink_to(regular)
    with pytest.raises(UnsafeFileError, match="link.json: is a symbolic link"):
        read_file_bytes(tmp_path / "link.json", 8)
    (tmp_path / "zero").symlink_to("/dev/zero")  # would exhaust memory if followed and read to the end
    with pytest.raises(UnsafeFileError, match="zero: is a symbolic link"):
        read_file_bytes(tmp_path / "zero", 8)
    os.mkfifo(tmp_path / "fifo")  # would block forever if opened for reading without a writer
    with pytest.raises(UnsafeFileError, match="fifo: not a regular file"):
        read_file_bytes(tmp_path / "fifo", 8)
    with pytest.raises(UnsafeFileError, match="regular.json: 8 bytes, more than the 7 allowed; not read"):
        read_file_bytes(regular, 7)
    with pytest.raises(FileNotFoundError):
        read_file_bytes(tmp_path / "absent", 8)


def test_a_file_changed_while_it_is_read_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "weights"
    path.write_bytes(b"x" * 3_000_000)
    real_read = os.read

    def read_then_append(descriptor, count):
        data = real_read(descriptor, count)
        if path.stat().st_size == 3_000_000:
            with open(path, "ab") as handle:  # another process writes once while the bytes are being read
                handle.write(b"y")
        return data

    monkeypatch.setattr(os, "read", read_then_append)
    with pytest.raises(UnsafeFileError, match="weights: changed while it was being read"):
        read_file_bytes(path, 4_000_000)


@pytest.mark.parametrize("kind", ["symlink to /dev/zero", "fifo", "oversized", "directory"])
def test_the_lock_is_read_under_the_same_rule(kind, tmp_path, specimen_lock_path):
    lock_path = tmp_path / "lock.json"
    if kind == "symlink to /dev/zero":
        lock_path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(lock_path)
    elif kind == "oversized":
        lock_path.write_bytes(specimen_lock_path.read_bytes() + b" " * (1 << 20))
    else:
        lock_path.mkdir()
    with pytest.raises(LockError, match=f"{lock_path}: lock.json: "):
        load_lock(lock_path)


@pytest.mark.parametrize("kind", ["fifo", "symlink to /dev/zero", "oversized"])
def test_an_artifact_that_is_not_a_plain_file_of_its_size_is_refused_unread(kind, copy_specimen, specimen_lock_path):
    directory = copy_specimen()
    target = directory / "config.json"
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
        message = "config.json: not a regular file"
    elif kind == "symlink to /dev/zero":
        target.symlink_to("/dev/zero")
        message = r"config.json: is a symbolic link \(to /dev/zero\)"
    else:
        target.write_bytes(b"{}" + b" " * 50_000_000)
        message = "config.json: 50,000,002 bytes, more than the 638 allowed; not read"
    with pytest.raises(ArtifactError, match=message):
        verify_artifacts(directory, load_lock(specimen_lock_path))


# ---- the model is built from the bytes that were hashed ----------------------------------------------------------


def test_the_model_and_tokenizer_are_built_without_reopening_any_artifact(copy_specimen, specimen_lock_path, monkeypatch):
    directory = copy_specimen()
    verified = verify_artifacts(directory, load_lock(specimen_lock_path))
    opened = []
    real_os_open, real_open = os.open, builtins.open

    def record_os_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_os_open(path, *args, **kwargs)

    def record_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", record_os_open)
    monkeypatch.setattr(builtins, "open", record_open)
    model, tokenizer = load.load_offline(verified)
    monkeypatch.undo()
    assert [path for path in opened if str(directory) in path] == []
    assert tokenizer(observe.FIXED_TEXT, add_special_tokens=False)["input_ids"] == [510, 1355, 2502, 9735, 13405, 253, 14593, 15]
    assert sum(parameter.numel() for parameter in model.parameters()) == 14_067_712


def test_the_in_memory_tokenizer_matches_transformers_own_loading(specimen_dir):
    from transformers import AutoTokenizer

    verified = verify_artifacts(specimen_dir, load_lock(Path(specimen_dir).parent / "specimen.lock.json"))
    built = load._tokenizer_from_bytes(verified)
    loaded = AutoTokenizer.from_pretrained(specimen_dir, local_files_only=True)
    for text in (observe.FIXED_TEXT, "  Two spaces, a tab\t, café, 12345 and <|endoftext|>.", "日本語"):
        ids = built(text, add_special_tokens=False)["input_ids"]
        assert ids == loaded(text, add_special_tokens=False)["input_ids"]
        assert built.convert_ids_to_tokens(ids) == loaded.convert_ids_to_tokens(ids)
        assert [built.decode([i]) for i in ids] == [loaded.decode([i]) for i in ids]
    assert (built.bos_token, built.eos_token, built.unk_token) == (loaded.bos_token, loaded.eos_token, loaded.unk_token)


def test_weights_swapped_after_verification_are_never_used(copy_specimen, specimen_lock_path, specimen_lock_data, tmp_path):
    from residlab.pythia.specimen import specimen_files

    directory = copy_specimen()
    verified = verify_artifacts(directory, load_lock(specimen_lock_path))
    swapped = directory / "model.safetensors.new"
    swapped.write_bytes(specimen_files(seed=1)["model.safetensors"])  # same size, other weights
    os.replace(swapped, directory / "model.safetensors")
    output = tmp_path / "run"
    with pytest.raises(observe.ObservationError, match="model.safetensors: changed in .* after it was verified"):
        observe.observe_to_directory(verified, output, command=["test"])
    assert not output.exists()


def test_the_manifest_records_the_hashes_of_the_bytes_loaded(copy_specimen, specimen_lock_path, specimen_lock_data, tmp_path):
    directory = copy_specimen()
    verified = verify_artifacts(directory, load_lock(specimen_lock_path))
    result = observe.observe_to_directory(verified, tmp_path / "run", command=["test"])
    locked = {entry["name"]: entry["sha256"] for entry in specimen_lock_data["files"]}
    files = {entry["name"]: entry for entry in result["manifest"]["files"]}
    assert {name: entry["sha256"] for name, entry in files.items()} == locked
    assert {name for name, entry in files.items() if entry["loaded"]} == set(observe.OBSERVE_READS)
    assert files["generation_config.json"]["loaded"] is False  # only text generation would read it
    for name in observe.OBSERVE_READS:
        assert hashlib.sha256(verified.contents[name].data).hexdigest() == files[name]["sha256"]


def test_observe_refuses_a_lock_that_leaves_a_file_it_reads_unpinned(copy_specimen, specimen_lock_data, tmp_path):
    from residlab.pythia.lock import parse_lock

    data = copy.deepcopy(specimen_lock_data)
    next(entry for entry in data["files"] if entry["name"] == "tokenizer.json")["sha256"] = None
    verified = verify_artifacts(copy_specimen(), parse_lock(data, "incomplete lock"))
    assert verified.unpinned == ("tokenizer.json",)
    with pytest.raises(observe.ObservationError, match="tokenizer.json: the lock .* records no sha256"):
        observe.observe_to_directory(verified, tmp_path / "run", command=["test"])
    assert not (tmp_path / "run").exists()


# ---- output paths --------------------------------------------------------------------------------------------


def _symlink_to_empty_directory(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "empty")
    return tmp_path / "out"


def _dangling_symlink(tmp_path: Path) -> Path:
    (tmp_path / "out").symlink_to(tmp_path / "nowhere" / "deeper")
    return tmp_path / "out"


def _symlink_to_file(tmp_path: Path) -> Path:
    (tmp_path / "file").write_text("x")
    (tmp_path / "out").symlink_to(tmp_path / "file")
    return tmp_path / "out"


def _a_file(tmp_path: Path) -> Path:
    (tmp_path / "out").write_text("x")
    return tmp_path / "out"


def _non_empty_directory(tmp_path: Path) -> Path:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    return tmp_path / "out"


def _parent_is_a_file(tmp_path: Path) -> Path:
    (tmp_path / "file").write_text("x")
    return tmp_path / "file" / "out"


OUTPUT_PATHS = {
    "symlink to an empty directory": (_symlink_to_empty_directory, "is a symbolic link"),
    "dangling symlink": (_dangling_symlink, "is a symbolic link"),
    "symlink to a file": (_symlink_to_file, "is a symbolic link"),
    "a file": (_a_file, "exists and is not a directory"),
    "a non-empty directory": (_non_empty_directory, "is not empty"),
    "parent is a file": (_parent_is_a_file, "is not a directory"),
}


def _snapshot(directory: Path) -> dict:
    return {
        str(path.relative_to(directory)): (os.readlink(path) if path.is_symlink() else path.is_dir())
        for path in sorted(directory.rglob("*"))
    }


@pytest.mark.parametrize("case", sorted(OUTPUT_PATHS))
def test_an_unusable_output_path_is_refused_before_loading_with_no_side_effect(case, verified_specimen, tmp_path, monkeypatch):
    make, message = OUTPUT_PATHS[case]
    place = tmp_path / "place"
    place.mkdir()
    output = make(place)
    before = _snapshot(place)
    monkeypatch.setattr(observe, "load_offline", must_not_load)
    with pytest.raises(OutputDirectoryError, match=message):
        observe.observe_to_directory(verified_specimen, output, command=["test"])
    assert _snapshot(place) == before  # nothing created, e.g. no directory at a dangling link's target


@pytest.mark.parametrize("case", sorted(OUTPUT_PATHS))
def test_the_runner_and_cli_refuse_an_unusable_output_path_without_a_traceback(
    case, specimen_dir, specimen_lock_path, tmp_path, capsys, monkeypatch
):
    from residlab.pythia import cli, runner

    make, message = OUTPUT_PATHS[case]
    output = make(tmp_path)
    monkeypatch.setattr(observe, "load_offline", must_not_load)
    common = ["--artifacts", str(specimen_dir), "--lock", str(specimen_lock_path), "--output", str(output)]
    assert runner.main(["--offline", *common]) == 1
    assert message in capsys.readouterr().err
    assert cli.main(["observe", *common]) == 1
    assert message in capsys.readouterr().err


def test_losing_the_race_for_a_new_directory_is_a_clear_error(verified_specimen, tmp_path, monkeypatch):
    output = tmp_path / "run"
    real_capture_json = observe.capture_tensors_json

    def other_run_fills_it_first(*args, **kwargs):
        output.mkdir()
        (output / "manifest.json").write_text("the other run's\n")
        return real_capture_json(*args, **kwargs)

    monkeypatch.setattr(observe, "capture_tensors_json", other_run_fills_it_first)
    with pytest.raises(OutputDirectoryError, match="is not empty.*another run wrote there first"):
        observe.observe_to_directory(verified_specimen, output, command=["test"])
    assert [path.name for path in output.iterdir()] == ["manifest.json"]
    assert (output / "manifest.json").read_text() == "the other run's\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run"]  # the staging directory is gone


def test_losing_the_race_at_the_rename_itself_is_a_clear_error(verified_specimen, tmp_path, monkeypatch):
    output = tmp_path / "run"
    real_rename = os.rename

    def other_run_renames_first(source, target):
        if Path(target) == output and not output.exists():
            output.mkdir()
            (output / "observations.json").write_text("{}")
        return real_rename(source, target)

    monkeypatch.setattr(os, "rename", other_run_renames_first)
    with pytest.raises(OutputDirectoryError, match="another run wrote there first"):
        observe.observe_to_directory(verified_specimen, output, command=["test"])
    assert [path.name for path in output.iterdir()] == ["observations.json"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run"]


@pytest.fixture(scope="module")
def verified_specimen(specimen_dir, specimen_lock_path):
    return verify_artifacts(specimen_dir, load_lock(specimen_lock_path))
