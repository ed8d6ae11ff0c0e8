"""``residlab pins try-latest``: the newest releases of the runtime libraries, tried in a throwaway copy.

The plan is the project's own, in ``pyproject.toml`` under ``[tool.residlab.try-latest]``:

- ``libraries``: what moves to its newest release, in the order a failure is traced (each after what it needs);
- ``prepare``: commands that build the environments from the copy's pinned files (the Makefile's recipes);
- ``checks``: named commands that must pass (``name``, ``command``, optional ``env`` and ``timeout-minutes``);
- ``after-write``: what rewrites the derived files once ``requirements.txt`` and the lock change (``residlab sync``).

In a command, ``{python}`` is the interpreter running this and ``{root}`` the folder the command runs in.

A trial: the files git knows are copied into a temporary folder (the repository is never touched), the newest
releases are written into the copy's ``requirements.txt`` and lock exactly as a re-pin writes them (then
``after-write``), ``prepare`` builds the environments and the checks run. If every check passes, every newer release
works. If one fails, the pins as they are are tried first (a failure there is nobody's release, and nothing is
blamed), then the libraries one at a time in the plan's order, each on top of those that worked: the first check a
library fails is its line. A newest release pip cannot install beside the others says so, in pip's words.

With ``numbers_to``, the list of every number the site shows (``numbers.json``, which the plan's render check writes
into the copy's ``_site/``) is kept twice, for ``residlab release diff``: ``re-pinned/`` from the last attempt that
passed with a newer release in it (the build a re-pin of what worked gives) and ``pinned/`` from the pins as they
are (tried for it when no failure had them tried already). The weekly workflow puts the diff in its report.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from residlab.build import pins
from residlab.build.numbers_list import NUMBERS
from residlab.build.checkout import CheckoutError, clean_copy
from residlab.build.sync import LOCK_NAME

REQUIREMENTS_NAME = "requirements.txt"
PLAN_KEYS = ("libraries", "prepare", "checks", "after-write", "prepare-timeout-minutes")
CHECK_KEYS = ("name", "command", "env", "timeout-minutes")
DEFAULT_TIMEOUT_MINUTES = 30.0
# pytest's short summary (-rfE): "FAILED tests/x.py::test_y - message" or "ERROR tests/x.py - message"
_PYTEST_FAILURE = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")
DETAIL_CHARS = 300
PINNED, REPINNED = "pinned", "re-pinned"  # where numbers_to keeps each build's numbers.json


class TrialError(RuntimeError):
    """The trial could not run, or its result would blame nobody (the pins fail as they are); says why."""


@dataclass(frozen=True)
class Check:
    name: str
    command: tuple[str, ...]
    env: dict[str, str]
    timeout_s: float


@dataclass(frozen=True)
class Plan:
    libraries: tuple[str, ...]
    prepare: tuple[tuple[str, ...], ...]
    checks: tuple[Check, ...]
    after_write: tuple[tuple[str, ...], ...]
    prepare_timeout_s: float


@dataclass(frozen=True)
class Failure:
    step: str  # "install", or the name of the check that failed
    test: str | None  # the first failing test pytest named; None for a command that is not pytest
    detail: str  # one line: pytest's message, pip's error, or the command's last line of output


@dataclass(frozen=True)
class Outcome:
    name: str
    pinned: str
    newest: str | None
    verdict: str  # "works", "breaks", "not installable", "newest" (nothing newer), "not offered" (no release found)
    failure: Failure | None = None


# ------------------------------------------------------------------------------------------------------ the plan


def _command(value, where: str) -> tuple[str, ...]:
    if not (isinstance(value, list) and value and all(isinstance(part, str) for part in value)):
        raise TrialError(f"{where} must be a command: a non-empty list of strings (got {value!r})")
    return tuple(value)


def _minutes(table: dict, key: str, where: str) -> float:
    value = table.get(key, DEFAULT_TIMEOUT_MINUTES)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TrialError(f"{where}: {key} must be a positive number of minutes (got {value!r})")
    return float(value) * 60


def parse_plan(table: object, where: str) -> Plan:
    if not isinstance(table, dict):
        raise TrialError(f"{where}: no [tool.residlab.try-latest] table")
    unknown = sorted(set(table) - set(PLAN_KEYS))
    if unknown or "libraries" not in table or "checks" not in table:
        raise TrialError(f"{where}: [tool.residlab.try-latest] needs libraries and checks, and takes only "
                         f"{', '.join(PLAN_KEYS)} (unknown: {', '.join(unknown) or 'none'})")
    libraries = table["libraries"]
    if not (isinstance(libraries, list) and libraries and all(isinstance(name, str) for name in libraries)):
        raise TrialError(f"{where}: libraries must be a non-empty list of library names")
    checks = []
    for index, entry in enumerate(table["checks"] if isinstance(table["checks"], list) else [None]):
        at = f"{where}: checks[{index}]"
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str) and not set(entry) - set(CHECK_KEYS)):
            raise TrialError(f"{at} must be a table with a name and a command (keys: {', '.join(CHECK_KEYS)})")
        env = entry.get("env", {})
        if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            raise TrialError(f"{at}: env must map variable names to strings")
        checks.append(Check(entry["name"], _command(entry.get("command"), f"{at}.command"), dict(env),
                            _minutes(entry, "timeout-minutes", at)))  # fmt: skip
    if not checks:
        raise TrialError(f"{where}: checks is empty: a trial with nothing to check proves nothing")
    commands = {}
    for key in ("prepare", "after-write"):
        listed = table.get(key, [])
        if not isinstance(listed, list):
            raise TrialError(f"{where}: {key} must be a list of commands")
        commands[key] = tuple(_command(value, f"{where}: {key}[{i}]") for i, value in enumerate(listed))
    return Plan(tuple(pins.normalised(name) for name in libraries), commands["prepare"], tuple(checks),
                commands["after-write"], _minutes(table, "prepare-timeout-minutes", where))  # fmt: skip


def load_plan(root: Path) -> Plan:
    """The trial plan in ``root/pyproject.toml``."""
    try:
        import tomllib  # Python 3.11+, the Python the lock records
    except ModuleNotFoundError:
        raise TrialError("reading the plan in pyproject.toml needs Python 3.11 or newer (tomllib)") from None
    path = root / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise TrialError(f"{path}: cannot read the plan ({error})") from None
    return parse_plan(data.get("tool", {}).get("residlab", {}).get("try-latest"), str(path))


# ------------------------------------------------------------------------------------------- files and commands


def write_pins(root: Path, versions: dict[str, str], plan: Plan, env: dict[str, str]) -> list[str]:
    """Pin ``versions`` in ``root``'s requirements.txt and lock together, then run the plan's ``after-write``
    there. Returns what those commands printed; raises ``ValueError`` (a bad pin) or ``TrialError``. If an
    ``after-write`` command fails, both files are put back as they were and ``after-write`` runs again on them, so
    no half re-pin is left behind."""
    lock_path, requirements_path = root / LOCK_NAME, root / REQUIREMENTS_NAME
    before = {path: path.read_text(encoding="utf-8") for path in (lock_path, requirements_path)}
    lock_text, requirements_text = pins.repinned_texts(before[lock_path], before[requirements_path], versions,
                                                       str(lock_path))  # fmt: skip
    _replace_texts({lock_path: lock_text, requirements_path: requirements_text})
    try:
        return _after_write(root, plan, env)
    except TrialError as error:
        _replace_texts(before)
        try:
            _after_write(root, plan, env)
        except TrialError:
            raise TrialError(f"{error}; requirements.txt and the lock are put back, but the derived files may not "
                             "be: run it again once it works") from None  # fmt: skip
        raise TrialError(f"{error}; requirements.txt, the lock and the derived files are as they were") from None


def _replace_texts(texts: dict[Path, str]) -> None:
    for path, text in texts.items():
        staged = path.with_name(path.name + ".repin")
        staged.write_text(text, encoding="utf-8")
        os.replace(staged, path)


def _after_write(root: Path, plan: Plan, env: dict[str, str]) -> list[str]:
    printed = []
    for command in plan.after_write:
        argv = expand(command, root)
        try:
            completed = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise TrialError(f"`{' '.join(argv)}` did not run after the re-pin: {error}") from None
        printed += (completed.stdout + completed.stderr).splitlines()
        if completed.returncode != 0:
            raise TrialError(f"`{' '.join(argv)}` failed after the re-pin: {last_line(completed.stdout + completed.stderr)}")
    return printed


def expand(command: tuple[str, ...], root: Path) -> list[str]:
    return [part.replace("{python}", sys.executable).replace("{root}", str(root)) for part in command]


def last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:DETAIL_CHARS] if lines else "no output"


def first_failure(step: str, output: str) -> Failure:
    """What a failed command's output says first: pytest's first failing test, pip's first error, else its last line."""
    for line in output.splitlines():
        match = _PYTEST_FAILURE.match(line.strip())
        if match:
            return Failure(step, match.group(2), (match.group(3) or match.group(1).lower())[:DETAIL_CHARS])
    errors = [line.strip() for line in output.splitlines() if line.startswith("ERROR:")]
    return Failure(step, None, errors[0][:DETAIL_CHARS] if errors else last_line(output))


