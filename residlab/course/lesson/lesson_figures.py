"""Figures and small derived statements for the Lesson 2.1 page (matplotlib; package only, never bundled)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from residlab.course.ui.chance import against_chance
from residlab.course.ui.figure_widths import both_widths
from residlab.course.models.gradient_profile import GradientProfile

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
        f"{_depth_count(pre_larger, depth)} {depth} depths. But the pre-LN stack as first built "
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


GRADIENT_TICKS = 5  # labelled ticks on the log axis, the lowest and highest median among them


def _draw_gradient_profile(profile: GradientProfile, ax, narrow: bool) -> None:
    import numpy as np
    from matplotlib.ticker import FormatStrFormatter, NullLocator

    depths = list(range(1, profile.depth + 1))
    for arrangement, values in profile.medians.items():
        style = ARRANGEMENT_STYLES.get(arrangement, {})
        ax.plot(depths, values, label=arrangement, linewidth=1.8, markersize=4, **style)
    ax.set_yscale("log")
    # Ticks at the data's lowest and highest medians and evenly between them in ratio, so the axis is labelled at
    # both of its ends whatever the run; plain decimals, since the data span about one decade.
    every = [value for values in profile.medians.values() for value in values]
    low, high = min(every), max(every)
    ax.set_yticks(np.geomspace(low, high, GRADIENT_TICKS) if high > low else [low])
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FormatStrFormatter("%.3g"))
    ax.set_ylim(low / 1.08, high * 1.08)
    ax.set_xlabel("block depth (1 = nearest the input)")
    ax.set_ylabel("median mean parameter-gradient norm")
    ax.set_xticks(depths[::2] if narrow and len(depths) > 10 else depths)  # on a phone, every other depth
    ax.set_title(f"{profile.depth} blocks of width {profile.width},{chr(10) if narrow else ' '}median over {profile.seeds} seeds")
    ax.grid(True, which="both", alpha=0.3)
    # Outside the axes, so no point of any line is hidden: below the plot on a phone, to its right otherwise.
    if narrow:
        ax.figure.legend(title="stack", loc="outside lower center", ncol=2)
    else:
        ax.figure.legend(title="stack", loc="outside right upper")


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


def _readability(p: float, chance: float) -> str:
    """A readout probability in words, against chance (a uniform guess over the vocabulary)."""
    if p >= 0.9:
        return "nearly certain"
    if p > 0.5:
        return "readable as the top token"
    if p >= 2 * chance:
        return "above chance but not the top token for sure"
    if p >= chance / 2:
        return "no more readable than chance"
    return "less readable than a uniform guess would make it (the readout puts its weight on other tokens)"


def readout_sentence(p_embedding: float, p_attention: float, p_mlp: float, vocab: int) -> str:
    """The logit-lens trajectory of the target, each probability worded against chance, 1/vocab."""
    chance = 1 / vocab
    return (f"The target is {_readability(p_embedding, chance)} from the embedding (p = {p_embedding:.3f}), "
            f"{_readability(p_attention, chance)} after the attention write ({p_attention:.3f}) and "
            f"{_readability(p_mlp, chance)} after the MLP ({p_mlp:.3f}), against the {chance:.3f} of a uniform "
            f"guess among the {vocab} tokens.")  # fmt: skip


def accuracy_sentence(accuracy: float, vocab: int, batch: int) -> str:
    """The last training batch's accuracy against chance, 1/vocab, with two standard errors over the batch."""
    chance = 1 / vocab
    where, margin = against_chance(accuracy, chance, batch)
    if where == "below":
        reading = (f"below the chance level of {chance:.3f} (a uniform guess among the {vocab} tokens) by more than "
                   f"two standard errors over the batch of {batch} ({margin:.3f}): the model systematically "
                   f"prefers a wrong token")  # fmt: skip
    elif where == "at":
        reading = f"at the chance level of {chance:.3f} (a uniform guess among the {vocab} tokens): it has not learned the task"
    else:
        reading = f"above the chance level of {chance:.3f} (a uniform guess among the {vocab} tokens)"
    return f"By the last step the batch accuracy is {accuracy:.3f}, {reading}."


LOSS_MARGIN = 0.05  # a loss within this of ln V (in nats) reads as the uniform guess's


