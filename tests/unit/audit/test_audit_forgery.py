"""Property test of ``audit verify`` against a forger: every field of every record of a packet of each specimen
block type is changed (another value of its type, a value of another type, removed, written twice, joined by an
unknown field), with every link recomputed or not. Verify must either refuse with a message naming a record and
a field, or accept; and it may accept only when what changed is a number within the tolerance the packet
declares for it, or a field the schema declares informational, or the thread count (an input of the re-run
that changes only float rounding). Never a traceback, always within a bounded time.

Why an acceptance within tolerance is sound: the re-run in this process reproduces the original packet bit for
bit, so verify compares the forged number with the true one, and accepts exactly when they differ by no more
than the tolerance the tool derives for that quantity: the float32 rounding another build or thread count may
produce. A claim that close to the truth is one verify cannot tell from a correct packet written elsewhere.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from audit_packets import field_paths, field_text, get, load_records, relinked, write_records, write_small_packets
from residlab import audit
from residlab.capture.blocks import SPECIMEN_CONFIGS
from residlab.course.lab06 import copy_audit

SECONDS_PER_VERIFY = 30  # a generous bound: each verify here takes well under a second
# Inputs of the re-run: a forger who changes one and re-links makes a different, consistent claim, which verify
# refuses where the results disagree (another record's field), not necessarily at the field itself.
RERUN_INPUTS = {("input", "clean"), ("input", "corrupt"), ("input", "target"), ("input", "rival"),
                ("intervention", "declared_sites"), ("model", "execution"), ("model", "source")}  # fmt: skip


@pytest.fixture(scope="module")
def packets(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forgery")
    return Packets({name: (path, load_records(path)) for name, path in write_small_packets(folder).items()})


class Packets(dict):
    def __repr__(self) -> str:  # a failing example's report shows the forgery, not four packets
        return "packets"


def run_verify(packet: Path) -> tuple[int, str]:
    """``residlab audit verify PACKET`` in this process; any exception but a refusal propagates (a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = copy_audit.main(["verify", str(packet)])
    assert time.monotonic() - started < SECONDS_PER_VERIFY
    return code, out.getvalue() + err.getvalue()


def _differences(before, after, path=()) -> list[tuple]:
    if isinstance(before, dict) and isinstance(after, dict):
        keys = set(before) | set(after)
        return [d for k in sorted(keys) for d in _differences(before.get(k, KeyError), after.get(k, KeyError), (*path, k))]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (a, b) in enumerate(zip(before, after)) for d in _differences(a, b, (*path, i))]
    same = json.dumps(before, default=repr) == json.dumps(after, default=repr)
    return [] if same else [(path, before, after)]


