"""The Lab 05 toy residual stream, computed exactly with the standard library alone.

The lab's hand trace uses two hand-made update rules on a 3-entry column vector

    F(x) = [-x1, 2, 0]         y = x + F(x)          (first branch, then the intermediate stream)
    G(y) = [y2, -y2, 2*y1]     z = y + G(y)          (second branch, then the final stream)

and a scalar readout s = [0, 0, 1] z. Neither rule is attention or an MLP, and there is no normalisation.

Arithmetic is exact (``residlab.course.lab05.exact_vectors``: fractions, exact norms, frozen vectors), so no
intervention can change a baseline vector or a stored result: every case starts from a fresh copy of the input
and builds new vectors. Bad input fails loudly with ``ToyInputError`` (a ``ValueError``) naming the bad entry or
the mismatched lengths; an update rule given a vector that is not 3 x 1 says so.

JSON conventions of the report (``python3 trace_residual_toy.py`` or ``residlab toy``):

- a number is ``{"exact": E, "float": F}``: E is an int when the value is a whole number, otherwise the
  string "p/q"; F is the nearest float;
- a vector is ``{"exact": [E, ...], "float": [F, ...], "shape": [rows, 1]}``;
- a norm is ``{"squared": E, "exact": "sqrt(N)", "simplified": "k*sqrt(m)", "float": F}`` (a perfect
  square shows its root, e.g. "4", in both forms);
- a 2 x 3 array is ``{"exact": [[E, E, E], [E, E, E]], "float": [[...], [...]], "shape": [2, 3]}``.

Command line: ``--input 1,2,-1`` (or ``[1;2;-1]``: ``notation``; "1/2" and "0.5" allowed), ``--second-position -2,0,3``
and ``--indent N`` (0 prints one line; otherwise each vector stays on one line). An entry, in lowest terms, has a
numerator and denominator of at most 1e70 each (``INPUT_LIMIT``). Bad input exits with status 2 and one line on
stderr naming the option, what was typed and which entry is wrong.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from residlab.course.lab05.exact_vectors import Norm, ToyInputError, Vector, exact_json, latex_number
from residlab.course.lab05.notation import ascii_minus, is_number_text, vector_pieces

STREAM_WIDTH = 3  # every toy vector is a 3 x 1 column
DEFAULT_INPUT = (1, 2, -1)
DEFAULT_SECOND_POSITION = (-2, 0, 3)
READOUT_WEIGHTS = (0, 0, 1)  # s = [0, 0, 1] z selects the third coordinate
# Extra inputs for the prediction "does y1 depend on x1?": varied signs, a zero and a fraction.
Y1_PROBE_INPUTS = ((1, 2, -1), (-2, 0, 3), (5, -3, 2), (0, 0, 0), (Fraction(7, 2), 1, Fraction(-1, 3)))


def zero_vector(width: int = STREAM_WIDTH) -> Vector:
    return Vector((0,) * width)


def check_column(vector: Vector, name: str, rows: int = STREAM_WIDTH) -> Vector:
    """Refuse anything that is not a rows x 1 column vector; return it unchanged."""
    if not isinstance(vector, Vector):
        raise ToyInputError(f"{name} must be a Vector, got {type(vector).__name__}")
    if vector.shape != (rows, 1):
        raise ToyInputError(f"{name} has shape {vector.shape[0]}x1; the toy stream is {rows}x1")
    return vector


def first_update(x: Vector) -> Vector:
    """F(x) = [-x1, 2, 0]: cancels the first coordinate, writes a constant 2 into the second."""
    check_column(x, "the input of F")
    return Vector((-x[0], 2, 0))


def second_update(y: Vector) -> Vector:
    """G(y) = [y2, -y2, 2*y1]: moves the second coordinate around and doubles the first into the third."""
    check_column(y, "the input of G")
    return Vector((y[1], -y[1], 2 * y[0]))


def readout(z: Vector) -> Fraction:
    """s = [0, 0, 1] z: the final third coordinate."""
    return check_column(z, "the readout's input").dot(Vector(READOUT_WEIGHTS))


@dataclass(frozen=True)
class SequentialTrace:
    """The five labelled vectors of one pass, each 3 x 1: x, F-branch write, y, G-branch write, z."""

    input: Vector
    first_update: Vector
    intermediate: Vector
    second_update: Vector
    final: Vector

    def __post_init__(self) -> None:
        for name in TRACE_FIELDS:
            check_column(getattr(self, name), name.replace("_", " "))

    def vectors(self) -> dict[str, Vector]:
        return {name: getattr(self, name) for name in TRACE_FIELDS}


TRACE_FIELDS = ("input", "first_update", "intermediate", "second_update", "final")


def sequential_trace(x: Vector, *, suppress_first: bool = False, suppress_second: bool = False) -> SequentialTrace:
    """y = x + F(x), z = y + G(y). A suppressed branch writes zeros; G always reads the y it is given."""
    check_column(x, "the input")
    first = zero_vector() if suppress_first else first_update(x)
    intermediate = x + first
    second = zero_vector() if suppress_second else second_update(intermediate)
    return SequentialTrace(x, first, intermediate, second, intermediate + second)


@dataclass(frozen=True)
class ParallelTrace:
    """z = x + F(x) + G(x): both branches read the same original input (a different architecture)."""

    input: Vector
    first_update: Vector
    second_update: Vector
    final: Vector

    def __post_init__(self) -> None:
        for name in ("input", "first_update", "second_update", "final"):
            check_column(getattr(self, name), name.replace("_", " "))


def parallel_trace(x: Vector) -> ParallelTrace:
    check_column(x, "the input")
    first, second = first_update(x), second_update(x)
    return ParallelTrace(x, first, second, x + first + second)


@dataclass(frozen=True)
class Interventions:
    """The three independent cases, each run on its own fresh copy of the input, and the shortcut."""

    first_suppressed: SequentialTrace
    second_suppressed: SequentialTrace
    parallel: ParallelTrace
    shortcut: Vector  # baseline z - baseline F(x): arithmetic on stored results, not a rerun


def run_interventions(x: Vector, baseline: SequentialTrace) -> Interventions:
    return Interventions(
        first_suppressed=sequential_trace(x.copy(), suppress_first=True),
        second_suppressed=sequential_trace(x.copy(), suppress_second=True),
        parallel=parallel_trace(x.copy()),
        shortcut=baseline.final - baseline.first_update,
    )


def check_position_rows(rows: Sequence[Vector]) -> tuple[int, int]:
    """The positions array is n x 3, one token position per row; return its shape."""
    if not rows:
        raise ToyInputError("the positions array needs at least one row")
    for index, row in enumerate(rows):
        if not isinstance(row, Vector) or len(row) != STREAM_WIDTH:
            length = len(row) if isinstance(row, Vector) else type(row).__name__
            raise ToyInputError(f"position row {index} has {length} entries; every row needs {STREAM_WIDTH}")
    return (len(rows), STREAM_WIDTH)


def trace_positions(rows: Sequence[Vector]) -> tuple[SequentialTrace, ...]:
    """Apply the update rules to each row separately: nothing here reads another row."""
    check_position_rows(rows)
    return tuple(sequential_trace(row.copy()) for row in rows)


# ---- JSON ------------------------------------------------------------------------------------------


def number_json(value: Fraction) -> dict:
    return {"exact": exact_json(value), "float": float(value)}


def vector_json(vector: Vector) -> dict:
    return {"exact": [exact_json(v) for v in vector.entries], "float": vector.floats(), "shape": list(vector.shape)}


def array_json(rows: Sequence[Vector]) -> dict:
    return {
        "exact": [[exact_json(v) for v in row.entries] for row in rows],
        "float": [row.floats() for row in rows],
        "shape": list(check_position_rows(rows)),
    }


def _traced_vector_json(vector: Vector) -> dict:
    return {**vector_json(vector), "norm": vector.norm().to_json()}


def sequential_json(trace: SequentialTrace) -> dict:
    return {
        **{name: _traced_vector_json(vector) for name, vector in trace.vectors().items()},
        "readout": number_json(readout(trace.final)),
    }


def parallel_json(trace: ParallelTrace) -> dict:
    return {
        "formula": "x + F(x) + G(x)",
        **{name: _traced_vector_json(getattr(trace, name)) for name in ("input", "first_update", "second_update", "final")},
        "readout": number_json(readout(trace.final)),
    }


def norm_comparison(baseline: SequentialTrace) -> dict:
    """Why |z - x| is not |F(x)| + |G(y)|: the two norms, their sum, the total change's norm, the angle."""
    first, second = baseline.first_update, baseline.second_update
    first_norm, second_norm = first.norm(), second.norm()
    update_dot = first.dot(second)
    cosine = None  # undefined when either update is zero
    if first_norm.squared and second_norm.squared:
        cosine = float(update_dot) / (first_norm.value * second_norm.value)
    return {
        "first_update_norm": first_norm.to_json(),
        "second_update_norm": second_norm.to_json(),
        "sum_of_update_norms": {
            "exact": f"{first_norm.exact} + {second_norm.exact}",
            "float": first_norm.value + second_norm.value,
        },
        "total_change_norm": (baseline.final - baseline.input).norm().to_json(),
        "update_dot_product": number_json(update_dot),
        "update_cosine": cosine,
        "why_they_differ": (
            "z - x = F(x) + G(y): the norm of a sum equals the sum of the norms only when the updates "
            "point the same way; a negative dot product means they partly cancel"
        ),
    }