def loss_sentence(first_step: int, first_loss: float, last_loss: float, vocab: int) -> str:
    """The logged losses against a uniform guess among the vocabulary, whose cross-entropy is ln(vocab)."""
    uniform = math.log(vocab)
    if first_loss > uniform + LOSS_MARGIN:
        start = (f"above it: the random initial weights already make confident predictions, most of them wrong, "
                 f"and a confident wrong guess costs more than a uniform one")  # fmt: skip
    elif first_loss < uniform - LOSS_MARGIN:
        start = "already below it"
    else:
        start = "at about that of the uniform guess"
    end = (f"below ln {vocab}" if last_loss < uniform - LOSS_MARGIN else
           f"not below ln {vocab}: the model predicts no better than a uniform guess")  # fmt: skip
    return (f"A uniform guess among the {vocab} tokens has a loss of ln {vocab} = {uniform:.3f}. The loss at step "
            f"{first_step}, {first_loss:.3f}, is {start}. At the last step the loss is {last_loss:.4f}, {end}.")


READABLE_GAP = 0.1  # a clean-corrupt gap in logit difference below this (odds within about 10%) is not read


def recovery_control_sentence(mlp_recovery: float | None, gap: float) -> str:
    """The lesson's control, the MLP write patched alone, read only when the clean-corrupt gap is readable."""
    if mlp_recovery is None or abs(gap) < READABLE_GAP:
        return (f"The control cannot be read: the clean and corrupt runs differ by {gap:.2f} in logit difference, "
                f"below the {READABLE_GAP} this page reads, so no recovery means anything here.")  # fmt: skip
    if mlp_recovery < 0.5:
        return (f"The control is the MLP: its clean write recovers {mlp_recovery:.2f} of the gap of {gap:.2f}, a "
                f"partial recovery, so not every clean write restores the behaviour. That the attention write "
                f"carries the first token's identity follows from the architecture (in one block, attention is the "
                f"only route from position 0); the control shows that the MLP write, computed from it, is not enough "
                f"on its own.")  # fmt: skip
    return (f"The control does not separate them: the MLP's clean write alone recovers {mlp_recovery:.2f} of the "
            f"gap of {gap:.2f} too, so this patch cannot tell the attention write's content from any clean write.")


def _removal(effect: float) -> str:
    """What removing a write does to the logit difference, from its effect (what it adds), as printed to 2 decimals."""
    shown = round(effect, 2)
    if shown == 0:
        return "leaves the logit difference unchanged to two decimals"
    return f"{'lowers' if shown > 0 else 'raises'} the logit difference by {abs(shown):.2f}"


def direct_effect_reading(projection: float, direct: float) -> str:
    """How a write's raw projection d.w and its exact direct effect (both what the write adds) compare, and what
    removing the write from the final state does, as printed to 2 decimals."""
    p, d = round(projection, 2), round(direct, 2)
    sense = ("in the same sense as the projection" if p * d > 0
             else "against the sense of the projection" if p * d < 0 else "")  # fmt: skip
    effect = f"its exact direct effect is {d:.2f}: removing it from the final state, keeping every other write, {_removal(direct)}"
    return f"{effect}{', ' + sense if sense else ''}"


def total_effect_reading(total: float, direct: float) -> str:
    """How an earlier write's total effect (zeroed, the later write recomputed) compares with its direct effect,
    as printed to 2 decimals; both are what the write adds. The part the direct effect leaves out runs through
    the later write, which reads the state this one built."""
    t, d = round(total, 2), round(direct, 2)
    opening = f"zeroing it and letting the MLP recompute {_removal(total)}: its total effect is {t:.2f}"
    if t == d:
        return f"{opening}, its direct effect to two decimals, so nothing it does runs through the MLP"
    if t * d < 0:
        return (f"{opening}, of the opposite sign to its direct effect ({d:.2f}): the rest, {total - direct:.2f}, is indirect, "
                f"through what the MLP and the final normaliser's scale recompute from the state this write built")
    through = "most" if abs(t - d) > abs(d) else "part"
    if abs(t) > abs(d):
        return f"{opening}, more than its direct effect ({d:.2f}): {through} of its leverage is exercised through the MLP"
    return f"{opening}, less than its direct effect ({d:.2f}): the recomputed MLP undoes part of it"
