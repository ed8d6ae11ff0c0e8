"""Figures and small derived statements for the Lesson 2.1 page (matplotlib; package only, never bundled)."""

from __future__ import annotations

from dataclasses import dataclass

from residlab.course.figure_widths import both_widths
from residlab.course.lesson.gradient_profile import GradientProfile

ARRANGEMENT_STYLES = {
    "pre-LN": {"color": "#3f7da0", "marker": "o"},
    "post-LN": {"color": "#c0504d", "marker": "s"},
    "pre-LN + final LN": {"color": "#5b9e4d", "marker": "^", "linestyle": "--"},
}
CONTROL = "pre-LN + final LN"  # the matched control: the pre-LN stack with a final LayerNorm before the head


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


def _lean(summary: ProfileSummary) -> str:
    verb = "falls" if summary.first > summary.last else "rises"
    return f"{verb} from {summary.first:.3f} at the first block to {summary.last:.3f} at the last"


def _depth_count(count: int, depth: int) -> str:
    return "none of the" if count == 0 else "every one of the" if count == depth else f"{count} of the"


def _factor_range(low: float, high: float) -> str:
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"between {low:.2f} and {high:.2f}"


def profile_sentences(profile: GradientProfile) -> dict[str, str]:
    """The page's reading of the three stacks, every clause chosen from the profile: ``levels`` (what the
    document's comparison of levels shows, and what the control does to it) and ``shapes`` (how each profile
    leans from the first block to the last)."""
    depth = profile.depth
    summary = summarise_profile(profile)
    pre, control = profile.medians["pre-LN"], profile.medians[CONTROL]
    pre_larger = depths_where_first_exceeds(profile, "pre-LN", "post-LN")
    control_larger = depths_where_first_exceeds(profile, CONTROL, "post-LN")
    factors = [a / b for a, b in zip(pre, control)]
    if min(factors) > 1:
        effect = (
            f"lowers the gradient at every depth, by a factor {_factor_range(min(factors), max(factors))}: the "
            "unnormalised output raised every pre-LN gradient behind it"
        )
    elif max(factors) < 1:
        effect = f"raises the gradient at every depth, by a factor {_factor_range(1 / max(factors), 1 / min(factors))}"
    else:
        effect = f"lowers the gradient at {sum(f > 1 for f in factors)} of the {depth} depths and raises it elsewhere"
    if control_larger == pre_larger:
        verdict = "so here the final normaliser leaves the comparison of levels as it was."
    else:
        verdict = (
            "so which stack receives the larger gradients turns on whether the output is normalised: the levels of "
            "the first two curves are not a property of pre-LN."
        )
    levels = (
        f"In this run the pre-LN median gradient norm is larger than the post-LN one at "
        f"{_depth_count(pre_larger, depth)} {depth} depths. But the pre-LN stack of the lesson's source document "
        f"has no final normaliser: its output is the raw sum of every write, which the head reads unscaled. The "
        f"matched control, the same pre-LN stack with the same weights and a final LayerNorm before the head, "
        f"{effect}. The control's gradient is larger than the post-LN one at {_depth_count(control_larger, depth)} "
        f"{depth} depths, {verdict}"
    )
    same_lean = (summary["pre-LN"].first > summary["pre-LN"].last) == (summary[CONTROL].first > summary[CONTROL].last)
    shapes = (
        f"The shapes are what the figure shows. The pre-LN norm {_lean(summary['pre-LN'])} (the first block's is "
        f"{summary['pre-LN'].first_to_last:.2f} times the last's); with the final LayerNorm it "
        f"{_lean(summary[CONTROL])} ({summary[CONTROL].first_to_last:.2f} times)"
        + (", the same lean" if same_lean else ", the opposite lean")
        + f". The post-LN norm {_lean(summary['post-LN'])} (the last block's is "
        f"{1 / summary['post-LN'].first_to_last:.2f} times the first's) and peaks at depth "
        f"{summary['post-LN'].largest_depth}."
    )
    return {"levels": levels, "shapes": shapes}


