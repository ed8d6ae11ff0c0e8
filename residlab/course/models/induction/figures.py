"""The induction model's figures: two heads' attention patterns, the logit-lens trajectory, the patching heatmap.

Each function draws from a report of ``induction_lab.measure`` (plain data) and returns the matplotlib figure.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np

from residlab.course.ui.figure_widths import both_widths


def _token_labels(tokens: list[int]) -> list[str]:
    return [f"{position}: {token}" for position, token in enumerate(tokens)]


def _column_heads(labels: list[str]) -> list[str]:
    """Labels set over a phone's narrow heatmap columns: a few words a line, turned upright."""
    return [textwrap.fill(label, 16) for label in labels]


def _transposed(ax, image_grid, column_labels: list[str], column_title: str, row_labels: list[str], row_title: str,
                **imshow):
    """A heatmap drawn on its side for a phone: ``image_grid``'s columns (positions, many) as rows, each labelled in
    one line on the left, and its rows (a few states or sites) as columns headed above, on two or three lines."""
    image = ax.imshow(np.asarray(image_grid).T, aspect="auto", **imshow)
    ax.set_yticks(range(len(row_labels)), row_labels)
    ax.set_ylabel(row_title)
    ax.set_xticks(range(len(column_labels)), _column_heads(column_labels), rotation=90)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel(column_title)
    return image


def plot_head_patterns(report: dict):
    """The attention weights of the previous-token head and the induction head on the example sequence (on a
    phone, one above the other)."""
    tokens = report["example"]["tokens"]
    labels = _token_labels(tokens)

    def draw(narrow: bool):
        figure, axes = plt.subplots(2 if narrow else 1, 1 if narrow else 2, figsize=(3.7, 8.4) if narrow else (7.5, 4.4),
                                    layout="constrained")
        for ax, kind in zip(axes, ("previous_token", "induction")):
            head = report["heads_found"][kind]
            image = ax.imshow(np.array(report["example"]["attention"][kind]), cmap="Blues", vmin=0, vmax=1)
            ax.set_title(f"highest {head['kind']} score:\nblock {head['block']}, head {head['head']} ({head['score']:.2f})",
                         fontsize=10)  # fmt: skip
            ax.set_xticks(range(len(tokens)), labels, rotation=90)
            ax.set_yticks(range(len(tokens)), labels)
            ax.set_xlabel("key (position: token)")
            ax.set_ylabel("query (position: token)")
        figure.colorbar(image, ax=axes, shrink=0.8, label="attention weight", location="bottom" if narrow else "right")
        return figure

    return both_widths(draw)


def plot_lens_trajectory(report: dict):
    """Probability of the right next token under the logit lens, per residual state and repeated position."""
    trajectory = report["lens"]["example"]
    tokens = report["example"]["tokens"]
    period = report["example"]["period"]
    states = list(trajectory)
    grid = np.array([trajectory[state]["p_right_by_position"] for state in states])
    positions = range(period, 2 * period - 1)

    def draw(narrow: bool):
        # On a phone, on its side: the positions as rows, the states as columns in depth order, left to right.
        figure, ax = plt.subplots(figsize=(3.7, 5.2) if narrow else (7.5, 3.4), layout="constrained")
        if narrow:
            image = _transposed(ax, grid, states, "residual state (in depth order)",
                                [f"{p}: {tokens[p]} → {tokens[p + 1]}" for p in positions],
                                "repeated position\n(position: token →\nthe right next token)",
                                cmap="Greens", vmin=0, vmax=1)  # fmt: skip
            figure.colorbar(image, ax=ax, label="lens probability of\nthe right next token", location="bottom")
            return figure
        image = ax.imshow(grid, cmap="Greens", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(positions)), [f"{p}: {tokens[p]}\n→ {tokens[p + 1]}" for p in positions])
        ax.set_yticks(range(len(states)), states)
        ax.set_xlabel("repeated position (position: token → the right next token)")
        figure.colorbar(image, ax=ax, label="lens probability of the right next token", location="right")
        return figure

    return both_widths(draw)


def plot_patching_heatmap(report: dict):
    """Share of the clean metric recovered by putting one clean activation into the corrupted run."""
    patching = report["patching"]
    experiment = patching["experiment"]
    grid = np.array(patching["recovery"], dtype=float)
    limit = max(1.0, float(np.nanmax(np.abs(grid))))
    labels = [f"{p}: {c}/{k}" if c != k else f"{p}: {c}" for p, (c, k)
              in enumerate(zip(experiment["clean"], experiment["corrupt"]))]  # fmt: skip

    def draw(narrow: bool):
        # On a phone, on its side: the positions as rows, the patched activations as columns in depth order.
        colours = {"cmap": "RdBu_r", "vmin": -limit, "vmax": limit}  # red positive, as Lab 07
        figure, ax = plt.subplots(figsize=(3.7, 6.6) if narrow else (7.5, 3.4), layout="constrained")
        if narrow:
            image = _transposed(ax, grid, patching["rows"], "patched activation (in depth order)", labels,
                                "position\n(position: clean token / corrupted token)", **colours)
            figure.colorbar(image, ax=ax, label="recovery R", location="bottom")
            return figure
        image = ax.imshow(grid, aspect="auto", **colours)
        ax.set_xticks(range(len(labels)), labels, rotation=90)
        ax.set_yticks(range(len(patching["rows"])), patching["rows"])
        ax.set_xlabel("position (position: clean token / corrupted token)")
        figure.colorbar(image, ax=ax, label="recovery R", location="right")
        return figure

    return both_widths(draw)
