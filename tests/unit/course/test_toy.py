"""residlab.course.lab05.toy: the Lab 05 hand trace, its interventions, its errors and its report."""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from residlab.course.lab05 import exact_vectors, notation, toy
from residlab.course.lab05.toy import Norm, ToyInputError, Vector

DOCUMENT_INPUT = Vector.of(1, 2, -1)
DOCUMENT_SECOND_POSITION = Vector.of(-2, 0, 3)


def exact(vector: Vector) -> list:
    return [toy.exact_json(value) for value in vector.entries]


# ---- the document's solutions ---------------------------------------------------------------------


def test_document_trace_vectors_and_norms():
    trace = toy.sequential_trace(DOCUMENT_INPUT)
    assert exact(trace.input) == [1, 2, -1]
    assert exact(trace.first_update) == [-1, 2, 0]
    assert exact(trace.intermediate) == [0, 4, -1]
    assert exact(trace.second_update) == [4, -4, 0]
    assert exact(trace.final) == [4, 0, -1]
    norms = [vector.norm() for vector in trace.vectors().values()]
    assert [n.exact for n in norms] == ["sqrt(6)", "sqrt(5)", "sqrt(17)", "sqrt(32)", "sqrt(17)"]
    assert [n.squared for n in norms] == [6, 5, 17, 32, 17]
    assert norms[3].simplified == "4*sqrt(2)"
    assert [n.value for n in norms] == [math.sqrt(v) for v in (6, 5, 17, 32, 17)]  # correctly rounded: exact
    assert all(vector.shape == (3, 1) for vector in trace.vectors().values())


def test_document_total_change_and_norm_comparison():
    report = toy.build_report(DOCUMENT_INPUT, DOCUMENT_SECOND_POSITION)
    assert report["total_change"]["exact"] == [3, -2, 0]
    assert report["total_change"]["norm"]["exact"] == "sqrt(13)"
    comparison = report["norm_comparison"]
    assert comparison["sum_of_update_norms"]["exact"] == "sqrt(5) + sqrt(32)"
    assert comparison["sum_of_update_norms"]["float"] == math.sqrt(5) + math.sqrt(32)
    assert comparison["total_change_norm"]["float"] < comparison["sum_of_update_norms"]["float"]
    assert comparison["update_dot_product"]["exact"] == -12  # [-1,2,0].[4,-4,0]: the updates partly cancel
    # -12 / sqrt(160): two rounded roots, a product and a quotient stay within 4 ulp (1e-15 relative).
    assert comparison["update_cosine"] == pytest.approx(-12 / math.sqrt(5 * 32), rel=1e-15, abs=0)


def test_document_interventions_shortcut_and_readouts():
    baseline = toy.sequential_trace(DOCUMENT_INPUT)
    cases = toy.run_interventions(DOCUMENT_INPUT, baseline)
    assert exact(cases.first_suppressed.second_update) == [2, -2, 2]  # G(x)
    assert exact(cases.first_suppressed.final) == [3, 0, 1]
    assert exact(cases.shortcut) == [5, -2, -1]
    assert cases.shortcut != cases.first_suppressed.final
    assert exact(cases.second_suppressed.final) == [0, 4, -1]
    assert exact(cases.parallel.final) == [2, 2, 1]
    assert toy.readout(baseline.final) == -1
    assert toy.readout(cases.first_suppressed.final) == 1
    assert toy.readout(cases.second_suppressed.final) == -1
    report = toy.build_report(DOCUMENT_INPUT, DOCUMENT_SECOND_POSITION)
    assert {name: r["exact"] for name, r in report["readouts"].items()} == {
        "baseline": -1, "first_suppressed": 1, "second_suppressed": -1, "parallel": 1, "shortcut": -1,
    }


def test_document_second_position_rows():
    report = toy.build_report(DOCUMENT_INPUT, DOCUMENT_SECOND_POSITION)
    positions = report["positions"]
    assert positions["array"]["shape"] == [2, 3]
    assert positions["array"]["exact"] == [[1, 2, -1], [-2, 0, 3]]
    assert positions["first_update"]["exact"][1] == [2, 2, 0]
    assert positions["intermediate"]["exact"][1] == [0, 2, 3]
    assert positions["second_update"]["exact"][1] == [2, -2, 0]
    assert positions["final"]["exact"][1] == [2, 0, 3]
    assert positions["final"]["exact"][0] == [4, 0, -1]
    assert positions["rows_match_single_vector_traces"] == [True, True]
    assert positions["rows_unchanged_when_other_row_zeroed"] == [True, True]


