"""Each way a packet was found to pass or crash verification, refused in one line naming the record and field:
relabelled tokens, a zeroed replacement digest, a key written twice, extra entries and links in the packet,
options that cannot apply, malformed values (overflowing, NaN, a string, a list, deep nesting, a 5,000-digit
integer, a seed of 2**64), FIFOs, directories and link loops in place of a record; the recovery tolerance's
derivation; and the same refusals from the downloadable runner, run as a separate process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from audit_packets import copy_packet, load_records, relinked, write_records, write_small_packets
from residlab import audit
from residlab.course.lab06 import copy_audit

ROOT = Path(__file__).resolve().parents[3]
RUNNER = ROOT / "assets" / "labs" / "audit_residual_writes.py"


@pytest.fixture(scope="module")
def packets(tmp_path_factory):
    return write_small_packets(tmp_path_factory.mktemp("packets"))


def verify(argv, capsys):
    capsys.readouterr()
    code = copy_audit.main(["verify", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def forged(packets, tmp_path, edit, relink=True, kind="gpt2") -> Path:
    records = load_records(packets[kind])
    edit(records)
    return write_records(relinked(records) if relink else records, tmp_path / "forged")


def refused_in_one_line(code, out, err, named: str) -> None:
    assert code == 1 and out == "", out
    assert err.count("\n") == 1 and err.startswith("error: ") and named in err, err


# ---------------------------------------------------------------------------------------------- labels


def test_a_relabelled_token_is_refused_when_the_model_has_a_tokenizer(specimen_dir, tmp_path, capsys):
    packet = tmp_path / "packet"
    assert copy_audit.main(["--model", str(specimen_dir), "--clean", " The cat sat", "--corrupt", " The dog sat",
                            "--target", " on", "--rival", " down", "--site", "attn:0:-1", "--output", str(packet)]) == 0  # fmt: skip
    code, out, _ = verify([packet, "--model", specimen_dir], capsys)
    assert code == 0 and "labels the tokenizer turns into the recorded ids: 4 of 4 [ok]" in out, out
    records = load_records(packet)
    records["input"]["target"]["text"] = " down"  # the rival's text shown as the target's
    code, out, _ = verify([write_records(relinked(records), tmp_path / "relabelled"), "--model", specimen_dir], capsys)
    assert code == 1 and "FAIL record input, field target.text: the tokenizer makes" in out, out


def test_a_label_is_refused_when_the_model_has_no_tokenizer(packets, tmp_path, capsys):
    packet = forged(packets, tmp_path, lambda r: r["input"]["clean"].update(text="Paris"))
    code, out, err = verify([packet], capsys)
    refused_in_one_line(code, out, err, "record input, field clean.text: this model has no tokenizer")


# ---------------------------------------------------------------------------------------------- digests and keys


def test_a_zeroed_replacement_digest_is_refused(packets, tmp_path, capsys):
    def zero(records):
        records["intervention"]["runs"][2]["intervention"]["replacement"]["sha256"] = "0" * 64

    code, out, _ = verify([forged(packets, tmp_path, zero)], capsys)
    assert code == 1
    assert "FAIL record intervention, field runs[2].intervention.replacement.sha256: not the SHA-256" in out


def test_a_changed_field_digest_in_one_link_is_refused(packets, tmp_path, capsys):
    def change(records):
        records["model"]["links"]["input"]["fields"]["length"] = "0" * 64

    code, out, _ = verify([forged(packets, tmp_path, change, relink=False)], capsys)
    assert code == 1 and "FAIL record model, field links.input.fields: not record input's digest" in out


def test_a_key_written_twice_is_refused_naming_it(packets, tmp_path, capsys):
    records = load_records(packets["gpt2"])
    path = ("results", 0, "norm")
    packet = write_records(records, tmp_path / "twice", duplicate=(path, "value", 999), record="measurement")
    code, out, err = verify([packet], capsys)
    refused_in_one_line(code, out, err, "record measurement, field results[0].norm.value: written twice in one object")


# ---------------------------------------------------------------------------------------------- the directory


def test_extra_entries_and_links_in_the_packet_are_refused(packets, tmp_path, capsys):
    extra = copy_packet(packets["gpt2"], tmp_path / "extra")
    (extra / "notes.txt").write_text("hello")
    refused_in_one_line(*verify([extra], capsys), "holds 'notes.txt' besides the records")
    linked = copy_packet(packets["gpt2"], tmp_path / "linked")
    shutil.copy(linked / "input.json", tmp_path / "elsewhere.json")
    (linked / "input.json").unlink()
    (linked / "input.json").symlink_to(tmp_path / "elsewhere.json")  # an identical copy, through a link
    refused_in_one_line(*verify([linked], capsys), "record input: input.json is a symbolic link; a record is a regular file")


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda path: os.mkfifo(path), "a FIFO (named pipe)"),
        (lambda path: path.mkdir(), "a directory"),
        (lambda path: path.symlink_to(path), "a symbolic link"),  # a loop
    ],
)
def test_a_record_that_is_not_a_regular_file_is_named_for_what_it_is(packets, tmp_path, capsys, make, what):
    packet = copy_packet(packets["gpt2"], tmp_path / "packet")
    (packet / "measurement.json").unlink()
    make(packet / "measurement.json")
    refused_in_one_line(*verify([packet], capsys), f"record measurement: measurement.json is {what}")


def test_a_missing_record_is_named(packets, tmp_path, capsys):
    packet = copy_packet(packets["gpt2"], tmp_path / "packet")
    (packet / "input.json").unlink()
    refused_in_one_line(*verify([packet], capsys), "record input: input.json is missing from")


# ---------------------------------------------------------------------------------------------- malformed values


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("1e999", "results[0].norm.value: expected a finite number, found the number 1e999, which overflows a float"),
        ("NaN", "results[0].norm.value: expected a finite number, found NaN, which is not a number"),
        ("-Infinity", "results[0].norm.value: expected a finite number, found -Infinity"),
        ('"6.8"', "results[0].norm.value: expected a finite number, found '6.8'"),
        ("[6.8]", "results[0].norm.value: expected a finite number, found a list of 1"),
        ("9" * 5000, "results[0].norm.value: expected a finite number, found an integer of 5000 digits"),
        ("[" * 100_000 + "]" * 100_000, ": measurement.json nests objects or lists deeper than 10 levels"),
    ],
)
def test_a_malformed_value_is_refused_naming_the_field(packets, tmp_path, capsys, raw, named):
    """The first norm's value written as ``raw``, every link recomputed over the text as written."""
    packet = forged(packets, tmp_path, lambda r: r["measurement"]["results"][0]["norm"].update(value="@@RAW@@"))
    path = packet / "measurement.json"
    path.write_text(path.read_text().replace('"@@RAW@@"', raw))
    refused_in_one_line(*verify([packet], capsys), f"record measurement{'' if 'nests' in named else ', field '}{named}")


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda r: r["model"]["source"].update(seed=2**64), "record model, field source.seed: expected an integer"),
        (lambda r: r["model"].update(parameters=[]), "record model, field parameters: expected an object, found a list"),
        (lambda r: r["input"]["target"].update(id=-1), "record input, field target.id: expected an integer from 0"),
        (lambda r: r["model"].update(extra=1), "record model, field extra: not a field of a residlab-audit-packet/5"),
        (lambda r: r["input"]["clean"].update(text="\ud800"), "record input, field clean.text: expected a string"),
        (lambda r: r["measurement"].pop("quantities"), "record measurement, field quantities: missing"),
        (lambda r: r["intervention"]["declared_sites"].append(r["intervention"]["declared_sites"][0]),
         "record intervention, field declared_sites[2]: blocks.0.attn_write@2 is declared twice"),
        (lambda r: r["input"].update(clean={"ids": [5, 17, 3, 4], "text": None}),
         "record input, field corrupt.ids: the clean prompt is 4 tokens and the corrupt prompt 3"),
    ],
)
def test_a_malformed_record_is_refused_in_one_line(packets, tmp_path, capsys, edit, named):
    refused_in_one_line(*verify([forged(packets, tmp_path, edit)], capsys), named)


