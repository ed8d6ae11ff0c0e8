"""Verifying a packet: read its four records (the packet directory holds exactly those four regular files, each
read once under the one read rule and checked against its schema before any value is used), check every link
and digest against the record it names, re-run the audit the packet records on the model it names, and compare
every field of every record with the re-run (exactly, or within the tolerance a field carries, which is itself
re-derived). Labels are re-derived from the tokenizer. The re-run is in the dtype the packet was measured in (its
model record's ``execution.dtype``), on whatever device or device map the verifier chooses, and every
tolerance is re-derived from that dtype's tolerance scale. ``subject_from_packet`` rebuilds the specimen a
packet names, in its dtype; a model directory must be given.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from residlab.capture.blocks import IDENTITY_ABSOLUTE
from residlab.capture.files import UnsafeFileError, read_file_bytes
from residlab.capture.versions import library_versions
from residlab.audit.subject import AuditError, Subject, _import_torch, tolerance_scale
from residlab.audit.loading import Placement, place_specimen
from residlab.audit.runs import (
    AuditInput, DeclaredSite, InputError, check_input, run_audit, sha256_json, tensor_sha256,
)
from residlab.audit.schema import INFORMATIONAL, RECORDS, check_record, child_path, parse_record
from residlab.audit.packet import (
    LIBRARIES, block_identity_excesses, input_record, intervention_record, linked_records,
    measurement_record, model_record, record_body, recovery_tolerance, total_effect_tolerance,
)

MAX_RECORD_BYTES = 64 * 2**20  # a record larger than this is refused unread
_FILES = tuple(f"{name}.json" for name in RECORDS)
# The checks a page names by their number, each under the one label the report prints: a page reads the number
# back from the report's own lines (``check_number``), so its prose follows the report's order.
CHECK_LABELS = {
    "parameters": "parameter digest before and after every run equals the model record's",
    "upstream": "recorded sites upstream of the declared site bit-identical to the source run",
    "declared": "declared site equal to its replacement, its other positions untouched",
}


def check_number(lines, label: str) -> int:
    """The number a verification report's ``lines`` gave the check labelled ``label``; KeyError when none."""
    for line in lines:
        number, _, rest = line.partition(": ")
        if number.startswith("check ") and rest.startswith(label + ": "):
            return int(number.removeprefix("check "))
    raise KeyError(label)


@dataclass
class Verification:
    lines: list = field(default_factory=list)
    failures: list = field(default_factory=list)

    def check(self, label: str, passed: int, total: int, detail: str = "") -> None:
        number = len([line for line in self.lines if line.startswith("check ")]) + 1
        verdict = "ok" if passed == total else "FAIL"
        self.lines.append(f"check {number}: {label}: {passed} of {total}{detail} [{verdict}]")

    def fail(self, message: str) -> None:
        self.failures.append(message)

    @property
    def passed(self) -> bool:
        return not self.failures

    def printed(self) -> list[str]:
        """What a verify command prints: every check, every failure, then the verdict."""
        verdict = "verified: every check passed" if self.passed else f"NOT verified: {len(self.failures)} problem(s)"
        return [*self.lines, *(f"FAIL {failure}" for failure in self.failures), verdict]


def _what_it_is(mode: int) -> str:
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))  # fmt: skip
    return next((what for test, what in kinds if test(mode)), "not a regular file")


def read_packet(packet_dir: Path) -> dict:
    """The four records, each checked against its schema; the directory must hold exactly those four files."""
    packet_dir = Path(packet_dir)
    if not packet_dir.is_dir():
        raise AuditError(f"{packet_dir} is not a directory")
    try:
        with os.scandir(packet_dir) as entries:
            names = [entry.name for entry in islice(entries, 64)]
    except OSError as error:
        raise AuditError(f"{packet_dir}: cannot be listed ({error.strerror})") from None
    extras = sorted(set(names) - set(_FILES))
    if extras:
        shown = ", ".join(repr(name) for name in extras[:5]) + (", ..." if len(extras) > 5 else "")
        raise AuditError(f"{packet_dir} holds {shown} besides the records; a packet holds exactly {', '.join(_FILES)}")
    records = {}
    for name, file_name in zip(RECORDS, _FILES):
        path = packet_dir / file_name
        try:
            if file_name not in names:
                raise FileNotFoundError
            mode = os.lstat(path).st_mode
            if not stat.S_ISREG(mode):
                raise AuditError(f"record {name}: {file_name} is {_what_it_is(mode)}; a record is a regular file")
            data = read_file_bytes(path, MAX_RECORD_BYTES).data
        except FileNotFoundError:
            raise AuditError(f"record {name}: {file_name} is missing from {packet_dir}") from None
        except UnsafeFileError as error:
            raise AuditError(f"record {name}: {error}") from None
        records[name] = check_record(name, parse_record(data, name))
    return records


