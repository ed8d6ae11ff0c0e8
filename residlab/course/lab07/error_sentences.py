"""Lab 07's sentences about attribution patching's error (Part 5), each chosen from a report's numbers: the model's
nonlinearities counted from its modules, the worst cell's error split exactly into the final LayerNorm's part and
the upstream part in both orders and their Shapley average, which cells have nothing but the final LayerNorm after
them (their upstream part 0 by construction), the first-order term's checks, and the per-head error over the pairs.
The helpers and the other parts' sentences are ``sentences``'s."""

from __future__ import annotations

from residlab.course.lab07.cells import by_construction, distinct_cells, hybrid, same_intervention
from residlab.course.lab07.sentences import MOSTLY, NOT_READ, _interval, _percent, _value, most_caveat, observed


def nothing_between(design: dict, kind: str, block: int, arrangement: str) -> bool:
    """Whether no nonlinearity but the final normaliser lies between this site and the final state: the last block's
    MLP write and output, and in a parallel block its attention write too (in a sequential block the MLP reads the
    attention write, so the last attention write has the last MLP ahead of it). There the attribution error's
    upstream part is 0 by construction (asserted)."""
    last = ("attn_write", "mlp_write", "resid_post") if arrangement == "parallel" else ("mlp_write", "resid_post")
    return kind in last and block == len(design["activation"]["denoising"]["resid_pre"]) - 1


def attribution_cells(report: dict, name: str) -> list[dict]:
    """Every distinct cell with its exact and approximate recovery, its error and the error's two parts."""
    design = report["designs"][name]
    cells = []
    for site, position, kind, block in distinct_cells(design, patching=False):
        error = design["error"][kind][block][position]
        if error is None:
            continue
        fixed = by_construction(design, kind, block, position)
        bare = nothing_between(design, kind, block, report["block_arrangement"])
        bends = design["bends"][kind][block][position]
        if bare and max(abs(bends[part]) for part in ("upstream", "upstream_final_first", "upstream_shapley")) > 1e-5:
            raise AssertionError(f"{name}: {site} at {position}: an upstream part of the attribution error is not 0, though "
                                 "nothing but the final LayerNorm lies between it and the final state")  # fmt: skip
        cells.append({"site": site, "position": position, "error": error, "nothing_between": bare,
                      "identity": bool(fixed or hybrid(design, kind, block, position)),
                      "second_name": same_intervention(design, kind, block, position),
                      "exact": design["activation"]["denoising"][kind][block][position],
                      "approximate": design["attribution"][kind][block][position],
                      **design["bends"][kind][block][position]})  # fmt: skip
    return cells


def upstream_kinds(report: dict) -> str:
    """The kinds of nonlinearity in the upstream part (the blocks'), counted from the model's modules."""
    kinds = {}
    for place in report["nonlinearities"]:
        if place["part"] == "upstream":
            kinds[place["what"]] = kinds.get(place["what"], 0) + 1
    return "the blocks' " + ", ".join(f"{what} ({count})" for what, count in kinds.items())


def nonlinearities_sentence(report: dict) -> str:
    """How many places the model bends, counted from its modules, by kind, and which part of the split each is in."""
    places = report["nonlinearities"]
    kinds = {}
    for place in places:
        kinds[place["what"]] = kinds.get(place["what"], 0) + 1
    upstream = sum(place["part"] == "upstream" for place in places)
    return (f"Counted from the model's modules, it is not linear in {len(places)} places (the table), each a place the "
            f"first-order estimate can fail: " + ", ".join(f"{count} {what}" for what, count in kinds.items())
            + f". {between(upstream)}, {len(places) - upstream} after it.")


def between(upstream: int) -> str:
    """How many bends lie between a site and the final state: all of them only from the earliest site (a later
    site has fewer ahead of it), so "up to" that many."""
    if upstream == 0:
        return "None of them lies between a site and the final state"
    verb = "lies" if upstream == 1 else "lie"
    return f"Up to {upstream} of them, depending on the site, {verb} between a site and the final state"


def nonlinearity_rows(report: dict) -> list[list[str]]:
    return [[str(index + 1), f"`{place['module']}`", place["what"],
             "final normaliser part" if place["part"] == "final" else "upstream part"]
            for index, place in enumerate(report["nonlinearities"])]  # fmt: skip


