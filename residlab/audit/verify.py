"""Verifying a packet: read its four records (each size-checked before it is read), check every link against
the record it names, re-run the audit the packet records on the model it names, and compare every field of every
record with the re-run (exactly, or within the tolerance a field carries). ``subject_from_packet`` rebuilds the
specimen a packet names; a model directory must be given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from residlab.capture.blocks import IDENTITY_ABSOLUTE  # bundled
from residlab.capture.recording import library_versions  # bundled
from residlab.audit.subject import AuditError, Subject, build_specimen, read_json_object  # bundled
from residlab.audit.runs import COMPONENTS, MAX_THREADS, AuditInput, DeclaredSite, run_audit, sha256_json  # bundled
from residlab.audit.runs import tokenize_prompt  # bundled
from residlab.audit.packet import LIBRARIES, RECORDS, SCHEMA, block_identity_excesses, input_record  # bundled
from residlab.audit.packet import intervention_record, linked_records, measurement_record, model_record  # bundled
from residlab.audit.packet import record_body  # bundled

MAX_RECORD_BYTES = 64 * 2**20  # a record larger than this is refused unread


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


def read_packet(packet_dir: Path) -> dict:
    packet_dir = Path(packet_dir)
    if not packet_dir.is_dir():
        raise AuditError(f"{packet_dir} is not a directory")
    records = {}
    for name in RECORDS:
        value = read_json_object(packet_dir / f"{name}.json", MAX_RECORD_BYTES, f"record {name}")
        if value.get("record") != name or value.get("schema") != SCHEMA:
            raise AuditError(f"record {name}: {name}.json is not a {SCHEMA} {name} record")
        records[name] = value
    return records


def check_links(records: dict, report: Verification) -> None:
    """Every link against the record it names. A record all others disagree with was edited (named down to
    the field by the per-field digests); a link only one record gets wrong was itself changed."""
    actual = {name: sha256_json(record_body(records[name])) for name in RECORDS}
    matched = total = 0
    for name in RECORDS:
        body = record_body(records[name])
        doubters = []
        for other in RECORDS:
            if other == name:
                continue
            total += 1
            link = (records[other].get("links") or {}).get(name) or {}
            if link.get("sha256") == actual[name]:
                matched += 1
            else:
                doubters.append((other, link))
        if len(doubters) == len(RECORDS) - 1:
            fields = doubters[0][1].get("fields") or {}
            changed = sorted(k for k in set(fields) | set(body) if fields.get(k) != (sha256_json(body[k]) if k in body else None))
            report.fail(f"record {name} was changed: field(s) {', '.join(changed) or '(unknown)'} no longer match the "
                        f"digests the other three records hold")  # fmt: skip
        else:
            for other, _ in doubters:
                report.fail(f"record {other}, field links.{name}: names a SHA-256 that is not record {name}'s")
    report.check("links between the records match", matched, total)


def _close(recorded, rerun, tolerance: dict) -> bool:
    if recorded is None or rerun is None:
        return recorded is None and rerun is None
    return abs(rerun - recorded) <= tolerance["absolute"] + tolerance["relative"] * abs(recorded)


def compare_values(recorded, rerun, path: str, report: Verification, counts: dict) -> None:
    """Recorded against re-run: nodes with a tolerance compare numerically, everything else exactly."""
    if isinstance(recorded, dict) and "tolerance" in recorded and isinstance(rerun, dict):
        counts["tolerances"] += 1
        if recorded["tolerance"] != rerun.get("tolerance"):
            report.fail(f"{path}.tolerance: {recorded['tolerance']} is not the tool's {rerun.get('tolerance')}")
            return
        counts["tolerances_ok"] += 1
        for key in set(recorded) | set(rerun):
            if key in ("tolerance", "sha256"):
                continue  # hashes of floats may differ across builds; the values are compared instead
            if key in ("value", "values"):
                a, b = recorded.get(key), rerun.get(key)
                pairs = list(zip(a, b)) if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) else [(a, b)]
                counts["numbers"] += 1
                if all(_close(x, y, recorded["tolerance"]) for x, y in pairs):
                    counts["numbers_ok"] += 1
                else:
                    report.fail(f"{path}.{key}: the packet says {_short(a)}, the re-run gives {_short(b)} "
                                f"(tolerance {recorded['tolerance']['absolute']:g} + "
                                f"{recorded['tolerance']['relative']:g} x |value|)")  # fmt: skip
            else:
                compare_values(recorded.get(key), rerun.get(key), _child(path, key), report, counts)
        return
    if isinstance(recorded, dict) and isinstance(rerun, dict):
        for key in sorted(set(recorded) | set(rerun)):
            if key not in rerun:
                report.fail(f"{_child(path, key)}: in the packet, but not part of a {SCHEMA} record")
            elif key not in recorded:
                report.fail(f"{_child(path, key)}: missing from the packet")
            else:
                compare_values(recorded[key], rerun[key], _child(path, key), report, counts)
        return
    if isinstance(recorded, list) and isinstance(rerun, list) and len(recorded) == len(rerun):
        for index, (a, b) in enumerate(zip(recorded, rerun)):
            compare_values(a, b, f"{path}[{index}]", report, counts)
        return
    counts["exact"] += 1
    if recorded == rerun:
        counts["exact_ok"] += 1
    else:
        report.fail(f"{path}: the packet says {_short(recorded)}, the re-run gives {_short(rerun)}")


def _child(path: str, key: str) -> str:
    """'record model, field ' + 'parameters' -> '... field parameters'; then dotted."""
    return f"{path}{key}" if path.endswith(" ") else f"{path}.{key}"


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _input_from_record(record: dict) -> AuditInput:
    try:
        for what in ("clean", "corrupt"):
            if not isinstance(record[what]["ids"], list) or not all(_is_int(i) for i in record[what]["ids"]):
                raise AuditError(f"record input: field {what}.ids is not a list of token ids")
        for what in ("target", "rival"):
            if not _is_int(record[what]["id"]):
                raise AuditError(f"record input: field {what}.id is not a token id")
        return AuditInput(
            clean_ids=tuple(record["clean"]["ids"]), corrupt_ids=tuple(record["corrupt"]["ids"]),
            target=record["target"]["id"], rival=record["rival"]["id"], clean_text=record["clean"]["text"],
            corrupt_text=record["corrupt"]["text"], target_text=record["target"]["text"],
            rival_text=record["rival"]["text"],
        )  # fmt: skip
    except (KeyError, TypeError) as error:
        raise AuditError(f"record input: field {error} is missing or malformed") from None


def _sites_from_record(record: dict) -> list[DeclaredSite]:
    try:
        sites = [DeclaredSite(s["component"], s["block"], s["position"]) for s in record["declared_sites"]]
    except (KeyError, TypeError) as error:
        raise AuditError(f"record intervention: field declared_sites is malformed ({error})") from None
    if not sites or not all(_is_int(site.block) and _is_int(site.position) for site in sites):
        raise AuditError("record intervention: field declared_sites needs sites with integer block and position")
    return sites


def verify_packet(packet_dir: Path, subject: Subject) -> Verification:
    """Re-run the audit a packet records on ``subject`` and check every record, link, digest and result."""
    records = read_packet(packet_dir)
    report = Verification()
    check_links(records, report)
    try:
        threads = records["model"]["execution"]["threads"]
    except (KeyError, TypeError):
        threads = None
    if not (_is_int(threads) and 1 <= threads <= MAX_THREADS):
        raise AuditError(f"record model: field execution.threads is not a thread count from 1 to {MAX_THREADS}")
    audit_input = _input_from_record(records["input"])
    sites = _sites_from_record(records["intervention"])
    length, blocks = len(audit_input.clean_ids), len(subject.blocks)
    for site in sites:
        if site.component not in COMPONENTS or not (0 <= site.block < blocks and 0 <= site.position < length):
            raise AuditError(f"record intervention: declared site {site} lies outside this model or input")
    if subject.tokenizer is not None:
        for what in ("clean", "corrupt"):
            text = records["input"][what]["text"]
            if text is not None and tokenize_prompt(subject, text, what) != list(records["input"][what]["ids"]):
                report.fail(f"record input, field {what}.ids: not what the tokenizer makes of {what}.text")
    runs, comparisons = run_audit(subject, audit_input, sites, threads)
    recorded_digest = records["model"].get("parameters", {}).get("digest")
    digests = [d for run in runs for d in (run.digest_before, run.digest_after)]
    report.check("parameter digest before and after every run equals the model record's",
                 sum(d == recorded_digest for d in digests), len(digests))  # fmt: skip
    if any(d != recorded_digest for d in digests):
        report.fail("record model, field parameters.digest: the model's parameters hash differently")
    upstream = sum(c["upstream_identical"] for c in comparisons)
    upstream_total = sum(c["upstream_sites"] for c in comparisons)
    report.check("recorded sites upstream of the declared site bit-identical to the source run", upstream,
                 upstream_total, f" sites, over {len(comparisons)} intervened runs")  # fmt: skip
    replaced = sum(c["declared_equals_replacement"] and c["other_positions_identical"] for c in comparisons)
    report.check("declared site equal to its replacement, its other positions untouched", replaced, len(comparisons))
    changed = sum(c["downstream_changed"] for c in comparisons)
    stray = (upstream_total - upstream) + (len(comparisons) - replaced)
    report.check("changed sites that lie downstream of the declared site", changed, changed + stray,
                 f" ({changed} of {sum(c['downstream_sites'] for c in comparisons)} downstream sites changed)")  # fmt: skip
    if upstream != upstream_total or replaced != len(comparisons):
        report.fail("an intervention changed a site other than its declared one and those downstream of it")
    excesses = block_identity_excesses(subject, runs[0])
    identity_holds = sum(excess <= IDENTITY_ABSOLUTE for excess in excesses)
    report.check("blocks whose output is input + attention write + MLP write within float32 rounding",
                 identity_holds, len(excesses))  # fmt: skip
    if identity_holds != len(excesses):
        report.fail("the block identity fails: the site table does not describe this model")
    rerun = {name: record_body(record) for name, record in linked_records({
        "model": model_record(subject, threads),
        "input": input_record(audit_input, sites),
        "intervention": intervention_record(runs, sites),
        "measurement": measurement_record(subject, audit_input, sites, runs, comparisons),
    }).items()}  # fmt: skip
    environment = record_body(records["model"]).get("libraries")
    for name in RECORDS:
        counts = dict.fromkeys(("exact", "exact_ok", "numbers", "numbers_ok", "tolerances", "tolerances_ok"), 0)
        recorded = record_body(records[name])
        if name == "model":  # another environment may run the check: report, do not fail
            recorded = {key: value for key, value in recorded.items() if key != "libraries"}
            rerun[name] = {key: value for key, value in rerun[name].items() if key != "libraries"}
        compare_values(recorded, rerun[name], f"record {name}, field ", report, counts)
        detail = f" fields exact; {counts['numbers_ok']} of {counts['numbers']} numbers within tolerance"
        report.check(f"record {name} reproduced", counts["exact_ok"] + counts["numbers_ok"] + counts["tolerances_ok"],
                     counts["exact"] + counts["numbers"] + counts["tolerances"], detail)  # fmt: skip
    current = library_versions(LIBRARIES)
    if environment != current:
        report.lines.append(f"note: the packet was written with {environment}; this check ran with {current}")
    return report


# ---------------------------------------------------------------------------------------------------------
# Sources: rebuild the model a packet names.


def subject_from_packet(packet_dir: Path) -> Subject:
    """The specimen a packet names (a model directory must be given with --model)."""
    source = read_packet(packet_dir)["model"].get("source") or {}
    if source.get("kind") == "specimen":
        return build_specimen(source.get("name", ""), int(source.get("seed", 0)))
    raise AuditError(f"record model, field source.kind is {source.get('kind')!r}: give the model with --model DIR")
