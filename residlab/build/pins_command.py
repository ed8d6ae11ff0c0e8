"""``residlab pins``: how far the pins are behind, and whether the newest releases still work.

- ``outdated``: every pinned library (``requirements.txt``, and the lock's ``libraries`` and ``also_tested``), its
  pinned version and the newest release the package index offers for the lock's Python, asked of pip
  (``package_index``). Changes nothing.
- ``try-latest``: the plan's libraries (``pyproject.toml``, ``[tool.residlab.try-latest]``) moved to their newest
  releases in a throwaway copy and checked there (``try_latest``); one line per library. Changes nothing unless
  ``--write``: then the newer releases that worked are pinned in ``requirements.txt`` and the lock together and
  the plan's ``after-write`` (``residlab sync``) runs, so one commit holds the re-pin.
- ``write``: that re-pin alone, from a try-latest report (``--from-report``) or ``NAME==VERSION`` arguments.

Exit status: 0 done (try-latest: no newer release failed); 1 a newer release breaks a check or cannot be
installed, or a pin file is unreadable or wrong; 2 a usage error; 3 the index could not be asked, or the trial
could not run or could blame nobody.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

from residlab.build import package_index, pins, try_latest
from residlab.build.sync import LOCK_NAME, default_site_root

UNREACHABLE_STATUS = 3


def read_pins(root: Path) -> tuple[dict, str]:
    """The lock's data and requirements.txt's text under ``root``; ``ValueError`` naming an unreadable one."""
    try:
        lock = pins.load_lock_data(root / LOCK_NAME)
        requirements_text = (root / try_latest.REQUIREMENTS_NAME).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read the pins under {root}: {error}") from None
    if not (isinstance(lock, dict) and isinstance(lock.get("libraries"), dict)):
        raise ValueError(f"{root / LOCK_NAME}: no `libraries` mapping")
    return lock, requirements_text


def outdated(args) -> int:
    lock, requirements_text = read_pins(args.root)
    pinned = pins.pinned_versions(lock, requirements_text)
    python = lock["libraries"].get("python")
    releases = package_index.newest_releases(list(pinned), python_version=python, index_url=args.index_url,
                                             timeout_s=args.timeout)  # fmt: skip
    rows = [("library", "pinned", "newest", "status", "pinned in")]
    for name, versions in pinned.items():
        release = releases[name]
        for version, where in versions.items():
            if release.newest is None:
                status = "not on the index"
            elif version == release.newest:
                status = "newest"
            elif version in release.versions:
                status = "behind"
            else:  # yanked, removed, or a mirror without it: worth a look before anything else
                status = "pinned release not offered"
            rows.append((name, version, release.newest or "-", status, ", ".join(where)))
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[4])
    behind = sum(row[3] != "newest" for row in rows[1:])
    print(f"{behind} of {len(rows) - 1} pins differ from the newest release for Python {python} on "
          f"{args.index_url or 'the index pip is configured with'}; `residlab pins try-latest` tries the newest "
          "runtime libraries")  # fmt: skip
    return 0


def trial_environment(index_url: str | None) -> dict[str, str]:
    """What the trial's commands run with: this environment, and the index given, for every pip they start."""
    return {**os.environ, **({"PIP_INDEX_URL": index_url} if index_url else {})}


def try_newest(args) -> int:
    lock, requirements_text = read_pins(args.root)
    plan = try_latest.load_plan(args.root)
    chosen = [pins.normalised(name) for name in args.library] or list(plan.libraries)
    unknown = [name for name in chosen if name not in plan.libraries]
    if unknown:
        raise ValueError(f"--library {', '.join(unknown)}: the plan's libraries are {', '.join(plan.libraries)}")
    plan = replace(plan, libraries=tuple(name for name in plan.libraries if name in chosen))
    python, running = lock["libraries"].get("python"), f"{sys.version_info[0]}.{sys.version_info[1]}"
    if python != running:
        raise try_latest.TrialError(f"the lock records Python {python} but this is Python {running}: run try-latest "
                                    "with the lock's Python, the one its environments are built with")
    required = pins.requirement_pins(requirements_text)
    pinned = {}
    for name in plan.libraries:
        pinned[name] = lock["libraries"].get(name)
        if pinned[name] is None or required.get(name) != pinned[name]:
            raise ValueError(f"{name}: requirements.txt pins {required.get(name, 'nothing')} and the lock records "
                             f"{pinned[name] or 'nothing'}; they must agree before a trial")  # fmt: skip
    releases = package_index.newest_releases(list(plan.libraries), python_version=python, index_url=args.index_url,
                                             timeout_s=args.timeout)  # fmt: skip
    env = trial_environment(args.index_url)
    outcomes = try_latest.run_trial(args.root, plan, pinned, {n: r.newest for n, r in releases.items()}, env, args.keep,
                                    args.numbers_to)  # fmt: skip
    for outcome in outcomes:
        print(try_latest.outcome_line(outcome))
    if args.report:
        args.report.write_text(json.dumps(try_latest.report_data(outcomes, python)) + "\n", encoding="utf-8")
    if args.summary:
        args.summary.write_text(try_latest.summary_markdown(outcomes, python), encoding="utf-8")
    if args.write:
        repin(args.root, plan, try_latest.repin_versions(outcomes), env)
    return 1 if any(outcome.failure is not None for outcome in outcomes) else 0


