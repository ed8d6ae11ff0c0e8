"""The course's one pipe table, for page cells with ``output: asis``, and labels typeset as math (standard
library only)."""

from __future__ import annotations

import re

SUBSCRIPTED = re.compile(r"([A-Za-z])_(\w+)")


class MarkdownText(str):
    """A string that an inline `{python}` expression puts into the page as Markdown (Quarto reads the
    text/markdown this offers), so ``$...$`` in it is math; anywhere else it is the plain string."""

    def _repr_markdown_(self) -> str:
        return str(self)


def math_label(label: str) -> MarkdownText:
    """A boundary label such as ``H_6`` or ``U_0`` typeset as math (``$H_{6}$``), like the equations around it:
    for a table cell, an inline expression, or matplotlib's mathtext."""
    return MarkdownText("$" + SUBSCRIPTED.sub(r"\1_{\2}", label) + "$")


def markdown_table(header: list[str], rows: list[list[object]], align: str | None = None) -> str:
    """A pipe table for a page cell with ``output: asis``. ``align``: one of l/r/c per column (default: left)."""
    if any(len(row) != len(header) for row in rows):
        raise ValueError(f"every row needs {len(header)} cells")
    align = align or "l" * len(header)
    if len(align) != len(header) or set(align) - set("lrc"):
        raise ValueError(f"align must give one of l, r, c for each of the {len(header)} columns, got {align!r}")
    rules = {"l": ":---", "r": "---:", "c": ":---:"}
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rules[a] for a in align) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
