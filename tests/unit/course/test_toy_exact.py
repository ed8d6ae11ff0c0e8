"""Lab 05 Parts 1-3: every number of the toy report against its closed form, compared exactly.

The toy computes in exact fractions, so each float it publishes has exactly one correct value: the nearest
float to the exact one (a norm's float: math.sqrt of its exact square, which is correctly rounded). These
tests compare with ``==``; the only tolerance (the cosine) says why it has one.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from residlab.course.lab05 import toy


def exact_float(exact) -> float:
    """The correctly rounded float of an exact JSON value: an int, "p/q", or "sqrt(a) + sqrt(b)" (the sum of
    the two update norms, whose float is the sum of two correctly rounded roots)."""
    if isinstance(exact, str) and exact.startswith("sqrt("):
        roots = [term.strip()[len("sqrt("):-1] for term in exact.split("+")]
        return sum(math.sqrt(Fraction(root)) for root in roots)
    return float(Fraction(exact))


def walk(node, path="report"):
    """Yield (path, dict) for every dict in a report that holds a "float": numbers, norms, vectors, arrays."""
    if isinstance(node, dict):
        if "float" in node:
            yield path, node
        for key, value in node.items():
            yield from walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{path}[{index}]")


@pytest.mark.parametrize(
    "x, second",
    [((1, 2, -1), (-2, 0, 3)), ((Fraction(1, 3), Fraction(-1, 2), Fraction(2, 7)), (Fraction(5, 3), 1, -1))],
)
def test_every_float_in_the_toy_report_is_its_exact_value_correctly_rounded(x, second):
    report = toy.build_report(toy.Vector(x), toy.Vector(second))
    seen = set()
    for path, item in walk(report):
        if "squared" in item:
            # A norm's float is sqrt of its exact square, correctly rounded (math.sqrt is correctly rounded).
            assert item["float"] == math.sqrt(Fraction(item["squared"])), path
        elif "shape" in item:  # a 3 x 1 vector (a list) or an n x 3 array (a list of rows)
            is_array = isinstance(item["exact"][0], list)
            rows, floats = (item["exact"], item["float"]) if is_array else ([item["exact"]], [item["float"]])
            assert floats == [[float(Fraction(v)) for v in row] for row in rows], path
        else:
            assert item["float"] == exact_float(item["exact"]), path
        seen.add(path)
    # The walk reached the numbers the page prints (so a change of the report's layout cannot empty it).
    assert {
        "report.baseline.final", "report.baseline.final.norm", "report.total_change.norm",
        "report.norm_comparison.sum_of_update_norms", "report.readouts.baseline", "report.positions.final",
        "report.interventions.parallel.final.norm",
        "report.predictions.larger_update_has_larger_readout_effect.readout_change_when_first_suppressed",
    } <= seen


def test_toy_document_numbers_in_closed_form():
    report = toy.build_report(toy.Vector.of(1, 2, -1), toy.Vector.of(-2, 0, 3))
    baseline = report["baseline"]
    # x = [1,2,-1], F = [-1,2,0], y = [0,4,-1], G = [4,-4,0], z = [4,0,-1]: squared norms 6, 5, 17, 32, 17.
    for name, squared in (("input", 6), ("first_update", 5), ("intermediate", 17), ("second_update", 32), ("final", 17)):
        assert baseline[name]["norm"]["squared"] == squared
        assert baseline[name]["norm"]["float"] == math.sqrt(squared)
    assert baseline["second_update"]["norm"]["simplified"] == "4*sqrt(2)"
    comparison = report["norm_comparison"]
    assert comparison["total_change_norm"]["exact"] == "sqrt(13)"  # z - x = [3, -2, 0]
    assert comparison["total_change_norm"]["float"] == math.sqrt(13)
    assert comparison["sum_of_update_norms"]["float"] == math.sqrt(5) + math.sqrt(32)
    # cos = -12 / (sqrt(5) sqrt(32)) = -3 / sqrt(10); two correctly rounded roots, a product and a quotient
    # put it within 4 ulp (< 1e-15 relative) of the closed form. Six-decimal rounding would be 1e-7 away.
    assert comparison["update_cosine"] == pytest.approx(-3 / math.sqrt(10), rel=1e-15, abs=0)
    assert report["readouts"]["baseline"] == {"exact": -1, "float": -1.0}
    assert report["readouts"]["first_suppressed"] == {"exact": 1, "float": 1.0}
    effects = report["predictions"]["larger_update_has_larger_readout_effect"]
    assert (effects["readout_change_when_first_suppressed"]["exact"], effects["readout_change_when_second_suppressed"]["exact"]) == (2, 0)
