"""``residlab audit``: packets on every specimen type and on the copy model, verification, tampering, bad input,
the output rule (refused before any model work, by the command line, the API and the downloaded runner)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from residlab.capture import blocks
from residlab import audit
from residlab.audit import cli as audit_cli
from residlab.audit import packet as audit_packet
from residlab.capture.outdir import OutputDirectoryError
from residlab.course.lab06 import copy_audit
from residlab.course.models import lesson_lab

ROOT = Path(__file__).resolve().parents[3]
RUNNER = ROOT / "assets" / "labs" / "audit_residual_writes.py"
PROMPTS = ["--clean-ids", "5,17,3,40,2", "--corrupt-ids", "9,17,3,40,2", "--target-id", "12", "--rival-id", "30"]


def run_cli(argv, capsys):
    code = copy_audit.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def gpt2_packet(tmp_path_factory):
    directory = tmp_path_factory.mktemp("packet") / "gpt2"
    assert copy_audit.main(["--specimen", "gpt2", *PROMPTS, "--output", str(directory)]) == 0
    return directory


def edited_copy(packet: Path, target: Path, record: str, edit, relink: bool = False) -> Path:
    shutil.copytree(packet, target)
    records = {name: json.loads((target / f"{name}.json").read_text()) for name in audit.RECORDS}
    edit(records[record])
    if relink:  # a careful forger recomputes every link
        records = audit.linked_records({name: audit.record_body(value) for name, value in records.items()})
    for name, value in records.items():
        (target / f"{name}.json").write_text(json.dumps(value))
    return target


@pytest.mark.parametrize("name", list(blocks.SPECIMEN_CONFIGS))
def test_each_specimen_gets_a_packet_that_verifies(name, tmp_path, capsys):
    packet = tmp_path / "packet"
    code, out, err = run_cli(["--specimen", name, *PROMPTS, "--output", str(packet)], capsys)
    assert code == 0, err
    assert "random-weight" in out  # specimen numbers are labelled wherever they appear
    assert sorted(p.name for p in packet.iterdir()) == sorted(f"{r}.json" for r in audit.RECORDS)
    records = audit.read_packet(packet)
    assert records["model"]["block_type"] == name
    assert len(records["measurement"]["results"]) == 2 * records["model"]["blocks"]
    code, out, err = run_cli(["verify", str(packet)], capsys)
    assert code == 0, out + err
    assert "verified: every check passed" in out
    assert "check 9" in out and "[FAIL]" not in out


@pytest.mark.parametrize("name", list(blocks.SPECIMEN_CONFIGS))
def test_a_last_write_has_one_effect_whether_removed_from_the_final_state_or_zeroed(name):
    """Every effect is what the write adds. A write after which nothing is recomputed (the last block's MLP write;
    in a parallel block its attention write too, which the MLP does not read) has the same direct and total effect,
    in sign and value, within the two quantities' declared tolerances."""
    subject = audit.build_specimen(name)
    last, readout = len(subject.blocks) - 1, 4
    parallel = subject.block_type.sites.mlp_reads == "resid_pre"
    sites = [audit.DeclaredSite("mlp", last, readout)] + ([audit.DeclaredSite("attn", last, readout)] if parallel else [])
    audit_input = audit.AuditInput((5, 17, 3, 40, 2), (9, 17, 3, 40, 2), 12, 30)
    for row in audit.build_packet(subject, audit_input, sites)["measurement"]["results"]:
        direct, total = row["direct_effect_exact"], row["total_effect"]
        allowed = direct["tolerance"]["absolute"] + direct["tolerance"]["relative"] * abs(direct["value"]) + (
            total["tolerance"]["absolute"])
        assert abs(direct["value"]) > 10 * allowed, (name, row["site"])  # not vacuous: a sign to agree on
        assert abs(direct["value"] - total["value"]) <= allowed, (name, row["site"], direct, total)


