"""The Lab 04 page's figure and tables (matplotlib; package only, never bundled into a runner)."""

from __future__ import annotations

from residlab.paper_lab import sinusoidal_encoding


def plot_positional_encoding(positions: int, d_model: int):
    """Heat map of PE(pos, j) for pos = 0..positions-1 and every dimension j. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    encoding = sinusoidal_encoding(positions, d_model)
    figure, ax = plt.subplots(figsize=(7, 3.6))
    image = ax.imshow(
        encoding.tolist(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest", origin="upper"
    )
    ax.set_xlabel("dimension j (even j: sine, odd j: cosine; the wavelength grows with j)")
    ax.set_ylabel("position pos")
    ax.set_title(f"Sinusoidal positional encoding, d_model = {d_model}, positions 0 to {positions - 1}")
    figure.colorbar(image, ax=ax, label="PE(pos, j)")
    figure.tight_layout()
    return figure
