"""Every inline `` `{python} EXPR` `` result marked with the expression that computed it, while Quarto renders.

Quarto evaluates a page's inline expressions through the Jupyter kernel's ``user_expressions`` (one request per
Markdown cell) and splices each result into the page's Markdown: a ``text/plain`` result escaped as Markdown text
(a quoted string unquoted and its punctuation backslash-escaped, anything else as it is), a ``text/markdown``
result as it is. ``install()`` wraps the kernel's ``user_expressions`` so that each result holding a digit comes back
as ``text/markdown``: the very text Quarto would have spliced, inside a pandoc span
``[TEXT]{.rl-number expr="EXPR"}``. The site's Lua filter ``assets/site/numbers.lua`` lists the numbers of each
span under the expression's own source (the number's stable id) and puts the span's text back in its place, so
the page reads and is marked up exactly as before.

Active only in an IPython kernel that Quarto started for this project (``QUARTO_PROJECT_ROOT`` set); the command
line, the tests and the runners never see it. Standard library only.
"""

from __future__ import annotations

import os
import re

MARK = "rl-number"
# Quarto's class is [\\`*_{}\[\]()>#+-.!], in which "+-." is the range + , - .
_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()>#+,\-.!])")


def quarto_text(plain: str) -> str:
    """The Markdown Quarto splices for a ``text/plain`` result (its ``asEscapedMarkdown``)."""
    if len(plain) >= 2 and plain[0] == plain[-1] and plain[0] in "'\"":
        return _PUNCTUATION.sub(r"\\\1", plain[1:-1].replace("\\", "\\\\"))
    return plain


def marked(expression: str, markdown: str) -> str:
    """``markdown`` in a span naming ``expression`` (a pandoc attribute value: backslash and quote escaped)."""
    attribute = expression.replace("\\", "\\\\").replace('"', '\\"')
    return f'[{markdown}]{{.{MARK} expr="{attribute}"}}'


def mark_result(expression: str, result: dict) -> dict:
    """One ``user_expressions`` result, marked when it is a one-line text holding a digit; else unchanged."""
    data = result.get("data") if result.get("status") == "ok" else None
    if not isinstance(data, dict) or "text/html" in data or "text/latex" in data:
        return result
    if "text/markdown" in data:
        text = data["text/markdown"]
    elif "text/plain" in data:
        text = quarto_text(data["text/plain"])
    else:
        return result
    if not isinstance(text, str) or "\n" in text or not re.search(r"\d", text):
        return result
    return {**result, "data": {"text/markdown": marked(expression, text)}}


def install(shell=None) -> bool:
    """Wrap the running kernel's ``user_expressions`` (once); True when it is wrapped."""
    if not os.environ.get("QUARTO_PROJECT_ROOT"):
        return False
    if shell is None:
        try:
            shell = get_ipython()  # type: ignore[name-defined]  # noqa: F821  (a builtin in an IPython kernel)
        except NameError:
            return False
    if getattr(shell.user_expressions, "residlab_marks", False):
        return True
    original = shell.user_expressions

    def user_expressions(expressions):
        results = original(expressions)
        return {key: mark_result(expressions[key], value) for key, value in results.items()}

    user_expressions.residlab_marks = True
    shell.user_expressions = user_expressions
    return True
