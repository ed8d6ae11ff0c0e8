"""``residlab pythia pin``: re-read the six files' sizes and hashes at one immutable revision and rewrite the lock.

For instructors, when the pinned revision changes or the lock must be completed. It asks the Hub API
(``paths-info``) for each allowed file at that commit: LFS files (the weights) come with the Hub's sha256;
for plain git files the API gives only a git blob id, so the file is downloaded into a temporary directory,
its blob id checked against the API's, and its sha256 computed. It uses the fetch's client and bounds
(``FetchLimits``: a deadline for the whole pin, ``--timeout``; a stall limit; no byte read past a file's
size), so an instructor's pin can hang or fill a disk no more than a learner's fetch. The new lock is
validated, then written atomically; every value's ``source`` says it was read from the Hub API at that
revision on that date.

Package only (not bundled): learners never re-pin.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

from residlab.pythia.hub import (
    ArtifactError, FetchClock, FetchLimits, download_file, git_blob_id, hub_endpoint, hub_metadata,
)
from residlab.pythia.lock import ALLOWED_FILES, LockError, default_lock_path, parse_lock
from residlab.pythia.runner import positive_seconds

_HEX40 = "0123456789abcdef"
# The Hub refuses a file over 10 MB outside LFS; a larger size claimed for one is refused before downloading.
GIT_FILE_MAX_BYTES = 10 * 1000 * 1000


def read_pins_from_hub(repository: str, revision: str, *, endpoint: str | None = None,
                       limits: FetchLimits = FetchLimits()) -> dict[str, dict]:
    """name -> {"size", "sha256", "how"} for the six allowed files at ``revision``, from the Hub API. Through the
    fetch's own client and bounds: one bounded metadata request, and each plain git file downloaded with its
    API size as the limit (at most ``GIT_FILE_MAX_BYTES``), all within one deadline."""
    clock = FetchClock.start(limits)
    endpoint = hub_endpoint(endpoint)
    try:
        metadata = hub_metadata(repository, revision, list(ALLOWED_FILES), endpoint, clock)
    except ArtifactError as error:
        raise ArtifactError(f"{repository}: {error}") from None
    pins = {}
    with tempfile.TemporaryDirectory(prefix="residlab-pin-") as scratch:
        for name in ALLOWED_FILES:
            info = metadata[name]
            if info.lfs_sha256 is not None:
                if info.lfs_size != info.size:
                    raise ArtifactError(f"{name}: the Hub API reports size {info.size} but LFS size {info.lfs_size}")
                pins[name] = {"size": info.size, "sha256": info.lfs_sha256, "how": "size and LFS sha256"}
                continue
            # A plain git file: the API gives its git blob id, not its sha256. Download it and check.
            if info.size > GIT_FILE_MAX_BYTES:
                raise ArtifactError(
                    f"{name}: the Hub API reports {info.size:,} bytes for a file outside LFS; more than the "
                    f"{GIT_FILE_MAX_BYTES:,} the Hub keeps outside LFS, so it was not downloaded"
                )
            held = download_file(repository, revision, name, info.size, Path(scratch), endpoint, clock, "the Hub API")
            if git_blob_id(held.data) != info.blob_id:
                raise ArtifactError(
                    f"{name}: the downloaded bytes do not match the Hub API's git blob id {info.blob_id}"
                )
            pins[name] = {
                "size": info.size,
                "sha256": held.sha256,
                "how": f"size and git blob id {info.blob_id}; sha256 computed from the file downloaded at that revision",
            }
    return pins


def pinned_lock(old: dict, repository: str, revision: str, pins: dict[str, dict], today: datetime.date) -> dict:
    """The new lock: the old one's library versions, the Hub's pins, every source saying where it came from."""
    read = f"read from the Hub API at revision {revision} on {today.isoformat()}"
    new = dict(old)
    new.update(
        repository=repository,
        revision=revision,
        revision_source=f"pinned by `residlab pythia pin --revision {revision}` on {today.isoformat()}: an immutable commit id",
        synthetic=old.get("synthetic", False) if old.get("repository") == repository else False,
        total_bytes=sum(pin["size"] for pin in pins.values()),
        total_bytes_source=f"sum of the six file sizes {read}",
        files=[
            {"name": name, "size": pins[name]["size"], "sha256": pins[name]["sha256"], "source": f"{pins[name]['how']}, {read}"}
            for name in sorted(pins)
        ],
    )
    return new


def write_lock_atomically(data: dict, path: Path) -> None:
    parse_lock(data, str(path))  # never write a lock that would not load
    handle, temporary = tempfile.mkstemp(prefix=".pin-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(json.dumps(data, indent=2) + "\n")
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def changes(old: dict, new: dict) -> list[str]:
    lines = []
    for key in ("repository", "revision", "total_bytes"):
        if old.get(key) != new.get(key):
            lines.append(f"{key}: {old.get(key)} -> {new.get(key)}")
    old_files = {entry["name"]: entry for entry in old.get("files", [])}
    for entry in new["files"]:
        before = old_files.get(entry["name"], {})
        for key in ("size", "sha256"):
            if before.get(key) != entry[key]:
                lines.append(f"{entry['name']} {key}: {before.get(key)} -> {entry[key]}")
    return lines


def main(argv: list[str] | None = None, *, today: datetime.date | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="residlab pythia pin", description="Re-read the six files' sizes and sha256 at a revision and rewrite the lock."
    )
    parser.add_argument("--revision", required=True, help="the immutable 40-hex commit id to pin")
    parser.add_argument("--repo", help="repository id (default: the one in the lock)")
    parser.add_argument("--lock", type=Path, default=default_lock_path(), help="the lock file to rewrite")
    parser.add_argument("--endpoint", default=os.environ.get("HF_ENDPOINT"), help="Hub endpoint (default: HF_ENDPOINT)")
    parser.add_argument("--timeout", type=positive_seconds, default=FetchLimits().deadline_s, metavar="SECONDS",
                        help=f"give up a pin that takes longer than this in all (default {FetchLimits().deadline_s:g})")
    args = parser.parse_args(argv)
    if len(args.revision) != 40 or any(char not in _HEX40 for char in args.revision):
        parser.error(f"--revision {args.revision!r} is not a 40-hex commit id: pin an immutable commit, never a branch or tag")
    try:
        old = json.loads(args.lock.read_text(encoding="utf-8"))
        parse_lock(old, str(args.lock))
        repository = args.repo or old["repository"]
        pins = read_pins_from_hub(repository, args.revision, endpoint=args.endpoint,
                                  limits=FetchLimits(deadline_s=args.timeout))
        new = pinned_lock(old, repository, args.revision, pins, today or datetime.date.today())
        write_lock_atomically(new, args.lock)
    except (ArtifactError, LockError, OSError, ValueError) as error:
        print(f"error: {error}; the lock was not changed", file=sys.stderr)
        return 1
    changed = changes(old, new)
    print(f"Pinned {repository} at {args.revision} in {args.lock} ({new['total_bytes']:,} bytes in six files).")
    print("Changed:" if changed else "Nothing changed: the lock already held these values.")
    for line in changed:
        print(f"  {line}")
    print(
        "Next: run `residlab sync` (rewrites the runner's embedded lock, _variables.yml and "
        "assets/labs/residual-requirements.txt), then `make test` and `make render`, and commit the results."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
