"""Figures and small derived statements for the Lesson 2.1 page (matplotlib; package only, never bundled)."""

from __future__ import annotations

from dataclasses import dataclass

from residlab.course.lesson.gradient_profile import GradientProfile

ARRANGEMENT_STYLES = {
    "pre-LN": {"color": "#3f7da0", "marker": "o"},
    "post-LN": {"color": "#c0504d", "marker": "s"},
}


@dataclass(frozen=True)
class ProfileSummary:
    """What Figure 5 shows, computed from the profile rather than asserted."""

    arrangement: str
    first: float  # median gradient norm of the first block (nearest the input)
    last: float  # median gradient norm of the last block (nearest the output)
    first_to_last: float  # first / last
    largest_depth: int  # 1-based depth with the largest median norm
    smallest_depth: int  # 1-based depth with the smallest median norm


def summarise_profile(profile: GradientProfile) -> dict[str, ProfileSummary]:
    summaries = {}
    for arrangement, values in profile.medians.items():
        summaries[arrangement] = ProfileSummary(
            arrangement=arrangement,
            first=values[0],
            last=values[-1],
            first_to_last=values[0] / values[-1],
            largest_depth=values.index(max(values)) + 1,
            smallest_depth=values.index(min(values)) + 1,
        )
    return summaries


def depths_where_first_exceeds(profile: GradientProfile, first: str = "pre-LN", second: str = "post-LN") -> int:
    """How many of the depths have a larger median gradient norm in ``first`` than in ``second``."""
    return sum(a > b for a, b in zip(profile.medians[first], profile.medians[second]))


def plot_gradient_profile(profile: GradientProfile, ax=None):
    """Figure 5: median per-block parameter-gradient norm against depth, one line per arrangement.

    Returns the matplotlib Figure. The y axis is logarithmic so equal vertical distances are equal ratios.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter

    if ax is None:
        figure, ax = plt.subplots(figsize=(7, 4))
    else:
        figure = ax.figure
    depths = list(range(1, profile.depth + 1))
    for arrangement, values in profile.medians.items():
        style = ARRANGEMENT_STYLES.get(arrangement, {})
        ax.plot(depths, values, label=arrangement, linewidth=1.8, markersize=4, **style)
    ax.set_yscale("log")
    # Plain decimals on both major and minor log ticks: the data span well under one decade.
    ax.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%.2f"))
    ax.set_xlabel("block depth (1 = nearest the input)")
    ax.set_ylabel("median mean parameter-gradient norm")
    ax.set_xticks(depths)
    ax.set_title(f"{profile.depth} blocks of width {profile.width}, median over {profile.seeds} seeds")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="normaliser placement", loc="center left")
    figure.tight_layout()
    return figure