def test_the_checks_lab06_names_are_read_back_from_the_report(gpt2_packet):
    """Lab 06's enumeration ("check N says ...") comes from the report's own lines: each number it states is the
    line that says what the sentence says it does, and a report with one more check before them shifts them."""
    import re

    from residlab.course.lab06 import decoder_audit

    report = audit.verify_packet(gpt2_packet, audit.build_specimen("gpt2"))
    meant = ("parameter digest", "upstream of the declared site bit-identical", "declared site equal to its replacement")
    for lines in (report.lines, ["check 1: labels the tokenizer turns into the recorded ids: 4 of 4 [ok]"]
                  + [re.sub(r"^check (\d+)", lambda m: f"check {int(m[1]) + 1}", line) for line in report.lines]):
        found = re.findall(r"[Cc]hecks? (\d+)|and (\d+)", decoder_audit.checks_sentence(lines))
        numbers = [int(n) for pair in found for n in pair if n]
        assert len(numbers) == 3
        for number, words in zip(numbers, meant):
            said = [line for line in lines if line.startswith(f"check {number}: ")]  # after the re-run's own line
            assert len(said) == 1 and words in said[0], (number, lines)


def test_the_packet_records_what_the_issue_lists(gpt2_packet):
    records = audit.read_packet(gpt2_packet)
    model = records["model"]
    assert model["parameters"]["count"] == len(model["parameters"]["tensors"]) > 0
    assert model["execution"] == {"dtype": "float32", "tolerance_scale": 1, "threads": 1, "attention": "eager",
                                  "gradients": "off (torch.inference_mode)", "mode": "eval"}  # fmt: skip
    assert model["normaliser"]["type"] == "LayerNorm" and model["normaliser"]["epsilon"] == 1e-5
    assert set(model["libraries"]) >= {"torch", "transformers"}
    assert records["input"]["attention_mask"] == [1] * 5 and records["input"]["differing_positions"] == [0]
    runs = records["intervention"]["runs"]
    assert [r["id"] for r in runs[:2]] == ["clean", "corrupt"] and len(runs) == 2 + 2 * 6
    patch = runs[3]["intervention"]
    assert patch["replacement"]["kind"] == "clean write" and patch["replacement"]["from_run"] == "clean"
    for name in audit.RECORDS:  # each names the other three by the SHA-256 of their canonical JSON
        for other, link in records[name]["links"].items():
            assert link["sha256"] == audit.sha256_json(audit.record_body(records[other]))
    clean, corrupt = (records["measurement"]["baseline"][which]["value"] for which in ("clean", "corrupt"))
    for row in records["measurement"]["results"]:
        for quantity in ("norm", "direct_projection", "direct_effect_exact", "dla_term", "survival_cosine"):
            assert row[quantity]["tolerance"] == audit.TOLERANCES[quantity]
        # derived from the metrics' tolerance, written out here: t(M) = 1e-5 + 1e-5 |M|
        total, recovery = row["total_effect"]["value"], row["patch_recovery"]["value"]
        assert row["total_effect"]["tolerance"]["relative"] == row["patch_recovery"]["tolerance"]["relative"] == 0
        assert row["total_effect"]["tolerance"]["absolute"] == pytest.approx(  # M(w zeroed) = M(clean) - T
            1e-5 + 1e-5 * abs(clean - total) + 1e-5 + 1e-5 * abs(clean), rel=1e-12)
        gap, patched = clean - corrupt, corrupt + recovery * (clean - corrupt)
        spread = (1e-5 + 1e-5 * abs(patched)) + abs(1 - recovery) * (1e-5 + 1e-5 * abs(corrupt)) + abs(recovery) * (
            1e-5 + 1e-5 * abs(clean))
        room = abs(gap) - (1e-5 + 1e-5 * abs(clean)) - (1e-5 + 1e-5 * abs(corrupt))
        assert row["patch_recovery"]["tolerance"]["absolute"] == pytest.approx(spread / room, rel=1e-12)
    assert set(records["measurement"]["quantities"]) == set(audit.TOLERANCES) | {"total_effect", "patch_recovery"}
    checks = records["measurement"]["checks"]
    assert all(c["upstream_identical"] == c["upstream_sites"] for c in checks["intervened_runs"])
    assert all(c["declared_equals_replacement"] for c in checks["intervened_runs"])