def plot_gradient_profile(profile: GradientProfile, ax=None):
    """Figure 5: median per-block parameter-gradient norm against depth, one line per arrangement.

    Returns the matplotlib Figure (without ``ax``, drawn for a wide column and for a phone's: figure_widths). The y
    axis is logarithmic so equal vertical distances are equal ratios.
    """
    import matplotlib.pyplot as plt

    if ax is not None:
        _draw_gradient_profile(profile, ax, narrow=False)
        return ax.figure

    def draw(narrow: bool):
        figure, axes = plt.subplots(figsize=(3.7, 4.2) if narrow else (7, 4), layout="constrained")
        _draw_gradient_profile(profile, axes, narrow)
        return figure

    return both_widths(draw)


def _draw_gradient_profile(profile: GradientProfile, ax, narrow: bool) -> None:
    from matplotlib.ticker import FormatStrFormatter

    depths = list(range(1, profile.depth + 1))
    for arrangement, values in profile.medians.items():
        style = ARRANGEMENT_STYLES.get(arrangement, {})
        ax.plot(depths, values, label=arrangement, linewidth=1.8, markersize=4, **style)
    ax.set_yscale("log")
    # Plain decimals on both major and minor log ticks: the data span about one decade.
    ax.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%.2f"))
    ax.set_xlabel("block depth (1 = nearest the input)")
    ax.set_ylabel("median mean parameter-gradient norm")
    ax.set_xticks(depths[::2] if narrow and len(depths) > 10 else depths)  # on a phone, every other depth
    ax.set_title(f"{profile.depth} blocks of width {profile.width},{chr(10) if narrow else ' '}median over {profile.seeds} seeds")
    ax.grid(True, which="both", alpha=0.3)
    if narrow:  # below the plot: the lines use the whole width
        ax.figure.legend(title="stack", loc="outside lower center", ncol=2)
    else:
        ax.legend(title="stack", loc="center left")


def _occurrences(count: int) -> str:
    return "never occurs" if count == 0 else "occurs once" if count == 1 else f"occurs {count:,} times"


def training_exposure(clean_count: int, corrupt_count: int, drawn: int, possible: int) -> str:
    """The page's sentences on whether the audited sequences were in training, chosen from the replayed counts.

    ``drawn``: sequences in all training batches; ``possible``: distinct sequences the task can produce."""
    if clean_count == corrupt_count == 0:
        lead, use = "Both sequences are held out, by chance:", "on sequences it never saw in training"
    elif clean_count and corrupt_count:
        lead, use = "Neither sequence is held out:", "on sequences it was trained on"
    else:
        held = "clean" if clean_count == 0 else "corrupt"
        lead, use = f"Only the {held} sequence is held out, by chance:", "on one sequence it was trained on"
    return (
        f"{lead} the training batches, replayed from the seed, hold {drawn:,} sequences, in which the clean "
        f"sequence {_occurrences(clean_count)} and the corrupt one {_occurrences(corrupt_count)}. With "
        f"{possible:,} possible sequences, each is expected about {drawn / possible:.1f} times. What follows "
        f"examines how the trained model computes its answer {use}, not whether it generalises."
    )


def retained_verdict(retained_fraction: float) -> str:
    """What the retained share (``ComponentAudit.retained_fraction``, as printed to 2 decimals) says later writes
    did to an earlier write's direction."""
    shown = round(retained_fraction, 2)
    if shown > 1:
        return "adds to its direction rather than cancelling any of it"
    if shown == 1:
        return "leaves its direction as it was"
    if shown > 0:
        return f"cancels part of it, and {shown:.2f} of its length along that direction is left"
    return "cancels all of it along that direction, or more"


def attribution_contrast(term: float, removal: float) -> str:
    """How a write's DLA term (scale frozen) and its removal effect compare, as printed to 2 decimals."""
    if round(term, 2) == round(removal, 2):
        return "the same to two decimals"
    if term * removal < 0:
        return "of opposite signs"
    return "of the same sign but different sizes"