def _link_digests(body: dict) -> dict:
    return {"sha256": sha256_json(body), "fields": {key: sha256_json(value) for key, value in body.items()}}


def check_links(records: dict, report: Verification) -> None:
    """Every link (the record's SHA-256 and every per-field digest) against the record it names. A record all
    others disagree with was edited (named down to the field); a link only one record gets wrong was changed."""
    actual = {name: _link_digests(record_body(records[name])) for name in RECORDS}
    matched = total = 0
    for name in RECORDS:
        doubters = []
        for other in RECORDS:
            if other == name:
                continue
            total += 1
            link = records[other]["links"][name]
            if link == actual[name]:
                matched += 1
            else:
                doubters.append((other, link))
        if len(doubters) == len(RECORDS) - 1 and all(link["sha256"] != actual[name]["sha256"] for _, link in doubters):
            fields, now = doubters[0][1]["fields"], actual[name]["fields"]
            changed = sorted(k for k in set(fields) | set(now) if fields.get(k) != now.get(k))
            report.fail(f"record {name} was changed: field(s) {', '.join(changed) or '(unknown)'} no longer match the "
                        f"digests the other three records hold")  # fmt: skip
        else:
            for other, link in doubters:
                part = "sha256" if link["sha256"] != actual[name]["sha256"] else "fields"
                report.fail(f"record {other}, field links.{name}.{part}: not record {name}'s digest")
    report.check("links between the records match", matched, total)


def _close(recorded, rerun, tolerance: dict) -> bool:
    if tolerance["absolute"] is None:  # not determined (a recovery over a gap within the metrics' tolerance)
        return True
    if recorded is None or rerun is None:
        return recorded is None and rerun is None
    return abs(rerun - recorded) <= tolerance["absolute"] + tolerance["relative"] * abs(recorded)


def _tolerance_text(tolerance: dict) -> str:
    if tolerance["absolute"] is None:
        return "not determined"
    return f"tolerance {tolerance['absolute']:g} + {tolerance['relative']:g} x |value|"


def _numbers_close(a, b, tolerance: dict) -> bool:
    """A value (or a list of values) within tolerance of the re-run's, entry by entry."""
    if isinstance(a, list) != isinstance(b, list) or (isinstance(a, list) and len(a) != len(b)):
        return False  # a list of another length, or a list for a number
    return all(_close(x, y, tolerance) for x, y in (zip(a, b) if isinstance(a, list) else [(a, b)]))


def compare_values(recorded, rerun, path: str, report: Verification, counts: dict) -> None:
    """Recorded against re-run: nodes with a tolerance compare numerically, everything else exactly."""
    if isinstance(recorded, dict) and "tolerance" in recorded and isinstance(rerun, dict) and "tolerance" in rerun:
        tolerance = rerun["tolerance"]  # the tool's, or derived from the packet's own recorded metrics
        values = [key for key in ("value", "values") if key in recorded or key in rerun]
        close = {key: _numbers_close(recorded.get(key), rerun.get(key), tolerance) for key in values}
        counts["tolerances"] += 1
        counts["numbers"] += len(values)
        counts["numbers_ok"] += sum(close.values())
        for key in values:
            if not close[key]:
                report.fail(f"{path}.{key}: the packet says {_short(recorded.get(key))}, the re-run gives "
                            f"{_short(rerun.get(key))} ({_tolerance_text(tolerance)})")  # fmt: skip
        if recorded["tolerance"] == tolerance:
            counts["tolerances_ok"] += 1
        elif all(close.values()):  # a changed value also changes its derived tolerance: named once, above
            report.fail(f"{path}.tolerance: {recorded['tolerance']} is not {tolerance}, the tolerance this "
                        "quantity's rule gives")  # fmt: skip
        for key in sorted(set(recorded) | set(rerun)):
            if key not in ("tolerance", "sha256", *values):  # a replacement's sha256: recomputed from its values
                compare_values(recorded.get(key), rerun.get(key), child_path(path, key), report, counts)
        return
    if isinstance(recorded, dict) and isinstance(rerun, dict):
        for key in sorted(set(recorded) | set(rerun)):
            if key not in rerun:
                report.fail(f"{child_path(path, key)}: in the packet, but not in the re-run's record")
            elif key not in recorded:
                report.fail(f"{child_path(path, key)}: missing from the packet")
            else:
                compare_values(recorded[key], rerun[key], child_path(path, key), report, counts)
        return
    if isinstance(recorded, list) and isinstance(rerun, list) and len(recorded) == len(rerun):
        for index, (a, b) in enumerate(zip(recorded, rerun)):
            compare_values(a, b, f"{path}[{index}]", report, counts)
        return
    counts["exact"] += 1
    if recorded == rerun and type(recorded) is type(rerun):
        counts["exact_ok"] += 1
    else:
        report.fail(f"{path}: the packet says {_short(recorded)}, the re-run gives {_short(rerun)}")


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


