"""The specimen lock: which repository, which immutable revision, which six files, their sizes and hashes.

One JSON file, ``residlab/locks/pythia-14m.lock.json``, is the single source of these pins; the runner
carries a copy of it (written in by ``residlab sync``). Every value records where it came from. Loading
validates the whole file and names the first problem, so a hand-edited lock fails loudly, not later.

Standard library only: the runner's ``--plan`` must work before anything is installed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from residlab.capture.files import FileBytes, UnsafeFileError, path_identity, read_file_bytes

# The only files ever downloaded: no .bin weights, no custom code, no other checkpoints or optimizer states.
ALLOWED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
)
LOCK_SCHEMA = 1
REQUIRED_KEYS = ("schema", "repository", "revision", "synthetic", "total_bytes", "files", "libraries")
OPTIONAL_KEYS = ("revision_source", "total_bytes_source", "libraries_source", "also_tested", "also_tested_source")
FILE_KEYS = ("name", "size", "sha256", "source")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$")
LOCK_MAX_BYTES = 1 << 20  # a lock is a few kB; anything larger is not a lock


class LockError(ValueError):
    """The lock file is malformed or inconsistent; the message names the problem."""


@dataclass(frozen=True)
class LockedFile:
    name: str
    size: int
    sha256: str | None  # None: no trusted record yet; fetch verifies it against the Hub's metadata instead
    source: str


@dataclass(frozen=True)
class Lock:
    repository: str
    revision: str
    files: tuple[LockedFile, ...]  # sorted by name, exactly ALLOWED_FILES
    total_bytes: int
    synthetic: bool
    libraries: dict
    origin: str  # where this lock was read from (a path, or "the runner's embedded copy")
    data: dict  # the validated JSON, unchanged

    def file(self, name: str) -> LockedFile:
        for entry in self.files:
            if entry.name == name:
                return entry
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.files)

    @property
    def missing_hashes(self) -> tuple[str, ...]:
        """Files whose sha256 the lock does not record (the lock is incomplete while this is non-empty)."""
        return tuple(entry.name for entry in self.files if entry.sha256 is None)


def default_lock_path() -> Path:
    """The pinned lock inside the package (meaningless inside a runner, which embeds its copy)."""
    return Path(__file__).resolve().parent.parent / "locks" / "pythia-14m.lock.json"


def _check_text(data: dict, key: str, origin: str) -> None:
    if key in data and not (isinstance(data[key], str) and data[key].strip()):
        raise LockError(f"{origin}: {key} {data[key]!r} must be a non-empty string")


def parse_lock(data: object, origin: str) -> Lock:
    """Validate lock JSON (already parsed) and return a ``Lock``; raise ``LockError`` naming the problem."""
    if not isinstance(data, dict):
        raise LockError(f"{origin}: the lock must be a JSON object")
    unknown = sorted(set(data) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        raise LockError(f"{origin}: unknown key(s) {', '.join(unknown)}")
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise LockError(f"{origin}: missing key(s) {', '.join(missing)}")
    if type(data["schema"]) is not int or data["schema"] != LOCK_SCHEMA:
        raise LockError(f"{origin}: schema {data['schema']!r} is not the supported schema {LOCK_SCHEMA}")
    if not (isinstance(data["repository"], str) and _REPOSITORY.match(data["repository"])):
        raise LockError(f"{origin}: repository {data['repository']!r} is not of the form owner/name")
    if not (isinstance(data["revision"], str) and _HEX40.match(data["revision"])):
        raise LockError(f"{origin}: revision {data['revision']!r} is not an immutable 40-hex commit id")
    if not isinstance(data["synthetic"], bool):
        raise LockError(f"{origin}: synthetic {data['synthetic']!r} must be true or false")
    for key in ("revision_source", "total_bytes_source", "libraries_source", "also_tested_source"):
        _check_text(data, key, origin)
    for key in ("libraries", "also_tested"):
        if key in data and not (
            isinstance(data[key], dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in data[key].items())
        ):
            raise LockError(f"{origin}: {key} {data[key]!r} must map library names to version strings")

    entries = data["files"]
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise LockError(f"{origin}: files must be a list of objects")
    files = []
    for index, entry in enumerate(entries):
        name = entry.get("name")
        if not isinstance(name, str):
            raise LockError(f"{origin}: files[{index}]: name {name!r} is not a string")
        where = f"{origin}: file {name!r}"
        extra = sorted(set(entry) - set(FILE_KEYS))
        absent = [key for key in FILE_KEYS if key not in entry]
        if extra:
            raise LockError(f"{where}: unknown key(s) {', '.join(extra)}")
        if absent:
            raise LockError(f"{where}: missing key(s) {', '.join(absent)}")
        size = entry["size"]
        if not (isinstance(size, int) and not isinstance(size, bool) and size > 0):
            raise LockError(f"{where}: size {size!r} is not a positive integer")
        digest = entry["sha256"]
        if digest is not None and not (isinstance(digest, str) and _HEX64.match(digest)):
            raise LockError(f"{where}: sha256 {digest!r} is neither 64 lowercase hex digits nor null")
        if not (isinstance(entry["source"], str) and entry["source"].strip()):
            raise LockError(f"{where}: source must say where the size and hash came from (got {entry['source']!r})")
        files.append(LockedFile(name=name, size=size, sha256=digest, source=entry["source"]))

    names = [entry.name for entry in files]
    if sorted(names) != sorted(ALLOWED_FILES) or len(set(names)) != len(names):
        unexpected = sorted(set(names) - set(ALLOWED_FILES))
        absent = sorted(set(ALLOWED_FILES) - set(names))
        duplicated = sorted({name for name in names if names.count(name) > 1})
        details = "; ".join(
            part
            for part in (
                f"not allowed: {', '.join(map(str, unexpected))}" if unexpected else "",
                f"missing: {', '.join(absent)}" if absent else "",
                f"listed twice: {', '.join(duplicated)}" if duplicated else "",
            )
            if part
        )
        raise LockError(f"{origin}: files must be exactly the six allowed names ({details})")

    total = data["total_bytes"]
    if not (isinstance(total, int) and not isinstance(total, bool)):
        raise LockError(f"{origin}: total_bytes {total!r} is not an integer")
    summed = sum(entry.size for entry in files)
    if total != summed:
        raise LockError(
            f"{origin}: the plan and the lock disagree: total_bytes is {total:,} "
            f"but the six file sizes add up to {summed:,}"
        )
    return Lock(
        repository=data["repository"],
        revision=data["revision"],
        files=tuple(sorted(files, key=lambda entry: entry.name)),
        total_bytes=total,
        synthetic=data["synthetic"],
        libraries=dict(data["libraries"]),
        origin=origin,
        data=data,
    )


def embedded_lock_json() -> str | None:
    """The pinned lock a runner carries, or None in the package.

    ``residlab sync`` writes the lock into a runner as its ``EMBEDDED_LOCK_JSON`` data section, near the end of
    the file (see ``residlab/build/runners.py``); the package never defines that name.
    """
    return globals().get("EMBEDDED_LOCK_JSON")


def load_lock(path: Path | str | None = None) -> Lock:
    """Read and validate a lock. ``None`` means the pinned one (in a runner: its embedded copy)."""
    embedded = embedded_lock_json() if path is None else None
    if embedded is not None:
        text, origin = embedded, "the runner's embedded lock"
    else:
        lock_path = default_lock_path() if path is None else Path(path)
        origin = str(lock_path)
        try:
            text = read_file_bytes(lock_path, LOCK_MAX_BYTES).data
        except FileNotFoundError:
            raise LockError(f"{origin}: no such lock file") from None
        except UnsafeFileError as error:
            raise LockError(f"{origin}: {error}") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise LockError(f"{origin}: not valid JSON ({error})") from None
    return parse_lock(data, origin)