def first_order_sentence(report: dict, name: str) -> str:
    """The first-order term checked: forward-mode J da against a central finite difference, and the estimate two ways."""
    check = report["designs"][name]["first_order_check"]
    return (f"The first-order term is checked at every cell: J da from a forward-mode pass agrees with the central "
            f"finite difference (step {check['step']:g} of da, on a float64 copy of the model) within {check['state']:.1e} "
            f"of the largest J da, the estimate ∇f · J da with the same difference of M within {check['metric']:.1e} of "
            f"the largest estimate, and the page's estimate (the backward pass) with the forward pass's within "
            f"{check['two_ways']:.1e} of it; the page is not built if any exceeds {check['tolerance']:.0e}.")


def _leans(final: float, upstream: float) -> str:
    """Which part is the larger in size ("even" when they agree to the two decimals the page shows)."""
    if round(abs(final), 2) == round(abs(upstream), 2):
        return "even"
    return "final" if abs(final) > abs(upstream) else "upstream"


def attribution_sentence(report: dict, name: str) -> str:
    """The worst cell, its error split exactly into the final normaliser's part and the upstream part in both orders
    (``attribution.split_both_orders``) and their Shapley average, which part is the larger by that average there
    and over every large cell, whether the two orders agree, and the angle the final LayerNorm sees."""
    design = report["designs"][name]
    if not design["readable"]:
        return NOT_READ
    every = attribution_cells(report, name)
    cells = [cell for cell in every if not cell["identity"]]  # identities and hybrids left out
    worst = max(cells, key=lambda cell: abs(cell["error"]))
    apart = "the cells fixed by construction" + (" and the hybrid-prompt cells" if design.get("hybrids") else "")
    first = (f"On the worked example ({apart} left out) the largest error is at {worst['site']}, position {worst['position']}: attribution "
             f"says {observed(worst['approximate'])}, the exact patch {observed(worst['exact'])} (error {_value(worst['error'])}). "
             f"Taking the upstream part first, the final LayerNorm's part is {_value(worst['final_norm'])} and the upstream "
             f"part {_value(worst['upstream'])}; taking the final LayerNorm first, {_value(worst['final_norm_final_first'])} "
             f"and {_value(worst['upstream_final_first'])}; their average (the Shapley split, which depends on no order) "
             f"{_value(worst['final_norm_shapley'])} and {_value(worst['upstream_shapley'])}.")  # fmt: skip
    orders = {_leans(worst["final_norm"], worst["upstream"]), _leans(worst["final_norm_final_first"], worst["upstream_final_first"])}
    lean = _leans(worst["final_norm_shapley"], worst["upstream_shapley"])
    where = {"final": "the larger part is the final LayerNorm's", "even": "the two parts are equal to two decimals",
             "upstream": "the larger part is upstream, in the blocks between the site and the final state"}[lean]
    why = (f"By the Shapley split {where}" + (", and both orders agree." if len(orders) == 1 else
           ", but the two orders disagree on which part is the larger: the two parts interact, and a split in one order "
           "alone would blame whichever part it takes second."))  # fmt: skip
    large = [cell for cell in cells if abs(cell["error"]) >= 0.1]
    bare = [cell for cell in large if cell["nothing_between"]]
    bent = [cell for cell in large if not cell["nothing_between"]]
    dominated = sum(_leans(cell["final_norm_shapley"], cell["upstream_shapley"]) == "final" for cell in bent)
    agree = sum(_leans(c["final_norm"], c["upstream"]) == _leans(c["final_norm_final_first"], c["upstream_final_first"]) for c in bent)
    one = len(bare) == 1
    forced = (f"{len(bare)} {'lies' if one else 'lie'} where nothing bends between the site and the final state (the "
              f"final LayerNorm comes after it), so {'its' if one else 'their'} upstream part is 0 by construction "
              f"and both orders agree there; of the other {len(bent)}, " if bare else "")  # fmt: skip
    named_twice = (" (one exact intervention under two names counted as two cells here: each name has its own "
                   "attribution estimate)" if any(cell["second_name"] for cell in large) else "")
    tally = (f"Of the {len(large)} cells whose error is at least 0.10 in size{named_twice}, {forced}the final LayerNorm's Shapley part "
             f"is the larger in {dominated}, and the two orders agree on the larger part in {agree}." if large else
             "No cell's error reaches 0.10 in size.")  # fmt: skip
    angle = (f"The clean and corrupt final states at the readout, centred as the final LayerNorm centres them, are "
             f"{design['final_angle']:.0f} degrees apart.")  # fmt: skip
    apart_cells = [cell for cell in every if cell["identity"]]
    left_out = ""
    if apart_cells:  # their exact share is fixed or a hybrid prompt's, but their attribution error is observed too
        worst_apart = max(apart_cells, key=lambda cell: abs(cell["error"]))
        reaching = sum(abs(cell["error"]) >= 0.1 for cell in apart_cells)
        left_out = (f" The cells left out above have observed attribution errors too (only their exact share is fixed or a "
                    f"hybrid prompt's): {reaching} of them {'reaches' if reaching == 1 else 'reach'} 0.10 in size, the largest {_value(worst_apart['error'])} at "
                    f"{worst_apart['site']}, position {worst_apart['position']}, its final LayerNorm's part "
                    f"{_value(worst_apart['final_norm_shapley'])} by the Shapley split.")  # fmt: skip
    return f"{first} {why} {tally}{left_out} {angle}"