def run_logged(argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float, log: Path) -> int | None:
    """Run a command with its output in ``log``; its exit status, or None when it ran past ``timeout_s`` (then it
    and everything it started are killed)."""
    with open(log, "w", encoding="utf-8") as output:
        try:
            process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        except OSError as error:
            raise TrialError(f"cannot run `{' '.join(argv)}`: {error}") from None
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        finally:
            if process.poll() is None:  # ran past its time, or this process was interrupted
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:  # it ended meanwhile
                    pass
                process.wait()


# --------------------------------------------------------------------------------------------------- the trial


class Trial:
    """Attempts in one throwaway copy: each writes a set of versions, prepares the environments, runs the checks."""

    def __init__(self, plan: Plan, copy: Path, logs: Path, env: dict[str, str], numbers_to: Path | None = None):
        self.plan, self.copy, self.logs, self.env, self.numbers_to = plan, copy, logs, env, numbers_to
        self.count = 0

    def _run(self, command: tuple[str, ...], label: str, extra_env: dict[str, str], timeout_s: float):
        self.count += 1
        log = self.logs / f"{self.count:02d}-{re.sub(r'[^A-Za-z0-9]+', '-', label).strip('-')[:40]}.log"
        env = {**self.env, **{key: value.replace("{root}", str(self.copy)) for key, value in extra_env.items()}}
        started = time.monotonic()
        status = run_logged(expand(command, self.copy), self.copy, env, timeout_s, log)
        output = log.read_text(encoding="utf-8", errors="replace")
        print(f"try-latest:   {label}: {'ran past its time' if status is None else f'exit status {status}'} "
              f"({time.monotonic() - started:.0f} s)", file=sys.stderr)  # fmt: skip
        if status is None:
            return f"{output}\nran past {timeout_s / 60:g} minutes and was stopped"
        return None if status == 0 else output

    def attempt(self, versions: dict[str, str], label: str, numbers_as: str = REPINNED) -> Failure | None:
        """One set of versions through prepare and the checks; the first failure, or None when all passed (then the
        build's numbers are kept in ``numbers_to/numbers_as``)."""
        print(f"try-latest: {label}", file=sys.stderr)
        write_pins(self.copy, versions, self.plan, self.env)
        for command in self.plan.prepare:
            failed = self._run(command, "prepare", {}, self.plan.prepare_timeout_s)
            if failed is not None:
                return first_failure("install", failed)
        for check in self.plan.checks:
            failed = self._run(check.command, check.name, check.env, check.timeout_s)
            if failed is not None:
                print("\n".join(failed.splitlines()[-40:]), file=sys.stderr)  # its end, for whoever reads the log
                return first_failure(check.name, failed)
        built = self.copy / "_site" / NUMBERS
        if self.numbers_to is not None and built.is_file():
            (self.numbers_to / numbers_as).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(built, self.numbers_to / numbers_as / NUMBERS)
        return None


