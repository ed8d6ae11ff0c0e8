"""Small audit packets of every specimen block type and ways to forge them, shared by the audit's refusal and
property tests: an edited copy (optionally re-linked, as a careful forger would), a record written with a key
twice, and the paths of every field of a record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from residlab import audit
from residlab.capture.blocks import SPECIMEN_CONFIGS

SMALL_INPUT = audit.AuditInput((5, 17, 3), (9, 17, 3), 12, 30)
# one write at the readout position (a direct effect) and one before it (none): both shapes of a result row
SMALL_SITES = [audit.DeclaredSite("attn", 0, 2), audit.DeclaredSite("mlp", 2, 1)]


def write_small_packets(folder: Path) -> dict[str, Path]:
    """One packet per specimen block type, each audited at SMALL_SITES."""
    packets = {}
    for name in SPECIMEN_CONFIGS:
        packets[name] = folder / name
        audit.audit_to_directory(audit.build_specimen(name), SMALL_INPUT, SMALL_SITES, packets[name])
    return packets


def load_records(packet: Path) -> dict:
    return {name: json.loads((packet / f"{name}.json").read_text()) for name in audit.RECORDS}


def relinked(records: dict) -> dict:
    """What a careful forger writes: every link recomputed over the edited bodies."""
    return audit.linked_records({name: audit.record_body(value) for name, value in records.items()})


def _encode(node, path: tuple, duplicate: tuple | None) -> str:
    """JSON text of ``node``; at ``duplicate`` = (object path, key, decoy) the key is written twice, the decoy
    first, so the ordinary parser (which keeps the last) would read the true value. A subtree that does not hold
    the duplicate is json.dumps's compact text, the same bytes written faster (the property tests write thousands)."""
    if duplicate is None or duplicate[0][: len(path)] != path:
        return json.dumps(node, separators=(",", ":"))
    if isinstance(node, dict):
        parts = [f"{json.dumps(k)}:{_encode(v, (*path, k), duplicate)}" for k, v in node.items()]
        if duplicate[0] == path:
            parts.insert(0, f"{json.dumps(duplicate[1])}:{json.dumps(duplicate[2])}")
        return "{" + ",".join(parts) + "}"
    if isinstance(node, list):
        return "[" + ",".join(_encode(v, (*path, i), duplicate) for i, v in enumerate(node)) + "]"
    return json.dumps(node)


def write_records(records: dict, target: Path, duplicate: tuple | None = None, record: str | None = None) -> Path:
    """The records into a new packet directory; ``duplicate`` applies to ``record`` only."""
    target.mkdir()
    for name, value in records.items():
        text = _encode(value, (), duplicate if name == record else None)
        (target / f"{name}.json").write_text(text)
    return target


def copy_packet(packet: Path, target: Path) -> Path:
    return Path(shutil.copytree(packet, target))


def field_paths(node, path: tuple = (), entries: tuple = (0, 1, 2, -1)) -> list[tuple]:
    """The path of every field below ``node``; of a list, the given entries (by default its first three and
    its last)."""
    paths = []
    if isinstance(node, dict):
        for key, value in node.items():
            paths += [(*path, key), *field_paths(value, (*path, key), entries)]
    elif isinstance(node, list):
        for index in sorted({i % len(node) for i in entries if -len(node) <= i < len(node)}):
            paths += [(*path, index), *field_paths(node[index], (*path, index), entries)]
    return paths


def get(node, path: tuple):
    for key in path:
        node = node[key]
    return node


def field_text(path: tuple) -> str:
    """A path as verify names a field: results[2].norm.value."""
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text