def _before_direct_logit_attribution(records):  # schema 2: no dla_term, no attribution
    records["measurement"].pop("attribution")
    for row in records["measurement"]["results"]:
        row.pop("dla_term")


def _schema_4(records):
    """Schema 4: the removal's change, M(w zeroed) - M(clean), as ablation_effect; execution named the device
    (always cpu) and no tolerance scale."""
    for row in records["measurement"]["results"]:
        effect = row.pop("total_effect")
        row["ablation_effect"] = effect | {"value": -effect["value"]}
    quantities = records["measurement"]["quantities"]
    quantities["ablation_effect"] = quantities.pop("total_effect")
    execution = records["model"]["execution"]
    del execution["tolerance_scale"]
    execution["device"] = "cpu"


@pytest.mark.parametrize(
    ("schema", "older"),
    [
        (2, _before_direct_logit_attribution),
        # schema 3 differs from 4 only in the block boundaries' names (site table, identity, measurement texts),
        # strings the schema field's refusal comes before: today's records under the old number stand for it
        (3, lambda records: None),
        (4, _schema_4),
    ],
    ids=["before direct logit attribution", "before the boundaries were resid_pre and resid_post",
         "before one sign for every effect and the recorded dtype"],
)
def test_a_packet_of_an_older_schema_is_refused_in_one_line(packets, tmp_path, capsys, schema, older):
    def written_by_an_older_version(records):  # what its writer would have linked
        for record in records.values():
            record["schema"] = f"residlab-audit-packet/{schema}"
        older(records)

    refused_in_one_line(*verify([forged(packets, tmp_path, written_by_an_older_version, relink=False)], capsys),
                        f"record model, field schema: 'residlab-audit-packet/{schema}'; this tool reads "
                        "residlab-audit-packet/5 records (write the packet again with this version)")