def describe(failure: Failure) -> str:
    if failure.step == "install":
        return f"cannot be installed beside the other pins: {failure.detail}"
    where = f"{failure.test} in the {failure.step}" if failure.test else f"the {failure.step}"
    return f"breaks {where}: {failure.detail}"


def run_trial(root: Path, plan: Plan, pinned: dict[str, str], newest: dict[str, str | None], env: dict[str, str],
              keep: bool = False, numbers_to: Path | None = None) -> list[Outcome]:
    """Try the newest release of each of the plan's libraries (``newest``; None when the index offers none) against
    ``pinned``; one ``Outcome`` per library, in the plan's order. ``root`` itself is never written; ``numbers_to``
    receives the pinned and the re-pinned builds' ``numbers.json`` when a newer release worked and the checks built
    the site."""
    moved = {name: newest[name] for name in plan.libraries if newest[name] not in (None, pinned[name])}
    results: dict[str, Failure | None] = {}
    if moved:
        folder = Path(tempfile.mkdtemp(prefix="residlab-try-latest-"))
        try:
            copy, logs = folder / "checkout", folder / "logs"
            logs.mkdir()
            try:
                clean_copy(root, copy)
            except CheckoutError as error:
                raise TrialError(str(error)) from None
            results = _trace(Trial(plan, copy, logs, env, numbers_to), pinned, moved)
        finally:
            if keep:
                print(f"try-latest: the throwaway copy and its logs are kept in {folder}", file=sys.stderr)
            else:
                shutil.rmtree(folder, ignore_errors=True)
    outcomes = []
    for name in plan.libraries:
        if name not in moved:
            verdict = "not offered" if newest[name] is None else "newest"
            outcomes.append(Outcome(name, pinned[name], newest[name], verdict))
        else:
            failure = results[name]
            verdict = "works" if failure is None else "not installable" if failure.step == "install" else "breaks"
            outcomes.append(Outcome(name, pinned[name], moved[name], verdict, failure))
    return outcomes