# ---------------------------------------------------------------------------------------------------------
# What the records declare, checked against the model before anything runs.


def describe_source(source: dict) -> str:
    if source["kind"] == "specimen":
        return f"the random-weight {source['name']} specimen, seed {source['seed']}"
    if source["kind"] == "directory":
        return f"a model directory ({len(source['files'])} files: {', '.join(f['name'] for f in source['files'][:4])})"
    return "Lesson 2.1's trained copy model"


def how_to_verify(source: dict) -> str:
    if source["kind"] == "specimen":
        return f"verify it with no model option (the packet names its specimen) or --specimen {source['name']} " \
               f"--seed {source['seed']}"  # fmt: skip
    if source["kind"] == "directory":
        return "verify it with --model DIR, the directory it was made from"
    return "verify it with `residlab audit verify PACKET --copy-model` (the downloadable runner has no copy model)"


def _first_difference(recorded, given, path: str) -> str | None:
    """Where two sources first differ, as a field path (None when they agree)."""
    if isinstance(recorded, dict) and isinstance(given, dict):
        keys = sorted(set(recorded) | set(given))
        return next(filter(None, (_first_difference(recorded.get(k), given.get(k), child_path(path, k)) for k in keys)), None)
    if isinstance(recorded, list) and isinstance(given, list) and len(recorded) == len(given):
        pairs = enumerate(zip(recorded, given))
        return next(filter(None, (_first_difference(a, b, f"{path}[{i}]") for i, (a, b) in pairs)), None)
    return None if recorded == given and type(recorded) is type(given) else path


def check_subject(model: dict, subject: Subject) -> None:
    """Refuse, in one line, a model that is not the one the packet was made with (what identifies it: the
    specimen's name and seed, a directory's files, the copy model's training; the rest is compared later)."""
    recorded, given = model["source"], subject.source
    identity = ("kind", "name", "seed", "files", "training", "code")
    differs = "source.kind" if recorded["kind"] != given.get("kind") else _first_difference(
        {k: recorded.get(k) for k in identity}, {k: given.get(k) for k in identity}, "source")
    if differs:
        raise AuditError(f"this packet was made with {describe_source(recorded)}, not {describe_source(given)} given "
                         f"here (record model, field {differs} differs): {how_to_verify(recorded)}")  # fmt: skip


def _sites_from_record(record: dict, blocks: int, length: int) -> list[DeclaredSite]:
    sites = []
    for index, entry in enumerate(record["declared_sites"]):
        site = DeclaredSite(entry["component"], entry["block"], entry["position"])
        where = f"record intervention, field declared_sites[{index}]"
        if not (site.block < blocks and site.position < length):
            raise AuditError(f"{where}: {site.label} lies outside this model ({blocks} blocks) or the input "
                             f"({length} tokens)")  # fmt: skip
        if site in sites:
            raise AuditError(f"{where}: {site.label} is declared twice")
        sites.append(site)
    return sites


def _tokens(subject: Subject, text: str) -> list[int]:
    return list(subject.tokenizer(text, add_special_tokens=False)["input_ids"])


