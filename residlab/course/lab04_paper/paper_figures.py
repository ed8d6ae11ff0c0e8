"""The Lab 04 page's figure (matplotlib; package only, never bundled into a runner)."""

from __future__ import annotations

from residlab.course.figure_widths import both_widths
from residlab.course.lab04_paper.positional_encoding import sinusoidal_encoding


def plot_positional_encoding(positions: int, d_model: int):
    """Two heat maps of PE(pos, j) for pos = 0..positions-1: the sine dimensions j = 2i on the left (on a phone,
    above), the cosine dimensions j = 2i + 1 on the right (below), both against the pair index i. Returns the
    matplotlib Figure."""
    import matplotlib.pyplot as plt

    encoding = sinusoidal_encoding(positions, d_model)

    def draw(narrow: bool):
        figure, axes = plt.subplots(2 if narrow else 1, 1 if narrow else 2, figsize=(3.7, 5.6) if narrow else (7.5, 3.6),
                                    sharey=True, sharex=narrow, layout="constrained")
        for ax, columns, name in ((axes[0], encoding[:, 0::2], "sine: dimension 2i"), (axes[1], encoding[:, 1::2], "cosine: dimension 2i + 1")):
            image = ax.imshow(columns.tolist(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
            ax.set_title(name, fontsize=10)
        for ax in axes if narrow else axes[:1]:
            ax.set_ylabel("position pos")
        for ax in axes[-1:] if narrow else axes:
            ax.set_xlabel("pair index i")
        separator = "\n" if narrow else ", "
        figure.suptitle(f"Sinusoidal positional encoding{separator}d_model = {d_model}, positions 0 to {positions - 1}", fontsize=11)
        figure.colorbar(image, ax=axes, label="PE(pos, j)", fraction=0.05, location="bottom" if narrow else "right")
        return figure

    return both_widths(draw)