def test_the_same_audit_writes_the_same_bytes(gpt2_packet, tmp_path):
    assert copy_audit.main(["--specimen", "gpt2", *PROMPTS, "--output", str(tmp_path / "again")]) == 0
    for name in audit.RECORDS:
        assert (tmp_path / "again" / f"{name}.json").read_bytes() == (gpt2_packet / f"{name}.json").read_bytes()


def _set(path: list, value):
    def edit(record):
        node = record
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("record", "path", "value", "relink", "named"),
    [
        ("model", ["execution", "dtype"], "float16", False, "record model was changed: field(s) execution"),
        ("input", ["clean", "ids"], [6, 17, 3, 40, 2], False, "record input was changed: field(s) clean"),
        ("intervention", ["held_fixed"], [], False, "record intervention was changed: field(s) held_fixed"),
        ("measurement", ["metric"], "p(target)", False, "record measurement was changed: field(s) metric"),
        ("measurement", ["results", 2, "total_effect", "value"], 0.5, True,
         "record measurement, field results[2].total_effect.value"),
        ("measurement", ["results", 0, "patch_recovery", "tolerance", "absolute"], 10.0, True,
         "record measurement, field results[0].patch_recovery.tolerance"),
        ("measurement", ["results", 1, "dla_term", "value"], 0.25, True, "record measurement, field results[1].dla_term.value"),
        ("measurement", ["attribution", "scale", "value"], 1.5, True, "record measurement, field attribution.scale.value"),
        ("model", ["parameters", "digest"], "0" * 64, True, "record model, field parameters.digest"),
        ("input", ["clean", "ids"], [6, 17, 3, 40, 2], True, "record measurement, field baseline.clean.value"),
        ("intervention", ["runs", 2, "intervention", "replacement", "values", 0], 1.0, True,
         "record intervention, field runs[2].intervention.replacement.values"),
    ],
)
def test_a_tampered_packet_fails_naming_record_and_field(gpt2_packet, tmp_path, capsys, record, path, value, relink, named):
    packet = edited_copy(gpt2_packet, tmp_path / "edited", record, _set(path, value), relink)
    code, out, _ = run_cli(["verify", str(packet)], capsys)
    assert code == 1
    assert "NOT verified" in out
    assert named in out, out


@pytest.mark.parametrize(
    ("record", "path", "value", "named"),
    [
        ("input", ["clean", "ids"], ["5", 17], "record input, field clean.ids[0]: expected an integer from 0 to"),
        ("input", ["rival", "id"], True, "record input, field rival.id: expected an integer from 0 to 2147483647, found true"),
        ("intervention", ["declared_sites", 0, "block"], "0", "record intervention, field declared_sites[0].block: "
         "expected an integer"),
        ("model", ["execution", "threads"], 10**6, "record model, field execution.threads: expected an integer from 1 to"),
    ],
)
def test_a_malformed_packet_is_refused_with_a_clear_error(gpt2_packet, tmp_path, capsys, record, path, value, named):
    packet = edited_copy(gpt2_packet, tmp_path / "malformed", record, _set(path, value), relink=True)
    code, _, err = run_cli(["verify", str(packet)], capsys)
    assert code == 1
    assert named in err and "Traceback" not in err


def test_a_swapped_link_is_named(gpt2_packet, tmp_path, capsys):
    def swap(record):
        record["links"]["input"]["sha256"] = record["links"]["intervention"]["sha256"]

    packet = edited_copy(gpt2_packet, tmp_path / "swapped", "measurement", swap)
    code, out, _ = run_cli(["verify", str(packet)], capsys)
    assert code == 1
    assert "record measurement, field links.input" in out
    assert "check 1: links between the records match: 11 of 12 [FAIL]" in out


def test_verify_against_other_weights_names_the_packets_model_in_one_line(gpt2_packet, capsys):
    code, out, err = run_cli(["verify", str(gpt2_packet), "--specimen", "gpt2", "--seed", "1"], capsys)
    assert code == 1 and out == ""
    assert err == ("error: this packet was made with the random-weight gpt2 specimen, seed 0, not the random-weight "
                   "gpt2 specimen, seed 1 given here (record model, field source.seed differs): verify it with no "
                   "model option (the packet names its specimen) or --specimen gpt2 --seed 0\n")