def test_document_prediction_answers():
    predictions = toy.build_report(DOCUMENT_INPUT, DOCUMENT_SECOND_POSITION)["predictions"]
    assert predictions["y1_depends_on_x1"]["answer"] is False
    assert {p["y1"]["exact"] for p in predictions["y1_depends_on_x1"]["probes"]} == {0}
    assert len({json.dumps(p["input"]["exact"][0]) for p in predictions["y1_depends_on_x1"]["probes"]}) >= 4
    norms = predictions["each_addition_increases_norm"]
    assert (norms["answer"], norms["first_addition"]["increased"], norms["second_addition"]["increased"]) == (False, True, False)
    assert predictions["shortcut_recovers_first_suppressed"]["answer"] is False
    larger = predictions["larger_update_has_larger_readout_effect"]
    assert larger["answer"] is False
    assert larger["readout_change_when_first_suppressed"]["exact"] == 2
    assert larger["readout_change_when_second_suppressed"]["exact"] == 0


# ---- other inputs, against closed forms derived by hand --------------------------------------------
# y = [0, x2 + 2, x3], z = [x2 + 2, 0, x3]; first suppressed: z = [x1 + x2, 0, x3 + 2 x1];
# parallel: [x2, 2, x3 + 2 x1]; shortcut: [x1 + x2 + 2, -2, x3].

OTHER_INPUTS = [
    (3, -1, 2),
    (-5, -7, 4),
    (0, 0, 0),
    (Fraction(1, 2), Fraction(-3, 4), Fraction(5, 3)),
    (Decimal("0.25"), -1.5, 10),
    (-2, 0, 3),
]


@pytest.mark.parametrize("values", OTHER_INPUTS)
def test_closed_forms_on_other_inputs(values):
    x1, x2, x3 = (Fraction(v) for v in values)
    x = Vector(values)
    trace = toy.sequential_trace(x)
    assert trace.intermediate == Vector.of(0, x2 + 2, x3)
    assert trace.final == Vector.of(x2 + 2, 0, x3)
    cases = toy.run_interventions(x, trace)
    assert cases.first_suppressed.final == Vector.of(x1 + x2, 0, x3 + 2 * x1)
    assert cases.second_suppressed.final == Vector.of(0, x2 + 2, x3)
    assert cases.parallel.final == Vector.of(x2, 2, x3 + 2 * x1)
    assert cases.shortcut == Vector.of(x1 + x2 + 2, -2, x3)
    assert toy.readout(trace.final) == x3
    assert toy.readout(cases.first_suppressed.final) == x3 + 2 * x1
    assert trace.final.norm().squared == (x2 + 2) ** 2 + x3**2
    # z - x = [x2 + 2 - x1, -x2, 0]: the float is the correctly rounded root of the exact square.
    assert (trace.final - trace.input).norm().value == math.sqrt((x2 + 2 - x1) ** 2 + x2**2)


def test_hand_computed_other_input():
    # x = [3,-1,2]: F = [-3,2,0], y = [0,1,2], G(y) = [1,-1,0], z = [1,0,2].
    trace = toy.sequential_trace(Vector.of(3, -1, 2))
    assert [exact(v) for v in trace.vectors().values()] == [[3, -1, 2], [-3, 2, 0], [0, 1, 2], [1, -1, 0], [1, 0, 2]]
    assert [v.norm().exact for v in trace.vectors().values()] == ["sqrt(14)", "sqrt(13)", "sqrt(5)", "sqrt(2)", "sqrt(5)"]


def test_fractional_input_stays_exact():
    report = toy.build_report(Vector.of(Fraction(1, 3), Fraction(-1, 2), 0), Vector.of(Fraction(2, 7), 1, -1))
    # y = [0, 3/2, 0], G(y) = [3/2, -3/2, 0], z = [3/2, 0, 0]; |z| = 3/2 exactly.
    assert report["baseline"]["intermediate"]["exact"] == [0, "3/2", 0]
    assert report["baseline"]["final"]["exact"] == ["3/2", 0, 0]
    assert report["baseline"]["final"]["norm"]["exact"] == "3/2"
    assert report["baseline"]["input"]["float"] == [1 / 3, -0.5, 0.0]
    assert report["baseline"]["input"]["norm"]["exact"] == "sqrt(13/36)"
    assert report["baseline"]["input"]["norm"]["simplified"] == "sqrt(13)/6"


