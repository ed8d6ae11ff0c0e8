"""The download plan, the pinned fetch and the offline verification of the six specimen files.

- ``plan_text(lock)``: the six files, their sizes and the total; no network, standard library only.
- ``verify_artifacts(directory, lock)``: offline; refuses an extra, missing, resized, changed or symlinked
  file with a message naming the file and what differs. Every file is read once, under the one rule of
  ``read_file_bytes`` (no symlink, regular file, size-bounded, identity unchanged while read), and the bytes
  it hashed are the bytes it returns: ``observe`` loads the model from those, never from the path again.
- ``fetch_artifacts(directory, lock)``: downloads exactly the missing files of the six, at the pinned revision,
  with the standard library's HTTP client, under ``FetchLimits``: it never reads more than the lock's size plus
  one byte of any file (whatever the headers say), the whole fetch has a deadline, a silent connection counts
  as stalled, attempts per file are bounded, and a resume (``Range``) the server ignores is refused. Each file
  lands in a private staging folder inside ``directory``, is checked for size and sha256 there, and only then
  is moved into place with ``os.replace``. A file the user already has is never overwritten or deleted.

Trust comes from the lock or, at fetch time, from the Hub; never from a file in the directory itself. Where the
lock records no sha256 (the pinned lock lacks one for ``generation_config.json``, which no public record gives),
the fetch checks the file against the Hub's metadata for the immutable revision (size, and the git blob id or
LFS sha256). Offline, such a file is checked for its size only and reported as unpinned; ``observe`` never
reads it (``OBSERVE_READS``), and refuses to run if any file it does read lacks a pinned sha256.
``residlab pythia pin --revision <commit>`` completes the lock.

Standard library only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from residlab.pythia.hub import (
    ArtifactError, FetchClock, FetchLimits, HubUnreachable, download_file, hub_endpoint, hub_metadata, hub_problem,
)
from residlab.pythia.lock import ALLOWED_FILES, FileBytes, Lock, UnsafeFileError, path_identity, read_file_bytes

STAGING_PREFIX = ".residlab-download-"
# Written by earlier releases to vouch for files the lock had no hash for; a directory cannot vouch for itself.
RETIRED_RECORD_FILE = "residlab-verified-hashes.json"
# The files observe loads. generation_config.json only matters for text generation, which nothing here does.
OBSERVE_READS = ("config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json")


@dataclass(frozen=True)
class VerifiedArtifacts:
    directory: Path
    lock: Lock
    sha256: dict  # file name -> sha256 of the bytes read, every one of the six
    contents: dict = field(repr=False)  # file name -> FileBytes, for files whose lock entry has a sha256
    unpinned: tuple = ()  # files the lock has no sha256 for: checked for size only offline, never loaded

    def bytes_for(self, name: str) -> bytes:
        """The verified bytes of ``name``, refused if the file on disk changed since it was verified."""
        if name not in self.contents:
            raise ArtifactError(
                f"{name}: the lock ({self.lock.origin}) records no sha256 for it, so its bytes are not verified and "
                f"are never loaded; complete the lock with `residlab pythia pin --revision {self.lock.revision}`"
            )
        held = self.contents[name]
        if path_identity(self.directory / name) != held.identity:
            raise ArtifactError(f"{name}: changed in {self.directory} after it was verified; refused, nothing loaded")
        return held.data


def plan_text(lock: Lock) -> str:
    """What a fetch would download: exactly the six files and their total. Makes no request."""
    width = max(len(name) for name in lock.names)
    lines = [f"Plan: {lock.repository} at revision {lock.revision}" + (" (SYNTHETIC specimen)" if lock.synthetic else "")]
    for entry in lock.files:
        digest = entry.sha256[:12] + "…" if entry.sha256 else "no sha256 in the lock"
        lines.append(f"  {entry.name:<{width}}  {entry.size:>12,} bytes  {digest}")
    lines.append(f"  {len(lock.files)} files, {lock.total_bytes:,} bytes in all; nothing else is downloaded")
    if lock.missing_hashes:
        lines.append("  " + unpinned_note(lock.missing_hashes))
    lines.append(f"  lock: {lock.origin}")
    return "\n".join(lines)


def unpinned_note(names) -> str:
    """What a file the lock has no sha256 for means to the person running the fetch or the observation."""
    return (
        f"{', '.join(names)}: the lock has no sha256 for it (no public record gives one), so a fetch checks it "
        "against the Hub's metadata for this revision and an offline run checks only its size. The observation "
        "never reads it: your results do not depend on it, and there is nothing for you to do."
    )


# ---- offline verification ------------------------------------------------------------------------------------


def _inspect_entries(directory: Path) -> tuple[list[str], list[str]]:
    """Problems with what the directory holds besides the six files, and the allowed names present."""
    problems, present = [], []
    for entry in sorted(os.scandir(directory), key=lambda item: item.name):
        if entry.is_symlink():
            problems.append(f"{entry.name}: is a symbolic link (to {os.readlink(entry.path)}); artifacts must be regular files")
        elif entry.name.startswith(STAGING_PREFIX):
            problems.append(f"{entry.name}: left by an interrupted fetch; delete it (its contents were never accepted)")
        elif entry.is_dir(follow_symlinks=False):
            problems.append(f"{entry.name}: unexpected directory; the artifact directory holds only the six files")
        elif entry.name == RETIRED_RECORD_FILE:
            problems.append(
                f"{entry.name}: written by an earlier release to vouch for files the lock has no hash for; it is no "
                "longer trusted or used (trust comes from the lock or the Hub): delete it"
            )
        elif entry.name in ALLOWED_FILES:
            present.append(entry.name)
        else:
            problems.append(f"{entry.name}: extra file, not one of the six allowed files")
    return problems, present


def _read_present(directory: Path, name: str, lock: Lock) -> tuple[str | None, FileBytes | None]:
    """(problem, bytes) for one present file: read under the one rule, bounded by the lock's size, then the
    size and, where the lock has one, the sha256."""
    expected = lock.file(name)
    try:
        held = read_file_bytes(directory / name, expected.size)
    except FileNotFoundError:
        return f"{name}: disappeared while the directory was being checked", None
    except UnsafeFileError as error:
        return str(error), None
    if held.size != expected.size:
        return f"{name}: {held.size:,} bytes, the lock says {expected.size:,}", None
    if expected.sha256 is not None and held.sha256 != expected.sha256:
        return f"{name}: sha256 {held.sha256}, the lock says {expected.sha256} (same size, different bytes)", None
    return None, held


def _read_entries(directory: Path, lock: Lock) -> tuple[list[str], list[str], dict[str, FileBytes]]:
    """(problems, the allowed files present, name -> verified bytes of each present file that matched the lock)."""
    problems, present = _inspect_entries(directory)
    held = {}
    for name in present:
        problem, read = _read_present(directory, name, lock)
        if problem:
            problems.append(problem)
        else:
            held[name] = read
    return problems, present, held

def verify_artifacts(directory: Path, lock: Lock) -> VerifiedArtifacts:
    """Check an artifact directory against the lock without any network access; hold the verified bytes."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ArtifactError(f"{directory}: no such artifact directory")
    problems, present, held = _read_entries(directory, lock)
    problems += [f"{name}: missing" for name in lock.names if name not in present]
    if problems:
        raise ArtifactError(f"{directory} does not match the lock ({lock.origin}):\n  " + "\n  ".join(problems))
    return VerifiedArtifacts(
        directory=directory,
        lock=lock,
        sha256={name: read.sha256 for name, read in held.items()},
        contents={name: read for name, read in held.items() if lock.file(name).sha256 is not None},
        unpinned=lock.missing_hashes,
    )