def test_parameter_digests_are_each_tensors_own_bytes_in_registration_order():
    """The parallel hashing gives what hashing each tensor's bytes one by one gives, in the model's order;
    a transposed (non-contiguous) or 0-dim tensor hashes as its row-major bytes."""
    import hashlib

    model = audit.build_specimen("gpt_neox_sequential", seed=5).model
    expected = [hashlib.sha256(p.detach().numpy().tobytes()).hexdigest() for _, p in model.named_parameters()]
    digests = audit.parameter_digests(model)
    assert [t["sha256"] for t in digests["tensors"]] == expected
    assert [t["name"] for t in digests["tensors"]] == [blocks.canonical_path(n) for n, _ in model.named_parameters()]
    total = hashlib.sha256("".join(f"{list(p.shape)}|{p.dtype}|{h}\n" for (_, p), h in
                                   zip(model.named_parameters(), expected)).encode()).hexdigest()  # fmt: skip
    assert digests["digest"] == total
    transposed = torch.arange(12.0).reshape(3, 4).t()
    assert audit.tensor_sha256(transposed) == hashlib.sha256(transposed.contiguous().numpy().tobytes()).hexdigest()
    assert audit.tensor_sha256(torch.tensor(2.5)) == hashlib.sha256(torch.tensor(2.5).numpy().tobytes()).hexdigest()


