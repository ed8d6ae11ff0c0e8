"""The Lab 04 page's figure (matplotlib; package only, never bundled into a runner)."""

from __future__ import annotations

from residlab.course.lab04.positional_encoding import sinusoidal_encoding


def plot_positional_encoding(positions: int, d_model: int):
    """Two heat maps of PE(pos, j) for pos = 0..positions-1: the sine dimensions j = 2i on the left, the cosine
    dimensions j = 2i + 1 on the right, both against the pair index i. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    encoding = sinusoidal_encoding(positions, d_model)
    figure, axes = plt.subplots(1, 2, figsize=(7.5, 3.6), sharey=True)
    for ax, columns, name in ((axes[0], encoding[:, 0::2], "sine: dimension 2i"), (axes[1], encoding[:, 1::2], "cosine: dimension 2i + 1")):
        image = ax.imshow(columns.tolist(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("pair index i")
    axes[0].set_ylabel("position pos")
    figure.suptitle(f"Sinusoidal positional encoding, d_model = {d_model}, positions 0 to {positions - 1}", fontsize=11)
    figure.colorbar(image, ax=axes, label="PE(pos, j)", fraction=0.05)
    return figure
