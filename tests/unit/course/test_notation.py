"""One notation for Lab 05's toy: the runner (residlab/course/lab05/notation.py, through toy.parse_vector_text),
the toy explorer (toy-trace.js) and the answer checker (answer-checker.js) accept and refuse the same typed numbers
and vectors, with the same exact values: one list below, run through the Python and, in node, through the page's
own scripts. The forms the page prints are among them: the column [3;-2;0], the transpose mark, the minus sign
U+2212 and the fraction slash.

Sizes are left out: the explorer reads at most 40 characters and exponents up to 30 per entry (bounded work per
keystroke), the runner 200 characters and 1000 (tests/unit/course/test_toy.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from residlab.course.lab05 import notation, toy

ROOT = Path(__file__).resolve().parents[3]
HARNESS = Path(__file__).with_name("read_typed.cjs")

# (typed, its value) for numbers; None: refused.
NUMBERS = [
    ("2", 2), ("-3", -3), ("+4", 4), ("0", 0), ("-0", 0), ("1/3", Fraction(1, 3)), ("-1/2", Fraction(-1, 2)),
    ("0.5", Fraction(1, 2)), (".5", Fraction(1, 2)), ("5.", 5), ("-0.125", Fraction(-1, 8)), ("1e3", 1000),
    ("2E-2", Fraction(1, 50)), ("1_000", 1000), ("4.123", Fraction(4123, 1000)), ("  7  ", 7),
    ("\u22121", -1), ("\u22121/2", Fraction(-1, 2)), ("\u20133", -3), ("\u2212.5", Fraction(-1, 2)),
    ("1\u20442", Fraction(1, 2)), ("\u22121\u20442", Fraction(-1, 2)), ("3\u00f74", Fraction(3, 4)),
    ("", None), ("abc", None), ("nan", None), ("-inf", None), ("Infinity", None), ("1/0", None), ("1.2.3", None),
    ("--1", None), ("1/2/3", None), ("0x10", None), ("1e", None), ("e5", None), (".", None), ("1 2", None),
    ("1__0", None), ("\u00bd", None), ("1.5/2", None), ("1/-2", None), ("\u0661", None),
    ("\u2212\u22121", None), ("1/2e3", None),
]
# (typed, its three values) for vectors; None: refused.
VECTORS = [
    ("1,2,-1", (1, 2, -1)), ("1, 2, -1", (1, 2, -1)), ("[1, 2, -1]", (1, 2, -1)), ("(1, 2, -1)", (1, 2, -1)),
    ("1 2 -1", (1, 2, -1)), ("[1 2 -1]", (1, 2, -1)), ("[3;-2;0]", (3, -2, 0)), ("[3; -2; 0]", (3, -2, 0)),
    ("3;-2;0", (3, -2, 0)), ("[3;\u22122;0]", (3, -2, 0)), ("[3, \u22122, 0]\u1d40", (3, -2, 0)),
    ("[3, -2, 0]^T", (3, -2, 0)), ("[3,-2,0]T", (3, -2, 0)), ("[3;-2;0]\u1d40", (3, -2, 0)),
    ("[1/2, 0.5, -3]", (Fraction(1, 2), Fraction(1, 2), -3)), ("[\u22121\u20442; 2; 3]", (Fraction(-1, 2), 2, 3)),
    ("", None), ("[]", None), ("1,2", None), ("[1;2]", None), ("1,2,3,4", None), ("1,,3", None), ("1,2;3", None),
    ("[1, 2, x]", None), ("[1;2;nan]", None), ("1 2,3,4", None), ("[1, 2, -1", (None)), ("3;-2;0;", None),
]


def python_reads(kind: str, text: str) -> list[Fraction] | None:
    try:
        if kind == "number":  # as the first entry of a column
            return [toy.parse_vector_text(f"{text};0;0").entries[0]]
        return list(toy.parse_vector_text(text).entries)
    except toy.ToyInputError:
        return None


@pytest.fixture(scope="module")
def javascript_reads() -> dict:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the notation test runs the page's scripts in it (Node 18 or newer)")
    cases = [["number", text] for text, _ in NUMBERS] + [["vector", text] for text, _ in VECTORS]
    completed = subprocess.run([node, str(HARNESS), str(ROOT)], input=json.dumps(cases), capture_output=True,
                               text=True, timeout=60, check=False)
    assert completed.returncode == 0, completed.stderr
    return {tuple(case): result for case, result in zip(cases, json.loads(completed.stdout))}


def as_fractions(values) -> list[Fraction] | None:
    return None if values is None else [Fraction(value) for value in values]


@pytest.mark.parametrize("kind, text, expected",
                         [("number", text, None if value is None else [Fraction(value)]) for text, value in NUMBERS]
                         + [("vector", text, None if values is None else [Fraction(v) for v in values])
                            for text, values in VECTORS])
def test_the_runner_the_explorer_and_the_answer_checker_read_alike(javascript_reads, kind, text, expected):
    read = javascript_reads[(kind, text)]
    assert python_reads(kind, text) == expected, "the runner"
    assert as_fractions(read["explorer"]) == expected, "the toy explorer"
    assert as_fractions(read["checker"]) == expected, "the answer checker"


def test_the_minus_signs_and_slashes_are_the_same_in_the_scripts():
    script = (ROOT / "assets" / "explorers" / "toy-trace.js").read_text(encoding="utf-8")
    for characters in (notation.MINUS_SIGNS, notation.SLASHES):
        listed = "".join(f"\\u{ord(character):04X}" for character in characters)
        assert f"/[{listed}]/g" in script