@pytest.mark.parametrize(
    "squared, exact_form, simplified",
    [(32, "sqrt(32)", "4*sqrt(2)"), (9, "3", "3"), (0, "0", "0"), (12, "sqrt(12)", "2*sqrt(3)"),
     (Fraction(1, 4), "1/2", "1/2"), (Fraction(8, 3), "sqrt(8/3)", "2*sqrt(6)/3"), (Fraction(1, 2), "sqrt(1/2)", "sqrt(2)/2")],
)
def test_norm_exact_forms(squared, exact_form, simplified):
    norm = Norm(Fraction(squared))
    assert (norm.exact, norm.simplified) == (exact_form, simplified)
    assert norm.value == math.sqrt(squared)  # math.sqrt is correctly rounded: exact equality


def test_latex_forms_used_by_the_page():
    assert Vector.of(0, 4, -1).latex() == r"[0,4,-1]^\mathsf{T}"
    assert Vector.of(Fraction(-1, 2), 0, 1).latex() == r"[-\tfrac{1}{2},0,1]^\mathsf{T}"
    assert Norm(Fraction(32)).latex() == r"\sqrt{32}"
    assert Norm(Fraction(0)).latex() == "0"
    assert Norm(Fraction(9)).latex() == "3"


# ---- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values, fragments",
    [
        ((1, "2", 3), ["entry 1", "'2'", "str"]),
        ((True, 0, 0), ["entry 0", "True", "bool"]),
        ((0, None, 0), ["entry 1", "None"]),
        ((0, 0, float("nan")), ["entry 2", "nan", "finite"]),
        ((float("inf"), 0, 0), ["entry 0", "inf", "finite"]),
        ((0, float("-inf"), 0), ["entry 1", "-inf", "finite"]),
        ((Decimal("NaN"), 0, 0), ["entry 0", "NaN", "finite"]),
    ],
)
def test_bad_entries_are_named(values, fragments):
    with pytest.raises(ToyInputError) as error:
        Vector(values)
    for fragment in fragments:
        assert fragment in str(error.value)


def test_a_string_is_not_a_vector():
    with pytest.raises(ToyInputError, match="sequence of numbers"):
        Vector("123")


@pytest.mark.parametrize("operation", ["add", "subtract"])
def test_mismatched_lengths_are_refused_not_truncated(operation):
    three, two = Vector.of(1, 2, 3), Vector.of(1, 2)
    with pytest.raises(ToyInputError, match=f"cannot {operation} vectors of lengths 3 and 2.*nothing is truncated"):
        (three + two) if operation == "add" else (three - two)
    with pytest.raises(ToyInputError, match="lengths 2 and 3"):
        (two + three) if operation == "add" else (two - three)


def test_update_rules_and_traces_refuse_wrong_shapes():
    with pytest.raises(ToyInputError, match="input of F has shape 2x1"):
        toy.first_update(Vector.of(1, 2))
    with pytest.raises(ToyInputError, match="input of G has shape 4x1"):
        toy.second_update(Vector.of(1, 2, 3, 4))
    with pytest.raises(ToyInputError, match="intermediate has shape 2x1"):
        toy.SequentialTrace(Vector.of(1, 2, 3), Vector.of(1, 2, 3), Vector.of(1, 2), Vector.of(1, 2, 3), Vector.of(1, 2, 3))
    with pytest.raises(ToyInputError, match="position row 1 has 2 entries"):
        toy.trace_positions([Vector.of(1, 2, 3), Vector.of(1, 2)])
    with pytest.raises(ToyInputError, match="the second position has shape 4x1"):
        toy.build_report(DOCUMENT_INPUT, Vector.of(1, 2, 3, 4))


@pytest.mark.parametrize(
    "text, fragment",
    [("1,2", "has 2 entries"), ("1,x,3", "entry 2 is 'x'"), ("nan,0,0", "entry 1 is 'nan'"),
     ("0,inf,0", "entry 2 is 'inf'"), ("1/0,0,0", "zero denominator"), ("1,2,3,4", "has 4 entries"),
     ("5", "has 1 entry;"), ("1,,3", "entry 2 is empty")],
)
def test_parse_vector_text_errors(text, fragment):
    with pytest.raises(ToyInputError, match=fragment):
        toy.parse_vector_text(text)


def test_parse_vector_text_is_exact():
    assert toy.parse_vector_text("1/2, 0.1, -3") == Vector((Fraction(1, 2), Fraction(1, 10), -3))


# ---- nothing is mutated ----------------------------------------------------------------------------


