"""Lab 05 Part 3's checker (residlab/course/lab05/code_check.py): a correct solution passes every function,
each mistake planted in it is named at the function it is planted in, and the download check_toy.py, run alone as
a learner runs it, says the same."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import toy_solutions

from residlab.course.lab05 import code_check, toy, toy_skeleton

ROOT = Path(__file__).resolve().parents[3]
DOWNLOAD = ROOT / "assets" / "labs" / "check_toy.py"
SKELETON_DOWNLOAD = ROOT / "assets" / "labs" / "my_toy.py"


def module_from(source: str) -> types.ModuleType:
    module = types.ModuleType("learner_toy")
    exec(compile(source, "my_toy.py", "exec"), module.__dict__)
    return module


def run_alone(script: Path, *arguments: str, cwd: Path, silent_stdin: bool = False) -> subprocess.CompletedProcess:
    # -I: no PYTHONPATH, no user site, no current folder on the path: the download needs nothing but itself.
    # silent_stdin: standard input a pipe that stays open and sends nothing until the process has ended.
    if not silent_stdin:
        return subprocess.run([sys.executable, "-I", str(script), *arguments], cwd=cwd, capture_output=True,
                              text=True, timeout=120, check=False)
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(read_end) as stdin:
            return subprocess.run([sys.executable, "-I", str(script), *arguments], cwd=cwd, stdin=stdin,
                                  capture_output=True, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)


def test_the_correct_solution_passes_every_function():
    verdicts = code_check.check_module(module_from(toy_solutions.CORRECT))
    assert list(verdicts) == [name for name, _ in code_check.CHECKED_FUNCTIONS]
    assert {name: mistake and mistake.line() for name, mistake in verdicts.items()} == dict.fromkeys(verdicts)


@pytest.mark.parametrize("plant", sorted(toy_solutions.PLANTS) + sorted(toy_solutions.VARIANTS))
def test_each_planted_mistake_is_named_at_its_function(plant):
    function, said, _, _ = {**toy_solutions.PLANTS, **toy_solutions.VARIANTS}[plant]
    verdicts = code_check.check_module(module_from(toy_solutions.planted(plant)))
    assert verdicts[function] is not None, plant
    assert verdicts[function].line().startswith(said), verdicts[function].line()
    assert verdicts[function].name in code_check.NAMED_MISTAKES
    # only the function planted in and those that call it fail: the mistake is not blamed on the others
    assert verdicts["add"] is None or function == "add"


def test_every_named_mistake_has_a_plant():
    planted = set()
    for plant in toy_solutions.PLANTS:
        function = toy_solutions.PLANTS[plant][0]
        planted.add(code_check.check_module(module_from(toy_solutions.planted(plant)))[function].name)
    assert planted == set(code_check.NAMED_MISTAKES)


def test_an_index_one_place_off_is_named_with_the_reads_it_got_wrong():
    # G(y) = [y2, -y2, 2*y1] read 1-based (y[2], y[2], y[1]): every read one place on, each named.
    mistake = code_check.check_module(module_from(toy_solutions.planted("index_off_one_based")))["second_update"]
    assert "y[2] read for y[1], y[2] read for y[1], y[1] read for y[0]" in mistake.detail
    # and the learner's second_block and trace, built on that second_update, are named for the same cause
    verdicts = code_check.check_module(module_from(toy_solutions.planted("index_off_one_based")))
    assert verdicts["second_block"].name == verdicts["trace"].name == code_check.INDEX_OFF


def test_a_wrong_value_near_a_named_mistake_is_not_given_its_name():
    # |z| - |x| + 1 is neither |z - x| nor a difference of norms: shown as a wrong value, unnamed.
    source = toy_solutions.CORRECT.replace("    return norm([b - a for a, b in zip(x, z)])", "    return norm(z) - norm(x) + 1")
    assert code_check.check_module(module_from(source))["total_change_norm"].name is None
    source = toy_solutions.CORRECT.replace("    return z[2]", "    return z[2] + 1")
    assert code_check.check_module(module_from(source))["readout"].name is None


def test_decimal_entries_are_read_as_the_toys_vector_reads_them(tmp_path):
    # The toy's Vector takes Decimal entries exactly; so does the checker, in the package and the download alike.
    source = "from decimal import Decimal\n" + toy_solutions.CORRECT.replace(
        "    return [-x[0], 2, 0]", "    return [-Decimal(x[0]), Decimal(2), Decimal(0)]").replace(
        "    return z[2]", "    return Decimal(z[2])")
    verdicts = code_check.check_module(module_from(source))
    assert verdicts["first_update"] is None and verdicts["readout"] is None
    (tmp_path / "my_toy.py").write_text(source, encoding="utf-8")
    completed = run_alone(DOWNLOAD, "my_toy.py", cwd=tmp_path)
    lines = completed.stdout.splitlines()
    assert "  first_update       passes" in lines and "  readout            passes" in lines, completed.stdout
    wrong = toy_solutions.CORRECT.replace("    return [-x[0], 2, 0]", "    return [-x[0], 2, '0']")
    assert "not a list of three numbers" in code_check.check_module(module_from(wrong))["first_update"].detail


def test_the_editor_is_told_each_function_and_an_ended_one_is_named_without_being_called_again():
    # The page's editor keeps the time (Pyodide has no threads): told each function as it starts, it ends a runaway
    # one and checks again with it in `ended`, which is named as still running and never called again.
    looping = toy_solutions.CORRECT.replace(
        "def parallel(x):\n    return", "def parallel(x):\n    while True:\n        pass\n    return")
    started = []
    verdicts = code_check.check_module(module_from(looping), before_function=started.append, ended={"parallel"})
    assert started == [name for name, _ in code_check.CHECKED_FUNCTIONS if name != "parallel"]
    assert verdicts["parallel"].line() == f"still running after {code_check.FUNCTION_LIMIT_S:g} s: a loop that never ends?"
    assert all(mistake is None for name, mistake in verdicts.items() if name != "parallel")


def test_a_wrong_value_that_is_no_named_mistake_is_shown_with_its_input_and_the_expected_value():
    source = toy_solutions.CORRECT.replace("    return [-x[0], 2, 0]", "    return [-x[0], 3, 0]")
    mistake = code_check.check_module(module_from(source))["first_update"]
    x = code_check.held_out_inputs()[0]
    assert mistake.name is None
    assert mistake.line() == (f"first_update({code_check._text(x)}) returned {code_check._text([-x[0], 3, 0])}; "
                              f"expected {toy.first_update(toy.Vector(x))}")


def test_the_held_out_inputs_are_fixed_and_never_the_pages():
    inputs = code_check.held_out_inputs()
    assert inputs == code_check.held_out_inputs() and len(inputs) == code_check.HELD_OUT_COUNT
    assert len({tuple(x) for x in inputs}) == len(inputs)
    shown = {toy.DEFAULT_INPUT, toy.DEFAULT_SECOND_POSITION}
    assert not {tuple(x) for x in inputs} & shown
    # negative, zero-free and fractional entries among them, each exact as a float
    entries = [value for x in inputs for value in x]
    assert any(value < 0 for value in entries) and any(isinstance(value, float) for value in entries)
    assert all(float(value) == toy.Vector(x).entries[i] for x in inputs for i, value in enumerate(x))


def test_the_skeleton_defines_exactly_the_checked_functions_and_none_is_written():
    defined = {name: function for name, function in vars(toy_skeleton).items()
               if inspect.isfunction(function) and function.__module__ == toy_skeleton.__name__}
    assert [(name, ", ".join(inspect.signature(defined[name]).parameters)) for name, _ in code_check.CHECKED_FUNCTIONS] \
        == list(code_check.CHECKED_FUNCTIONS)
    assert set(defined) == {name for name, _ in code_check.CHECKED_FUNCTIONS}
    verdicts = code_check.check_module(toy_skeleton)
    assert all(mistake.line() == "not written yet (it raises NotImplementedError)" for mistake in verdicts.values())


def test_a_missing_function_is_named():
    source = toy_solutions.CORRECT.replace("def readout(z):", "def read_out(z):")
    assert code_check.check_module(module_from(source))["readout"].line() == "missing: define readout(z)"


def check_lines(source: str, tmp_path: Path) -> tuple[int, str]:
    """What check_main prints and returns for the file, in this process."""
    path = tmp_path / "my_toy.py"
    path.write_text(source, encoding="utf-8")
    from contextlib import redirect_stdout
    from io import StringIO

    printed = StringIO()
    with redirect_stdout(printed):
        status = code_check.check_main([str(path)])
    return status, printed.getvalue()


@pytest.mark.parametrize("plant", [None, *sorted(toy_solutions.PLANTS), *sorted(toy_solutions.VARIANTS)])
def test_the_download_run_alone_says_what_the_package_says(plant, tmp_path):
    source = toy_solutions.CORRECT if plant is None else toy_solutions.planted(plant)
    status, printed = check_lines(source, tmp_path)
    completed = run_alone(DOWNLOAD, "my_toy.py", cwd=tmp_path)
    assert (completed.returncode, completed.stdout, completed.stderr) == (status, printed.replace(str(tmp_path / "my_toy.py"), "my_toy.py"), "")
    assert status == (0 if plant is None else 1)
    passing = sum(line.endswith("  passes") for line in printed.splitlines())
    assert printed.splitlines()[-1] == f"{passing} of {len(code_check.CHECKED_FUNCTIONS)} functions pass."
    assert passing == len(code_check.CHECKED_FUNCTIONS) if plant is None else passing < len(code_check.CHECKED_FUNCTIONS)


def test_a_loop_that_never_ends_is_named_within_the_limit_when_run_alone(tmp_path):
    # Outside the page nothing else stops a learner's endless loop: the download gives each function
    # FUNCTION_LIMIT_S and names the one that ran past it; the others are still checked.
    looping = toy_solutions.CORRECT.replace(
        "def parallel(x):\n    return", "def parallel(x):\n    while True:\n        pass\n    return")
    assert looping != toy_solutions.CORRECT
    (tmp_path / "my_toy.py").write_text(looping, encoding="utf-8")
    completed = run_alone(DOWNLOAD, "my_toy.py", cwd=tmp_path)
    lines = completed.stdout.splitlines()
    assert completed.returncode == 1 and completed.stderr == ""
    assert f"  parallel           still running after {code_check.FUNCTION_LIMIT_S:g} s: a loop that never ends?" in lines
    assert lines[-1] == f"{len(code_check.CHECKED_FUNCTIONS) - 1} of {len(code_check.CHECKED_FUNCTIONS)} functions pass."


@pytest.mark.parametrize(("top_level", "printed"), [("while True:\n    pass\n", ""), ("answer = input('x? ')\n", "x? ")])
def test_top_level_code_that_never_ends_is_named_within_the_limit_when_run_alone(top_level, printed, tmp_path):
    # A learner who calls their own code at the top level, in a loop that never ends or waiting for input that never
    # comes (standard input a pipe left open), gets one line and exit status 2 after FUNCTION_LIMIT_S, not a checker
    # that hangs or an interpreter that aborts at shutdown.
    (tmp_path / "my_toy.py").write_text(toy_solutions.CORRECT + "\n" + top_level, encoding="utf-8")
    completed = run_alone(DOWNLOAD, "my_toy.py", cwd=tmp_path, silent_stdin=True)
    assert (completed.returncode, completed.stdout) == (2, printed)  # (the learner's own prompt)
    assert completed.stderr == (f"check_toy.py: error: my_toy.py was still running its top-level code after "
                                f"{code_check.FUNCTION_LIMIT_S:g} s: a loop that never ends, or a call that waits for "
                                "input, outside the functions?\n")


@pytest.mark.parametrize("source, says", [
    (None, "my_toy.py is not a file"),
    ("def add(a, b:\n", "my_toy.py, line 1: "),
    ("raise RuntimeError('boom')\n", "my_toy.py raised RuntimeError while it was imported: boom"),
])
def test_an_unreadable_file_gets_one_line_and_status_2(source, says, tmp_path):
    if source is not None:
        (tmp_path / "my_toy.py").write_text(source, encoding="utf-8")
    completed = run_alone(DOWNLOAD, "my_toy.py", cwd=tmp_path)
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.startswith(f"check_toy.py: error: {says}") and completed.stderr.count("\n") == 1
    usage = run_alone(DOWNLOAD, cwd=tmp_path)
    assert usage.returncode == 2 and usage.stderr.startswith("usage: check_toy.py my_toy.py")


def test_the_skeleton_download_is_the_packages_skeleton_and_a_solution_runs_with_plain_python(tmp_path):
    text = SKELETON_DOWNLOAD.read_text(encoding="utf-8")
    first, rest = text.split("\n", 1)
    assert first.startswith("# my_toy.py: ") and "residlab/course/lab05/toy_skeleton.py" in first
    assert rest == Path(toy_skeleton.__file__).read_text(encoding="utf-8")
    (tmp_path / "my_toy.py").write_text(toy_solutions.CORRECT, encoding="utf-8")
    completed = run_alone(tmp_path / "my_toy.py", cwd=tmp_path)
    final = toy.sequential_trace(toy.Vector(toy.DEFAULT_INPUT)).final
    assert (completed.returncode, completed.stdout) == (0, f"z = {final}\n")