def fetch_artifacts(
    directory: Path,
    lock: Lock,
    *,
    endpoint: str | None = None,
    report=print,
    limits: FetchLimits = FetchLimits(),
) -> VerifiedArtifacts:
    """Download the missing ones of the six files into ``directory`` and verify all six."""
    directory = Path(directory)
    if os.path.islink(directory) or (directory.exists() and not directory.is_dir()):
        raise ArtifactError(f"{directory}: exists and is not a directory (a symbolic link is refused too)")
    created = [folder for folder in (directory, *directory.parents) if not os.path.lexists(folder)]  # deepest first
    directory.mkdir(parents=True, exist_ok=True)
    try:
        return _fetch_into(directory, lock, endpoint, report, limits)
    except HubUnreachable as error:
        kept = [name for name in lock.names if os.path.lexists(directory / name)]
        if _remove_empty(created):
            where = f"Nothing was written: the folder {directory} this fetch created was removed again"
        elif kept:
            where = f"The files already in {directory} were kept ({', '.join(kept)})"
        else:
            where = f"Nothing was written to {directory}, which can be used again as it is"
        raise ArtifactError(
            f"{error}; or fetch on a machine that reaches the Hub, copy the six files into one folder here and run "
            f"with --offline. {where}; the same command fetches what is missing once the Hub is reachable."
        ) from None
    except BaseException:
        _remove_empty(created)  # a refused fetch leaves no empty folder behind
        raise


