"""The download plan, the pinned fetch and the offline verification of the six specimen files.

- ``plan_text(lock)``: the six files, their sizes and the total; no network, standard library only.
- ``verify_artifacts(directory, lock)``: offline; refuses an extra, missing, resized, changed or symlinked
  file with a message naming the file and what differs. Nothing is downloaded.
- ``fetch_artifacts(directory, lock)``: downloads exactly the missing files of the six, at the pinned
  revision, through ``huggingface_hub.hf_hub_download`` (its progress bar shown). Each file lands in a
  private staging folder inside ``directory``, is checked for size and sha256 there, and only then is moved
  into place with ``os.replace``. A file the user already has is never overwritten or deleted: a verified
  one is kept, a different one stops the fetch.

Where the lock records no sha256 (it may lack one, e.g. ``generation_config.json`` before an instructor
completes it), the fetch checks the file against the Hub's own metadata for the immutable revision (size, and
the git blob id or LFS sha256), records the sha256 it computed in ``residlab-verified-hashes.json`` beside
the artifacts, so that later offline runs check those bytes, and says which command completes the lock.

Standard library only at import time: huggingface_hub is imported inside the functions that reach the Hub.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from residlab.pythia.lock import ALLOWED_FILES, Lock  # bundled

VERIFIED_HASHES_FILE = "residlab-verified-hashes.json"
STAGING_PREFIX = ".residlab-download-"
_CHUNK = 1 << 20


class ArtifactError(RuntimeError):
    """An artifact directory or a download does not match the lock; the message names the file."""


@dataclass(frozen=True)
class VerifiedArtifacts:
    directory: Path
    lock: Lock
    sha256: dict  # file name -> sha256 of the bytes on disk, every one checked
    recorded_hashes: tuple  # files checked against VERIFIED_HASHES_FILE because the lock has no sha256


def plan_text(lock: Lock) -> str:
    """What a fetch would download: exactly the six files and their total. Makes no request."""
    width = max(len(name) for name in lock.names)
    lines = [f"Plan: {lock.repository} at revision {lock.revision}" + (" (SYNTHETIC specimen)" if lock.synthetic else "")]
    for entry in lock.files:
        digest = entry.sha256[:12] + "…" if entry.sha256 else "no sha256 in the lock"
        lines.append(f"  {entry.name:<{width}}  {entry.size:>12,} bytes  {digest}")
    lines.append(f"  {len(lock.files)} files, {lock.total_bytes:,} bytes in all; nothing else is downloaded")
    if lock.missing_hashes:
        lines.append(
            f"  The lock records no sha256 for {', '.join(lock.missing_hashes)}: a fetch checks it against the "
            f"Hub's metadata for this revision. Complete the lock with `residlab pythia pin --revision {lock.revision}`."
        )
    lines.append(f"  lock: {lock.origin}")
    return "\n".join(lines)


def _digest_file(digest, path: Path) -> str:
    """Feed the file to ``digest`` in chunks (the weights are tens of MB) and return its hex digest."""
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    return _digest_file(hashlib.sha256(), path)


def git_blob_id(path: Path) -> str:
    """The git blob id the Hub reports for a non-LFS file: sha1 of b"blob <size>\\0" + content."""
    return _digest_file(hashlib.sha1(b"blob %d\0" % path.stat().st_size), path)


def _read_recorded_hashes(directory: Path, lock: Lock) -> dict:
    """name -> sha256 recorded by an earlier fetch for files the lock has no hash for."""
    path = directory / VERIFIED_HASHES_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        recorded = {name: entry["sha256"] for name, entry in data["files"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ArtifactError(f"{VERIFIED_HASHES_FILE}: unreadable ({error}); it should be written only by a fetch") from None
    if data.get("repository") != lock.repository or data.get("revision") != lock.revision:
        raise ArtifactError(
            f"{VERIFIED_HASHES_FILE}: recorded for {data.get('repository')} at {data.get('revision')}, "
            f"not for {lock.repository} at {lock.revision}"
        )
    return recorded


def _inspect_entries(directory: Path) -> tuple[list[str], dict[str, Path]]:
    """Problems with what the directory holds besides the six files, and the allowed files present."""
    problems, present = [], {}
    for entry in sorted(os.scandir(directory), key=lambda item: item.name):
        path = Path(entry.path)
        if entry.is_symlink():
            problems.append(f"{entry.name}: is a symbolic link (to {os.readlink(path)}); artifacts must be regular files")
        elif entry.name.startswith(STAGING_PREFIX):
            problems.append(f"{entry.name}: left by an interrupted fetch; delete it (its contents were never accepted)")
        elif entry.is_dir():
            problems.append(f"{entry.name}: unexpected directory; the artifact directory holds only the six files")
        elif entry.name in ALLOWED_FILES:
            if not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                problems.append(f"{entry.name}: not a regular file")
            else:
                present[entry.name] = path
        elif entry.name != VERIFIED_HASHES_FILE:
            problems.append(f"{entry.name}: extra file, not one of the six allowed files")
    return problems, present


def _check_file(path: Path, name: str, lock: Lock, recorded: dict) -> tuple[str | None, str | None]:
    """(problem, sha256) for one present file: size first, then the hash from the lock or the record."""
    expected = lock.file(name)
    size = path.stat().st_size
    if size != expected.size:
        return f"{name}: {size:,} bytes, the lock says {expected.size:,}", None
    actual = file_sha256(path)
    wanted = expected.sha256 or recorded.get(name)
    if wanted is None:
        return (
            f"{name}: the lock records no sha256 and no fetch has verified it here; run the fetch (online) to "
            f"check it against the Hub, or complete the lock with `residlab pythia pin --revision {lock.revision}`"
        ), None
    if actual != wanted:
        origin = "the lock" if expected.sha256 else VERIFIED_HASHES_FILE
        return f"{name}: sha256 {actual}, {origin} says {wanted} (same size, different bytes)", None
    return None, actual


def verify_artifacts(directory: Path, lock: Lock) -> VerifiedArtifacts:
    """Check an artifact directory against the lock without any network access."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ArtifactError(f"{directory}: no such artifact directory")
    problems, present = _inspect_entries(directory)
    recorded = _read_recorded_hashes(directory, lock)
    problems += [f"{name}: missing" for name in lock.names if name not in present]
    hashes = {}
    for name, path in present.items():
        problem, digest = _check_file(path, name, lock, recorded)
        if problem:
            problems.append(problem)
        else:
            hashes[name] = digest
    if problems:
        raise ArtifactError(
            f"{directory} does not match the lock ({lock.origin}):\n  " + "\n  ".join(problems)
        )
    used_records = tuple(name for name in lock.missing_hashes)
    return VerifiedArtifacts(directory=directory, lock=lock, sha256=hashes, recorded_hashes=used_records)


