"""Quarto post-render step: draw the site's social-preview image into the built site.

``_quarto.yml`` names ``assets/site/social-preview.png`` as the open-graph and twitter-card image. It is drawn
here, after every render, from the site's own numbers: the Lab 05 toy trace x -> y = x + F(x) -> z = y + G(y)
as ``residlab.course.lab05.toy`` computes it, beside the site's title and description. Nothing is committed; a
build without this step has no preview image, and tests/site/test_publish.py fails.

Quarto runs it with the project's Python (``residlab site render`` sets QUARTO_PYTHON) in the project root and
names the output folder in QUARTO_PROJECT_OUTPUT_DIR.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

IMAGE = Path("assets/site/social-preview.png")
SIZE_PX = (1200, 630)  # the size open-graph and twitter-card previews expect (1.91:1)
DPI = 100


def draw(path: Path, title: str, description: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    from residlab.course.lab05 import toy

    trace = toy.sequential_trace(toy.Vector(toy.DEFAULT_INPUT))
    columns = [("x", trace.input), ("y = x + F(x)", trace.intermediate), ("z = y + G(y)", trace.final)]
    figure = pyplot.figure(figsize=(SIZE_PX[0] / DPI, SIZE_PX[1] / DPI), dpi=DPI, facecolor="#ffffff")
    figure.text(0.06, 0.80, title, fontsize=54, fontweight="bold", color="#212529")
    figure.text(0.06, 0.70, "the transformer residual stream", fontsize=26, color="#0a58ca")
    figure.text(0.06, 0.12, description, fontsize=15, color="#495057", wrap=True)
    axes = figure.add_axes((0.06, 0.24, 0.88, 0.40))
    axes.set_axis_off()
    axes.set_xlim(0, 3)
    axes.set_ylim(-0.35, 3.2)
    for column, (label, vector) in enumerate(columns):
        left = column + 0.3
        axes.add_patch(matplotlib.patches.FancyBboxPatch((left, 0), 0.42, 2.9, boxstyle="round,pad=0.02",
                                                         facecolor="#f1f6ff", edgecolor="#0d6efd", linewidth=2))
        for row, value in enumerate(vector.entries):
            axes.text(left + 0.21, 2.45 - row * 0.95, str(toy.exact_json(value)),
                      ha="center", va="center", fontsize=30, color="#212529")
        axes.text(left + 0.21, -0.22, label, ha="center", va="center", fontsize=17, color="#212529")
        if column < len(columns) - 1:
            update = "+ F(x)" if column == 0 else "+ G(y)"
            axes.annotate("", xy=(left + 0.95, 1.45), xytext=(left + 0.5, 1.45),
                          arrowprops={"arrowstyle": "-|>", "color": "#6c757d", "linewidth": 2.5})
            axes.text(left + 0.72, 1.75, update, ha="center", fontsize=18, color="#495057")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI, facecolor=figure.get_facecolor(), metadata={"Software": None})
    pyplot.close(figure)


def main() -> int:
    import yaml

    root = Path.cwd()
    website = yaml.safe_load((root / "_quarto.yml").read_text(encoding="utf-8")).get("website", {})
    output = Path(os.environ.get("QUARTO_PROJECT_OUTPUT_DIR") or "_site")
    draw((output if output.is_absolute() else root / output) / IMAGE, website.get("title", ""), website.get("description", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