def test_copy_model_packet_equals_the_lesson(tmp_path):
    packet = copy_audit.write_copy_model_packet(tmp_path / "copy")
    lesson = lesson_lab.audit_model(lesson_lab.default_training()[0])
    results = {row["site"]: row for row in packet["measurement"]["results"]}
    published = {"blocks.0.attn_write": ("1.359", "-1.734", "9.553", "1.000"),
                 "blocks.0.mlp_write": ("6.775", "5.554", "5.554", "0.351")}  # fmt: skip
    for component, (site, figures) in zip(lesson.components, published.items()):
        row = results[site]
        ours = (row["direct_projection"], row["direct_effect_exact"], row["total_effect"], row["patch_recovery"])
        assert tuple(f"{q['value']:.3f}" for q in ours) == figures
        theirs = (component.direct_projection, component.direct_effect_exact,
                  component.total_effect, component.patch_recovery)  # fmt: skip
        assert [q["value"] for q in ours] == pytest.approx(theirs, abs=1e-6)
        assert row["norm"]["value"] == pytest.approx(component.write_norm, abs=1e-6)
    assert packet["input"]["rival"]["id"] == lesson.rival
    report = copy_audit.verify_copy_model_packet(tmp_path / "copy")
    assert report.passed, report.failures


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--clean-ids", "1,2,3", "--corrupt-ids", "1,2", "--target-id", "4", "--rival-id", "5"],
         "the clean prompt is 3 tokens and the corrupt prompt 2"),
        ([*PROMPTS, "--site", "attn:3:0"], "block 3 is out of range: the model has 3 blocks"),
        ([*PROMPTS, "--site", "mlp:0:5"], "position 5 is out of range: the prompts have 5 tokens"),
        ([*PROMPTS, "--site", "resid:0:0"], "COMPONENT attn or mlp"),
        (["--clean-ids", "1,2", "--corrupt-ids", "1,3", "--target-id", "96", "--rival-id", "5"],
         "target: token ids [96] are outside the vocabulary"),
        (["--clean", "a b", "--corrupt-ids", "1,3", "--target-id", "9", "--rival-id", "5"], "has no tokenizer"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(arguments, message, tmp_path, capsys):
    output = tmp_path / "out"
    code, out, err = run_cli(["--specimen", "gpt2", *arguments, "--output", str(output)], capsys)
    assert code == 1
    assert message in err and "Traceback" not in err
    assert not output.exists() and list(tmp_path.iterdir()) == []


def test_an_unknown_specimen_lists_the_supported_block_types(tmp_path, capsys):
    code, _, err = run_cli(["--specimen", "mistral", *PROMPTS, "--output", str(tmp_path / "out")], capsys)
    assert code == 1
    assert "supported block types: gpt_neox (GPTNeoXLayer), gpt_neox_sequential (GPTNeoXLayer), gpt2" in err


# ------------------------------------------------------------------------------------------ the output rule
# capture.outdir's rule: a new name or an empty real directory; anything else is refused before any model work,
# with a one-line message, and nothing is created or changed.


def _symlink_to_empty_directory(root: Path) -> Path:
    (root / "empty").mkdir()
    (root / "link").symlink_to(root / "empty")
    return root / "link"


def _dangling_symlink(root: Path) -> Path:
    (root / "dangling").symlink_to(root / "elsewhere" / "target")
    return root / "dangling"


def _under_a_read_only_directory(root: Path) -> Path:
    (root / "locked").mkdir()
    (root / "locked").chmod(0o555)  # tests run as root: the rule checks the write bits, not only os.access
    return root / "locked" / "out"


def _under_a_file(root: Path) -> Path:
    (root / "notes.txt").write_text("mine")
    return root / "notes.txt" / "out"


def _non_empty_directory(root: Path) -> Path:
    (root / "out").mkdir()
    (root / "out" / "keep.txt").write_text("mine")
    return root / "out"


REFUSED_OUTPUTS = {
    "symlink to an empty directory": (_symlink_to_empty_directory, "is a symbolic link"),
    "dangling symlink": (_dangling_symlink, "is a symbolic link"),
    "under a read-only directory": (_under_a_read_only_directory, "locked is read-only"),
    "under a file": (_under_a_file, "notes.txt is not a directory"),
    "non-empty directory": (_non_empty_directory, "is not empty"),
}


def _tree(root: Path) -> list:
    """Every path under ``root`` with its kind and content, symbolic links not followed."""
    entries = []
    for directory, names, files in os.walk(root):
        for name in names + files:
            path = Path(directory) / name
            content = os.readlink(path) if path.is_symlink() else path.read_bytes() if path.is_file() else None
            entries.append((str(path.relative_to(root)), path.is_symlink(), path.is_dir(), content))
    return sorted(entries)


@pytest.fixture
def refused_output(request, tmp_path):
    """(root, output path, expected message, the tree under root before the run); the read-only directory is
    made writable again afterwards."""
    make, message = REFUSED_OUTPUTS[request.param]
    root = tmp_path / "place"
    root.mkdir()
    output = make(root)
    yield root, output, message, _tree(root)
    for directory, names, _ in os.walk(root):
        for name in names:
            if not (Path(directory) / name).is_symlink():
                (Path(directory) / name).chmod(0o755)


def _no_model_work(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was built or loaded before the output directory was checked")

    monkeypatch.setattr(audit_cli, "place_specimen", refuse)  # what the command line calls
    monkeypatch.setattr(audit_cli, "place_directory", refuse)


def _assert_nothing_created(root: Path, before: list) -> None:
    assert _tree(root) == before
    assert not (root / "elsewhere").exists()  # a dangling link's target (and its parent) is never created


@pytest.mark.parametrize("refused_output", list(REFUSED_OUTPUTS), indirect=True)
@pytest.mark.parametrize("source", [["--specimen", "gpt2"], ["--model", "no-such-model"]], ids=["specimen", "model"])
def test_a_refused_output_ends_the_command_before_any_model_work(refused_output, source, monkeypatch, capsys):
    root, output, message, before = refused_output
    _no_model_work(monkeypatch)
    code, out, err = run_cli([*source, *PROMPTS, "--output", str(output)], capsys)
    assert code == 1 and out == ""
    assert message in err and "Traceback" not in err and err.count("\n") == 1, err
    _assert_nothing_created(root, before)


@pytest.mark.parametrize("refused_output", list(REFUSED_OUTPUTS), indirect=True)
def test_audit_to_directory_refuses_before_any_work(refused_output, monkeypatch):
    root, output, message, before = refused_output

    def refuse(*args, **kwargs):
        raise AssertionError("the audit ran before the output directory was checked")

    monkeypatch.setattr(audit_packet, "build_packet", refuse)  # what audit_to_directory calls
    with pytest.raises(OutputDirectoryError, match=message):
        audit.audit_to_directory(None, None, [], output)
    _assert_nothing_created(root, before)


# ---------------------------------------------------------------------------------------- model directories


@pytest.fixture(scope="module")
def llama_directory(tmp_path_factory):
    directory = tmp_path_factory.mktemp("llama") / "model"
    audit.build_specimen("llama", seed=3).model.save_pretrained(directory, safe_serialization=True)
    return directory


def test_a_model_directory_is_audited_and_verified(llama_directory, tmp_path, capsys):
    packet = tmp_path / "packet"
    code, out, err = run_cli(["--model", str(llama_directory), *PROMPTS, "--site", "mlp:-1:-1", "--output", str(packet)], capsys)
    assert code == 0, err
    assert "random-weight" not in out
    records = audit.read_packet(packet)
    assert records["model"]["source"]["kind"] == "directory"
    assert "model.safetensors" in [f["name"] for f in records["model"]["source"]["files"]]
    specimen = audit.build_specimen("llama", seed=3)
    assert records["model"]["parameters"]["digest"] == audit.parameter_digests(specimen.model)["digest"]
    code, out, _ = run_cli(["verify", str(packet), "--model", str(llama_directory)], capsys)
    assert code == 0, out


def _broken_copy(source: Path, target: Path, break_it) -> Path:
    shutil.copytree(source, target)
    break_it(target)
    return target


def _drop_a_tensor(directory: Path):
    from safetensors.torch import load_file, save_file

    tensors = load_file(directory / "model.safetensors")
    del tensors["model.layers.0.mlp.up_proj.weight"]
    save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})