# ---- fetch ------------------------------------------------------------------------------------------------


def _hub_metadata(lock: Lock, names: list[str], endpoint: str | None) -> dict:
    """name -> (size, git blob id, lfs sha256 or None) from the Hub API at the pinned revision."""
    from huggingface_hub import HfApi

    try:
        infos = HfApi(endpoint=endpoint).get_paths_info(lock.repository, names, revision=lock.revision)
    except Exception as error:  # noqa: BLE001 - every failure becomes one clear refusal
        raise ArtifactError(
            f"could not read the Hub's metadata for {', '.join(names)} at revision {lock.revision}: {_describe(error)}"
        ) from None
    found = {}
    for info in infos:
        lfs = getattr(info, "lfs", None)
        found[info.path] = (info.size, info.blob_id, lfs.sha256 if lfs else None)
    absent = [name for name in names if name not in found]
    if absent:
        raise ArtifactError(f"the Hub lists no {', '.join(absent)} at revision {lock.revision}")
    return found


def _check_against_hub(path: Path, name: str, metadata: tuple) -> tuple[str | None, str]:
    """(problem, sha256) for a file the lock has no hash for, against the Hub's size and blob id / LFS sha256."""
    size, blob_id, lfs_sha256 = metadata
    actual_size = path.stat().st_size
    digest = file_sha256(path)
    if actual_size != size:
        return f"{name}: {actual_size:,} bytes, the Hub's metadata says {size:,}", digest
    if lfs_sha256 is not None:
        if digest != lfs_sha256:
            return f"{name}: sha256 {digest}, the Hub's LFS metadata says {lfs_sha256}", digest
    else:
        actual_blob = git_blob_id(path)
        if actual_blob != blob_id:
            return f"{name}: git blob id {actual_blob}, the Hub's metadata says {blob_id}", digest
    return None, digest


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0]


