"""The course's one pipe table, for page cells with ``output: asis`` (standard library only)."""

from __future__ import annotations


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
