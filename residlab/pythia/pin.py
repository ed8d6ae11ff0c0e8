"""``residlab pythia pin``: re-read the six files' sizes and hashes at one immutable revision and rewrite the lock.

For instructors, when the pinned revision changes or the lock must be completed. It asks the Hub API
(``get_paths_info``) for each allowed file at that commit: LFS files (the weights) come with the Hub's sha256;
for plain git files the API gives only a git blob id, so the file is downloaded into a temporary directory,
its blob id checked against the API's, and its sha256 computed. The new lock is validated, then written
atomically; every value's ``source`` says it was read from the Hub API at that revision on that date.

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

from residlab.pythia.artifacts import ArtifactError, git_blob_id
from residlab.pythia.lock import ALLOWED_FILES, LockError, UnsafeFileError, default_lock_path, parse_lock, read_file_bytes

_HEX40 = "0123456789abcdef"


def read_pins_from_hub(repository: str, revision: str, *, endpoint: str | None = None) -> dict[str, dict]:
    """name -> {"size", "sha256", "how"} for the six allowed files at ``revision``, from the Hub API."""
    from huggingface_hub import HfApi, hf_hub_download

    api = HfApi(endpoint=endpoint)
    try:
        infos = api.get_paths_info(repository, list(ALLOWED_FILES), revision=revision)
    except Exception as error:  # noqa: BLE001 - one clear refusal for every failure
        raise ArtifactError(f"could not read {repository} at revision {revision} from the Hub API: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from None
    by_name = {info.path: info for info in infos}
    absent = [name for name in ALLOWED_FILES if name not in by_name]
    if absent:
        raise ArtifactError(f"{repository} has no {', '.join(absent)} at revision {revision}; nothing was changed")
    pins = {}
    with tempfile.TemporaryDirectory(prefix="residlab-pin-") as scratch:
        for name in ALLOWED_FILES:
            info = by_name[name]
            if info.lfs is not None:
                if info.lfs.size != info.size:
                    raise ArtifactError(f"{name}: the Hub API reports size {info.size} but LFS size {info.lfs.size}")
                pins[name] = {"size": info.size, "sha256": info.lfs.sha256, "how": "size and LFS sha256"}
                continue
            # A plain git file: the API gives its git blob id, not its sha256. Download it and check.
            try:
                path = Path(hf_hub_download(repository, name, revision=revision, local_dir=scratch, endpoint=endpoint))
            except Exception as error:  # noqa: BLE001
                raise ArtifactError(f"{name}: download at revision {revision} failed: {type(error).__name__}") from None
            try:
                held = read_file_bytes(path, info.size)
            except (OSError, UnsafeFileError) as error:
                raise ArtifactError(f"{name}: the download at revision {revision} could not be read back ({error})") from None
            if held.size != info.size or git_blob_id(held.data) != info.blob_id:
                raise ArtifactError(
                    f"{name}: the downloaded bytes do not match the Hub API's size {info.size} and git blob id "
                    f"{info.blob_id}; nothing was changed"
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
    args = parser.parse_args(argv)
    if len(args.revision) != 40 or any(char not in _HEX40 for char in args.revision):
        parser.error(f"--revision {args.revision!r} is not a 40-hex commit id: pin an immutable commit, never a branch or tag")
    try:
        old = json.loads(args.lock.read_text(encoding="utf-8"))
        parse_lock(old, str(args.lock))
        repository = args.repo or old["repository"]
        pins = read_pins_from_hub(repository, args.revision, endpoint=args.endpoint)
        new = pinned_lock(old, repository, args.revision, pins, today or datetime.date.today())
        write_lock_atomically(new, args.lock)
    except (ArtifactError, LockError, OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
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