def _ask_for_remote_code(directory: Path):
    config = json.loads((directory / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_custom.Model"}
    (directory / "config.json").write_text(json.dumps(config))


def _unsupported(directory: Path):
    config = json.loads((directory / "config.json").read_text())
    config["model_type"] = "mistral"
    (directory / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (_drop_a_tensor, "the weights do not match LlamaForCausalLM (missing_keys: model.layers.0.mlp.up_proj.weight"),
        (_ask_for_remote_code, "asks for remote code"),
        (_unsupported, "supported block types: gpt_neox"),
        (lambda d: (d / "model.safetensors").write_bytes(b"not safetensors"), "the weights do not load"),
    ],
)
def test_a_model_directory_failing_verification_is_refused(llama_directory, tmp_path, capsys, break_it, message):
    broken = _broken_copy(llama_directory, tmp_path / "broken", break_it)
    code, _, err = run_cli(["--model", str(broken), *PROMPTS, "--output", str(tmp_path / "out")], capsys)
    assert code == 1
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_verify_names_a_changed_model_file(llama_directory, tmp_path, capsys):
    packet = tmp_path / "packet"
    assert copy_audit.main(["--model", str(llama_directory), *PROMPTS, "--site", "attn:0:-1", "--output", str(packet)]) == 0
    changed = _broken_copy(llama_directory, tmp_path / "changed", lambda d: (d / "generation_config.json").write_text("{}"))
    capsys.readouterr()
    code, out, err = run_cli(["verify", str(packet), "--model", str(changed)], capsys)
    assert code == 1 and out == ""
    assert "(record model, field source.files[1].sha256 differs): verify it with --model DIR" in err


# ---------------------------------------------------------------------------------------------- the runner


def runner_in(folder: Path):
    """The runner as a learner runs it: a copy in ``folder``, a separate process started there, the learners'
    environment when `make test` provides it (RESIDLAB_RUNNER_PYTHON), else this one with residlab out of reach
    (-I)."""
    python = os.environ.get("RESIDLAB_RUNNER_PYTHON") or sys.executable
    script = shutil.copyfile(RUNNER, folder / RUNNER.name)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*arguments):
        return subprocess.run([python, "-I", str(script), *arguments], cwd=folder, capture_output=True, text=True,
                              timeout=600, env=environment)  # fmt: skip

    return run


