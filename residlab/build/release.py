"""``residlab release``: a course release per term, a frozen build that a class keeps, and what a re-pin changes.

- ``residlab release TERM [--site DIR]``: the built site (``_site/``, as ``make render`` left it) copied to
  ``releases/TERM/`` with the pins it was built from (``pins/requirements.txt`` and ``pins/pythia-14m.lock.json``)
  and ``manifest.json``: the term and the sha256 and size of every file. A release is never rebuilt or
  overwritten: a TERM that exists is refused. TERM is a year and a term, ``2027-spring``.
- ``residlab release verify TERM`` (or ``--all``, every release; ``make render`` runs it): every file of the
  release against its manifest; a changed, missing or added file is refused, named.
- ``residlab release diff A B``: A and B each a release's TERM, ``latest`` (``_site/``) or a build folder; the
  pins that differ, then page by page every number (``numbers.json``, ``residlab.build.numbers_list``) whose value
  changed (old -> new), appeared or disappeared. Exit status 0 when they show the same numbers, 1 when any differ.

Errors are one line and exit status 2 (a usage error, a refusal, a file that cannot be read). Every file is read in bounded chunks, with a
bound on the number of files and their total size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from residlab.build import numbers_list

RELEASES = "releases"
RELEASES_FILE = "_releases.yml"  # the navbar's Releases menu, for _quarto.yml's metadata-files (residlab sync)
SEASONS = ("spring", "summer", "autumn", "fall", "winter")
MANIFEST = "manifest.json"
PINS = "pins"
TERM = re.compile(r"(19|20)[0-9]{2}-(" + "|".join(SEASONS) + r")(-[a-z0-9]{1,12})?")
TERM_RULE = "a year and a term, such as 2027-spring (spring, summer, autumn, fall, winter; optionally a suffix such as -b)"
MAX_FILES = 20_000
MAX_TOTAL_BYTES = 2 * 1024**3
CHUNK = 1024 * 1024
LATEST = "latest"


class ReleaseError(Exception):
    """A release that cannot be made, read, verified or compared: one line."""


def check_term(term: str) -> str:
    if not TERM.fullmatch(term):
        raise ReleaseError(f"{term!r} is not a release name: {TERM_RULE}")
    return term


def site_files(folder: Path) -> list[Path]:
    """Every file under ``folder``, relative and sorted; refuses links and a tree past the bounds."""
    found, total = [], 0
    for directory, subfolders, files in os.walk(folder):
        subfolders.sort()
        if Path(directory) == folder and RELEASES in subfolders:
            subfolders.remove(RELEASES)  # a published site's releases are not part of its build
        for name in sorted(files) + [s for s in subfolders if (Path(directory) / s).is_symlink()]:
            path = Path(directory) / name
            if path.is_symlink() or not path.is_file():
                raise ReleaseError(f"{path} is not a plain file: a release holds plain files only")
            found.append(path.relative_to(folder))
            total += path.stat().st_size
            if len(found) > MAX_FILES or total > MAX_TOTAL_BYTES:
                raise ReleaseError(f"{folder} holds more than {MAX_FILES} files or {MAX_TOTAL_BYTES} bytes")
    return found


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_files(folder: Path) -> dict[str, dict]:
    return {path.as_posix(): {"sha256": sha256(folder / path), "bytes": (folder / path).stat().st_size}
            for path in site_files(folder) if path.as_posix() != MANIFEST}  # fmt: skip


def make_release(root: Path, site: Path, term: str) -> Path:
    """``site`` copied to ``root/releases/TERM`` with its pins and manifest, whole or not at all."""
    check_term(term)
    target = root / RELEASES / term
    if target.exists() or target.is_symlink():
        raise ReleaseError(f"release {term} exists ({target}): a release is never rebuilt or overwritten")
    if not (site / numbers_list.NUMBERS).is_file():
        raise ReleaseError(f"{site} holds no {numbers_list.NUMBERS}: not a build of this site (make render)")
    files = site_files(site)
    (root / RELEASES).mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{term}.", dir=root / RELEASES))
    try:
        for path in files:
            (staging / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(site / path, staging / path)
        (staging / PINS).mkdir(exist_ok=True)
        for source in (root / "requirements.txt", root / numbers_list.LOCK):
            shutil.copyfile(source, staging / PINS / source.name)
        pins = numbers_list.read_json(site / numbers_list.NUMBERS, "the list of numbers").get("pins", {})
        manifest = {"schema": 1, "term": term, "pins": pins, "files": manifest_files(staging)}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def verify_release(root: Path, term: str) -> int:
    """The number of files checked; ReleaseError naming the first that differs from the manifest."""
    folder = root / RELEASES / check_term(term)
    if not folder.is_dir():
        raise ReleaseError(f"no release {term} ({folder})")
    try:
        listed = numbers_list.read_json(folder / MANIFEST, "the manifest")["files"]
    except (numbers_list.NumbersError, KeyError) as error:
        raise ReleaseError(f"release {term}: {error}") from None
    present = {path.as_posix() for path in site_files(folder)} - {MANIFEST}
    for name in sorted(set(listed) - present):
        raise ReleaseError(f"release {term}: {name} is missing")
    for name in sorted(present - set(listed)):
        raise ReleaseError(f"release {term}: {name} is not in the manifest")
    for name in sorted(listed):
        if sha256(folder / name) != listed[name].get("sha256"):
            raise ReleaseError(f"release {term}: {name} differs from the manifest (sha256)")
    return len(listed)


def numbers_of(root: Path, which: str) -> tuple[str, dict]:
    """A build's list of numbers: ``latest`` (_site/), a release's TERM, or a build folder."""
    if which == LATEST:
        folder = root / "_site"
    elif TERM.fullmatch(which) and (root / RELEASES / which).is_dir():
        folder = root / RELEASES / which
    else:
        folder = Path(which)
        if not folder.is_dir():
            raise ReleaseError(f"{which!r} is neither {LATEST!r}, a release under {root / RELEASES}, nor a folder")
    path = folder / numbers_list.NUMBERS
    if not path.is_file():
        raise ReleaseError(f"{folder} holds no {numbers_list.NUMBERS}: not a build of this site")
    try:
        listed = numbers_list.read_json(path, "the list of numbers")
        pages = {entry["page"]: {n["id"]: n["value"] for n in entry["numbers"]} for entry in listed["pages"]}
    except (numbers_list.NumbersError, KeyError, TypeError) as error:
        raise ReleaseError(f"{path}: {error}") from None
    return which, {"pins": listed.get("pins", {}), "pages": pages}


def differences(old: dict, new: dict) -> dict:
    """Pins that differ and, page by page, numbers changed (old, new), appeared and disappeared."""
    pins = {name: (old["pins"].get(name), new["pins"].get(name))
            for name in sorted(set(old["pins"]) | set(new["pins"])) if old["pins"].get(name) != new["pins"].get(name)}  # fmt: skip
    pages = {}
    for page in sorted(set(old["pages"]) | set(new["pages"])):
        before, after = old["pages"].get(page, {}), new["pages"].get(page, {})
        changed = {i: (before[i], after[i]) for i in before if i in after and before[i] != after[i]}
        appeared = {i: after[i] for i in after if i not in before}
        disappeared = {i: before[i] for i in before if i not in after}
        if changed or appeared or disappeared:
            pages[page] = {"changed": changed, "appeared": appeared, "disappeared": disappeared}
    return {"pins": pins, "pages": pages}


def diff_lines(a: str, b: str, found: dict) -> list[str]:
    lines = [f"pins that differ ({a} -> {b}): {len(found['pins']) or 'none'}"]
    lines += [f"  {name}: {old or '(none)'} -> {new or '(none)'}" for name, (old, new) in found["pins"].items()]
    if not found["pages"]:
        lines.append("numbers: the same on every page")
    for page, page_diff in found["pages"].items():
        lines.append(page)
        lines += [f"  changed  {i}: {old} -> {new}" for i, (old, new) in page_diff["changed"].items()]
        lines += [f"  appeared {i}: {value}" for i, value in page_diff["appeared"].items()]
        lines += [f"  gone     {i}: {value}" for i, value in page_diff["disappeared"].items()]
    return lines


def terms(root: Path) -> list[str]:
    """The releases under ``root/releases/`` (each a folder with a manifest), newest term first."""
    folder = root / RELEASES
    found = [p.name for p in folder.iterdir() if TERM.fullmatch(p.name) and (p / MANIFEST).is_file()] if folder.is_dir() else []

    def order(term: str) -> tuple:
        year, season, *suffix = term.split("-", 2)
        return int(year), SEASONS.index(season), suffix

    return sorted(found, key=order, reverse=True)


def releases_yaml(root: Path) -> str:
    """``_releases.yml``: with releases, the navbar's Releases menu (the latest build, then each release, newest
    first) and the releases copied into the site as they are; without, nothing."""
    header = (f"# {RELEASES_FILE}: generated by `residlab sync` (and `residlab release`) from the manifests under "
              f"{RELEASES}/ (residlab/build/release.py);\n# `residlab sync --check` fails when it differs. _quarto.yml "
              "includes it (metadata-files).\n")  # fmt: skip
    found = terms(root)
    if not found:
        return header + "website: {}\n"
    lines = ["project:", "  resources:", f'    - "{RELEASES}/**"', "website:", "  navbar:", "    right:",
             '      - text: "Releases"', "        menu:", '          - text: "Latest build"', '            href: "index.qmd"']
    for term in found:
        lines += [f'          - text: "{term}"', f'            href: "{RELEASES}/{term}/index.html"']
    return header + "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="residlab release", description=__doc__.splitlines()[0].strip("`"))
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="the project's root folder")
    parser.add_argument("term", metavar="TERM | verify TERM | verify --all | diff A B", help="a release name, or verify or diff")
    parser.add_argument("more", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--site", type=Path, help="the build to release (default: _site/ of the root)")
    parser.add_argument("--all", action="store_true", help="verify: every release under releases/")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    action, rest = args.term, args.more
    if args.all and action != "verify":
        parser.error("--all goes with verify only")
    try:
        if action == "verify":
            if args.all and not rest:
                rest = terms(args.root)  # every release there is (none: nothing to check)
            elif len(rest) != 1 or args.all:
                parser.error("verify takes one TERM, or --all")
            for term in rest:
                count = verify_release(args.root, term)
                print(f"release {term}: {count} files match the manifest")
        elif action == "diff":
            if len(rest) != 2:
                parser.error("diff takes two builds: A B (a TERM, latest, or a build folder)")
            (a, old), (b, new) = numbers_of(args.root, rest[0]), numbers_of(args.root, rest[1])
            found = differences(old, new)
            print("\n".join(diff_lines(a, b, found)))
            return 1 if found["pins"] or found["pages"] else 0
        else:
            if rest:
                parser.error(f"unexpected arguments after TERM: {' '.join(rest)}")
            target = make_release(args.root, args.site or args.root / "_site", action)
            (args.root / RELEASES_FILE).write_text(releases_yaml(args.root), encoding="utf-8")
            print(f"release {action}: {target} ({MANIFEST} lists every file's sha256); {RELEASES_FILE} lists it in "
                  "the navbar from the next render")
    except (ReleaseError, numbers_list.NumbersError, OSError) as error:
        print(f"residlab release: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    return 0
