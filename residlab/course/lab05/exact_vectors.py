"""Exact arithmetic for the Lab 05 toy residual stream, with the standard library alone.

Every entry is held as a ``fractions.Fraction``, so integer, decimal ("0.5") and fraction ("1/3") input give
exact results, and a norm keeps its exact form (``sqrt(17)``) next to its float. A float entry is taken at its
exact binary value. ``Vector`` is frozen (a tuple inside a frozen dataclass), so nothing can change a vector
once it is made: every operation builds a new one.

Bad input fails loudly with ``ToyInputError`` (a ``ValueError``): a non-numeric entry (a string, a bool, None)
or a non-finite one (NaN, inf) names its index and value; adding or subtracting vectors of different lengths
names both lengths and never truncates. ``residlab.course.lab05.toy`` computes the trace and its report with these.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

# Larger entries could make a squared norm overflow a float (1e150 squared, times 3, is below 1.8e308). What a
# learner types is held to a tighter limit (``residlab.course.lab05.toy.INPUT_LIMIT``), so that every value the trace
# computes from it stays within this one.
ENTRY_LIMIT = 10**150
# Square factors are pulled out of a norm by trial division up to here, then a square remainder as a whole:
# exact for every factor below 10^4 and bounded in time whatever the input.
SQUARE_FACTOR_SEARCH_LIMIT = 10**4


class ToyInputError(ValueError):
    """Input the toy refuses: a non-numeric or non-finite entry, mismatched lengths, a wrong shape."""


def _exact_entry(index: int, value: object) -> Fraction:
    """Convert one entry to an exact Fraction, or refuse it naming its index and value."""
    # bool is an int subclass; True as a coordinate is almost certainly a mistake.
    if isinstance(value, bool) or not isinstance(value, (int, Fraction, float, Decimal)):
        raise ToyInputError(
            f"entry {index} is {value!r} ({type(value).__name__}); entries must be real numbers "
            "(int, float, Fraction or Decimal)"
        )
    if isinstance(value, (float, Decimal)) and not math.isfinite(value):
        raise ToyInputError(f"entry {index} is {value!r}; entries must be finite (no NaN or infinity)")
    exact = Fraction(value)
    if max(abs(exact.numerator), exact.denominator) > ENTRY_LIMIT:
        raise ToyInputError(
            f"entry {index} has a numerator or denominator above 1e150; at most 1e150 is accepted, so that every "
            "float in the report stays finite"
        )
    return exact


@dataclass(frozen=True)
class Vector:
    """An immutable column vector of exact entries; shape (len(entries), 1)."""

    entries: tuple[Fraction, ...]

    def __post_init__(self) -> None:
        if isinstance(self.entries, (str, bytes)) or not isinstance(self.entries, Iterable):
            raise ToyInputError(f"a vector needs a sequence of numbers, got {self.entries!r}")
        exact = tuple(_exact_entry(index, value) for index, value in enumerate(self.entries))
        object.__setattr__(self, "entries", exact)  # the frozen dataclass's one sanctioned write

    @classmethod
    def of(cls, *values: object) -> Vector:
        return cls(tuple(values))

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.entries), 1)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: int) -> Fraction:
        return self.entries[index]

    def copy(self) -> Vector:
        """A new, equal Vector object (each intervention starts from one)."""
        return Vector(self.entries)

    def _check_same_length(self, other: Vector, operation: str) -> None:
        if not isinstance(other, Vector):
            raise ToyInputError(f"cannot {operation} a Vector and {type(other).__name__}")
        if len(self) != len(other):
            raise ToyInputError(
                f"cannot {operation} vectors of lengths {len(self)} and {len(other)}: "
                "lengths must match (nothing is truncated)"
            )

    def __add__(self, other: Vector) -> Vector:
        self._check_same_length(other, "add")
        return Vector(tuple(a + b for a, b in zip(self.entries, other.entries)))

    def __sub__(self, other: Vector) -> Vector:
        self._check_same_length(other, "subtract")
        return Vector(tuple(a - b for a, b in zip(self.entries, other.entries)))

    def dot(self, other: Vector) -> Fraction:
        self._check_same_length(other, "take the dot product of")
        return sum((a * b for a, b in zip(self.entries, other.entries)), Fraction(0))

    def norm(self) -> Norm:
        return Norm(self.dot(self))

    def floats(self) -> list[float]:
        return [float(value) for value in self.entries]

    def latex(self) -> str:
        """Row form with a transpose, as the lab writes columns: [0,4,-1]^T."""
        return "[" + ",".join(latex_number(value) for value in self.entries) + r"]^\mathsf{T}"

    def __str__(self) -> str:
        return "[" + ", ".join(exact_text(value) for value in self.entries) + "]"



def exact_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def exact_json(value: Fraction) -> int | str:
    return value.numerator if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def latex_number(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return rf"{sign}\tfrac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def _split_square(n: int) -> tuple[int, int]:
    """Write a non-negative integer n as k*k*m, pulling out every square factor below
    SQUARE_FACTOR_SEARCH_LIMIT and a remainder that is itself a perfect square; return (k, m).
    m is square-free unless n has a repeated prime factor of 10^4 or more beside other factors."""
    outside, inside, factor = 1, n, 2
    while factor * factor <= inside and factor < SQUARE_FACTOR_SEARCH_LIMIT:
        while inside % (factor * factor) == 0:
            inside //= factor * factor
            outside *= factor
        factor += 1
    root = math.isqrt(inside)
    if inside > 1 and root * root == inside:
        return outside * root, 1
    return outside, inside


@dataclass(frozen=True)
class Norm:
    """A Euclidean norm kept exactly as the square root of an exact squared norm."""

    squared: Fraction

    def _root_parts(self) -> tuple[Fraction, int]:
        """sqrt(squared) = coefficient * sqrt(radicand) with an integer, square-free radicand."""
        # sqrt(p/q) = sqrt(p*q) / q, then pull square factors out of p*q.
        p, q = self.squared.numerator, self.squared.denominator
        outside, inside = _split_square(p * q)
        return Fraction(outside, q), inside

    @property
    def is_rational(self) -> bool:
        return self._root_parts()[1] in (0, 1)

    @property
    def exact(self) -> str:
        """The form the lab writes: sqrt(32), not 4*sqrt(2); a perfect square shows its root."""
        if self.is_rational:
            return self.simplified
        return f"sqrt({exact_text(self.squared)})"

    @property
    def simplified(self) -> str:
        coefficient, radicand = self._root_parts()
        if radicand == 0:
            return "0"
        if radicand == 1:
            return exact_text(coefficient)
        if coefficient == 1:
            return f"sqrt({radicand})"
        root = f"sqrt({radicand})" if coefficient.numerator == 1 else f"{coefficient.numerator}*sqrt({radicand})"
        return root if coefficient.denominator == 1 else f"{root}/{coefficient.denominator}"

    @property
    def value(self) -> float:
        return math.sqrt(self.squared)

    def latex(self) -> str:
        coefficient, radicand = self._root_parts()
        if radicand == 0:
            return "0"
        if radicand == 1:
            return latex_number(coefficient)
        return rf"\sqrt{{{latex_number(self.squared)}}}"

    def to_json(self) -> dict:
        return {"squared": exact_json(self.squared), "exact": self.exact, "simplified": self.simplified, "float": self.value}

