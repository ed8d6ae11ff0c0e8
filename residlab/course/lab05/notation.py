"""How Lab 05's toy reads what a learner types: one grammar for a number and one for a vector, shared by the
runner (``toy.parse_vector_text``: ``--input`` and ``--second-position``), the toy explorer and the answer checker
(``assets/explorers/toy-trace.js`` holds the same two rules, and ``answer-checker.js`` reads through it;
``tests/unit/course/test_notation.py`` runs one list of typed inputs through the JavaScript and through this).

- A number: Python's ``Fraction`` grammar in ASCII digits: an integer, a decimal (``0.5``, ``.5``, ``5.``) with an
  optional exponent (``1e-3``), or a ratio of two integers (``-1/3``); digit groups may be split by single
  underscores (``1_000``). Its sign may be the minus sign the page prints (U+2212) or a dash a copy puts in its
  place (``MINUS_SIGNS``), its slash a fraction or division slash (``SLASHES``). NaN and infinity are not numbers.
- A vector: numbers separated by commas (a row: ``1,2,-1``), by semicolons (a column, as the page writes
  ``[3;-2;0]``) or by spaces, optionally inside ``[ ]`` or ``( )``, optionally followed by a transpose mark (``ᵀ``,
  ``^T``, ``T``, as the solutions print ``[3, -2, 0]ᵀ``). One kind of separator per vector.
"""

from __future__ import annotations

import re

# The minus sign U+2212 the page prints, and the dashes a keyboard or a copy may put in its place.
MINUS_SIGNS = "\u2212\u2012\u2013\ufe63\uff0d"
SLASHES = "\u2044\u2215\u00f7"  # the fraction slash, the division slash and the division sign
_PRINTED = str.maketrans(dict.fromkeys(MINUS_SIGNS, "-") | dict.fromkeys(SLASHES, "/"))
_DIGITS = "[0-9]+(?:_[0-9]+)*"
NUMBER_TEXT = re.compile(rf"[+-]?(?:{_DIGITS}/{_DIGITS}|(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?)")
_TRANSPOSED = re.compile(r"([\])])\s*(?:\^\s*)?(?:\u1d40|T|\{T\}|\\mathsf\{T\})\s*$")
_BRACKETS = {"[": "]", "(": ")"}


def ascii_minus(text: str) -> str:
    """The text with the page's minus signs and slashes as ASCII '-' and '/'."""
    return text.translate(_PRINTED)


def is_number_text(text: str) -> bool:
    """Whether ``text`` (already stripped) is a number in the grammar above."""
    return NUMBER_TEXT.fullmatch(ascii_minus(text)) is not None


def vector_pieces(text: str) -> list[str] | None:
    """The entries of a typed vector, each stripped, in order; None when it mixes separators."""
    inner = _TRANSPOSED.sub(r"\1", text.strip())
    if inner[:1] in _BRACKETS and inner.endswith(_BRACKETS[inner[:1]]):
        inner = inner[1:-1].strip()
    if ";" in inner and "," in inner:
        return None
    separator = ";" if ";" in inner else ("," if "," in inner else None)
    return [piece.strip() for piece in inner.split(separator)] if separator else inner.split()