def case_readouts(baseline: SequentialTrace, cases: Interventions) -> dict[str, Fraction]:
    return {
        "baseline": readout(baseline.final),
        "first_suppressed": readout(cases.first_suppressed.final),
        "second_suppressed": readout(cases.second_suppressed.final),
        "parallel": readout(cases.parallel.final),
        "shortcut": readout(cases.shortcut),
    }


def interventions_json(cases: Interventions) -> dict:
    return {
        "first_suppressed": {
            "description": "F writes zeros, so y = x and G is recomputed from that changed input",
            **sequential_json(cases.first_suppressed),
        },
        "second_suppressed": {
            "description": "F writes as in the baseline; only G's write is replaced by zeros",
            **sequential_json(cases.second_suppressed),
        },
        "parallel": {
            "description": "both branches read the original x: a different architecture, not a renaming",
            **parallel_json(cases.parallel),
        },
    }


def shortcut_json(cases: Interventions, readouts: dict) -> dict:
    return {
        "formula": "baseline z - baseline F(x)",
        **vector_json(cases.shortcut),
        "readout": number_json(readouts["shortcut"]),
        "equals_first_suppressed": cases.shortcut == cases.first_suppressed.final,
    }


def y1_probes(x: Vector, second_position: Vector) -> list[dict]:
    """y1 for the input, the second position and ``Y1_PROBE_INPUTS``, each distinct probe once, in order."""
    probes = dict.fromkeys([x, second_position, *(Vector(values) for values in Y1_PROBE_INPUTS)])
    return [{"input": vector_json(probe), "y1": number_json(sequential_trace(probe).intermediate[0])}
            for probe in probes]