def head_error_rows(report: dict, name: str) -> list[list[str]]:
    """Per head: the per-head attribution error over the pairs, its Shapley split, and the final LayerNorm's part in
    each order (means [intervals])."""
    table = report["distribution"]["designs"][name]["head_error"]
    return [[f"{block}.{head}", _interval(cell["total"]), _interval(cell["final_norm_shapley"]), _interval(cell["upstream_shapley"]),
             _value(cell["final_norm"]["mean"]), _value(cell["final_norm_final_first"]["mean"])]
            for block, row in enumerate(table) for head, cell in enumerate(row)]  # fmt: skip


EVEN_MARGIN = 0.05  # a head's two error parts are "about even" when their mean sizes differ by less


def head_error_sentence(report: dict, name: str) -> str:
    """Which head's attribution error is largest over the pairs, and which part carries it by the Shapley split."""
    table = report["distribution"]["designs"][name]["head_error"]
    block, head = max(((b, h) for b, row in enumerate(table) for h in range(len(row))),
                      key=lambda bh: abs(table[bh[0]][bh[1]]["total"]["mean"]))  # fmt: skip
    cell = table[block][head]
    final, upstream = cell["final_norm_shapley"], cell["upstream_shapley"]
    lean = _leans(final["mean"], upstream["mean"])
    if abs(abs(final["mean"]) - abs(upstream["mean"])) < EVEN_MARGIN:
        lean = "even"
    larger = {"final": "on average its larger part is the final LayerNorm", "upstream": "on average its larger part is upstream",
              "even": "on average its error is split about evenly"}[lean]
    upstream_larger = cell.get("upstream_larger_fraction")  # the parts compared pair by pair, not by their intervals
    pairs = report["distribution"]["pairs"]
    larger_fraction = None if upstream_larger is None else max(upstream_larger, 1 - upstream_larger)
    mostly = ("" if larger_fraction is None or larger_fraction < MOSTLY else
              f" (in most pairs the {'upstream part' if upstream_larger >= MOSTLY else 'final LayerNorm'}: "
              f"{most_caveat(larger_fraction, pairs)})")
    pairwise = ("" if upstream_larger is None else
                f"; pair by pair the upstream part is the larger in size in {_percent(upstream_larger)} of pairs, the "
                f"final LayerNorm's in {_percent(1 - upstream_larger)}{mostly}")  # fmt: skip
    total = cell["total"]["mean"]
    first = {order: cell[part]["mean"] for order, part in (("upstream first", "final_norm"),
                                                           ("final LayerNorm first", "final_norm_final_first"))}  # fmt: skip
    order_leans = {_leans(part, total - part) for part in first.values()}
    orders = (f"; taken in one order or the other, the final LayerNorm's part is {_value(first['upstream first'])} "
              f"(upstream first) and {_value(first['final LayerNorm first'])} (final LayerNorm first)"
              + (", the two orders agreeing on the larger part" if len(order_leans) == 1 and "even" not in order_leans
                 else ", so which part is larger depends on the order: the Shapley split is their average"))  # fmt: skip
    return (f"Over the pairs the largest mean error is head {block}.{head}'s, {_interval(cell['total'])}; by the Shapley "
            f"split {larger} (final LayerNorm {_value(final['mean'])}, upstream {_value(upstream['mean'])}){pairwise}{orders}.")