def _remove_empty(folders: list[Path]) -> bool:
    """Remove the folders this fetch created, deepest first, while they are empty; True if all are gone."""
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            return False
    return bool(folders)


def _fetch_into(directory: Path, lock: Lock, endpoint: str | None, report, limits: FetchLimits) -> VerifiedArtifacts:
    problems, present, held = _read_entries(directory, lock)
    if problems:
        raise ArtifactError(
            f"{directory} already holds files that do not match the lock; nothing was downloaded, and the fetch never "
            "overwrites or deletes a file you have (move them away first):\n  " + "\n  ".join(problems)
        )
    missing = [name for name in lock.names if name not in present]
    unpinned = [name for name in lock.missing_hashes]
    if not missing and not unpinned:
        report(f"{directory}: all six files already present and verified; nothing downloaded")
        return verify_artifacts(directory, lock)

    clock = FetchClock.start(limits)
    endpoint = hub_endpoint(endpoint)
    metadata = hub_metadata(lock.repository, lock.revision, unpinned, endpoint, clock) if unpinned else {}
    for name in unpinned:
        if metadata[name].size != lock.file(name).size:
            raise ArtifactError(
                f"{name}: the Hub's metadata says {metadata[name].size:,} bytes at revision {lock.revision}, "
                f"the lock says {lock.file(name).size:,}: the plan and the lock disagree with the Hub"
            )
        if name in held:
            problem = hub_problem(name, held[name].data, metadata[name])
            if problem:
                raise ArtifactError(f"{directory}: {problem}; nothing was downloaded and the file was left as it is")

    if missing:
        report(
            f"Fetching {len(missing)} of 6 files from {lock.repository} at revision {lock.revision} "
            f"(deadline {limits.deadline_s:g} s)"
        )
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=directory))
    try:
        for name in missing:
            expected = lock.file(name)
            staged = download_file(lock.repository, lock.revision, name, expected.size, staging, endpoint, clock)
            if expected.sha256 is None:
                problem = hub_problem(name, staged.data, metadata[name])
            elif staged.sha256 != expected.sha256:
                problem = f"{name}: sha256 {staged.sha256}, the lock says {expected.sha256}"
            else:
                problem = None
            if problem:
                raise ArtifactError(f"downloaded {problem}; the file was discarded, nothing from it was kept")
            target = directory / name
            if os.path.lexists(target):
                raise ArtifactError(f"{name}: appeared in {directory} during the fetch; left it untouched")
            os.replace(staging / name, target)
            report(f"  {name}: {expected.size:,} bytes, verified")
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    if unpinned:
        report(f"Checked against the Hub's metadata for revision {lock.revision}: {unpinned_note(unpinned)}")
    verified = verify_artifacts(directory, lock)
    report(f"{directory}: six files verified ({lock.total_bytes:,} bytes)")
    return verified