def _trace(trial: Trial, pinned: dict[str, str], moved: dict[str, str]) -> dict[str, Failure | None]:
    together = trial.attempt({**pinned, **moved}, "every newer release together: " + _listed(moved))
    if together is None:
        if trial.numbers_to is not None:
            trial.attempt(dict(pinned), "the pins as they are, for the numbers a re-pin changes", numbers_as=PINNED)
        return dict.fromkeys(moved)
    baseline = trial.attempt(dict(pinned), "the pins as they are, to see whether the failure is a newer release's",
                             numbers_as=PINNED)
    if baseline is not None:
        raise TrialError(f"the pins as they are fail too, so no newer release can be blamed: they {describe(baseline)}")
    kept: dict[str, str] = {}
    results = {}
    for name in moved:  # the plan's order
        candidate = {**kept, name: moved[name]}
        if candidate == moved:  # exactly the combination already tried together
            results[name] = together
        else:
            results[name] = trial.attempt({**pinned, **candidate}, f"{name} {moved[name]}" +
                                          (f" on top of {_listed(kept)}" if kept else " alone"))  # fmt: skip
        if results[name] is None:
            kept[name] = moved[name]
    return results


def _listed(versions: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in versions.items())


# -------------------------------------------------------------------------------------------------- the report


def outcome_line(outcome: Outcome) -> str:
    if outcome.verdict == "newest":
        return f"{outcome.name} {outcome.pinned}: already the newest release"
    if outcome.verdict == "not offered":
        return f"{outcome.name} {outcome.pinned}: the index offers no release of it for this Python"
    result = "works" if outcome.failure is None else describe(outcome.failure)
    return f"{outcome.name} {outcome.pinned} -> {outcome.newest}: {result}"


def repin_versions(outcomes: list[Outcome]) -> dict[str, str]:
    """The newer releases that worked, together: what a re-pin writes."""
    return {outcome.name: outcome.newest for outcome in outcomes if outcome.verdict == "works"}


def headline(outcomes: list[Outcome]) -> str:
    broken = [outcome for outcome in outcomes if outcome.failure is not None]
    if broken:
        first = broken[0]
        failed = "cannot be installed" if first.failure.step == "install" else f"breaks {first.failure.test or 'the ' + first.failure.step}"
        more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
        return f"try-latest: {first.name} {first.newest} {failed}{more}"
    repin = repin_versions(outcomes)
    return f"Re-pin to the newest releases: {_listed(repin)}" if repin else "try-latest: every pin is the newest release"


def summary_markdown(outcomes: list[Outcome], python: str) -> str:
    """The report as Markdown: the headline, then one table row per library (for an issue or a pull request)."""
    rows = []
    for outcome in outcomes:
        result = outcome_line(outcome).split(": ", 1)[1]
        if outcome.failure is not None and outcome.failure.test:
            result = result.replace(outcome.failure.test, f"`{outcome.failure.test}`", 1)
        rows.append(f"| {outcome.name} | {outcome.pinned} | {outcome.newest or '-'} | {result.replace('|', '/')} |")
    return "\n".join([
        headline(outcomes), "",
        f"`residlab pins try-latest` on Python {python}: each newer release was written into a throwaway copy's "
        "requirements.txt and lock, its environments were built and its checks run.", "",
        "| library | pinned | newest | result |", "| --- | --- | --- | --- |", *rows, "",
        "How to read and act on this: the Instructors page (instructors.qmd), \"When the pins age\".",
    ]) + "\n"  # fmt: skip


def report_data(outcomes: list[Outcome], python: str) -> dict:
    return {
        "schema": 1,
        "python": python,
        "libraries": [{"name": o.name, "pinned": o.pinned, "newest": o.newest, "verdict": o.verdict,
                       "line": outcome_line(o)} for o in outcomes],  # fmt: skip
        "repin": repin_versions(outcomes),
        "breaks": [o.name for o in outcomes if o.failure is not None],
        "headline": headline(outcomes),
        "summary": summary_markdown(outcomes, python),
    }


def repin_from_report(text: str, origin: str) -> dict[str, str]:
    """The versions a try-latest report (``--report``) found working together; ``ValueError`` if it is no report."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{origin}: not a try-latest report (not JSON: {error})") from None
    repin = data.get("repin") if isinstance(data, dict) and data.get("schema") == 1 else None
    if not (isinstance(repin, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in repin.items())):
        raise ValueError(f"{origin}: not a try-latest report (no schema 1 and repin mapping)")
    return repin