def _addition(before: Norm, after: Norm) -> dict:
    return {"before": before.to_json(), "after": after.to_json(), "increased": after.squared > before.squared}


def predictions(baseline: SequentialTrace, cases: Interventions, readouts: dict, probes: list[dict]) -> dict:
    """The lab's four predictions, each answered from the computed values with the evidence beside it."""
    first_effect = abs(readouts["first_suppressed"] - readouts["baseline"])
    second_effect = abs(readouts["second_suppressed"] - readouts["baseline"])
    first_norm, second_norm = baseline.first_update.norm(), baseline.second_update.norm()
    if first_norm.squared == second_norm.squared:
        larger_has_larger_effect = None  # equal norms: neither update is "the larger"
    elif second_norm.squared > first_norm.squared:
        larger_has_larger_effect = second_effect > first_effect
    else:
        larger_has_larger_effect = first_effect > second_effect
    norms = [baseline.input.norm(), baseline.intermediate.norm(), baseline.final.norm()]
    first_addition, second_addition = _addition(norms[0], norms[1]), _addition(norms[1], norms[2])
    return {
        "y1_depends_on_x1": {
            # y1 depends on x1 only if probes with different x1 give different y1.
            "answer": len({json.dumps(probe["y1"]["exact"]) for probe in probes}) > 1,
            "reason": "y1 = x1 + (-x1) = 0 whatever x1 is",
            "probes": probes,
        },
        "each_addition_increases_norm": {
            "answer": first_addition["increased"] and second_addition["increased"],
            "first_addition": first_addition,
            "second_addition": second_addition,
        },
        "shortcut_recovers_first_suppressed": {
            "answer": cases.shortcut == cases.first_suppressed.final,
            "shortcut": vector_json(cases.shortcut),
            "first_suppressed_final": vector_json(cases.first_suppressed.final),
        },
        "larger_update_has_larger_readout_effect": {
            "answer": larger_has_larger_effect,
            "first_update_norm": first_norm.to_json(),
            "second_update_norm": second_norm.to_json(),
            "readout_change_when_first_suppressed": number_json(first_effect),
            "readout_change_when_second_suppressed": number_json(second_effect),
        },
    }


def positions_json(rows: tuple[Vector, ...], row_traces: tuple[SequentialTrace, ...]) -> dict:
    """The n x 3 array traced row by row, and the evidence that no row reads another."""
    # Changing the other rows to zeros must leave a row's results exactly as they were.
    zero_row = zero_vector()
    unchanged_by_others = [
        trace_positions(tuple(row if j == i else zero_row for j, row in enumerate(rows)))[i] == row_traces[i]
        for i in range(len(rows))
    ]
    return {
        "array": array_json(rows),
        **{name: array_json([getattr(trace, name) for trace in row_traces])
           for name in ("first_update", "intermediate", "second_update", "final")},
        "rows_match_single_vector_traces": [t == sequential_trace(row) for t, row in zip(row_traces, rows)],
        "rows_unchanged_when_other_row_zeroed": unchanged_by_others,
    }


