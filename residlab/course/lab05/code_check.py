"""Lab 05 Part 3's checker: a learner's toy, function by function, against the exact toy on held-out inputs.

    python3 check_toy.py my_toy.py

The learner's file defines the functions of the skeleton (``residlab/course/lab05/toy_skeleton.py``, the
download ``my_toy.py``), each taking and returning plain lists of three numbers. Each function is called on inputs
the page never shows, made the same way every run (``held_out_inputs``), and its answers are compared with
``residlab.course.lab05.toy``'s exact ones (within 1e-9, relative, so floats pass). One line per function says
``passes`` or names the mistake: a length mismatch truncated instead of refused; the baseline mutated (a list it
was given changed, or the baseline trace changed by an intervention); the first branch suppressed by subtracting
its old update instead of recomputing the second branch; a suppression never applied (the baseline's final stream
returned); the parallel arrangement reading the intermediate state; a norm of the wrong vector; a difference of norms
where the norm of the difference is asked; an index read one place off; an update returned instead of the new state.
Each is recognised by its value (the answer equals what that wrong computation gives on the same input), not by the
code's text. Anything else is a wrong value, shown with its input and the value expected. Entries may be ints,
floats, Fractions or Decimals, the numbers the toy's own ``Vector`` reads.

The same file runs in Lab 05's page (under Pyodide, in the browser) and as the download. Exit status: 0 every
function passes, 1 one does not, 2 the file could not be read or imported (one line says why). Outside the page
the file's top-level code and each function's checks stop after ``FUNCTION_LIMIT_S`` seconds (a loop that never
ends is named, not waited on). Pyodide has no threads, so in the page the editor keeps the time instead: it calls
``check_main`` with ``before_function``, which tells it each function as its checks start, ends the interpreter when
one runs past ``FUNCTION_LIMIT_S``, and calls ``check_main`` again in a fresh one with that function in ``ended``, so
the others are still judged and the runaway one is named in the same words.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import math
import os
import random
import sys
import threading
from collections.abc import Callable, Collection
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

from residlab.course.lab05.exact_vectors import Vector, exact_text
from residlab.course.lab05.toy import READOUT_WEIGHTS, first_update, parallel_trace, readout, second_update, sequential_trace

CHECKED_FUNCTIONS = (
    ("add", "a, b"), ("first_update", "x"), ("second_update", "y"), ("first_block", "x"), ("second_block", "y"),
    ("norm", "v"), ("readout", "z"), ("trace", "x"), ("total_change_norm", "x"), ("suppress_first", "x"),
    ("suppress_second", "x"), ("parallel", "x"),
)
TRACE_KEYS = ("input", "first_update", "intermediate", "second_update", "final")
HELD_OUT_SEED = 5  # Lab 05: the cases are the same every run, and none is an input the page shows
HELD_OUT_COUNT = 8
RELATIVE_TOLERANCE = 1e-9
FUNCTION_LIMIT_S = 5  # one function's eight cases take milliseconds; this is a loop that never ends
# What a learner's function may return as a number: what the toy's Vector reads exactly (exact_vectors._exact_entry).
NUMBER_TYPES = (int, float, Fraction, Decimal)

TRUNCATED = "a length mismatch truncated instead of refused"
MUTATED = "the baseline mutated"
SUBTRACTED = ("the first branch suppressed by subtracting its old update instead of recomputing the second "
              "branch")
READS_INTERMEDIATE = "the parallel arrangement reading the intermediate state"
WRONG_NORM = "a norm of the wrong vector"
UPDATE_NOT_STATE = "an update returned instead of the new state"
NOT_APPLIED = "a suppression never applied"
DIFFERENCE_OF_NORMS = "a difference of norms where the norm of the difference is asked"
INDEX_OFF = "an index read one place off"
NAMED_MISTAKES = (TRUNCATED, MUTATED, SUBTRACTED, NOT_APPLIED, READS_INTERMEDIATE, WRONG_NORM, DIFFERENCE_OF_NORMS,
                  INDEX_OFF, UPDATE_NOT_STATE)


class Mistake(Exception):
    """One function's first failed case: ``name`` (one of the named mistakes, or None) and what happened."""

    def __init__(self, name: str | None, detail: str) -> None:
        super().__init__(detail)
        self.name, self.detail = name, detail

    def line(self) -> str:
        return f"{self.name}: {self.detail}" if self.name else self.detail