# ---------------------------------------------------------------------------------------------- options and models


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--seed", "7"], "--seed applies only with --specimen NAME"),
        (["--copy-model", "--seed", "7"], "--seed applies only with --specimen NAME"),
        (["--model", "somewhere", "--seed", "7"], "--seed applies only with --specimen NAME"),
        (["--specimen", "gpt_neox"], "this packet was made with the random-weight gpt2 specimen, seed 0, not the "
                                     "random-weight gpt_neox specimen, seed 0 given here"),
    ],
)
def test_options_that_cannot_apply_and_another_model_are_refused(packets, capsys, arguments, named):
    refused_in_one_line(*verify([packets["gpt2"], *arguments], capsys), named)


def test_a_seed_beyond_torchs_range_is_refused_by_the_parser(packets, capsys):
    with pytest.raises(SystemExit) as stopped:
        copy_audit.main(["--specimen", "gpt2", "--seed", str(2**64), "--clean-ids", "1", "--corrupt-ids", "2",
                         "--target-id", "3", "--rival-id", "4", "--output", "unused"])  # fmt: skip
    assert stopped.value.code == 2
    assert "argument --seed: 18446744073709551616 is outside 0 to 2**64 - 1" in capsys.readouterr().err


def test_a_copy_model_packet_without_copy_model_says_to_use_it(tmp_path, capsys):
    packet = tmp_path / "copy"
    copy_audit.write_copy_model_packet(packet)
    refused_in_one_line(*verify([packet], capsys), "verify it with `residlab audit verify PACKET --copy-model`")


# ---------------------------------------------------------------------------------------------- tolerances


def test_the_recovery_tolerance_is_the_error_of_a_ratio():
    """With each metric off by at most t(M) = 1e-5 + 1e-5 |M|, the largest change of R = (P - C) / (K - C) over
    the corners of that box is within the declared tolerance, and the declared tolerance is not loose by more
    than a factor of 2 near it (first order)."""
    for clean, corrupt, recovery in [(1.955, 1.117, 0.45), (0.4, 0.397, 0.3), (5.0, -3.0, 1.2), (0.1, 0.0999, -4.0)]:
        declared = audit.recovery_tolerance(clean, corrupt, recovery)["absolute"]
        patched = corrupt + recovery * (clean - corrupt)
        worst = 0.0
        for signs in [(a, b, c) for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)]:
            k, c, p = (m + s * (1e-5 + 1e-5 * abs(m)) for m, s in zip((clean, corrupt, patched), signs))
            worst = max(worst, abs((p - c) / (k - c) - recovery))
        assert worst <= declared * (1 + 1e-9) and declared <= 2 * worst
    assert audit.recovery_tolerance(1.0, 1.0 - 1e-5, 0.5)["absolute"] is None  # a gap within the metrics' tolerance


