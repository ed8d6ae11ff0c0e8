"""Figures of the glossary, drawn by code so that the page and its test share one drawing.

``draw_four_positions(ax)`` draws the residual-stream entry's schematic: four token positions, each with
its own residual vector before and after one transformer block; causal attention mixing the positions it
permits; a position-wise MLP applied separately at each position; and the highlighted last-position state
handed to a readout. The drawing is analytic (a schematic of the computation), not values observed in a
run, and it deliberately omits normalisation and the residual-addition arrows.

Package only (matplotlib); never bundled into a runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FOUR_TOKENS = ("The", "capital", "is", "Paris")

# Vertical placement of each row of the diagram, bottom to top (data coordinates).
_ROW_TOKENS = 0.0
_ROW_BEFORE = 1.35
_ROW_ATTENTION = 3.8
_ROW_MLP = 5.0
_ROW_AFTER = 6.3
_COLUMN_SPACING = 2.0
_CELLS_PER_VECTOR = 5  # a residual vector is drawn as a short column of coordinates
_CELL = 0.22

_BEFORE_COLOUR = "#d9d9d9"
_AFTER_COLOUR = "#9ecae1"
_HIGHLIGHT_COLOUR = "#fd8d3c"
_ATTENTION_COLOUR = "#54278f"
_MLP_COLOUR = "#238b45"


def _column_x(position: int) -> float:
    return position * _COLUMN_SPACING


def _draw_vector(ax: "Axes", x: float, y_bottom: float, face: str, *, highlight: bool = False) -> None:
    """One residual vector h_{l,t}: a column of coordinate cells centred on x, starting at y_bottom."""
    from matplotlib.patches import Rectangle

    for cell in range(_CELLS_PER_VECTOR):
        ax.add_patch(
            Rectangle(
                (x - _CELL / 2, y_bottom + cell * _CELL),
                _CELL,
                _CELL,
                facecolor=face,
                edgecolor="#d94801" if highlight else "#525252",
                linewidth=2.2 if highlight else 0.8,
            )
        )


def _arrow(ax: "Axes", start: tuple[float, float], end: tuple[float, float], colour: str, **style) -> None:
    properties = dict(arrowstyle="-|>", color=colour, linewidth=1.2, shrinkA=2, shrinkB=2)
    properties.update(style)
    ax.annotate("", xy=end, xytext=start, arrowprops=properties)


def draw_four_positions(ax: "Axes", tokens: Sequence[str] = FOUR_TOKENS, narrow: bool = False) -> "Axes":
    """Draw the four-position residual-stream schematic on ``ax`` and return it.

    ``tokens`` are the token pieces shown under the columns (one column per position, causal order). ``narrow``:
    the phone's drawing (figure_widths), the columns alone with short row labels; the notes beside them are the
    caption's.
    """
    from matplotlib.patches import FancyBboxPatch

    tokens = tuple(tokens)
    if len(tokens) < 2:
        raise ValueError(f"the schematic needs at least two token positions to show mixing, got {len(tokens)}")
    if any(not isinstance(token, str) or not token for token in tokens):
        raise ValueError(f"every token label must be a non-empty string, got {tokens!r}")

    n = len(tokens)
    last = n - 1
    vector_height = _CELLS_PER_VECTOR * _CELL
    attention_y = _ROW_ATTENTION
    mlp_half_height = 0.3

    for position, token in enumerate(tokens):
        x = _column_x(position)
        # The tokenizer's output: one token per column.
        ax.text(x, _ROW_TOKENS, token, ha="center", va="center", fontsize=11,
                bbox=dict(boxstyle="round,pad=0.3", facecolor="white", edgecolor="#525252"))
        ax.text(x, _ROW_TOKENS - 0.55, f"t = {position}",
                ha="center", va="center", fontsize=8, color="#525252")
        _arrow(ax, (x, _ROW_TOKENS + 0.3), (x, _ROW_BEFORE - 0.05), "#525252")

        # h_{l,t}: this position's own vector entering the block.
        _draw_vector(ax, x, _ROW_BEFORE, _BEFORE_COLOUR)

        # Causal attention: position t may read every position s <= t, and no later one.
        for source in range(position + 1):
            _arrow(ax, (_column_x(source), _ROW_BEFORE + vector_height), (x, attention_y - 0.12), _ATTENTION_COLOUR,
                   alpha=0.85 if source == position else 0.55)
        ax.plot([x], [attention_y], marker="o", markersize=9, color=_ATTENTION_COLOUR)

        # The MLP: the same learned function, applied to this position alone.
        ax.add_patch(FancyBboxPatch((x - 0.45, _ROW_MLP - mlp_half_height), 0.9, 2 * mlp_half_height,
                                    boxstyle="round,pad=0.05", facecolor="#e5f5e0", edgecolor=_MLP_COLOUR))
        ax.text(x, _ROW_MLP, "MLP", ha="center", va="center", fontsize=10, color=_MLP_COLOUR)
        _arrow(ax, (x, attention_y + 0.12), (x, _ROW_MLP - mlp_half_height - 0.05), "#525252")
        _arrow(ax, (x, _ROW_MLP + mlp_half_height + 0.05), (x, _ROW_AFTER - 0.05), "#525252")

        # h_{l+1,t}: still one vector per position after the block; the last one is the analyst's pick.
        is_selected = position == last
        _draw_vector(ax, x, _ROW_AFTER, _HIGHLIGHT_COLOUR if is_selected else _AFTER_COLOUR, highlight=is_selected)

    right_edge = _column_x(last)
    if narrow:
        _narrow_labels(ax, n, right_edge, vector_height)
    else:
        ax.text(right_edge + 0.55, attention_y, "Attention (causal):\nreads permitted\npositions s \u2264 t",
                ha="left", va="center", fontsize=9, color=_ATTENTION_COLOUR)
        ax.text(right_edge + 0.55, _ROW_MLP, "MLP: same weights,\neach position alone",
                ha="left", va="center", fontsize=9, color=_MLP_COLOUR)

        # Row labels on the left say what each row holds.
        label_x = -0.75
        ax.text(label_x, _ROW_TOKENS, "tokens", ha="right", va="center", fontsize=10)
        ax.text(label_x, _ROW_BEFORE + vector_height / 2, "before the block\n$H_\\ell$ (rows $h_{\\ell,t}^\\top$)",
                ha="right", va="center", fontsize=10)
        ax.text(label_x, _ROW_AFTER + vector_height / 2, "after the block\n$H_{\\ell+1}$ (rows $h_{\\ell+1,t}^\\top$)",
                ha="right", va="center", fontsize=10)

        # The selected state, and only it, goes to the readout.
        readout_x = right_edge + 1.6
        readout_y = _ROW_AFTER + vector_height / 2
        _arrow(ax, (right_edge + _CELL / 2 + 0.05, readout_y), (readout_x - 0.05, readout_y), "#d94801", linewidth=2.0)
        ax.text(readout_x, readout_y, "readout\n(e.g. logit lens)\n\u2192 derived scores", ha="left", va="center",
                fontsize=10, bbox=dict(boxstyle="round,pad=0.35", facecolor="#fff5eb", edgecolor="#d94801"))
        ax.text(right_edge, _ROW_AFTER + vector_height + 0.3, "selected state $h_{\\ell+1,%d}$\n(index -1)" % last, ha="center",
                va="bottom", fontsize=9, color="#d94801")

        ax.set_xlim(-3.4, right_edge + 4.3)
        ax.set_ylim(_ROW_TOKENS - 0.9, _ROW_AFTER + vector_height + 1.2)
    ax.set_aspect("equal")
    ax.axis("off")  # a schematic: the rows are labelled in place of axes
    return ax


def _narrow_labels(ax: "Axes", n: int, right_edge: float, vector_height: float) -> None:
    """The phone's labels: each row named in a word on the left, the selected state and its readout above it."""
    for y, label in ((_ROW_TOKENS, "tokens"), (_ROW_BEFORE + vector_height / 2, "$H_\\ell$"), (_ROW_ATTENTION, "attention"),
                     (_ROW_MLP, "MLP"), (_ROW_AFTER + vector_height / 2, "$H_{\\ell+1}$")):
        ax.text(-0.9, y, label, ha="right", va="center", fontsize=10)
    top = _ROW_AFTER + vector_height
    _arrow(ax, (right_edge, top + 0.05), (right_edge, top + 0.75), "#d94801", linewidth=2.0)
    ax.text(right_edge, top + 0.85, "selected state $h_{\\ell+1,%d}$ \u2192 readout" % (n - 1), ha="right", va="bottom",
            fontsize=9, color="#d94801")
    ax.set_xlim(-2.9, right_edge + 0.6)
    ax.set_ylim(_ROW_TOKENS - 0.9, top + 1.6)


def plot_four_positions(tokens: Sequence[str] = FOUR_TOKENS) -> "Figure":
    """The page's schematic, drawn for a wide column and for a phone's (figure_widths); returns the wide Figure."""
    import matplotlib.pyplot as plt

    from residlab.course.ui.figure_widths import both_widths

    def draw(narrow: bool):
        figure, axes = plt.subplots(figsize=(3.7, 4.6) if narrow else (7.5, 4.7), layout="constrained")
        draw_four_positions(axes, tokens, narrow)
        return figure

    return both_widths(draw)


def four_position_figure(tokens: Sequence[str] = FOUR_TOKENS) -> "Figure":
    """A standalone matplotlib Figure (not registered with pyplot) holding the four-position schematic."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9.0, 5.6), layout="constrained")
    draw_four_positions(figure.add_subplot(), tokens)
    return figure