def every_vector(baseline: SequentialTrace, cases: Interventions, row_traces: tuple[SequentialTrace, ...]) -> list:
    return [
        *baseline.vectors().values(),
        *cases.first_suppressed.vectors().values(),
        *cases.second_suppressed.vectors().values(),
        cases.parallel.input, cases.parallel.first_update, cases.parallel.second_update, cases.parallel.final,
        cases.shortcut,
        baseline.final - baseline.input,
        *(vector for trace in row_traces for vector in trace.vectors().values()),
    ]


def build_report(x: Vector, second_position: Vector, command: Sequence[str] | None = None) -> dict:
    """Everything the lab asks of Parts 1-3, for input x and the second position, as JSON-ready data."""
    check_column(x, "the input")
    check_column(second_position, "the second position")
    baseline_input = x.copy()  # kept aside so the report can show the input came through unchanged
    baseline = sequential_trace(x)
    cases = run_interventions(x, baseline)
    readouts = case_readouts(baseline, cases)
    rows = (x, second_position)
    row_traces = trace_positions(rows)
    return {
        "report": "Lab 05 toy residual trace (Parts 1-3)",
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "platform": sys.platform},  # "emscripten" when it runs in the page (Pyodide)
        "command": list(command) if command is not None else None,
        "conventions": (
            "exact values are ints or 'p/q' strings; float is the nearest float; a norm's exact form is "
            "sqrt(squared norm); vectors are 3x1 columns written as lists"
        ),
        "update_rules": {"F": "F(x) = [-x1, 2, 0]", "G": "G(y) = [y2, -y2, 2*y1]", "readout": "s = [0, 0, 1] z"},
        "baseline": sequential_json(baseline),
        "total_change": {"formula": "z - x", **_traced_vector_json(baseline.final - baseline.input)},
        "norm_comparison": norm_comparison(baseline),
        "interventions": interventions_json(cases),
        "shortcut": shortcut_json(cases, readouts),
        "readouts": {name: number_json(value) for name, value in readouts.items()},
        "predictions": predictions(baseline, cases, readouts, y1_probes(x, second_position)),
        "positions": positions_json(rows, row_traces),
        "checks": {
            "every_vector_is_3x1": all(vector.shape == (STREAM_WIDTH, 1)
                                       for vector in every_vector(baseline, cases, row_traces)),
            "input_unchanged_after_interventions": x == baseline_input and baseline.input == baseline_input,
        },
    }


# ---- command line ------------------------------------------------------------------------------------

# A typed entry, in lowest terms, has a numerator and denominator of at most this. Every vector the trace computes
# has entries a*xi + b*xj + c with |a|, |b| <= 1, 2 and c in {0, 2, -2}: over the common denominator, at most
# 5 * INPUT_LIMIT**2 = 5e140, within exact_vectors.ENTRY_LIMIT (so no intermediate value is ever refused).
INPUT_LIMIT = 10**70
ENTRY_MAX_CHARACTERS = 200  # bounds the work of reading one entry
EXPONENT_LIMIT = 1000  # "1e999999999" would take Fraction minutes to expand; far past INPUT_LIMIT anyway
_EXPONENT = re.compile(r"[eE]([+-]?\d[\d_]*)$")


def _parse_entry(piece: str, where: str) -> Fraction:
    """One typed entry as an exact Fraction, or a ToyInputError saying what is wrong with it and what to type."""
    if not piece:
        raise ToyInputError(f"{where} is empty: enter a number such as 2, -0.5 or 1/3")
    if len(piece) > ENTRY_MAX_CHARACTERS:
        raise ToyInputError(f"{where} has {len(piece)} characters; the toy reads at most {ENTRY_MAX_CHARACTERS}")
    too_large = (
        f"{where} is {piece!r}: too large, or too many decimal places, for the toy, which takes entries whose "
        "numerator and denominator (in lowest terms) are at most 1e70 each, so that every value it computes stays "
        "exact; enter a smaller number"
    )
    exponent = _EXPONENT.search(piece)
    if exponent and abs(int(exponent.group(1))) > EXPONENT_LIMIT:
        raise ToyInputError(too_large)
    try:
        value = Fraction(ascii_minus(piece) if is_number_text(piece) else "?")  # notation's grammar; "?" is refused
    except ZeroDivisionError:
        raise ToyInputError(f"{where} is {piece!r}, a fraction with a zero denominator") from None
    except ValueError:
        try:
            float(piece)  # 'nan' and 'inf' parse here; name them as non-finite
        except ValueError:
            raise ToyInputError(
                f"{where} is {piece!r}, which is not a number: enter an integer, a decimal such as 0.5 or a "
                "fraction such as 1/3"
            ) from None
        raise ToyInputError(f"{where} is {piece!r}; entries must be finite numbers (no NaN or infinity)") from None
    if max(abs(value.numerator), value.denominator) > INPUT_LIMIT:
        raise ToyInputError(too_large)
    return value