def _describe(error: BaseException) -> str:
    """One readable line: what the Hub said, with the underlying cause huggingface_hub wrapped (e.g. a 500)."""
    parts, current = [], error
    while current is not None and len(parts) < 6:
        part = f"{type(current).__name__}: {_first_line(current)}"
        if not parts or parts[-1] != part:
            parts.append(part)
        current = current.__cause__ or current.__context__
    hints = {
        "RevisionNotFoundError": "the Hub has no such revision",
        "RepositoryNotFoundError": "the Hub has no such repository (or it is private)",
        "RemoteEntryNotFoundError": "the Hub has no such file at this revision",
        "EntryNotFoundError": "the Hub has no such file at this revision",
        "LocalEntryNotFoundError": "the Hub could not be reached or answered with an error",
    }
    hint = hints.get(type(error).__name__)
    if type(error).__name__ == "LocalEntryNotFoundError" and len(parts) > 1:
        parts = parts[1:]  # its own text only says the file is not cached; the cause says why
    detail = " <- ".join(parts[:2])
    return f"{hint} ({detail})" if hint else detail


def _record_hashes(directory: Path, lock: Lock, entries: dict) -> None:
    """Atomically write VERIFIED_HASHES_FILE (name -> sha256 and how it was verified)."""
    data = {
        "repository": lock.repository,
        "revision": lock.revision,
        "note": "sha256 computed by residlab's fetch for files whose lock entry has none, after checking size "
        "and git blob id (or LFS sha256) against the Hub's metadata for this immutable revision",
        "files": entries,
    }
    handle, temporary = tempfile.mkstemp(prefix=STAGING_PREFIX, dir=directory)
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(temporary, directory / VERIFIED_HASHES_FILE)


def _download_one(lock: Lock, name: str, staging: Path, endpoint: str | None) -> Path:
    from huggingface_hub import hf_hub_download

    try:
        downloaded = Path(
            hf_hub_download(lock.repository, name, revision=lock.revision, local_dir=staging, endpoint=endpoint)
        )
    except Exception as error:  # noqa: BLE001 - every failure becomes one clear refusal
        raise ArtifactError(
            f"{name}: download from {lock.repository} at revision {lock.revision} failed: {_describe(error)}; "
            "nothing from it was kept"
        ) from None
    if downloaded.resolve() != (staging / name).resolve() or not stat.S_ISREG(os.lstat(downloaded).st_mode):
        raise ArtifactError(f"{name}: the download did not produce a regular file in the staging folder; nothing kept")
    return downloaded


