"""The committed capture of a lock's files, refreshed in one command (``residlab pythia capture``,
``make pythia-capture``): the observation of verified files, written into ``<captures>/<repository name>-<revision>``
with its manifest, replacing the one there only once the new one is complete.

Pages prefer a capture made during the render, then this committed one, then the synthetic specimen's
(``residlab.course.models.capture_source``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from residlab.pythia.artifacts import ArtifactError, verify_artifacts
from residlab.pythia.cache import cache_folder, cached_artifacts, capture_folder_name
from residlab.pythia.lock import Lock
from residlab.pythia.observe import observe_to_directory

COMMAND = ["residlab", "pythia", "capture"]  # recorded in the manifest: no folder of this machine


def refresh_capture(lock: Lock, captures: Path, artifacts: Path | None = None) -> Path:
    """Observe the verified files (``artifacts``, else the lock's cache folder) into ``captures``; the folder it
    wrote."""
    captures = Path(captures)
    if not captures.is_dir():
        raise ArtifactError(f"{captures}: no such folder of committed captures")
    verified = verify_artifacts(Path(artifacts), lock) if artifacts is not None else cached_artifacts(lock)
    if verified is None:
        raise ArtifactError(
            f"{cache_folder(lock)}: no files of {lock.repository} at revision {lock.revision} fetched yet; run "
            "`make pythia` (residlab pythia fetch --cache) first, or name verified files with --artifacts"
        )
    target = captures / capture_folder_name(lock)
    scratch = Path(tempfile.mkdtemp(prefix=".residlab-capture-", dir=captures))
    try:
        observe_to_directory(verified, scratch / "new", command=COMMAND)
        if target.exists():
            os.replace(target, scratch / "old")
        os.replace(scratch / "new", target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