def _within_declared_tolerance(record: dict, path: tuple, before, after) -> bool:
    """A number under a measured value (or replacement values) within the tolerance the forged record holds."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (before, after))
    keys = [k for k in path if isinstance(k, str)]
    if not numbers or not keys or keys[-1] not in ("value", "values"):
        return False
    node = get(record, path[: path.index(keys[-1])])
    tolerance = node["tolerance"]
    if tolerance["absolute"] is None:
        return True
    return abs(after - before) <= tolerance["absolute"] + tolerance["relative"] * abs(after)


def acceptable(original: dict, forged_text: dict) -> bool:
    """Whether verify may accept the forged packet (parsed as the ordinary parser would)."""
    for name in audit.RECORDS:  # the links are digests of the bodies, recomputed by verify
        for path, before, after in _differences(audit.record_body(original[name]), audit.record_body(forged_text[name])):
            informational = path[:1] in [(key,) for key in audit.INFORMATIONAL.get(name, ())]
            threads = (name, *path) == ("model", "execution", "threads")
            if not (informational or threads or _within_declared_tolerance(forged_text[name], path, before, after)):
                return False
    return True


def assert_refusal_names_the_field(output: str, record: str, path: tuple, added: bool = False) -> None:
    """A refusal line names the record and the field changed (or the field added beside it); for an input of
    the re-run, some record and field."""
    lines = [line for line in output.splitlines() if line.startswith(("FAIL ", "error: "))]
    assert lines, output
    names = {str(path[0]), "unknown_field"} if added else {str(path[0])}
    if (record, path[0]) in RERUN_INPUTS:
        assert any("record " in line and "field" in line for line in lines), output
    else:
        assert any(f"record {record}" in line and any(n in line for n in names) for line in lines), output


# A value of another JSON type than the one held, and another value of the same type.
OTHER_TYPE = {dict: [], list: {}, str: 7, int: "7", float: "7.5", bool: "true", type(None): "null"}


def another_value(draw, old):
    if isinstance(old, bool):
        return not old
    if isinstance(old, int):
        return draw(st.one_of(st.integers(-3, 3).map(lambda d: old + d), st.integers(-(2**70), 2**70)))
    if isinstance(old, float):
        nudge = st.floats(-1e-4, 1e-4, allow_nan=False).map(lambda d: old * (1 + d) + d * 1e-3)
        return draw(st.one_of(nudge, st.floats(allow_nan=True, allow_infinity=True)))
    if isinstance(old, str):
        return draw(st.text(max_size=12))
    if old is None:
        return draw(st.one_of(st.floats(-10, 10), st.text(max_size=4)))
    if isinstance(old, list):
        return old[1:] if old and draw(st.booleans()) else [*old, old[-1] if old else 0]
    return {**old, "extra": 1}


@st.composite
def forgeries(draw):
    kind = draw(st.sampled_from(sorted(SPECIMEN_CONFIGS)))
    record = draw(st.sampled_from(audit.RECORDS))
    how = draw(st.sampled_from(["value", "type", "remove", "twice", "unknown"]))
    relink = draw(st.booleans())
    return kind, record, how, relink


def forge(records: dict, record: str, path: tuple, how: str, value, relink: bool, folder: Path) -> tuple[Path, dict]:
    """Write the forged packet; return it and its records as the ordinary parser (last key wins) reads them."""
    records = json.loads(json.dumps(records))
    parent, key = get(records[record], path[:-1]), path[-1]
    duplicate = None
    if how == "remove":
        del parent[key]
    elif how == "unknown":
        target = get(records[record], path) if isinstance(get(records[record], path), dict) else parent
        if isinstance(target, dict):
            target["unknown_field"] = 1
        else:
            target.append(target[-1] if target else 1)
    elif how != "twice":
        parent[key] = value
    if relink:
        with contextlib.suppress(ValueError):  # NaN or infinity has no canonical JSON: nothing to re-link over
            records = relinked(records)
    if how == "twice":  # the decoy first: a parser keeping the last key reads the true value
        duplicate = (path[:-1], key, value) if isinstance(key, str) else None
    packet = write_records(records, folder / "forged", duplicate=duplicate, record=record)
    return packet, records


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forgeries(), st.data())
def test_verify_refuses_a_forged_field_or_accepts_only_within_tolerance(packets, forgery, data):
    kind, record, how, relink = forgery
    packet, original = packets[kind]
    path = data.draw(st.sampled_from(field_paths(original[record])))
    old = get(original[record], path)
    value = OTHER_TYPE[type(old)] if how == "type" else another_value(data.draw, old)
    if how == "twice" and not isinstance(path[-1], str):
        how = "value"  # a list entry has no key to write twice
    with tempfile.TemporaryDirectory() as folder:
        forged, as_read = forge(original, record, path, how, value, relink, Path(folder))
        code, output = run_verify(forged)
    assert code in (0, 1), output
    event("accepted" if code == 0 else "refused")
    if how == "twice":
        assert code == 1 and f"record {record}, field {field_text(path)}: written twice" in output, output
    elif code == 0:
        assert acceptable(original, as_read), (record, path, how, value, output)
    else:
        assert_refusal_names_the_field(output, record, path, added=how == "unknown")


def test_every_field_of_every_record_refuses_another_type_even_relinked(packets):
    """The exhaustive pass: every field (of a list, its first entry and its last) of every record of every
    block type, given a value of another JSON type and every link recomputed (but the links and the envelope,
    which re-linking would rewrite), is refused naming it."""
    subjects = {kind: audit.build_specimen(kind) for kind in packets}
    checked = 0
    for kind, (packet, original) in packets.items():
        for record in audit.RECORDS:
            for path in field_paths(original[record], entries=(0, -1)):
                value = OTHER_TYPE[type(get(original[record], path))]
                relink = path[0] not in ("links", "record", "schema")  # re-linking would rewrite these
                with tempfile.TemporaryDirectory() as folder:
                    forged, _ = forge(original, record, path, "type", value, relink, Path(folder))
                    try:
                        report = audit.verify_packet(forged, subjects[kind])
                        output = "\n".join(f"FAIL {failure}" for failure in report.failures)
                    except audit.AuditError as error:
                        output = f"error: {error}"
                assert_refusal_names_the_field(output, record, path)
                checked += 1
    assert checked > 1500