def check_labels(record: dict, subject: Subject, report: Verification) -> None:
    """Each label re-derived: a text must be what the tokenizer turns into the recorded ids; without a
    tokenizer a record holds no text."""
    checked = 0
    for what, key in (("clean", "ids"), ("corrupt", "ids"), ("target", "id"), ("rival", "id")):
        text, ids = record[what]["text"], record[what][key]
        if text is None:
            continue
        if subject.tokenizer is None:
            raise AuditError(f"record input, field {what}.text: this model has no tokenizer, so the packet can hold "
                             f"no text for {what}.{key} (null expected)")  # fmt: skip
        made = _tokens(subject, text)
        if made != (ids if key == "ids" else [ids]):
            report.fail(f"record input, field {what}.text: the tokenizer makes {_short(made)} of {_short(text)}, "
                        f"not {what}.{key} {_short(ids)}")  # fmt: skip
        else:
            checked += 1
    if subject.tokenizer is not None:
        labelled = sum(record[what]["text"] is not None for what in ("clean", "corrupt", "target", "rival"))
        report.check("labels the tokenizer turns into the recorded ids", checked, labelled)


def check_replacements(record: dict, report: Verification) -> None:
    """Every replacement's sha256 recomputed from its recorded values, as float32."""
    torch = _import_torch()
    matched = total = 0
    for index, run in enumerate(record["runs"]):
        if run["intervention"] is None:
            continue
        replacement = run["intervention"]["replacement"]
        total += 1
        if tensor_sha256(torch.tensor(replacement["values"], dtype=torch.float32)) == replacement["sha256"]:
            matched += 1
        else:
            report.fail(f"record intervention, field runs[{index}].intervention.replacement.sha256: not the SHA-256 "
                        "of its values as float32")  # fmt: skip
    report.check("replacement digests recomputed from their values", matched, total)


def _derived_tolerances(rerun: dict, recorded: dict, scale: int) -> None:
    """The total effect's and recovery's tolerances the packet should hold: derived from its own recorded metrics."""
    clean, corrupt = (recorded["baseline"][which]["value"] for which in ("clean", "corrupt"))
    for row, old in zip(rerun["results"], recorded["results"]):
        row["total_effect"]["tolerance"] = total_effect_tolerance(clean, old["total_effect"]["value"], scale)
        row["patch_recovery"]["tolerance"] = recovery_tolerance(clean, corrupt, old["patch_recovery"]["value"], scale)