def repin(root: Path, plan: try_latest.Plan, versions: dict[str, str], env: dict[str, str]) -> None:
    if not versions:
        print("residlab pins: nothing to write: no newer release worked", file=sys.stderr)
        return
    for line in try_latest.write_pins(root, versions, plan, env):
        print(line, file=sys.stderr)
    print(f"Re-pin {', '.join(f'{name} {version}' for name, version in versions.items())}")


def write(args) -> int:
    if bool(args.from_report) == bool(args.pins):
        raise ValueError("give either --from-report FILE or NAME==VERSION arguments")
    if args.from_report:
        try:
            text = args.from_report.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read {args.from_report}: {error}") from None
        versions = try_latest.repin_from_report(text, str(args.from_report))
    else:
        matches = [re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", pin) for pin in args.pins]
        bad = [pin for pin, match in zip(args.pins, matches) if not match]
        if bad:
            raise ValueError(f"{', '.join(bad)}: each pin is NAME==VERSION")
        versions = {match.group(1): match.group(2) for match in matches}
    read_pins(args.root)
    repin(args.root, try_latest.load_plan(args.root), versions, dict(os.environ))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="residlab pins", description=__doc__.splitlines()[0].strip("`"))
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", type=Path, default=default_site_root(), help="the project's root folder")
    asks = argparse.ArgumentParser(add_help=False)
    asks.add_argument("--index-url", help="the package index to ask (default: the one pip is configured with)")
    asks.add_argument("--timeout", type=float, default=package_index.DEFAULT_TIMEOUT_S,
                      help="seconds pip waits for each answer from the index (default %(default)g)")
    subcommands.add_parser("outdated", parents=[common, asks], help="each pin beside the newest release on the index")
    trial = subcommands.add_parser("try-latest", parents=[common, asks],
                                   help="try the newest runtime libraries in a throwaway copy, one line per library")
    trial.add_argument("--library", action="append", default=[], metavar="NAME",
                       help="try only this one of the plan's libraries (repeatable)")
    trial.add_argument("--write", action="store_true",
                       help="pin the newer releases that worked in requirements.txt and the lock, then run residlab sync")
    trial.add_argument("--report", type=Path, metavar="FILE", help="also write the result as JSON (read by `write`)")
    trial.add_argument("--summary", type=Path, metavar="FILE", help="also write the result as Markdown")
    trial.add_argument("--keep", action="store_true", help="keep the throwaway copy and its logs, and say where")
    trial.add_argument("--numbers-to", type=Path, metavar="DIR", help="keep the numbers.json of the build as pinned "
                       "and as re-pinned in DIR/pinned and DIR/re-pinned, for `residlab release diff`")
    written = subcommands.add_parser("write", parents=[common], help="pin versions in requirements.txt and the lock "
                                     "together, then run residlab sync")  # fmt: skip
    written.add_argument("--from-report", type=Path, metavar="FILE", help="the versions a try-latest report found working")
    written.add_argument("pins", nargs="*", metavar="NAME==VERSION")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = {"outdated": outdated, "try-latest": try_newest, "write": write}[args.command]
    try:
        return run(args)
    except (package_index.IndexUnreachable, package_index.IndexQueryError, try_latest.TrialError) as error:
        status, message = UNREACHABLE_STATUS, str(error)
    except (ValueError, OSError) as error:  # a pin file or report unreadable or wrong, a report not writable
        status, message = 1, str(error)
    print(f"residlab pins {args.command}: error: {' '.join(message.split())}", file=sys.stderr)
    return status