def fetch_artifacts(directory: Path, lock: Lock, *, endpoint: str | None = None, report=print) -> VerifiedArtifacts:
    """Download the missing ones of the six files into ``directory`` and verify all six."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ArtifactError(f"{directory}: exists and is not a directory")
    directory.mkdir(parents=True, exist_ok=True)
    problems, present = _inspect_entries(directory)
    recorded = _read_recorded_hashes(directory, lock)
    unchecked = []  # present files the lock has no hash for and no earlier fetch recorded
    for name, path in present.items():
        if lock.file(name).sha256 is None and name not in recorded:
            if path.stat().st_size != lock.file(name).size:
                problems.append(f"{name}: {path.stat().st_size:,} bytes, the lock says {lock.file(name).size:,}")
            else:
                unchecked.append(name)
            continue
        problem, _ = _check_file(path, name, lock, recorded)
        if problem:
            problems.append(problem)
    if problems:
        raise ArtifactError(
            f"{directory} already holds files that do not match the lock; nothing was downloaded, and the fetch never "
            "overwrites or deletes a file you have (move them away first):\n  " + "\n  ".join(problems)
        )

    missing = [name for name in lock.names if name not in present]
    needs_hub_check = sorted(set(unchecked) | {name for name in missing if lock.file(name).sha256 is None})
    if not missing and not needs_hub_check:
        report(f"{directory}: all six files already present and verified; nothing downloaded")
        return verify_artifacts(directory, lock)
    if importlib.util.find_spec("huggingface_hub") is None:
        raise ArtifactError(
            "huggingface_hub is not installed: install the pinned requirements (residual-requirements.txt) first"
        )

    metadata = _hub_metadata(lock, needs_hub_check, endpoint) if needs_hub_check else {}
    for name in needs_hub_check:
        if metadata[name][0] != lock.file(name).size:
            raise ArtifactError(
                f"{name}: the Hub's metadata says {metadata[name][0]:,} bytes at revision {lock.revision}, "
                f"the lock says {lock.file(name).size:,}: the plan and the lock disagree with the Hub"
            )
    newly_recorded = {}
    for name in unchecked:
        problem, digest = _check_against_hub(present[name], name, metadata[name])
        if problem:
            raise ArtifactError(f"{directory}: {problem}; nothing was downloaded and the file was left as it is")
        newly_recorded[name] = digest

    if missing:
        report(f"Fetching {len(missing)} of 6 files from {lock.repository} at revision {lock.revision}")
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=directory))
    try:
        for name in missing:
            staged = _download_one(lock, name, staging, endpoint)
            expected = lock.file(name)
            if expected.sha256 is None:
                problem, digest = _check_against_hub(staged, name, metadata[name])
                if problem is None and staged.stat().st_size != expected.size:
                    problem = f"{name}: {staged.stat().st_size:,} bytes, the lock says {expected.size:,}"
            else:
                problem, digest = _check_file(staged, name, lock, {})
            if problem:
                raise ArtifactError(f"downloaded {problem}; the file was discarded, nothing from it was kept")
            target = directory / name
            if os.path.lexists(target):
                raise ArtifactError(f"{name}: appeared in {directory} during the fetch; left it untouched")
            os.replace(staged, target)
            if expected.sha256 is None:
                newly_recorded[name] = digest
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    if newly_recorded:
        entries = {
            name: {
                "sha256": digest,
                "size": lock.file(name).size,
                "verified_against": f"the Hub's metadata at revision {lock.revision}"
                + (" (LFS sha256)" if metadata[name][2] else f" (git blob id {metadata[name][1]})"),
            }
            for name, digest in newly_recorded.items()
        }
        merged = {}
        if (directory / VERIFIED_HASHES_FILE).exists():  # already validated by _read_recorded_hashes
            merged = json.loads((directory / VERIFIED_HASHES_FILE).read_text(encoding="utf-8"))["files"]
        merged.update(entries)
        _record_hashes(directory, lock, merged)
        names = ", ".join(sorted(newly_recorded))
        report(
            f"The lock is incomplete: it records no sha256 for {names}. Checked against the Hub's metadata for "
            f"revision {lock.revision} and recorded the computed sha256 in {directory / VERIFIED_HASHES_FILE}, "
            "so offline runs check these bytes. An instructor completes the lock with "
            f"`residlab pythia pin --revision {lock.revision}`."
        )
    verified = verify_artifacts(directory, lock)
    report(f"{directory}: six files verified ({lock.total_bytes:,} bytes)")
    return verified