def test_vectors_and_traces_are_frozen():
    vector = Vector.of(1, 2, -1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        vector.entries = (0, 0, 0)
    with pytest.raises(TypeError):
        vector.entries[0] = 5
    trace = toy.sequential_trace(vector)
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.final = Vector.of(0, 0, 0)


def test_interventions_leave_baseline_untouched():
    x = Vector.of(1, 2, -1)
    baseline = toy.sequential_trace(x)
    snapshot = {name: vector.entries for name, vector in baseline.vectors().items()}
    first_report = toy.build_report(x, DOCUMENT_SECOND_POSITION)
    toy.run_interventions(x, baseline)
    toy.run_interventions(x, baseline)
    assert x.entries == (1, 2, -1)
    assert {name: vector.entries for name, vector in baseline.vectors().items()} == snapshot
    assert toy.build_report(x, DOCUMENT_SECOND_POSITION) == first_report
    assert first_report["checks"]["input_unchanged_after_interventions"] is True
    assert first_report["checks"]["every_vector_is_3x1"] is True


def test_each_case_gets_its_own_copy_of_the_input(monkeypatch):
    x = Vector.of(1, 2, -1)
    baseline = toy.sequential_trace(x)
    seen = []
    real_first, real_second = toy.first_update, toy.second_update
    monkeypatch.setattr(toy, "first_update", lambda v: seen.append(("F", v)) or real_first(v))
    monkeypatch.setattr(toy, "second_update", lambda v: seen.append(("G", v)) or real_second(v))
    toy.sequential_trace(x)
    assert seen[0][1] is x  # the spy sees the very object when no copy is made
    seen.clear()
    cases = toy.run_interventions(x, baseline)
    assert seen, "the interventions call the update rules"
    assert all(argument is not x for _, argument in seen)
    # first suppressed: G reads y = x + 0, equal to x but a distinct object; parallel: both read a copy of x
    assert [(name, argument == x) for name, argument in seen] == [("G", True), ("F", True), ("F", True), ("G", True)]
    for case in (cases.first_suppressed, cases.second_suppressed, cases.parallel):
        assert case.input == x and case.input is not x
    rows = (x, DOCUMENT_SECOND_POSITION)
    assert all(trace.input is not row for trace, row in zip(toy.trace_positions(rows), rows))


# ---- command line and imports -----------------------------------------------------------------------


def test_main_prints_the_report(capsys):
    assert toy.main(["--input", "-2,0,3", "--second-position", "1/2,1,1", "--indent", "0"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("\n") == 1
    report = json.loads(printed)
    expected = toy.build_report(Vector.of(-2, 0, 3), Vector.of(Fraction(1, 2), 1, 1))
    assert {k: v for k, v in report.items() if k != "command"} == {k: v for k, v in expected.items() if k != "command"}
    assert report["command"] == sys.argv
    assert report["python"]["version"] == ".".join(map(str, sys.version_info[:3]))


def test_main_indented_output_keeps_vectors_on_one_line(capsys):
    toy.main([])
    printed = capsys.readouterr().out
    assert '"exact": [0, 4, -1],' in printed
    assert json.loads(printed)["baseline"]["final"]["exact"] == [4, 0, -1]


@pytest.mark.parametrize(
    "argv, line",
    [(["--input", "1,2"], "--input 1,2 has 2 entries; the toy stream needs 3, as in 1,2,-1 or [1;2;-1]"),
     (["--second-position", "a,b,c"], "--second-position a,b,c: entry 1 is 'a', which is not a number: enter an "
                                      "integer, a decimal such as 0.5 or a fraction such as 1/3"),
     (["--input", "nan,1,2"], "--input nan,1,2: entry 1 is 'nan'; entries must be finite numbers (no NaN or infinity)"),
     (["--input", "1, 2"], "--input '1, 2' has 2 entries; the toy stream needs 3, as in 1,2,-1 or [1;2;-1]")],
)
def test_main_bad_vector_exits_2_with_one_line_naming_the_option_and_entry(capsys, argv, line):
    assert toy.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.endswith(f": error: {line}\n") and captured.err.count("\n") == 1


def test_main_bad_indent_is_refused_by_argparse(capsys):
    with pytest.raises(SystemExit) as exit_info:
        toy.main(["--indent", "-1"])
    assert exit_info.value.code == 2
    assert "argument --indent: -1 is negative" in capsys.readouterr().err


def test_toy_imports_only_the_standard_library():
    # The toy, its exact arithmetic and its notation; between them only the toy's imports of the others (which its
    # runner drops).
    imported = set()
    for module in (toy, exact_vectors, notation):
        for node in ast.walk(ast.parse(Path(module.__file__).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module or "")
    assert {name for name in imported if name.split(".")[0] == "residlab"} == {"residlab.course.lab05.exact_vectors",
                                                                                   "residlab.course.lab05.notation"}
    assert {name.split(".")[0] for name in imported} - set(sys.stdlib_module_names) == {"residlab"}


def test_importing_residlab_and_toy_does_not_import_torch():
    code = (
        "import sys, residlab, residlab.course.lab05.toy, residlab.cli; "
        "assert 'torch' not in sys.modules, 'torch was imported'; "
        "assert 'numpy' not in sys.modules, 'numpy was imported'; print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_residlab_toy_command_forwards_its_options(capsys):
    from residlab import cli

    assert cli.main(["toy", "--input", "3,-1,2", "--indent", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["baseline"]["final"]["exact"] == [1, 0, 2]  # z = [x2 + 2, 0, x3]


TOO_LARGE = "too large, or too many decimal places, for the toy"


@pytest.mark.parametrize("entry", ["1e71", "-1e71", "1e-71", "1/" + "7" * 71, "7" * 71, "1e400", "1e4301",
                                   "1e10000000000", "0.5e-1001"])
def test_typed_entries_past_1e70_are_refused_by_value_in_an_instant(entry):
    # "1e10000000000" would take Fraction minutes to expand: the exponent is read first.
    with pytest.raises(toy.ToyInputError) as error:
        toy.parse_vector_text(f"1,{entry},2", "--input")
    assert str(error.value).startswith(f"--input 1,{entry},2: entry 2 is {entry!r}: {TOO_LARGE}")
    assert "at most 1e70 each" in str(error.value)


def test_entry_text_is_bounded_in_length():
    with pytest.raises(toy.ToyInputError, match="entry 3 has 201 characters; the toy reads at most 200"):
        toy.parse_vector_text("1,2," + "0" * 200 + "1")


NEAR_LIMIT = [Fraction(10**70 - 3, 10**70 - 7), Fraction(-(10**70), 10**70 - 1), Fraction(2 * 10**69 + 1, 10**70 - 11)]


@pytest.mark.parametrize("entries", [
    (10**70, 10**70, 10**70), (-(10**70), -(10**70), -(10**70)), (10**70, -2, -(10**70)),  # largest values
    tuple(NEAR_LIMIT), tuple(reversed(NEAR_LIMIT)),  # coprime denominators near 1e70: the largest numerators
    (Fraction(1, 10**70), Fraction(-1, 10**70), 0),  # the smallest
])
def test_every_input_within_the_limit_gives_a_report_with_finite_floats(entries):
    # What INPUT_LIMIT promises: no value the trace computes from such entries passes ENTRY_LIMIT, and every float
    # of the report is finite.
    import math

    def floats(value):
        if isinstance(value, float):
            yield value
        elif isinstance(value, (dict, list)):
            for item in value.values() if isinstance(value, dict) else value:
                yield from floats(item)

    text = ",".join(str(value) for value in entries)
    report = toy.build_report(toy.parse_vector_text(text), toy.parse_vector_text(text))
    assert all(math.isfinite(value) for value in floats(report))
    assert toy.parse_vector_text(text).entries == entries


def test_vectors_past_the_internal_limit_are_refused_without_printing_the_number():
    with pytest.raises(toy.ToyInputError, match=r"entry 2 has a numerator or denominator above 1e150"):
        toy.Vector((1, 2, Fraction(1, 10**151)))
    with pytest.raises(toy.ToyInputError, match=r"entry 0 has a numerator or denominator above 1e150"):
        toy.Vector((10**5000, 0, 0))  # str() of this would itself fail (Python's 4300-digit limit)
    assert toy.Vector((10**150, 0, -(10**150))).entries[0] == 10**150  # the limit itself is accepted


def test_norms_of_large_entries_stay_exact_and_fast():
    # 12345678901^2 + 2^2 + 1 has no small square factor: the exact form is sqrt of the whole, found at once.
    report = toy.build_report(toy.parse_vector_text("12345678901,2,-1"), toy.parse_vector_text("-2,0,3"))
    assert report["baseline"]["input"]["norm"]["simplified"] == f"sqrt({12345678901**2 + 4 + 1})"
    # A square remainder is pulled out whole: 4 * 10007^2 (10007, a prime above the trial-division limit).
    assert toy.Norm(Fraction(4 * 10007**2)).simplified == "20014"
    assert toy.Norm(Fraction(2 * 3**2 * 5**2)).simplified == "15*sqrt(2)"
