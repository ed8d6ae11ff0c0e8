"""Where the six files of a lock are kept once fetched, which lock a build uses, and where its committed capture
lives: the names the fetch (``residlab pythia fetch --cache``, ``make pythia``), the refresh of the committed
capture (``residlab pythia capture``) and the pages agree on.

- ``active_lock()``: the lock ``RESIDLAB_PYTHIA_LOCK`` names, else the pinned one. Tests point a build at a
  stand-in this way (another repository and revision, served by a fake hub); nothing else needs it.
- ``cache_folder(lock)``: ``<cache root>/<digest>``, the digest being the first 16 hex digits of the SHA-256 of
  the lock's canonical JSON, so a changed pin never finds the files of the old one. The cache root is
  ``RESIDLAB_PYTHIA_CACHE``, else ``.residlab-pythia/`` in the project (the folder the publish workflow keeps
  with ``actions/cache``, keyed on the lock file's hash).
- ``cached_artifacts(lock)``: that folder verified offline against the lock (``VerifiedArtifacts``), or None
  when it does not exist. A folder that exists and does not verify is an ``ArtifactError`` naming the file: a
  build must not quietly show something else. ``verified_files(lock)``: the same for the folder
  ``RESIDLAB_PYTHIA_ARTIFACTS`` names, when it names one, else the cache folder's.
- ``capture_folder_name(lock)``: the committed capture of a lock's files is ``<repository name>-<revision>``.

Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from residlab.pythia.artifacts import VerifiedArtifacts, verify_artifacts
from residlab.pythia.lock import Lock, load_lock

LOCK_ENV = "RESIDLAB_PYTHIA_LOCK"
ARTIFACTS_ENV = "RESIDLAB_PYTHIA_ARTIFACTS"  # names verified files elsewhere; they take the cache folder's place
CACHE_ENV = "RESIDLAB_PYTHIA_CACHE"
DEFAULT_CACHE_ROOT = Path(__file__).resolve().parents[2] / ".residlab-pythia"
DIGEST_DIGITS = 16


def active_lock(environ: dict | None = None) -> Lock:
    """The lock ``RESIDLAB_PYTHIA_LOCK`` names, else the pinned one."""
    environ = os.environ if environ is None else environ
    return load_lock(environ.get(LOCK_ENV) or None)


def lock_digest(lock: Lock) -> str:
    """The first 16 hex digits of the SHA-256 of the lock's canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(lock.data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:DIGEST_DIGITS]


def cache_root(environ: dict | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return Path(environ[CACHE_ENV]) if environ.get(CACHE_ENV) else DEFAULT_CACHE_ROOT


def cache_folder(lock: Lock, environ: dict | None = None) -> Path:
    """Where the fetch keeps this lock's six files."""
    return cache_root(environ) / lock_digest(lock)


def cached_artifacts(lock: Lock, environ: dict | None = None) -> VerifiedArtifacts | None:
    """The cache folder of ``lock`` verified offline, or None when there is none."""
    folder = cache_folder(lock, environ)
    if not os.path.lexists(folder):
        return None
    return verify_artifacts(folder, lock)


def verified_files(lock: Lock, environ: dict | None = None) -> VerifiedArtifacts | None:
    """The files a build captures from: those ``RESIDLAB_PYTHIA_ARTIFACTS`` names, else the lock's cache folder,
    verified offline; None when neither is there. Named or cached files that do not verify are an error."""
    environ = os.environ if environ is None else environ
    if environ.get(ARTIFACTS_ENV):
        return verify_artifacts(Path(environ[ARTIFACTS_ENV]), lock)
    return cached_artifacts(lock, environ)


def lock_label(lock: Lock) -> str:
    """The lock as a page names it: its file name (never this machine's folders) and its digest."""
    origin = Path(lock.origin)
    return f"{origin.name if origin.is_file() else lock.origin} (digest {lock_digest(lock)})"


def capture_folder_name(lock: Lock) -> str:
    """The committed capture of this lock's files: ``<repository name>-<revision>``."""
    return f"{lock.repository.rsplit('/', 1)[-1]}-{lock.revision}"
