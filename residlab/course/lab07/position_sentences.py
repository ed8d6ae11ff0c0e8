"""Lab 07's reading of attention position by position (Part 6): where the matched-position design acts, which of two
previous-token heads whose whole-sequence scores tie attends more to the previous token, whether that order agrees
with the causal methods' pair by pair, and where along the sequence a head stops attending one position back. Each
word is chosen from the report's ``heads.name_scores.previous_token`` (``by_query``, ``at_changed``)."""

from __future__ import annotations

from residlab.course.lab07.chance import independent_range
from residlab.course.lab07.head_sentences import score_tie

HALF = 0.5  # a head "turns away" from the previous token where less than half its attention goes there


def _turns_away(by_query: list[float]) -> int | None:
    """The first query position from which the head gives the previous token less than HALF of its attention at every
    later position (``by_query[i]`` is query position i + 1), or None."""
    for index in range(len(by_query)):
        if all(value < HALF for value in by_query[index:]):
            return index + 1
    return None


def changed_positions_sentence(report: dict) -> str:
    """Block 0's two named previous-token heads whose scores tie, read at the query positions that read the
    matched-position design's changed tokens: their mean attention one position back there, in how many pairs each is
    the higher, and in how many that order agrees with per-head denoising's (which head's share is the larger); then
    where the lower-scoring head turns away from the previous token, which the whole-sequence score averages in. ""
    where the report lacks the numbers or no scores tie."""
    scores = report["heads"]["name_scores"].get("previous_token", {})
    at, by_query = scores.get("at_changed"), scores.get("by_query")
    named = [h for b, h in report["heads"]["named"].get("previous_token", []) if b == 0]
    tie = score_tie(report, "previous_token", 0, named)
    grids = report["distribution"]["designs"].get("matched_position", {}).get("per_pair", {}).get("heads", {}).get("denoising")
    if not (at and by_query and tie and grids):
        return ""
    first, second = tie  # first: the higher whole-sequence score
    values = at["pair_sequences"][0]
    pairs = len(values[first])
    second_higher = [values[second][p] > values[first][p] for p in range(pairs)]
    second_larger = [grids[p][0][second] > grids[p][0][first] for p in range(pairs)]
    agree = sum(a == b for a, b in zip(second_higher, second_larger))
    mean = {h: sum(values[h]) / pairs for h in tie}
    leader = second if sum(second_higher) * 2 > pairs else first
    queries = " and ".join(map(str, at["queries"]))
    low, high = independent_range(pairs, sum(second_higher), sum(second_larger))
    aligned = (f"more than independent orders with these counts would ({low} to {high}, a two-sided 95 % range), so "
               f"pair by pair too" if agree > high else
               f"within what independent orders with these counts give ({low} to {high}, a two-sided 95 % range), so "
               f"the two agree on which head leads overall, not pair by pair beyond chance")
    said = (f"Read where the matched-position design acts, at the query positions that read its changed tokens "
            f"({queries}), head {second} gives the previous token {mean[second]:.2f} of its attention on average and "
            f"head {first} {mean[first]:.2f}; head {second}'s is the higher in {sum(second_higher)} of the {pairs} "
            f"pairs, so there head {leader} leads, and pair by pair that order agrees with per-head denoising's (whose "
            f"share is the larger) in {agree} of the {pairs} pairs, {aligned}.")
    turn = _turns_away(by_query[0][second])
    if turn is not None:
        late = ", ".join(f"{value:.2f}" for value in by_query[0][second][turn - 1:])
        said += (f" The whole-sequence score averages every query position, and from position {turn} on head {second} "
                 f"gives the previous token less than half of its attention ({late}; Part 1 gives how much of it goes "
                 f"to the prompt's first positions from the readout), which pulls its score down.")
    return said