def parse_vector_text(text: str, option: str = "") -> Vector:
    """'1,2,-1', '[1;2;-1]' or '1/2, 0.5, -3' -> a 3 x 1 Vector; raise ToyInputError naming ``option`` (as the user
    typed it, with ``text``) and the bad entry, counted from 1."""
    subject = f"{option} {shlex.quote(text)}" if option else repr(text)
    pieces = vector_pieces(text)
    if pieces is None:
        raise ToyInputError(f"{subject} mixes ',' and ';': separate the entries one way, as in 1,2,-1 or [1;2;-1]")
    if len(pieces) != STREAM_WIDTH:
        raise ToyInputError(
            f"{subject} has {len(pieces)} {'entry' if len(pieces) == 1 else 'entries'}; the toy stream needs "
            f"{STREAM_WIDTH}, as in 1,2,-1 or [1;2;-1]"
        )
    return Vector(tuple(_parse_entry(piece.strip(), f"{subject}: entry {index}") for index, piece in enumerate(pieces, 1)))


def _indent_argument(text: str) -> int:
    try:
        indent = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if indent < 0:
        raise argparse.ArgumentTypeError(f"{indent} is negative; use 0 for one line")
    return indent


VECTOR_OPTIONS = ("--input", "--second-position")
ONE_LINE_WIDTH = 100  # compact JSON up to this many characters is printed on one line


def _join_vector_values(argv: Sequence[str]) -> list[str]:
    # argparse reads "-2,0,3" after an option as another option; "--opt=-2,0,3" is unambiguous.
    joined, index = [], 0
    while index < len(argv):
        if argv[index] in VECTOR_OPTIONS and index + 1 < len(argv):
            joined.append(f"{argv[index]}={argv[index + 1]}")
            index += 2
        else:
            joined.append(argv[index])
            index += 1
    return joined


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    # `residlab toy` (which passes its name) and `python3 trace_residual_toy.py` run this same parser.
    parser = argparse.ArgumentParser(
        prog=prog or Path(sys.argv[0]).name,
        description="Lab 05 Parts 1-3: trace the toy residual stream exactly and print one JSON report.",
    )
    default_input = ",".join(map(str, DEFAULT_INPUT))
    default_second = ",".join(map(str, DEFAULT_SECOND_POSITION))
    # The vectors are read in main, not by argparse, so that a bad one gets one line naming the option and entry.
    parser.add_argument("--input", default=default_input, metavar="X1,X2,X3",
                        help=f"the input column x (default {default_input}); fractions like 1/2 are exact")
    parser.add_argument("--second-position", default=default_second, metavar="X1,X2,X3",
                        help=f"the second token position, row 2 of the 2x3 array (default {default_second})")
    parser.add_argument("--indent", type=_indent_argument, default=2, metavar="N",
                        help="JSON indentation (default 2; 0 prints one line)")
    return parser


def format_report(value: object, indent: int, level: int = 0) -> str:
    """JSON text indented by nesting, except that anything short (a vector, a number, a norm) stays on one line."""
    compact = json.dumps(value)
    if indent == 0 or len(compact) <= ONE_LINE_WIDTH:
        return compact
    pad, inner = " " * (indent * level), " " * (indent * (level + 1))
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(key)}: {format_report(item, indent, level + 1)}" for key, item in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        if all(isinstance(item, list) for item in value):  # a matrix: one row per line
            rows = [inner + json.dumps(item) for item in value]
        else:
            rows = [inner + format_report(item, indent, level + 1) for item in value]
        return "[\n" + ",\n".join(rows) + "\n" + pad + "]"
    return compact


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = build_parser(prog)
    arguments = parser.parse_args(_join_vector_values(sys.argv[1:] if argv is None else argv))
    try:
        x = parse_vector_text(arguments.input, "--input")
        report = build_report(x, parse_vector_text(arguments.second_position, "--second-position"), command=sys.argv)
    except ToyInputError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    print(format_report(report, arguments.indent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