def verify_packet(packet_dir: Path, subject: Subject) -> Verification:
    """Re-run the audit a packet records on ``subject`` and check every record, link, digest and result."""
    records = read_packet(packet_dir)
    check_subject(records["model"], subject)
    dtype = records["model"]["execution"]["dtype"]
    if subject.dtype != dtype:
        raise AuditError(f"record model, field execution.dtype: the packet was measured in {dtype}; the model given "
                         f"here runs in {subject.dtype} (verify re-runs in the packet's dtype)")  # fmt: skip
    scale = tolerance_scale(dtype)
    report = Verification()
    report.lines.append(f"re-run in {dtype}, the packet's dtype: " + (
        "float32's tolerances" if scale == 1 else f"its declared tolerances, float32's x {scale}"))
    check_links(records, report)
    threads = records["model"]["execution"]["threads"]
    inputs = records["input"]
    audit_input = AuditInput(
        clean_ids=tuple(inputs["clean"]["ids"]), corrupt_ids=tuple(inputs["corrupt"]["ids"]),
        target=inputs["target"]["id"], rival=inputs["rival"]["id"], clean_text=inputs["clean"]["text"],
        corrupt_text=inputs["corrupt"]["text"], target_text=inputs["target"]["text"], rival_text=inputs["rival"]["text"],
    )  # fmt: skip
    try:
        check_input(subject, audit_input)
    except InputError as error:
        raise AuditError(f"record input, field {error.field}: {error}") from None
    sites = _sites_from_record(records["intervention"], len(subject.blocks), len(audit_input.clean_ids))
    check_labels(inputs, subject, report)
    check_replacements(records["intervention"], report)
    runs, comparisons = run_audit(subject, audit_input, sites, threads)
    recorded_digest = records["model"]["parameters"]["digest"]
    digests = [d for run in runs for d in (run.digest_before, run.digest_after)]
    report.check(CHECK_LABELS["parameters"], sum(d == recorded_digest for d in digests), len(digests))  # fmt: skip
    if any(d != recorded_digest for d in digests):
        report.fail("record model, field parameters.digest: the model's parameters hash differently")
    upstream = sum(c["upstream_identical"] for c in comparisons)
    upstream_total = sum(c["upstream_sites"] for c in comparisons)
    report.check(CHECK_LABELS["upstream"], upstream,
                 upstream_total, f" sites, over {len(comparisons)} intervened runs")  # fmt: skip
    replaced = sum(c["declared_equals_replacement"] and c["other_positions_identical"] for c in comparisons)
    report.check(CHECK_LABELS["declared"], replaced, len(comparisons))
    changed = sum(c["downstream_changed"] for c in comparisons)
    stray = (upstream_total - upstream) + (len(comparisons) - replaced)
    report.check("changed sites that lie downstream of the declared site", changed, changed + stray,
                 f" ({changed} of {sum(c['downstream_sites'] for c in comparisons)} downstream sites changed)")  # fmt: skip
    if upstream != upstream_total or replaced != len(comparisons):
        report.fail("an intervention changed a site other than its declared one and those downstream of it")
    excesses = block_identity_excesses(subject, runs[0])
    identity_holds = sum(excess <= IDENTITY_ABSOLUTE * scale for excess in excesses)
    report.check(f"blocks whose output is input + attention write + MLP write within {dtype} rounding",
                 identity_holds, len(excesses))  # fmt: skip
    if identity_holds != len(excesses):
        report.fail("the block identity fails: the site table does not describe this model")
    rerun = {name: record_body(record) for name, record in linked_records({
        "model": model_record(subject, threads),
        "input": input_record(audit_input, sites),
        "intervention": intervention_record(runs, sites, scale),
        "measurement": measurement_record(subject, audit_input, sites, runs, comparisons),
    }).items()}  # fmt: skip
    _derived_tolerances(rerun["measurement"], records["measurement"], scale)
    for name in RECORDS:
        counts = dict.fromkeys(("exact", "exact_ok", "numbers", "numbers_ok", "tolerances", "tolerances_ok"), 0)
        informational = INFORMATIONAL.get(name, ())  # reported, never compared
        recorded = {key: value for key, value in record_body(records[name]).items() if key not in informational}
        rerun[name] = {key: value for key, value in rerun[name].items() if key not in informational}
        compare_values(recorded, rerun[name], f"record {name}, field ", report, counts)
        detail = f" fields exact; {counts['numbers_ok']} of {counts['numbers']} numbers within tolerance"
        report.check(f"record {name} reproduced", counts["exact_ok"] + counts["numbers_ok"] + counts["tolerances_ok"],
                     counts["exact"] + counts["numbers"] + counts["tolerances"], detail)  # fmt: skip
    environment, current = records["model"]["libraries"], library_versions(LIBRARIES)
    if environment != current:
        report.lines.append(f"note: the packet was written with {environment}; this check ran with {current}")
    return report


def _measured_values(node, path: str = ""):
    """(path, value, tolerance) of every measured value in a record."""
    if isinstance(node, dict):
        if "tolerance" in node and "value" in node:
            yield path, node["value"], node["tolerance"]
        for key, value in node.items():
            yield from _measured_values(value, child_path(path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _measured_values(value, f"{path}[{index}]")


def within_declared(approximate: dict, reference: dict) -> tuple[int, int]:
    """How many of the measured values of ``approximate`` (a measurement record, e.g. a bfloat16 packet's) lie
    within the tolerance it declares of ``reference``'s (the same audit's float32 record): (held, compared);
    values with no value or no determined tolerance are not compared."""
    exact = {path: value for path, value, _ in _measured_values(reference)}
    held = compared = 0
    for path, value, tolerance in _measured_values(approximate):
        if tolerance["absolute"] is None or value is None or exact.get(path) is None:
            continue
        compared += 1
        held += _close(exact[path], value, tolerance)
    return held, compared


# ---------------------------------------------------------------------------------------------------------
# Sources: rebuild the model a packet names.


def subject_from_packet(packet_dir: Path, placement: Placement | None = None) -> Subject:
    """The specimen a packet names, in the packet's dtype, placed as ``placement`` asks (a model directory must
    be given with --model, the copy model with --copy-model)."""
    model = read_packet(packet_dir)["model"]
    source, dtype = model["source"], model["execution"]["dtype"]
    if source["kind"] == "specimen":
        placement = placement or Placement()
        return place_specimen(source["name"], source["seed"],
                              Placement(placement.device, dtype, placement.device_map, placement.max_memory))
    raise AuditError(f"record model, field source.kind: the packet was made with {describe_source(source)}: "
                     f"{how_to_verify(source)}")  # fmt: skip
