"""residlab.course.figure_widths: every course figure drawn for a wide column and for a phone's, its text raised to
the smallest size that reads at 11 CSS px, a drawing wider than its column refused, and during a Quarto render the
phone's drawing kept in the render cache under a name its wide drawing carries."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from residlab.course import figure_widths  # noqa: E402
from residlab.course.figure_widths import SMALLEST_TEXT_PT, FigureTooWide, both_widths  # noqa: E402


def _draw(narrow: bool, wide_inches: float = 7.0):
    figure, axes = plt.subplots(figsize=(3.7, 3.0) if narrow else (wide_inches, 3.4), layout="constrained")
    axes.plot([0, 1], [0, 1])
    axes.set_xticks([0, 1], ["a", "b"], fontsize=6)
    axes.set_xlabel("narrow" if narrow else "wide")
    return figure


def _smallest(figure) -> float:
    return min(text.get_fontsize() for text in figure.findobj(Text) if text.get_text())


def test_the_wide_drawing_is_returned_and_every_text_reads_at_the_smallest_size(monkeypatch):
    monkeypatch.delenv("QUARTO_PROJECT_ROOT", raising=False)
    drawn = []
    figure = both_widths(lambda narrow: drawn.append(_draw(narrow)) or drawn[-1])
    assert figure is drawn[0] and figure.axes[0].get_xlabel() == "wide"
    assert _smallest(drawn[0]) == _smallest(drawn[1]) == SMALLEST_TEXT_PT
    assert figure.number in plt.get_fignums() and drawn[1].number not in plt.get_fignums()  # only the wide is shown
    assert figure.get_gid() is None  # outside a render nothing is written
    plt.close("all")


def test_a_drawing_wider_than_its_column_is_refused():
    with pytest.raises(FigureTooWide, match="the wide drawing is 960 px wide, its column 750 px"):
        both_widths(lambda narrow: _draw(narrow, wide_inches=10))
    plt.close("all")


def test_in_a_render_the_phone_drawing_is_kept_under_the_name_the_wide_one_carries(tmp_path, monkeypatch):
    monkeypatch.setenv("QUARTO_PROJECT_ROOT", str(tmp_path))
    names = []
    for _ in range(2):  # the same drawing twice: the same file, the same name
        figure = both_widths(_draw)
        names.append(figure.get_gid())
        plt.close(figure)
    assert names[0] == names[1] and names[0].startswith(figure_widths.PHONE_ID_PREFIX)
    kept = list((tmp_path / ".residlab-render-cache" / figure_widths.PHONE_FIGURES).iterdir())
    assert [path.name for path in kept] == [names[0].removeprefix(figure_widths.PHONE_ID_PREFIX) + ".svg"]
    svg = kept[0].read_text(encoding="utf-8")
    assert 'width="266.4pt"' in svg and ">narrow</text>" in svg  # 3.7 inches, its text as SVG text