def held_out_inputs(count: int = HELD_OUT_COUNT) -> list[list]:
    """Inputs made from a fixed seed: integers and halves/quarters (exact as floats), negative and zero entries;
    never the page's x = [1, 2, -1] or second position [-2, 0, 3]."""
    generator = random.Random(HELD_OUT_SEED)
    shown = ([1, 2, -1], [-2, 0, 3])
    inputs = []
    while len(inputs) < count:
        entry = [generator.choice([generator.randint(-9, 9), generator.randint(-36, 36) / 4]) for _ in range(3)]
        entry = [int(value) if float(value).is_integer() else value for value in entry]
        if entry not in shown and entry not in inputs:
            inputs.append(entry)
    return inputs


def _text(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_text(item) for item in value) + "]"
    if isinstance(value, Fraction):
        return exact_text(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


def _close(got, expected: Fraction | float) -> bool:
    if isinstance(got, bool) or not isinstance(got, NUMBER_TYPES):
        return False
    return math.isfinite(float(got)) and abs(float(got) - float(expected)) <= RELATIVE_TOLERANCE * max(1.0, abs(float(expected)))


def _as_vector(got, what: str) -> list:
    """The learner's answer as a list of three numbers, or a Mistake saying what came back instead."""
    if not isinstance(got, (list, tuple)) or len(got) != 3 or any(
            isinstance(item, bool) or not isinstance(item, NUMBER_TYPES) for item in got):
        raise Mistake(None, f"{what} returned {_text(got) if isinstance(got, (list, tuple)) else repr(got)}, not a "
                            "list of three numbers")
    return list(got)


def _same(got: list, expected: Vector) -> bool:
    return all(_close(value, exact) for value, exact in zip(got, expected.entries))


def _call(function, name: str, *arguments):
    """Call the learner's function, turning an exception into a Mistake and catching a changed argument."""
    before = copy.deepcopy(arguments)
    call = f"{name}({', '.join(_text(argument) for argument in arguments)})"
    try:
        result = function(*arguments)
    except NotImplementedError:
        raise Mistake(None, "not written yet (it raises NotImplementedError)") from None
    except Exception as error:  # the learner's code: any exception is a finding, reported in one line
        raise Mistake(None, f"{call} raised {type(error).__name__}: {error}") from None
    for old, new in zip(before, arguments):
        if old != new:
            raise Mistake(MUTATED, f"{call} changed its argument {_text(old)} into {_text(new)}; return a new list "
                                   "and leave the one it was given unchanged")
    return result


def _expect_vector(got, expected: Vector, call: str, known: dict[str, Vector]) -> None:
    """Compare with the exact answer; when wrong, name the mistake if the answer is one of ``known``."""
    if _same(got, expected):
        return
    for label, (name, vector) in known.items():
        if _same(got, vector) and not _same(got, expected):
            raise Mistake(name, f"{call} returned {_text(got)}, which is {label}; expected {expected}")
    raise Mistake(None, f"{call} returned {_text(got)}; expected {expected}")


class _MisreadVector(Vector):
    """A vector whose successive index reads are shifted as ``shifts`` says (the k-th read of entry i gives entry
    i + shifts[k], wrapping as a negative Python index does), recording each read as (meant, read): the toy's own
    rules, run on it, give the value a learner's rule gets with those reads one place off."""

    def __init__(self, entries, shifts: tuple[int, ...]) -> None:
        super().__init__(entries)
        object.__setattr__(self, "shifts", shifts)
        object.__setattr__(self, "reads", [])

    def __getitem__(self, index: int) -> Fraction:
        shift = self.shifts[len(self.reads)] if len(self.reads) < len(self.shifts) else 0
        read = (index + shift) % len(self.entries)
        self.reads.append((index, read))
        return self.entries[read]


def _read_count(rule) -> int:
    probe = _MisreadVector((0, 0, 0), ())
    rule(probe)
    return len(probe.reads)


def _index_off(rule, values: list, name: str) -> dict[str, tuple[str, Vector]]:
    """``rule`` (one of the toy's, reading its argument by index) on ``values`` with one or more of its reads one
    place off, each labelled with the reads it got wrong: the known answers of an index read one place off."""
    known = {}
    for shifts in itertools.product((0, 1, -1), repeat=_read_count(rule)):
        if not any(shifts):
            continue
        misread = _MisreadVector(values, shifts)
        value = rule(misread)
        wrong = ", ".join(f"{name}[{read}] read for {name}[{meant}]" for meant, read in misread.reads if meant != read)
        known.setdefault(f"what it gives with {wrong}", (INDEX_OFF, value))
    return known


# ---- one check per function: each raises Mistake at the first case that fails ------------------------------------


def check_add(toy) -> None:
    for a, b in [([1, 2, 3], [4, 5]), ([1, 2], [4, 5, 6]), ([0.5, -1, 2, 7], [1, 1, 1])]:
        try:
            got = toy.add(list(a), list(b))
        except ValueError:
            continue
        except NotImplementedError:
            raise Mistake(None, "not written yet (it raises NotImplementedError)") from None
        except Exception as error:
            raise Mistake(None, f"add({_text(a)}, {_text(b)}) raised {type(error).__name__}: {error}; refuse "
                                "mismatched lengths with ValueError") from None
        shorter = min(len(a), len(b))
        if isinstance(got, (list, tuple)) and len(got) == shorter:
            raise Mistake(TRUNCATED, f"add({_text(a)}, {_text(b)}) returned {_text(got)}; raise ValueError "
                                     "naming the two lengths")
        raise Mistake(None, f"add({_text(a)}, {_text(b)}) returned {_text(got)}; vectors of different lengths "
                            "must be refused with ValueError")
    for bad in (math.nan, math.inf):
        try:
            got = toy.add([1, bad, 0], [0, 0, 0])
        except ValueError:
            continue
        except Exception as error:
            raise Mistake(None, f"add([1, {bad}, 0], [0, 0, 0]) raised {type(error).__name__}: {error}; refuse a "
                                "non-finite entry with ValueError") from None
        raise Mistake(None, f"add([1, {bad}, 0], [0, 0, 0]) returned {_text(got)}; an entry that is not a finite "
                            "number must be refused with ValueError")
    inputs = held_out_inputs()
    for a, b in zip(inputs, inputs[1:]):
        got = _as_vector(_call(toy.add, "add", a, b), f"add({_text(a)}, {_text(b)})")
        _expect_vector(got, Vector(a) + Vector(b), f"add({_text(a)}, {_text(b)})", {})


def _check_rule(toy, name: str, reference, state, argument: str) -> None:
    for values in held_out_inputs():
        call = f"{name}({_text(values)})"
        got = _as_vector(_call(getattr(toy, name), name, values), call)
        vector = Vector(values)
        known = {"the new state, not the update": (None, state(vector)), **_index_off(reference, values, argument)}
        _expect_vector(got, reference(vector), call, known)


def check_first_update(toy) -> None:
    _check_rule(toy, "first_update", first_update, lambda x: x + first_update(x), "x")


def check_second_update(toy) -> None:
    _check_rule(toy, "second_update", second_update, lambda y: y + second_update(y), "y")


def _check_block(toy, name: str, update, argument: str) -> None:
    for values in held_out_inputs():
        call = f"{name}({_text(values)})"
        got = _as_vector(_call(getattr(toy, name), name, values), call)
        vector = Vector(values)
        misread = {label: (mistake, vector + value) for label, (mistake, value) in _index_off(update, values, argument).items()}
        _expect_vector(got, vector + update(vector), call, {"the update alone": (UPDATE_NOT_STATE, update(vector)), **misread})


def check_first_block(toy) -> None:
    _check_block(toy, "first_block", first_update, "x")


def check_second_block(toy) -> None:
    _check_block(toy, "second_block", second_update, "y")


def check_norm(toy) -> None:
    for values in held_out_inputs():
        got = _call(toy.norm, "norm", values)
        exact = Vector(values).norm()
        if _close(got, exact.value):
            continue
        if _close(got, exact.squared):
            raise Mistake(None, f"norm({_text(values)}) returned {_text(got)}, the squared norm; take its square root")
        raise Mistake(None, f"norm({_text(values)}) returned {_text(got)}; expected {exact.exact} = {exact.value!r}")


def check_readout(toy) -> None:
    third = READOUT_WEIGHTS.index(1)  # s = [0, 0, 1] z reads z[2]
    for values in held_out_inputs():
        got = _call(toy.readout, "readout", values)
        if _close(got, readout(Vector(values))):
            continue
        call = f"readout({_text(values)}) returned {_text(got)}"
        for read in ((third + 1) % len(values), third - 1):
            if _close(got, Fraction(values[read])):
                raise Mistake(INDEX_OFF, f"{call}, which is z[{read}]; expected {_text(values[third])}, z[{third}], the "
                                         "third coordinate")
        raise Mistake(None, f"{call}; expected {_text(values[third])}, the third coordinate")


def _learner_trace(toy, values: list) -> dict:
    got = _call(toy.trace, "trace", values)
    if not isinstance(got, dict) or set(got) != set(TRACE_KEYS):
        keys = sorted(got) if isinstance(got, dict) else type(got).__name__
        raise Mistake(None, f"trace({_text(values)}) returned {keys}; return a dict with the keys "
                            f"{', '.join(TRACE_KEYS)}")
    return {key: _as_vector(got[key], f"trace({_text(values)})[{key!r}]") for key in TRACE_KEYS}


def check_trace(toy) -> None:
    for values in held_out_inputs():
        got = _learner_trace(toy, values)
        exact = sequential_trace(Vector(values))
        updates = {"intermediate": exact.first_update, "final": exact.second_update}
        misread = {"first_update": _index_off(first_update, list(exact.input.entries), "x"),
                   "second_update": _index_off(second_update, list(exact.intermediate.entries), "y")}
        for key in TRACE_KEYS:
            known = {"the update alone": (UPDATE_NOT_STATE, updates[key])} if key in updates else misread.get(key, {})
            _expect_vector(got[key], getattr(exact, key), f"trace({_text(values)})[{key!r}]", known)


def check_total_change_norm(toy) -> None:
    for values in held_out_inputs():
        got = _call(toy.total_change_norm, "total_change_norm", values)
        exact = sequential_trace(Vector(values))
        if _close(got, (exact.final - exact.input).norm().value):
            continue
        others = {"z": exact.final, "y": exact.intermediate, "x": exact.input, "F(x)": exact.first_update,
                  "G(y)": exact.second_update, "z - y": exact.final - exact.intermediate, "x - z": exact.input - exact.final}
        named = [label for label, vector in others.items() if _close(got, vector.norm().value)]
        if not named and _close(got, exact.first_update.norm().value + exact.second_update.norm().value):
            named = ["none: it is |F(x)| + |G(y)|, the sum of the update norms"]
        call = f"total_change_norm({_text(values)}) returned {_text(got)}"
        expected = (exact.final - exact.input).norm()
        if named:
            raise Mistake(WRONG_NORM, f"{call}, the norm of {named[0]}; expected |z - x| = {expected.exact}")
        final, start = exact.final.norm().value, exact.input.norm().value
        for label, difference in (("|z| - |x|", final - start), ("|x| - |z|", start - final)):
            if _close(got, difference):
                raise Mistake(DIFFERENCE_OF_NORMS, f"{call}, which is {label}; expected |z - x| = {expected.exact}")
        raise Mistake(None, f"{call}; expected |z - x| = {expected.exact} = {expected.value!r}")


def _check_intervention(toy, name: str, expected, known) -> None:
    """Run the intervention after the baseline on the same list x: x and the stored baseline must not change."""
    for values in held_out_inputs():
        x = list(values)
        baseline = _learner_trace(toy, x)
        stored = copy.deepcopy(baseline)
        call = f"{name}({_text(values)})"
        got = _call(getattr(toy, name), name, x)
        if baseline != stored:
            changed = [key for key in TRACE_KEYS if baseline[key] != stored[key]]
            raise Mistake(MUTATED, f"{call} changed the stored baseline trace ({', '.join(changed)}); an intervention "
                                   "starts from its own copy")
        exact = sequential_trace(Vector(values))
        _expect_vector(_as_vector(got, call), expected(exact), call, known(exact))


def check_suppress_first(toy) -> None:
    _check_intervention(
        toy, "suppress_first", lambda t: sequential_trace(t.input, suppress_first=True).final,
        lambda t: {"the baseline z, with F still written": (NOT_APPLIED, t.final),
                   "old z - old F(x)": (SUBTRACTED, t.final - t.first_update),
                   "G(x) alone": (UPDATE_NOT_STATE, second_update(t.input))})


def check_suppress_second(toy) -> None:
    _check_intervention(
        toy, "suppress_second", lambda t: t.intermediate,
        lambda t: {"the baseline z, with G still written": (NOT_APPLIED, t.final),
                   "F(x) alone": (UPDATE_NOT_STATE, t.first_update)})


def check_parallel(toy) -> None:
    _check_intervention(
        toy, "parallel", lambda t: parallel_trace(t.input).final,
        lambda t: {"x + F(x) + G(y), with G reading y": (READS_INTERMEDIATE, t.final),
                   "F(x) + G(x), the updates without x": (UPDATE_NOT_STATE, t.first_update + second_update(t.input))})


CHECKS = {name: globals()[f"check_{name}"] for name, _ in CHECKED_FUNCTIONS}


def _verdict(check, toy) -> Mistake | None:
    try:
        check(toy)
        return None
    except Mistake as mistake:
        return mistake
    except RecursionError:
        return Mistake(None, "recursed without end")


class _StillRunning(Exception):
    pass


_given_up = []  # threads left running (a learner's endless loop, or a read of input that never comes)


def _within_limit(function, limit_s: float):
    """``function()`` in a daemon thread, given up after ``limit_s`` (_StillRunning; the thread is left spinning and
    the process exits without it); what it raises is raised here, as it would be without the thread."""
    results, errors = [], []

    def run() -> None:
        try:
            results.append(function())
        except BaseException as error:
            errors.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(limit_s)
    if worker.is_alive():
        _given_up.append(worker)
        raise _StillRunning
    if errors:
        raise errors[0]
    return results[0]


def _still_running(limit_s: float) -> Mistake:
    return Mistake(None, f"still running after {limit_s:g} s: a loop that never ends?")


def _verdict_within_limit(check, toy, limit_s: float) -> Mistake | None:
    try:
        return _within_limit(lambda: _verdict(check, toy), limit_s)
    except _StillRunning:
        return _still_running(limit_s)


def check_module(toy, limit_s: float | None = None, *, before_function: Callable[[str], None] | None = None,
                 ended: Collection[str] = ()) -> dict[str, Mistake | None]:
    """Every function's verdict: None when it passes, else its first Mistake. With ``limit_s``, a function whose
    checks run longer is named as running without end. The page's editor, which keeps the time itself (Pyodide has
    no threads), is told each function as its checks start (``before_function``) and names in ``ended`` the ones it
    ended after ``FUNCTION_LIMIT_S``: those are not called again."""
    verdicts = {}
    for name, arguments in CHECKED_FUNCTIONS:
        if name in ended:
            verdicts[name] = _still_running(FUNCTION_LIMIT_S)
            continue
        if before_function is not None:
            before_function(name)
        if not callable(getattr(toy, name, None)):
            verdicts[name] = Mistake(None, f"missing: define {name}({arguments})")
        elif limit_s is None:
            verdicts[name] = _verdict(CHECKS[name], toy)
        else:
            verdicts[name] = _verdict_within_limit(CHECKS[name], toy, limit_s)
    return verdicts


class LearnerFileError(Exception):
    """The learner's file is missing, unreadable or fails on import; the message is one line."""


def load_learner_module(path: Path, limit_s: float | None = None):
    """The learner's file imported as a module; with ``limit_s``, its top-level code is given up after that long."""
    if not path.is_file():
        raise LearnerFileError(f"{path} is not a file: save your toy (for example my_toy.py) and name it here")
    spec = importlib.util.spec_from_file_location("learner_toy", path)
    module = importlib.util.module_from_spec(spec)
    try:
        if limit_s is None:
            spec.loader.exec_module(module)
        else:
            _within_limit(lambda: spec.loader.exec_module(module), limit_s)
    except _StillRunning:
        raise LearnerFileError(f"{path} was still running its top-level code after {limit_s:g} s: a loop that never "
                               "ends, or a call that waits for input, outside the functions?") from None
    except SyntaxError as error:
        raise LearnerFileError(f"{path}, line {error.lineno}: {error.msg}") from None
    except Exception as error:  # the learner's top-level code: report it in one line
        raise LearnerFileError(f"{path} raised {type(error).__name__} while it was imported: {error}") from None
    return module


def check_main(argv: list[str] | None = None, *, before_function: Callable[[str], None] | None = None,
               ended: Collection[str] = ()) -> int:
    """The command: check the file ``argv`` names, print a line per function, return the exit status.
    ``before_function`` and ``ended`` are the page editor's (``check_module``)."""
    arguments = sys.argv[1:] if argv is None else argv
    program = Path(sys.argv[0]).name or "check_toy.py"
    if len(arguments) != 1 or arguments[0].startswith("-"):
        print(f"usage: {program} my_toy.py  (checks the functions of Lab 05 Part 3's skeleton)", file=sys.stderr)
        return 2
    # Pyodide has no threads; in the page the editor times each function (before_function, ended).
    limit_s = None if sys.platform == "emscripten" else FUNCTION_LIMIT_S
    try:
        toy = load_learner_module(Path(arguments[0]), limit_s)
    except LearnerFileError as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        return 2
    print(f"Checking {arguments[0]} against the exact toy on {HELD_OUT_COUNT} held-out inputs:")
    verdicts = check_module(toy, limit_s, before_function=before_function, ended=ended)
    width = max(len(name) for name in verdicts)
    for name, mistake in verdicts.items():
        print(f"  {name:<{width}}  {'passes' if mistake is None else mistake.line()}")
    passed = sum(mistake is None for mistake in verdicts.values())
    print(f"{passed} of {len(verdicts)} functions pass.")
    return 0 if passed == len(verdicts) else 1


def exit_with(status: int) -> None:
    """The script's exit. With a thread given up, the process ends at once: a daemon thread blocked reading standard
    input would make the interpreter's shutdown abort (Fatal Python error) instead of exiting with ``status``."""
    if _given_up:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    exit_with(check_main())