# That the runner alone writes, prints and verifies what the package's audit does is checked on every audit the
# pages run, in the learner's own environment (tests/site/test_page_commands.py); here, its refusals.


@pytest.mark.parametrize("refused_output", list(REFUSED_OUTPUTS), indirect=True)
def test_the_runner_alone_refuses_an_output_before_loading_a_model(refused_output, tmp_path):
    """The downloaded runner in a separate process: one line, status 1, nothing created, and the model directory
    (which does not exist) never read: the output is refused first."""
    root, output, message, before = refused_output
    refused = runner_in(tmp_path)("--model", "no-such-model", *PROMPTS, "--output", str(output))
    assert refused.returncode == 1 and refused.stdout == ""
    assert message in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    _assert_nothing_created(root, before)


def test_a_site_table_that_misses_a_write_writes_no_packet(tmp_path):
    """GPT-2 audited through a table that takes the MLP's normalised read (ln_2) for its write: the block identity
    fails, so the audit refuses before anything is written."""
    from dataclasses import replace

    subject = audit.build_specimen("gpt2")
    wrong_sites = replace(subject.block_type.sites, mlp_write=("ln_2", "output"))
    subject.block_type = replace(subject.block_type, sites=wrong_sites)
    audit_input = audit.AuditInput((5, 17, 3), (9, 17, 3), 12, 30)
    with pytest.raises(audit.AuditError, match="block 0: output differs from input"):
        audit.audit_to_directory(subject, audit_input, [audit.DeclaredSite("attn", 0, 2)], tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def _hook_count(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_no_hook_is_left_attached_after_a_run_or_a_failed_one():
    subject = audit.build_specimen("llama")
    assert _hook_count(subject.model) == 0
    run = audit.execute(subject, "clean", "clean", [5, 17, 3])
    assert len(run.sites) == 4 * len(subject.blocks) and _hook_count(subject.model) == 0
    with pytest.raises(IndexError):  # the replacement's position lies outside the prompt: the forward raises
        audit.execute(subject, "bad", "clean", [5, 17, 3], site=audit.DeclaredSite("attn", 0, 7),
                      replacement=torch.zeros(64))  # fmt: skip
    assert _hook_count(subject.model) == 0


def test_the_pythia_specimen_directory_is_audited_from_text(specimen_dir, tmp_path, capsys):
    """Lab 06 Part 3's command on the synthetic Pythia-14M files (random weights, Pythia's six files): text
    prompts through its own tokenizer, single-token target and rival, then verification."""
    packet = tmp_path / "packet"
    prompts = ["--clean", "The capital of France is", "--corrupt", "The capital of Spain is",
               "--target", " Paris", "--rival", " Madrid"]  # fmt: skip
    code, out, err = run_cli(["--model", str(specimen_dir), *prompts, "--site", "attn:5:-1", "--site", "mlp:5:-1",
                              "--output", str(packet)], capsys)  # fmt: skip
    assert code == 0, err
    records = audit.read_packet(packet)
    assert records["input"]["clean"]["ids"] == [510, 5347, 273, 6181, 310]
    assert (records["input"]["target"]["id"], records["input"]["rival"]["id"]) == (7785, 21924)
    assert records["model"]["block_type"] == "gpt_neox" and records["model"]["output_embedding"] == "lm_head"
    code, out, _ = run_cli(["verify", str(packet), "--model", str(specimen_dir)], capsys)
    assert code == 0, out
    code, _, err = run_cli(["--model", str(specimen_dir), *prompts[:6], "--rival", " Madrid.", "--output",
                            str(tmp_path / "refused")], capsys)  # fmt: skip
    assert code == 1 and "rival: ' Madrid.' is 2 tokens" in err and not (tmp_path / "refused").exists()
    code, _, err = run_cli(["--model", str(specimen_dir), "--clean", "The capital of France is",
                            "--corrupt", "The capital of the United Kingdom is", *prompts[4:], "--output",
                            str(tmp_path / "refused")], capsys)  # fmt: skip
    assert code == 1 and "the clean prompt is 5 tokens and the corrupt prompt 7" in err