def test_measurement_json_states_each_quantitys_formula_and_tolerance(packets):
    quantities = load_records(packets["llama"])["measurement"]["quantities"]
    assert "M(clean run) - M(clean run, w zeroed at its position)" in quantities["total_effect"]["formula"]
    assert "t(M_clean - T) + t(M_clean)" in quantities["total_effect"]["tolerance"]
    assert "/ (|g| - t(M_clean) - t(M_corrupt))" in quantities["patch_recovery"]["tolerance"]
    assert all(entry["formula"] and entry["tolerance"] for entry in quantities.values())


# ---------------------------------------------------------------------------------------------- the runner


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runner")
    script = shutil.copyfile(RUNNER, folder / RUNNER.name)
    python = os.environ.get("RESIDLAB_RUNNER_PYTHON") or sys.executable
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*arguments):
        return subprocess.run([python, "-I", str(script), *map(str, arguments)], cwd=folder, capture_output=True,
                              text=True, timeout=300, env=environment)  # fmt: skip

    return run


def test_the_runner_refuses_malformed_packets_in_one_line(packets, tmp_path, runner):
    """As a separate process: a key twice, an overflowing number, a FIFO, a wrong model, a seed out of range."""
    twice = write_records(load_records(packets["llama"]), tmp_path / "twice",
                          duplicate=(("baseline", "clean"), "value", 999), record="measurement")  # fmt: skip
    overflow = copy_packet(packets["llama"], tmp_path / "overflow")
    (overflow / "input.json").write_text((overflow / "input.json").read_text().replace('"length": 3', '"length": 1e999'))
    fifo = copy_packet(packets["llama"], tmp_path / "fifo")
    (fifo / "model.json").unlink()
    os.mkfifo(fifo / "model.json")
    cases = [
        ((twice,), "record measurement, field baseline.clean.value: written twice in one object"),
        ((overflow,), "record input, field length: expected an integer from 1 to 65536, found the number 1e999"),
        ((fifo,), "record model: model.json is a FIFO (named pipe); a record is a regular file"),
        ((packets["llama"], "--specimen", "gpt2"), "this packet was made with the random-weight llama specimen, seed 0"),
        ((packets["llama"], "--seed", "3"), "--seed applies only with --specimen NAME"),
    ]
    for arguments, named in cases:
        done = runner("verify", *arguments)
        assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and named in done.stderr, done.stderr
    done = runner("verify", packets["llama"], "--specimen", "llama", "--seed", str(2**64))
    assert done.returncode == 2 and "argument --seed: 18446744073709551616 is outside" in done.stderr
    done = runner("verify", packets["llama"])
    assert done.returncode == 0 and "verified: every check passed" in done.stdout, done.stdout + done.stderr


# ---------------------------------------------------------------------------------------------- model directories


@pytest.fixture(scope="module")
def llama_directory(tmp_path_factory):
    directory = tmp_path_factory.mktemp("llama") / "model"
    audit.build_specimen("llama", seed=3).model.save_pretrained(directory, safe_serialization=True)
    return directory


def _config(**changes):
    def edit(directory: Path):
        path = directory / "config.json"
        path.write_text(json.dumps(json.loads(path.read_text()) | changes))

    return edit


def _fifo_config(directory: Path):
    (directory / "config.json").unlink()
    os.mkfifo(directory / "config.json")


@pytest.mark.parametrize(
    ("break_it", "named"),
    [
        (_config(num_hidden_layers="x"), "config.json: model_type 'llama' with these values is not usable "
                                         "(StrictDataclassFieldValidationError"),
        (_config(num_attention_heads=0), "is not usable (ZeroDivisionError: integer modulo by zero)"),
        (_fifo_config, "config.json is not a regular file"),
    ],
)
def test_a_malformed_model_directory_is_refused_in_one_line(llama_directory, tmp_path, capsys, break_it, named):
    broken = Path(shutil.copytree(llama_directory, tmp_path / "broken"))
    break_it(broken)
    capsys.readouterr()
    code = copy_audit.main(["--model", str(broken), "--clean-ids", "1,2", "--corrupt-ids", "1,3", "--target-id", "4",
                            "--rival-id", "5", "--output", str(tmp_path / "out")])  # fmt: skip
    captured = capsys.readouterr()
    refused_in_one_line(code, captured.out, captured.err, named)
    assert not (tmp_path / "out").exists()
