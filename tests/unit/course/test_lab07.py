"""Lab 07's room: the designs' invariants, the patching identities any model satisfies, the null pairs, the rule
that names heads (and can fail), the means over pairs (a planted one-pair verdict is caught), the attribution
error's exact split, the sentences chosen from their numbers (the not-read branch included) and the page's
build-time checks."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from residlab.course.lab07 import (
    cells, chance, compare_sentences, designs, distribution, error_sentences, goal_sentences, head_sentences, lab, naming, predictions, sentences, verdicts,
)
from residlab.course.models.induction import measures
from residlab.course.models.induction import sentences as induction_sentences


def test_each_design_changes_only_what_it_names():
    copied = designs.make_design("copied_token")
    matched = designs.make_design("matched_position")
    assert copied.clean == matched.clean and copied.target == matched.target
    assert [p for p in range(len(copied.clean)) if copied.clean[p] != copied.corrupt[p]] == [copied.period - 1]
    assert copied.rival not in copied.clean  # a token the clean prompt never shows
    assert sorted(matched.corrupt) == sorted(matched.clean)  # the same tokens, moved
    assert matched.rival in matched.clean and matched.changed == (matched.period - 3, matched.period - 2)


def test_an_unknown_design_is_refused_by_name():
    with pytest.raises(ValueError, match="no design 'other'; the designs: copied_token, matched_position"):
        designs.make_design("other")


def test_a_sequence_without_one_earlier_occurrence_is_refused():
    broken = torch.tensor([1, 2, 3, 4, 1, 2, 9, 4])  # the readout's token (2) ... followed by 9, not 3
    with pytest.raises(ValueError, match="earlier occurrence"):
        designs.make_design("matched_position", broken)


@pytest.fixture(scope="module")
def random_pair():
    from residlab.course.lab07.patching import prepare
    from residlab.course.models.induction.recipe import new_model

    return prepare(new_model(2).eval(), designs.make_design("copied_token"))


def test_restoring_every_differing_input_restores_the_clean_run(random_pair):
    """The copied-token prompts differ at one position, so its block-0 input patched (either way) is the other run:
    a share of exactly 1 in both directions, whatever the weights."""
    from residlab.course.lab07.patching import activation_grids

    position = random_pair.design.changed[0]
    for direction in ("denoising", "noising"):
        share = activation_grids(random_pair, direction)["resid_pre"][0][position]
        assert share == pytest.approx(1.0, abs=1e-4)


def test_heads_add_up_to_the_attention_write(random_pair):
    from residlab.course.lab07.patching import head_delta

    for block in range(random_pair.depth):
        total = sum(head_delta(random_pair, block, head, random_pair.clean, random_pair.corrupt) for head in range(4))
        name = f"blocks.{block}.attn_write"
        assert torch.allclose(total, random_pair.clean[name] - random_pair.corrupt[name], atol=1e-5)


def test_path_patching_of_a_zero_difference_moves_nothing(random_pair):
    from residlab.course.lab07 import patching

    same = copy.copy(random_pair)
    same.clean = random_pair.corrupt  # no difference to send
    shares = patching.path_patching(same)
    assert all(abs(value) < 1e-4 for value in shares.values())


def test_a_share_is_undefined_when_the_gap_is_zero(random_pair):
    from residlab.course.lab07.patching import share

    same = copy.copy(random_pair)
    same.clean_metric = same.corrupt_metric
    assert share(same, "denoising", 1.0) is None and share(same, "noising", 1.0) is None


@pytest.mark.parametrize(("row", "named", "bound", "outcome"), [
    ([0.1, 0.8, 0.2, 0.0], [1], 0.01, "found"),
    ([0.1, 0.80, 0.78, 0.0], [1, 2], 0.01, "found"),
    ([0.9, 0.1, 0.2, 0.0], [1], 0.01, "unnamed"),
    ([0.005, 0.001, 0.0, 0.0], [1], 0.01, "nothing"),  # no head clears the null pairs' reach
])  # fmt: skip
def test_head_outcomes(row, named, bound, outcome):
    assert distribution.head_outcome(row, named, bound)[1] == outcome
    # the same top head, named another kind by the rule: said as such, not as an unnamed head
    assert distribution.head_outcome([0.9, 0.1, 0.2, 0.0], [1], 0.01, (0,))[1] == "other_kind"


def test_a_verdicts_chance_counts_only_the_heads_the_design_can_move():
    pair = {"heads": {"denoising": [[0.6, 0.0, 0.01, 0.3]]}}
    named, fixed = {"current_token": [[0, 0], [0, 3]]}, {"previous_token": [[0, 1], [0, 2]]}
    (entry,) = distribution.head_table([pair, pair], "denoising", [0.05], named, fixed)["kinds"].values()
    assert entry["chance"] == 1.0 and entry["movable"] == 2 and entry["fixed"] == [1, 2]
    (free,) = distribution.head_table([pair, pair], "denoising", [0.05], named)["kinds"].values()
    assert free["chance"] == 0.5 and free["movable"] == 4  # nothing fixed: all four heads compete
    # the model's own null for which head tops the block: the null pairs' top head, the bar aside
    null = {"heads": {"denoising": [[0.001, 0.0, 0.0, 0.002]]}}  # head 3 on top of a null pair, below any bar
    (entry,) = distribution.head_table([pair, pair], "denoising", [0.05], named, null_pairs=[null, pair])["kinds"].values()
    assert entry["top_named"] == 1.0 and entry["null_top_named"] == 1.0  # heads 0 and 3 named: both nulls' tops are named
    assert entry["top_named_discordant"] == [0, 0] and entry["top_named_p"] == 1.0  # the pairs agree: nothing to test
    (entry,) = distribution.head_table([pair, pair], "denoising", [0.05], {"previous_token": [[0, 1], [0, 2]]},
                                       null_pairs=[null, null])["kinds"].values()  # fmt: skip
    assert entry["top_named"] == 0.0 and entry["null_top_named"] == 0.0
    # paired: held-out pair i against null pair i; head 1 named, on top of the held-out pairs and of one null pair
    held = {"heads": {"denoising": [[0.0, 0.6, 0.0, 0.1]]}}
    (entry,) = distribution.head_table([held, held, held], "denoising", [0.05], {"previous_token": [[0, 1]]},
                                       null_pairs=[null, held, null])["kinds"].values()  # fmt: skip
    assert entry["top_named_discordant"] == [2, 0] and entry["top_named_p"] == 0.5  # 2 of 2 discordant: 2 * 1/4


def test_the_paired_test_is_the_exact_two_sided_mcnemar():
    assert predictions.paired_p(0, 0) == 1.0
    assert predictions.paired_p(13, 0) == 2 * 0.5**13  # every discordant pair one way
    assert predictions.paired_p(15, 2) == predictions.paired_p(2, 15) == 2 * sum(math.comb(17, k) for k in range(15, 18)) / 2**17
    assert predictions.paired_p(3, 3) == 1.0  # an even split: capped at 1


def test_a_tested_verdict_is_read_against_the_models_own_null_for_which_head_tops():
    entry = {"top_named": 0.95, "null_top_named": 0.59, "top_named_discordant": [24, 1], "top_named_p": 1.5e-06}
    said = compare_sentences.null_top_sentence(entry, 64, "swap")
    assert "on the null pairs a named head is the top head in 59 % (95 % Wilson [" in said and "the named heads top the block more often" in said
    assert "only the held-out pair has a named head on top in 24 and only the null pair in 1 (two-sided exact McNemar test, p = 1.5e-06, of whether the two rates differ)" in said
    assert "under the null's (a swap at positions the mechanism does not read at the readout)" in said  # the null the design has
    # the paired test decides, not the two rates: 95 % against 90 % told apart when every discordant pair goes one way
    assert "no difference the paired test tells apart" in compare_sentences.null_top_sentence({**entry, "null_top_named": 0.9, "top_named_discordant": [5, 2], "top_named_p": 0.45}, 64, "swap")
    assert "more often under the design's change" in compare_sentences.null_top_sentence({**entry, "null_top_named": 0.9, "top_named_discordant": [8, 0], "top_named_p": 0.0078}, 64, "swap")
    assert "the other way: a named head is the null pairs' top head" in compare_sentences.null_top_sentence(
        {"top_named": 0.42, "null_top_named": 0.8, "top_named_discordant": [2, 26], "top_named_p": 1.6e-06}, 64, "swap")
    assert compare_sentences.null_top_sentence({"top_named": 0.5}, 64, "swap") == ""  # a report without it


def test_a_head_that_does_not_clear_the_margin_is_not_named():
    margin = naming.NAME_MARGIN
    scores = {"previous_token": {"scores": [[0.25 + margin, 0.25 + margin - 0.01, 0.9, 0.1]], "controls": [[0.25, 0.25, 0.5, 0.0]]},
              "induction": {"scores": [[0.3, 0.3, 0.3, 0.3]], "controls": [[0.1, 0.1, 0.1, 0.1]]}}  # fmt: skip
    named = naming.named_heads(scores)
    assert named["previous_token"] == [[0, 0]]  # head 1 falls short by 0.01, head 2 by 0.1: not named
    assert named["induction"] == []  # a rule that can fail: no head named at all


@pytest.fixture(scope="module")
def small_distribution():
    from residlab.course.models.induction.recipe import new_model

    model = new_model(2).eval()
    named = {"previous_token": [[0, 1]], "current_token": [[0, 0]], "induction": [[1, 2], [1, 3]]}
    return model, named, distribution.measure_distribution(model, named, pairs=4)


def test_the_means_over_pairs_are_recomputed_from_the_pairs(small_distribution):
    _, _, measured = small_distribution
    distribution.check_distribution(measured, least=4)
    with pytest.raises(AssertionError, match="4 pairs, fewer than 64"):
        distribution.check_distribution(measured)
    per_pair = measured["designs"]["matched_position"]["per_pair"]["heads"]["denoising"]
    mean = sum(grid[0][2] for grid in per_pair) / len(per_pair)
    assert measured["designs"]["matched_position"]["heads"]["denoising"]["heads"][0][2]["mean"] == pytest.approx(mean, abs=1e-6)
    # each head against its own null pairs is recomputed from the null pairs' shares, kept pair by pair
    cell = measured["designs"]["matched_position"]["heads"]["denoising"]["heads"][0][2]
    null_shares = [grid[0][2] for grid in measured["designs"]["matched_position"]["per_pair"]["null_heads"]["denoising"]]
    assert cell["null_paired"]["higher"] == sum(v > n for v, n in zip((grid[0][2] for grid in per_pair), null_shares))
    cell["null_paired"] = {**cell["null_paired"], "higher": cell["null_paired"]["higher"] + 1}
    with pytest.raises(AssertionError, match="block 0 head 2: null_paired"):
        distribution.check_distribution(measured, least=4)
    cell["null_paired"] = {**cell["null_paired"], "higher": cell["null_paired"]["higher"] - 1}


def test_a_planted_one_pair_verdict_is_caught(small_distribution, monkeypatch):
    """The mean replaced by the first pair's share: the report's own check must refuse it."""
    model, named, _ = small_distribution
    honest = distribution.summarise
    monkeypatch.setattr(distribution, "summarise", lambda values: {**honest(values), "mean": values[0]})
    planted = distribution.measure_distribution(model, named, pairs=4)
    with pytest.raises(AssertionError, match="mean"):
        distribution.check_distribution(planted, least=4)


def test_the_null_pair_changes_only_tokens_the_readout_does_not_read(small_distribution):
    model, _, _ = small_distribution
    design = designs.make_design("copied_token")
    null = distribution.null_design(design)
    first = distribution.NULL_POSITION  # past the first positions, where block 0's heads sink attention
    assert null.changed == (first, first + design.period) and (null.target, null.rival) == (design.target, design.rival)
    assert [p for p in range(len(null.clean)) if null.clean[p] != null.corrupt[p]] == [first, first + design.period]
    assert null.corrupt[first] == null.corrupt[first + design.period] and null.corrupt[first] not in design.clean
    matched = designs.make_design("matched_position")
    swap = distribution.null_design(matched)  # a swap, as the matched-position design makes, away from its positions
    assert swap.changed == (first, first + 1) and sorted(swap.corrupt) == sorted(matched.clean) != list(swap.corrupt)
    assert swap.corrupt[design.period:] == matched.clean[design.period:]
    assert not set(swap.changed) & {*matched.changed, matched.readout, matched.readout - 1, matched.period - 1}
    # how much the end of the prompt reads the null's positions, beside the first positions it leaves alone
    reach = distribution.null_attention(model, [design, design])
    assert set(reach) == {"changed", "first"} and all(0 <= v <= 1 for row in reach["changed"] + reach["first"] for v in row)
    own, scaled = distribution.pair_shares(model, null), distribution.pair_shares(model, null, gap=2.0)
    for own_row, scaled_row in zip(own["heads"]["denoising"], scaled["heads"]["denoising"]):
        for a, b in zip(own_row, scaled_row):
            assert b == pytest.approx(a * own["gap"] / 2.0, abs=1e-5)  # read as a share of the design's own gap


def test_the_attribution_error_splits_exactly(random_pair):
    from residlab.course.lab07.attribution import attribution_grids, bend_measures, corrupt_gradients
    from residlab.course.lab07.patching import activation_grids

    gradients = corrupt_gradients(random_pair)
    exact, approximate = activation_grids(random_pair, "denoising"), attribution_grids(random_pair, gradients)
    for kind in ("resid_pre", "attn_write", "mlp_write", "resid_post"):
        for block in range(random_pair.depth):
            for position, cell in enumerate(bend_measures(random_pair, kind, block, gradients)):
                error = approximate[kind][block][position] - exact[kind][block][position]
                assert cell["upstream"] + cell["final_norm"] == pytest.approx(error, abs=1e-5)
                for suffix in ("_final_first", "_shapley"):  # the other order and the average sum to it too
                    assert cell["upstream" + suffix] + cell["final_norm" + suffix] == pytest.approx(error, abs=1e-5)
    # the readout's final state patched: dx is the whole change (J is the identity), so in both orders the final
    # LayerNorm's part is the whole error
    last = bend_measures(random_pair, "resid_post", random_pair.depth - 1, gradients)[-1]
    assert abs(last["upstream"]) < 1e-5 and abs(last["upstream_final_first"]) < 1e-5


def test_the_two_orders_and_their_average():
    from residlab.course.lab07.attribution import split_both_orders

    # estimate 1.0, grad f . dx 0.5, f(x + J da) - f(x) 0.8, exact 0.2, gap 2: parts differ by order, each sums
    split = split_both_orders(1.0, 0.5, 0.8, 0.2, 2.0)
    assert (split["upstream"], split["final_norm"]) == pytest.approx((0.25, 0.15))
    assert (split["upstream_final_first"], split["final_norm_final_first"]) == pytest.approx((0.3, 0.1))
    assert (split["upstream_shapley"], split["final_norm_shapley"]) == pytest.approx((0.275, 0.125))


def test_the_first_order_term_agrees_with_its_finite_difference(random_pair, monkeypatch):
    from residlab.course.lab07 import attribution

    gradients = attribution.corrupt_gradients(random_pair)
    check = attribution.finite_difference_check(random_pair, gradients)
    assert max(check["state"], check["metric"], check["two_ways"]) <= attribution.FD_TOLERANCE
    honest = attribution.linearised_changes
    monkeypatch.setattr(attribution, "linearised_changes", lambda *args: honest(*args) * 1.01)  # J da 1 % off
    with pytest.raises(AssertionError, match="first-order term's state check"):
        attribution.finite_difference_check(random_pair, gradients)


def test_each_heads_error_is_split_and_is_attribution_minus_exact(random_pair):
    from residlab.course.lab07.attribution import corrupt_gradients, head_attribution, head_error_split
    from residlab.course.lab07.patching import head_grid

    gradients = corrupt_gradients(random_pair)
    exact, approximate = head_grid(random_pair, "denoising"), head_attribution(random_pair, gradients)
    for block, row in enumerate(head_error_split(random_pair, gradients)):
        for head, cell in enumerate(row):
            assert cell["total"] == pytest.approx(approximate[block][head] - exact[block][head], abs=1e-5)
            assert cell["upstream_final_first"] + cell["final_norm_final_first"] == pytest.approx(cell["total"], abs=1e-5)


def _summary(mean: float, spread: float = 0.1) -> dict:
    return {"mean": mean, "low": mean - spread, "high": mean + spread, "pairs": 64}


def _small_report(gap: float, floor: float) -> dict:
    """A report of the shape ``run_lab`` writes, one design, numbers chosen by the test."""
    grid = [[0.0, 0.0, 0.9], [0.0, 0.0, 0.2]]
    entry = [[0.0, 1.0, 0.0], [0.0, 0.0, 0.9]]  # block 0's input: 1 at the one changed position, 0 where they agree
    # block 1's input is block 0's output, which is block 0's attention write where the prompts agree (one
    # intervention); the readout reads block 1's output
    output = [[0.0, 0.0, 0.9], [0.0, 0.0, 1.0]]
    kinds = ("resid_pre", "attn_write", "mlp_write", "resid_post")
    quiet = {"attention_moved": 0.0, "scale_change": 0.0, **{f"{part}{suffix}": 0.0 for part in ("upstream", "final_norm")
                                                              for suffix in ("", "_final_first", "_shapley")}}  # fmt: skip
    bent = {"attention_moved": 0.4, "scale_change": 0.1, "upstream": -0.1, "final_norm": -0.4, "upstream_final_first": -0.2,
            "final_norm_final_first": -0.3, "upstream_shapley": -0.15, "final_norm_shapley": -0.35}  # fmt: skip
    design = {"clean": [1, 2, 1], "corrupt": [1, 3, 1], "target": 2, "rival": 4, "changed": [1], "readout": 2,
              "clean_metric": gap / 2, "corrupt_metric": -gap / 2, "gap": gap, "readable": abs(gap) > lab.READ_FACTOR * floor,
              "activation": {d: {"resid_pre": entry, "attn_write": grid, "mlp_write": grid, "resid_post": output}
                             for d in ("denoising", "noising")},
              "attribution": {k: grid for k in kinds},
              "error": {k: [[0.0, 0.0, -0.5], [0.0, 0.0, 0.0]] for k in kinds},
              "bends": {k: [[quiet, quiet, dict(bent)], [quiet] * 3] for k in kinds},
              "hybrids": [], "first_order_check": {"step": 0.01, "state": 1e-5, "metric": 1e-5, "two_ways": 1e-7, "tolerance": 1e-3},
              "final_angle": 80.0,
              "path": {"queries": 0.0, "keys": 0.7, "values": 0.0, "everything": 0.9}}  # fmt: skip
    design["identities"] = cells.identities(design, 2)
    over_path = {"queries": _summary(0.0), "keys": _summary(0.7), "values": _summary(0.0), "everything": _summary(0.9)}
    heads = {"denoising": {"heads": [[_summary(0.1), _summary(0.2), _summary(0.6), _summary(0.0)],
                                     [_summary(0.3)] * 4], "kinds": {}}}  # fmt: skip
    measured = {"gap": _summary(gap), "path": over_path, "heads": heads, "not_testable": [],
                "null": {"gap": _summary(0.0, floor), "largest_gap": floor, "cells": {"denoising": floor, "noising": floor},
                         "path": floor, "heads": {"denoising": [floor, floor]},
                         "heads_largest": {"denoising": [{"largest": 0.02, "pairs": 64}] * 2}}}  # fmt: skip
    name_scores = {"previous_token": {"scores": [[0.1, 0.9, 0.8, 0.0], [0.1] * 4], "controls": [[0.0] * 4, [0.1] * 4]}}
    return {"designs": {"copied_token": design}, "read_factor": lab.READ_FACTOR, "block_arrangement": "sequential",
            "untrained": {"seeds": [0, 1, 2], "gaps": {"copied_token": [0.01, 0.0, -0.01]},
                          "highest_head_score": {"previous_token": 0.1, "induction": 0.05}},
            "distribution": {"pairs": 64, "interval": distribution.INTERVAL_NAME, "designs": {"copied_token": measured}},
            "heads": {"named": {"previous_token": [[0, 1], [0, 2]]}, "name_scores": name_scores},
            "verdict_words": verdicts.VERDICT_WORDS,
            "nonlinearities": [{"module": "mlp.act", "what": "GELU", "part": "upstream"},
                               {"module": "final_norm", "what": "LayerNorm", "part": "final"}]}  # fmt: skip


def test_a_gap_within_its_null_is_not_read():
    report = _small_report(gap=0.05, floor=0.03)
    assert "so no share of it is read" in sentences.gap_sentence(report, "copied_token")
    assert "For scale only, not as a null" in sentences.gap_sentence(report, "copied_token")
    for say in (sentences.path_sentence, error_sentences.attribution_sentence):
        assert say(report, "copied_token") == sentences.NOT_READ
    assert sentences.grid_sentence(report, "copied_token", "denoising") == sentences.NOT_READ


def test_sentences_follow_their_numbers():
    report = _small_report(gap=20.0, floor=0.01)
    # the ratio printed is the one computed (20 / 0.01), floored so that more than it stays true
    assert "more than 2000 times the largest gap any null pair gives, one draw's largest from a long tail, which another draw can exceed (the page reads a gap above 3 times)" in sentences.gap_sentence(report, "copied_token")
    report["distribution"]["designs"]["copied_token"]["null"]["largest_gap"] = 1.05
    assert "more than 19 times the largest gap any null pair gives" in sentences.gap_sentence(report, "copied_token")
    report["distribution"]["designs"]["copied_token"]["null"]["largest_gap"] = 0.01
    text = sentences.path_sentence(report, "copied_token")
    assert "keys alone carry 78%" in text
    # a report without each path's own null reach reads every path against the four's largest
    assert ("each path is read against its own null: the largest |share| it takes over the null pairs, keys only 0.01, "
            "queries only 0.01, values only 0.01, everything downstream 0.01") in text
    report["distribution"]["designs"]["copied_token"]["null"]["path_each"] = {"keys": 0.004, "queries": 0.002, "values": 0.01, "everything": 0.01}
    assert "keys only 0.00, queries only 0.00, values only 0.01" in sentences.path_sentence(report, "copied_token")
    del report["distribution"]["designs"]["copied_token"]["null"]["path_each"]
    # the rest of the whole write's share, pair by pair, read with its own mean's interval (not against the null's largest)
    measured = report["distribution"]["designs"]["copied_token"]
    measured["path_rest"] = {**_differences([0.1, 0.2, 0.25, 0.15]), "mean_interval": [0.12, 0.23]}
    assert ("The rest, the whole write's share less the three pair by pair, is 0.17 [0.10, 0.25] of the gap (the mean's "
            "95 % interval [0.12, 0.23], mean ± 1.96 standard errors), told apart from 0 as a mean (pair by pair its median "
            "size is 0.17)") in sentences.path_sentence(report, "copied_token")
    measured["path_rest"]["mean_interval"] = [-0.01, 0.35]
    assert "standard errors), not told apart from 0" in sentences.path_sentence(report, "copied_token")
    measured["null_path_rest"] = _summary(0.01, 0.05)  # the rest's own null, beside it
    assert "not told apart from 0 (on the null pairs the same rest is 0.01 [-0.04, 0.06]): what" in sentences.path_sentence(
        report, "copied_token")  # fmt: skip
    report["distribution"]["designs"]["copied_token"]["path"]["keys"] = _summary(0.0)
    assert "the keys carry nothing beyond their null pairs' reach" in sentences.path_sentence(report, "copied_token")
    text = error_sentences.attribution_sentence(report, "copied_token")
    assert "(the cells fixed by construction left out)" in text  # no hybrid cells in this design
    # a left-out cell's exact share is fixed, its attribution error is not: said beside the counts
    assert ("The cells left out above have observed attribution errors too (only their exact share is fixed or a hybrid "
            "prompt's): 1 of them reaches 0.10 in size, the largest -0.50 at blocks.0.resid_pre, position 2") in text
    report["designs"]["copied_token"]["hybrids"] = [{"cell": "one"}]
    assert "(the cells fixed by construction and the hybrid-prompt cells left out)" in error_sentences.attribution_sentence(report, "copied_token")
    report["designs"]["copied_token"]["hybrids"] = []
    assert "Taking the upstream part first, the final LayerNorm's part is -0.40 and the upstream part -0.10" in text
    assert "By the Shapley split the larger part is the final LayerNorm's, and both orders agree." in text
    for cells in report["designs"]["copied_token"]["bends"].values():
        cells[0][2] = {**cells[0][2], "upstream_shapley": -0.45, "final_norm_shapley": -0.05, "upstream_final_first": -0.45,
                       "final_norm_final_first": -0.05}  # fmt: skip
    text = error_sentences.attribution_sentence(report, "copied_token")
    assert "the larger part is upstream" in text and "but the two orders disagree on which part is the larger" in text
    # block 0's three cells at position 2 (their error -0.5) bend upstream; give block 1's MLP write there an error too:
    # nothing but the final LayerNorm lies after it, so its upstream part is 0 by construction and is counted apart
    design = report["designs"]["copied_token"]
    design["error"] = json.loads(json.dumps(design["error"]))
    design["error"]["mlp_write"][1][2] = -0.3
    design["bends"]["mlp_write"][1][2] = {**design["bends"]["mlp_write"][1][2], "final_norm": -0.3, "final_norm_final_first": -0.3,
                                          "final_norm_shapley": -0.3}  # fmt: skip
    text = error_sentences.attribution_sentence(report, "copied_token")
    assert ("Of the 4 cells whose error is at least 0.10 in size (one exact intervention under two names counted as two "
            "cells here: each name has its own attribution estimate), 1 lies where nothing bends between the site and the "
            "final state (the final LayerNorm comes after it), so its upstream part is 0 by construction and both orders "
            "agree there; of the other 3, the final LayerNorm's Shapley part is the larger in 0, and the two orders agree on "
            "the larger part in 0.") in text
    design["bends"]["mlp_write"][1][2] = {**design["bends"]["mlp_write"][1][2], "upstream": -0.01}
    with pytest.raises(AssertionError, match="an upstream part of the attribution error is not 0"):
        error_sentences.attribution_sentence(report, "copied_token")
    assert "13" not in error_sentences.nonlinearities_sentence(report)  # counted from the report, not typed
    assert error_sentences.nonlinearities_sentence(report).startswith("Counted from the model's modules, it is not linear in 2 places")
    assert "Up to 1 of them, depending on the site, lies between a site and the final state, 1 after it." in error_sentences.nonlinearities_sentence(report)
    report["nonlinearities"] = [report["nonlinearities"][0]] * 12 + [report["nonlinearities"][1]]
    text = error_sentences.nonlinearities_sentence(report)
    assert "Up to 12 of them, depending on the site, lie between a site and the final state, 1 after it." in text
    assert ". 12 of them lie" not in text


def test_where_score_and_share_disagree_the_page_says_so():
    report = _small_report(gap=20.0, floor=0.01)
    measured = report["distribution"]["designs"]["copied_token"]
    for method in ("noising", "path_keys"):  # every causal method ranks alike here
        measured["heads"][method] = measured["heads"]["denoising"]
        measured["null"]["heads"][method] = [0.01, 0.01]
    report["heads"]["name_scores"]["previous_token"]["scores"][0][2] = 0.7  # 0.2 apart: no tie
    text = head_sentences.disagreement_sentence(report)
    assert "by attention score block 0 head 1 is the first previous-token head (0.900)" in text
    assert "per-head denoising head 2 0.60 against head 1 0.20" in text
    heads = report["distribution"]["designs"]["copied_token"]["heads"]["denoising"]["heads"][0]
    heads[1], heads[2] = heads[2], heads[1]  # the shares now rank head 1 first too
    assert head_sentences.disagreement_sentence(report).startswith("Attention scores and causal shares rank")


def test_a_score_tie_is_no_disagreement_and_the_per_pair_preference_is_said():
    report = _small_report(gap=20.0, floor=0.01)
    measured = report["distribution"]["designs"]["copied_token"]
    entry = {"kind": "previous_token", "block": 0, "named": [1, 2], "fixed": [], "movable": 4, "chance": 0.5,
             "fractions": {"found": 0.95, "other_kind": 0.0, "unnamed": 0.05, "nothing": 0.0}, "other_kinds": [],
             "by_head": {"1": 0.08, "2": 0.87}}  # fmt: skip
    for method in ("denoising", "noising", "path_keys"):
        measured["heads"][method] = {**measured["heads"]["denoising"], "kinds": {"previous_token/0": entry}}
        measured["null"]["heads"][method] = [0.01, 0.01]
    report["heads"]["name_scores"]["previous_token"]["scores"][0][1:3] = [0.847, 0.804]  # closer than TIE_MARGIN
    # pair by pair on the pairs' own sequences: head 1's score higher in pairs 0 and 3; head 2's share larger in 0-2
    per_sequence = [[[0.1] * 4, [0.9, 0.8, 0.7, 0.9], [0.8, 0.9, 0.8, 0.7], [0.1] * 4], [[0.1] * 4] * 4]
    report["heads"]["name_scores"]["previous_token"]["pair_sequences"] = per_sequence
    report["distribution"]["period"] = 8
    grids = [[[0.0, one, two, 0.0], [0.1] * 4] for one, two in ((0.1, 0.6), (0.1, 0.6), (0.1, 0.6), (0.5, 0.2))]
    measured["per_pair"] = {"gap": [20.0] * 4, "heads": {m: grids for m in ("denoising", "noising", "path_keys")}}
    text = head_sentences.disagreement_sentence(report)
    assert "disagree" not in text
    # tied scores in three decimals, as Lab 06 shows them: 0.85 and 0.80 would read as 0.05 apart, no tie
    assert ("block 0's previous-token heads 1 and 2 are within 0.05 of each other (0.847 and 0.804), the tie threshold of "
            "Lab 06's and the glossary's highest-score rule, which cannot split them, while Part 1's rule names both") in text
    assert ("on the 4 sequences of period 8 the copied-token pairs are built from: head 1's score is the higher in 2 of 4 "
            "and head 2's in 2 (two-sided exact sign test p = 1.000; the mean paired score difference is 0.025 ± 0."
            in text)  # the same pairs, not a pooled score
    assert ("; per-head denoising gives head 2 the larger share in 3, ordering the two as their scores do in 3, the most "
            "these counts allow (independent orders with these counts: 1 to 3, a two-sided 95 % range)") in text
    # with these margins no agreement could be rare under independent orders: no test, left out of the correction, and
    # the observed agreement said as it is (here the most possible, and still not rare)
    assert (". Beyond that, by order, the agreement is the most these counts allow in every method (one-sided p 0.500, "
            "0.500, 0.500 under independent orders), yet no order test here could pass a Bonferroni bar over the 6 tests "
            "(0.008: even the most agreement possible has p 0.50 or more), and the tests share their pairs, so the orders "
            "are not read as linked (an uncorrected p below 0.05 on one draw's pairs is no finding)") in text
    tails = [("a", 0.044, 0.044), ("b", 0.025, 0.025), ("c", 0.06, 0.03)]  # the page's case: two at the most, p < 0.05
    said = chance.unreachable_order_words(tails, 6)
    assert said.startswith("by order, the agreement is the most these counts allow for a and b (one-sided p 0.044, 0.025, 0.060")
    assert "suggestive" not in said  # an uncorrected p below 0.05 on one draw is not read
    assert chance.unreachable_order_words(tails[:2], 6).endswith("so the orders are not read as linked (an uncorrected p below 0.05 on one draw's pairs is no finding)")
    assert "(permutation p against 0.017, a Bonferroni correction over the 3 tests here, the order tests that could not reject left out)" in text
    assert chance.smallest_tail(64, 53, 6) == pytest.approx(0.306, abs=1e-3)  # the page's margins: never below 0.25
    assert chance.smallest_tail(64, 32, 32) < 1e-6  # balanced margins: a test that can reject
    assert "reverse" not in text and "follow the score order" not in text  # the scores split the pairs evenly
    # head 1's score the higher in every pair, but 4 of 4 is no reliable score order (sign test p = 0.125): no order
    # for the methods to reverse, only what they give
    report["heads"]["name_scores"]["previous_token"]["pair_sequences"][0][1] = [0.9, 0.95, 0.9, 0.9]
    reversed_text = head_sentences.disagreement_sentence(report)
    assert "the mean paired score difference is" in reversed_text and "p = 0.125" in reversed_text
    assert (". So pair by pair the scores do not order the two reliably either, while the methods give head 2's share "
            "the larger in 3 of the 4 pairs. Beyond") in reversed_text
    assert "reverse" not in reversed_text
    report["heads"]["name_scores"]["previous_token"]["pair_sequences"][0][1] = [0.9, 0.8, 0.7, 0.9]
    assert chance.agreement_tail(64, 31, 8, 37) == pytest.approx(0.1092, abs=1e-4)  # P(agreement >= 37)
    assert "not only those the design changes" in text
    assert "the 3 methods share one trained model and these pairs, so where they agree that is not 3 replications" in text
    # the null of agreement holds both margins: 64 pairs, head 2 first by score in 33, by share in 56
    assert chance.independent_range(64, 31, 8) == (27, 37)  # narrower than a fair coin's 24 to 40
    rho, p_value = chance.rank_association(list(range(20)), list(range(20)))
    assert rho == pytest.approx(1.0) and p_value < 0.01
    rho, p_value = chance.rank_association([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5])
    assert 0 < rho < 1 and p_value > 0.05
    assert head_sentences.TIE_MARGIN == induction_sentences.TIE_MARGIN  # Lab 06's and the glossary's one rule
    spread = [[{**_summary(0.1), "pairs": 576}] * 4 for _ in range(2)]
    spread[0][1], spread[0][2] = {**_summary(0.847), "pairs": 576}, {**_summary(0.804), "pairs": 576}
    report["heads"]["name_scores"]["previous_token"].update(spread=spread, spread_periods=[8, 4, 12])
    text = head_sentences.disagreement_sentence(report)
    assert ("the intervals 2.5th to 97.5th percentile per naming sequence over 576 sequences, 3 periods (4 to 12) "
            "pooled") in text  # what the score intervals are over, said where they are shown
    report["heads"]["name_scores"]["previous_token"]["scores"][0][2] = 0.7  # now apart: a disagreement again
    assert head_sentences.disagreement_sentence(report).startswith("Where attention scores and causal effects disagree")


def test_a_verdict_names_the_kind_on_top_and_a_design_that_fixes_the_rest_is_no_test():
    report = _small_report(gap=20.0, floor=0.01)
    report["verdict_words"] = verdicts.VERDICT_WORDS
    entry = {"kind": "current_token", "block": 0, "named": [0, 3], "fixed": [], "movable": 4, "chance": 0.5,
             "fractions": {"found": 0.05, "other_kind": 0.95, "unnamed": 0.0, "nothing": 0.0},
             "other_kinds": ["previous_token"], "by_head": {"0": 0.05, "3": 0.0}}  # fmt: skip
    report["heads"]["name_scores"]["current_token"] = {"scores": [[0.95, 0.0, 0.0, 0.85]], "controls": [[0.0] * 4]}
    measured = report["distribution"]["designs"]["copied_token"]
    measured["heads"]["denoising"]["kinds"] = {"current_token/0": entry}
    text = head_sentences.kind_sentence(report, "copied_token", "denoising", "current_token")
    assert "95 % with a head of another named kind (previous-token) on top" in text and "unnamed" not in text
    assert ("a random pick among the 4 heads the mechanism does not predict near 0 in this design would name one in 50 % of "
            "the pairs where a head clears the null bar") in text
    assert "heads of another named kind are on top in most pairs" in text and "no better than a random pick" not in text
    entry.update(fixed=[1, 2], movable=2, chance=1.0, fractions={"found": 1.0, "other_kind": 0.0, "unnamed": 0.0, "nothing": 0.0})
    text = head_sentences.kind_sentence(report, "copied_token", "denoising", "current_token")
    assert text.endswith("no test against chance: the block's other heads are not identifiable here (the mechanism predicts them near 0).")
    assert "block 0 heads 1, 2 not identifiable in this design" in text and "random pick" not in text
    entry.update(top_named=1.0, null_top_named=0.56, top_named_discordant=[28, 0], top_named_p=7.5e-09)  # against the model's own null
    text = head_sentences.kind_sentence(report, "copied_token", "denoising", "current_token")
    assert "no test against chance: the block's other heads are not identifiable here (the mechanism predicts them near 0). Against the model's own null" in text
    assert "the named heads top the block more often under the design's change than under the null's (a substitution" in text
    assert "A description, not a test of the named heads" in text
    # near 0 if the mechanism holds: observed, never a construction (the null bar's own rate is said once, in the rule)
    assert "construction" not in text


def _differences(values: list[float]) -> dict:
    return distribution.spread_of_differences(values)


def test_the_directions_asymmetry_is_read_from_its_mean_and_its_size_pair_by_pair():
    report = _small_report(gap=20.0, floor=0.01)
    design = report["designs"]["copied_token"]
    design["activation"]["noising"] = json.loads(json.dumps(design["activation"]["noising"]))
    design["activation"]["noising"]["mlp_write"][0][2] = 0.67  # one draw: denoising 0.90, noising 0.67
    measured = report["distribution"]["designs"]["copied_token"]
    measured["activation"] = {d: {k: [[_summary(v) for v in row] for row in rows] for k, rows in grids.items()}
                              for d, grids in design["activation"].items()}  # fmt: skip
    difference = {k: [[_differences([0.0] * 4) for _ in row] for row in rows] for k, rows in design["activation"]["denoising"].items()}
    measured["activation_difference"] = difference
    # over the pairs: a mean near 0, but pairs of both signs, most of them further apart than the worked example's 0.23
    wide = [0.23, 0.3, -0.3, 0.5, -0.5, 0.4, -0.45, 0.1]
    difference["mlp_write"][0][2] = _differences(wide)
    text = compare_sentences.direction_sentence(report, "copied_token")
    assert "differ most over the pairs (median |difference| 0.35)" in text
    assert "is blocks.0.mlp_write, position 2; on the worked example (one draw) it is 0.90 denoising, 0.67 noising" in text
    assert ("On average the two directions are not told apart: the mean difference is 0.04, the mean's 95 % interval "
            "[-0.24, 0.31] (mean ± 1.96 standard errors), which holds 0, but pair by pair they differ widely in both "
            "directions") in text  # the mean read with its own interval, not with the pairs' spread
    assert "the median |difference| is 0.35" in text and "above 0 in 62 % of pairs and below in 38 %" in text
    assert "the worked example's |difference| 0.23 is exceeded in 75 % of pairs, among the smaller ones" in text
    assert "on this draw only" not in text and "make up for it" not in text
    difference["mlp_write"][0][2] = _differences([0.23, 0.02, -0.03, 0.01, -0.02, 0.04, -0.01, 0.0])  # pairs agree
    text = compare_sentences.direction_sentence(report, "copied_token")
    assert "and pair by pair too: the median |difference| is 0.02" in text and "exceeded in only 0 % of pairs" in text
    difference["mlp_write"][0][2] = _differences([0.05, 0.06, 0.04, 0.05, -0.01, 0.05, 0.06, 0.05])  # small, its mean told from 0
    assert ("On average denoising exceeds noising by less than 0.1 of the gap: the mean difference is 0.04, the mean's 95 % interval [0.03, 0.06]"
            in compare_sentences.direction_sentence(report, "copied_token"))
    difference["mlp_write"][0][2] = _differences([0.23, 0.3, -0.3, 0.5, -0.5, 0.4, -0.45, 0.1, 0.2, 0.25])
    assert "exceeded in 70 % of pairs, typical, not special" in compare_sentences.direction_sentence(report, "copied_token")
    difference["mlp_write"][0][2] = {**_summary(0.3, 0.2), "median_abs": 0.3}  # over the pairs: one sign
    text = compare_sentences.direction_sentence(report, "copied_token")
    assert "of one sign throughout, so over the pairs restoring it alone recovers more than removing it costs" in text


def test_the_directions_cell_is_chosen_over_the_pairs_not_from_the_worked_example():
    report = _small_report(gap=20.0, floor=0.01)
    design = report["designs"]["copied_token"]
    design["activation"]["noising"] = json.loads(json.dumps(design["activation"]["noising"]))
    design["activation"]["noising"]["mlp_write"][0][2] = 0.3  # the worked example's largest difference: 0.60
    measured = report["distribution"]["designs"]["copied_token"]
    measured["activation"] = {d: {k: [[_summary(v) for v in row] for row in rows] for k, rows in grids.items()}
                              for d, grids in design["activation"].items()}  # fmt: skip
    difference = {k: [[_differences([0.0] * 4) for _ in row] for row in rows] for k, rows in design["activation"]["denoising"].items()}
    measured["activation_difference"] = difference
    difference["mlp_write"][0][2] = _differences([0.6, 0.1, -0.1, 0.2, -0.2])  # median |difference| 0.20
    difference["mlp_write"][1][2] = _differences([0.0, 0.4, -0.4, 0.3, -0.35])  # median |difference| 0.35: the pairs' largest
    text = compare_sentences.direction_sentence(report, "copied_token")
    assert "differ most over the pairs (median |difference| 0.35)" in text
    assert "is blocks.1.mlp_write, position 2; on the worked example (one draw) it is 0.20 denoising, 0.20 noising" in text
    assert "blocks.0.mlp_write" not in text


def test_the_head_tables_largest_in_block_is_not_called_on_top():
    report = _small_report(gap=20.0, floor=0.01)
    for method in ("noising", "attribution", "path_keys"):
        report["distribution"]["designs"]["copied_token"]["heads"][method] = report["distribution"]["designs"]["copied_token"]["heads"]["denoising"]
    for row in report["distribution"]["designs"]["copied_token"]["heads"]["denoising"]["heads"]:
        for cell in row:
            cell.update(top_fraction=0.5, clears_fraction=0.25)
    cell = sentences.head_rows(report, "copied_token")[0][2]
    assert "; largest in block (null not applied) 50 %, above the null bar 25 %" in cell and "top" not in cell
    for row in report["distribution"]["designs"]["copied_token"]["heads"]["denoising"]["heads"]:
        for cell in row:
            cell.update(clears_largest_fraction=0.1, mean=0.9958, high=0.9958)  # the stricter bar beside; no identity's 1.00
    cell = sentences.head_rows(report, "copied_token")[0][2]
    assert cell.startswith("0.996 [") and cell.endswith("above the null bar 25 %, above the null pairs' largest 10 %")


def test_the_spread_of_differences_counts_the_worked_examples_size():
    spread = distribution.spread_of_differences([0.2, -0.5, 0.1, 0.3])
    assert (spread["first"], spread["median_abs"], spread["beyond_first"]) == (0.2, 0.25, 0.5)
    assert (spread["above_zero"], spread["below_zero"]) == (0.75, 0.25)


def _heads_report(positive: float, clears: float) -> dict:
    report = _small_report(gap=20.0, floor=0.01)
    report["heads"]["named"]["current_token"] = [[0, 0]]
    report["heads"]["name_scores"]["current_token"] = {"scores": [[0.95, 0.0, 0.0, 0.0]], "controls": [[0.0] * 4]}
    measured = report["distribution"]["designs"]["copied_token"]
    measured["heads"]["denoising"]["heads"][0][0] = {**_summary(0.21, 0.3), "positive_fraction": positive, "clears_fraction": clears}
    return report


def test_the_current_token_heads_are_read_from_the_fractions_of_pairs():
    text = head_sentences.outside_sentence(_heads_report(0.94, 0.30))
    assert "block 0 head 0 carries 0.21 on average (above 0 in 94 % of pairs, above the null bar in 30 %)" in text
    # 0.94 of 64 pairs (the summary's count): by point estimate, its Wilson interval reaching below 90 %
    assert ("above 0 in most pairs (by point estimate; 95 % Wilson [") in text and "reaching below the 90 % this page calls most" in text
    assert "but above the null bar in fewer than the 90 % this page calls most" in text
    assert "No current-token head clears the null bar in most pairs" in text
    text = head_sentences.outside_sentence(_heads_report(1.0, 0.98))
    assert ": part of the gap, above the null bar in most pairs" in text and "How they carry it is not measured head by head" in text
    assert "untested here" in text and "they refine" not in text  # a reading the numbers allow, not a finding
    text = head_sentences.outside_sentence(_heads_report(0.6, 0.03))
    assert "not above the null bar in 97 % of pairs" in text


def test_the_heads_denoising_minus_noising_is_named_where_it_keeps_one_sign():
    report = _small_report(gap=20.0, floor=0.01)
    heads = report["distribution"]["designs"]["copied_token"]["heads"]
    heads["noising"] = {"heads": [[_summary(0.1)] * 4, [_summary(0.3), _summary(0.55), _summary(0.3), _summary(0.3)]]}
    flat = _differences([0.0, 0.1, -0.1, 0.05])
    rows = [[flat] * 4, [flat] * 4]
    report["distribution"]["designs"]["copied_token"]["head_difference"] = rows
    # the difference's own null: the same head's denoising minus noising on the null pairs
    quiet = _differences([0.01, -0.02, 0.0, 0.01])
    null = [[quiet] * 4, [quiet] * 4]
    null[1][3] = _differences([0.25, 0.1, 0.0, 0.2])  # head 1.3's null pairs spread to about 0.25
    report["distribution"]["designs"]["copied_token"]["null_head_difference"] = null
    text = compare_sentences.head_direction_sentence(report, "copied_token")
    assert "no head's difference keeps one sign in at least 75 % of pairs, so no head is flagged here" in text
    assert "agree on no head's side" not in text
    rows[0][2] = _differences([0.3, 0.4, 0.2, 0.35, 0.3, 0.25, -0.05, -0.02])  # above 0 in 6 of 8 pairs
    rows[1][1] = _differences([-0.3, -0.4, -0.2, -0.1])
    rows[1][3] = _differences([0.1, 0.2, 0.3, 0.12])  # one sign throughout, mean 0.18: inside its null's interval
    text = compare_sentences.head_direction_sentence(report, "copied_token")
    # the two numbers compared, with the share restored or removed beside: not glossed "sufficient" or "necessary"
    assert ("denoising exceeds noising for head 0.2 in 75 % of pairs (95 % Wilson [63.1 %, 84.0 %], reaching below the 75 % "
            "of the rule; mean difference 0.22 "
            "[0.10, 0.33], mean ± 1.96 SE; denoising 0.60 on average)") in text  # the fraction and the mean with their intervals
    assert ("noising exceeds denoising for head 1.1 in 100 % of pairs (95 % Wilson [94.3 %, 100.0 %]; mean difference -0.25 "
            "[-0.38, -0.12], mean ± 1.96 SE; noising 0.55 on average)") in text
    assert "sufficient" not in text and "necessary" not in text
    # a mean against a mean: head 1.3's interval overlaps its null pairs' mean interval, so it is not read
    assert "head 1.3 keeps one sign too, but with a mean difference whose interval overlaps its null pairs' (0.18 [" in text
    assert "against 0.14 [" in text
    assert text.count("so not read") == 1
    assert "makes up for" not in text and "Why a head's two directions differ is not tested here" in text


def test_a_verdict_far_below_chance_says_why():
    report = _small_report(gap=20.0, floor=0.01)
    entry = {"kind": "previous_token", "block": 0, "named": [1, 2], "fixed": [], "movable": 4, "chance": 0.5,
             "fractions": {"found": 0.09, "other_kind": 0.05, "unnamed": 0.0, "nothing": 0.86}, "other_kinds": ["current_token"],
             "by_head": {"1": 0.0, "2": 0.09}}  # fmt: skip
    report["distribution"]["designs"]["copied_token"]["heads"]["attribution"] = {"kinds": {"previous_token/0": entry}}
    text = head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token")
    assert "inconclusive: no head clears the null bar in 86 % of pairs; among the pairs where one does, a named head is on top in 6 of 9 (95 % Wilson [35.4 %, 88.0 %])" in text
    assert "below chance" not in text and "random pick;" not in text
    entry["fractions"] = {"found": 0.0, "other_kind": 0.0, "unnamed": 0.0, "nothing": 1.0}
    text = head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token")
    assert "inconclusive: no head clears the null bar in 100 % of pairs, so there is no pair where one does to read" in text
    entry["fractions"] = {"found": 0.2, "other_kind": 0.0, "unnamed": 0.3, "nothing": 0.5}  # half the pairs: still inconclusive
    assert "a named head is on top in 13 of 32" in head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token")
    entry["fractions"] = {"found": 0.09, "other_kind": 0.0, "unnamed": 0.81, "nothing": 0.1}
    text = head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token")
    assert ("among the 58 pairs where a head clears the null bar, a named head is on top in 6 (95 % Wilson [4.8 %, 20.8 %]): "
            "below chance: heads the "
            "rule does not name this kind are on top more often") in text
    entry["fractions"] = {"found": 0.45, "other_kind": 0.0, "unnamed": 0.55, "nothing": 0.0}
    assert "no better than a random pick" in head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token")
    # the chance is a pick's among the pairs where a head clears the null: 0.45 of 0.8 is above one half
    entry["fractions"] = {"found": 0.45, "other_kind": 0.0, "unnamed": 0.35, "nothing": 0.2}
    # no binomial p: the pairs are not what chance acts on (the test against chance is over namings)
    assert ("a named head is on top in 29 (95 % Wilson [43.2 %, 69.5 %]): better than a random pick (29 of 51 against "
            "50 % for a blind pick, with no p, for the pairs are not what chance acts on: the rule names the heads once "
            "per model), but not in most pairs"
            in head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token"))
    assert "failure" not in head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token")
    # where the exact patch attribution estimates finds the named heads, attribution's shortfall is a miss, said first
    exact = {**entry, "fractions": {"found": 0.95, "other_kind": 0.0, "unnamed": 0.05, "nothing": 0.0}}
    heads = report["distribution"]["designs"]["copied_token"]["heads"]
    heads["denoising"] = {**heads["denoising"], "kinds": {"previous_token/0": exact}}
    entry["fractions"] = {"found": 0.09, "other_kind": 0.05, "unnamed": 0.0, "nothing": 0.86}
    text = head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token")
    # the cell's own reading first, as every cell's (inconclusive here), then the miss beside the exact patch
    assert ("inconclusive: no head clears the null bar in 86 % of pairs; among the pairs where one does, a named head is "
            "on top in 6 of 9 (95 % Wilson [35.4 %, 88.0 %]). Beside the exact patch it estimates: per-head denoising puts a named head on top in 95 % "
            "of pairs, attribution in 9 %, so here the first-order estimate misses the previous-token heads the exact "
            "patch finds") in text
    assert "failure" not in head_sentences.kind_sentence(report, "copied_token", "denoising", "previous_token")
    # "most pairs" is a point estimate: its Wilson interval and the pairs where a head clears the null said beside it
    entry["fractions"] = {"found": 0.92, "other_kind": 0.0, "unnamed": 0.0, "nothing": 0.08}
    assert ("a named head is on top in most pairs (92 %, by point estimate; 95 % Wilson [82.7 %, 96.6 %], reaching "
            "below the 90 % this page calls most; 59 of the 59 pairs where a head clears the null bar), above "
            "what a random pick would do"
            in head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token"))
    # a verdict one named head carries is said to be that head's, with the other's fraction beside it
    entry["by_head"] = {"1": 0.08, "2": 0.84}
    assert ("; it is mostly head 0.2's (on top in 84 % of the pairs; head 0.1 in 8 %), so it says little of the other "
            "named head") in head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token")
    entry["by_head"] = {"1": 0.42, "2": 0.50}  # shared: no head carries it
    assert "it is mostly" not in head_sentences.kind_sentence(report, "copied_token", "attribution", "previous_token")


def test_an_untestable_kind_is_said_under_the_mechanisms_hypothesis_with_each_heads_own_observed_share():
    report = _small_report(gap=20.0, floor=0.01)
    measured = report["distribution"]["designs"]["copied_token"]
    measured["path"]["keys"] = _summary(0.9, 0.01)  # the whole write's keys path is not what the reason cites
    measured["heads"]["path_keys"] = {"heads": [[_summary(0.5), _summary(-0.017, 0.08), _summary(0.3, 0.08), _summary(0.7)]]}
    reason = designs.not_testable_reason("copied_token", "previous_token", report)
    assert ("near 0 if the mechanism holds (observed over the pairs, each head's own write into block 1's keys only: "
            "head 0.1 -0.02 [-0.10, 0.06], head 0.2 0.30 [0.22, 0.38])") in reason
    assert "0.90" not in reason and "0.50" not in reason and "0.70" not in reason
    assert "(position 1)" in reason and "construction" not in reason and "identity" not in reason
    assert designs.not_testable_reason("matched_position", "previous_token", report) is None


def test_the_gap_is_read_over_the_pairs_too():
    report = _small_report(gap=20.0, floor=1.0)
    report["distribution"]["designs"]["copied_token"]["per_pair"] = {"gap": [20.0, 3.05, 12.0]}
    text = sentences.gap_sentence(report, "copied_token")
    assert ("over the pairs, all 3 gaps exceed 3 times the null pairs' largest; the smallest gap, 3.05, is at least 3.0 "
            "times it (the ratio taken before rounding; near the page's reading rule: within 2 % of it). The null, expected to move M by 0, moves it by up "
            "to 1.00, 8.6 % of the pairs' mean gap (11.68): not a quiet null") in text  # 1 / 11.683 = 8.56 %
    report["distribution"]["designs"]["copied_token"]["per_pair"]["gap"] = [20.0, 2.5, 12.0]
    text = sentences.gap_sentence(report, "copied_token")
    assert "2 of the 3 gaps exceed 3 times the null pairs' largest; the smallest gap, 2.50, is at least 2.5 times it (the ratio taken before rounding). " in text
    report["distribution"]["designs"]["copied_token"]["per_pair"]["gap"] = [20.0, 10.88 * 1.0 / 3.58 * 3.58, 12.0]
    assert "is at least 10.8 times it (the ratio taken before rounding). " in sentences.gap_sentence(report, "copied_token")
    report["distribution"]["designs"]["copied_token"]["per_pair"]["gap"] = [30.0, 25.0, 24.0]
    assert "3.8 % of the pairs' mean gap (26.33), a quiet null." in sentences.gap_sentence(report, "copied_token")
    assert "the token at position 2 replaced at both its occurrences (positions 2 and P + 2) by one the prompt does not hold, at positions the mechanism does not use, give gaps of" in sentences.gap_sentence(report, "copied_token")


def test_lab06s_corruption_and_the_key_step_are_said_from_the_report():
    report = _small_report(gap=20.0, floor=0.01)
    report["lab06"] = {"clean": [1, 2, 1], "position": 1, "clean_token": 2, "token": 7, "target": 2, "rival": 7, "gap": 12.38}
    text = compare_sentences.lab06_sentence(report)
    assert "at the same position (token 2) to token 7, their own rule's draw, where this design puts token 3" in text
    assert "the gap of that corruption, M(clean) minus M(corrupt), is 12.38 (the glossary prints it, Lab 06 the two values), this worked example's 20.00, so the gaps differ" in text
    report["lab06"].update(token=3, rival=4, gap=20.0)
    assert "to the same token; they read the same rival" in compare_sentences.lab06_sentence(report)
    matched = json.loads(json.dumps(report["distribution"]["designs"]["copied_token"]))
    matched["path"]["keys"] = _summary(0.7)
    matched["heads"]["path_keys"] = {"heads": [[_summary(0.05), _summary(0.1), _summary(0.5), _summary(0.0)], [_summary(0.0)] * 4]}
    report["distribution"]["designs"]["matched_position"] = matched
    copied = report["distribution"]["designs"]["copied_token"]
    copied["path"].update(keys=_summary(-0.02), values=_summary(0.79))
    copied["null"]["path"] = 0.13  # the keys within the null pairs' reach
    copied["heads"]["denoising"]["heads"][0][0] = {**_summary(0.5), "clears_fraction": 0.98}
    report["heads"]["named"]["current_token"] = [[0, 0]]
    text = compare_sentences.key_step_sentence(report)
    assert "mostly through block 1's values (0.79 [0.69, 0.89] of the gap), not its keys (-0.02 [-0.12, 0.08])" in text
    assert "(head 0.0 0.50 [0.40, 0.60])" in text and "keys alone carries 0.70 [0.60, 0.80] of its gap" in text
    # the key route isolated, but whose: the previous-token heads' own path shares against the whole write's
    assert ("each previous-token head's own write sent there alone carries head 0.1's 0.10 [0.00, 0.20] and head 0.2's "
            "0.50 [0.40, 0.60] (separate patches, which need not add up to the whole), head 0.2's write alone carries 0.71 "
            "of what the whole write sent into the keys carries (a ratio of means)") in text
    matched["heads"]["path_keys"]["heads"][0][2] = _summary(0.1)
    assert "a ratio of means" not in compare_sentences.key_step_sentence(report)
    copied["path"].update(keys=_summary(0.6))
    assert "mostly through" not in compare_sentences.key_step_sentence(report)


def test_the_runner_marks_the_hybrid_cells_as_the_page_does():
    report = _small_report(gap=20.0, floor=0.01)
    design = report["designs"]["copied_token"]
    design.update(clean=[1, 2, 3, 2], corrupt=[1, 3, 2, 2], changed=[1, 2], readout=3)
    design["identities"] = cells.identities(design, 2)
    lines = lab.summary_lines({**report, "heads": {**report["heads"], "name_margin": 0.5},
                               "distribution": {**report["distribution"], "period": 2}})  # fmt: skip
    assert any(line.startswith("  hybrid prompt (observed): blocks.0.resid_pre at positions 1 and 2") for line in lines)
    assert not any(line.startswith("  identity: blocks.0.resid_pre at positions 1 and 2") for line in lines)


def test_the_last_blocks_unread_cells_are_identities_and_hybrids_are_observed():
    report = _small_report(gap=20.0, floor=0.01)
    design = report["designs"]["copied_token"]
    design["clean"], design["corrupt"], design["readout"] = [1, 2, 5, 1], [1, 3, 5, 1], 3
    unread = [cell for cell in cells.identities(design, 2) if "nothing downstream reads it" in cell["why"]]
    assert [(c["kind"], c["positions"], c["value"]) for c in unread] == [(k, [1, 2], 0.0) for k in ("attn_write", "mlp_write", "resid_post")]
    grids = {d: {k: [[0.0] * 4, [0.0] * 4] for k in ("resid_pre", "attn_write", "mlp_write", "resid_post")} for d in ("denoising", "noising")}
    for d in grids:
        grids[d]["resid_pre"][0][1] = grids[d]["resid_post"][1][3] = 1.0
    cells.check_identities(design, grids, "test")
    grids["noising"]["mlp_write"][1][2] = 0.2  # an unread cell that moved: the identity is broken
    with pytest.raises(AssertionError, match="blocks.1.mlp_write at 2: 0.2, not 0 by construction"):
        cells.check_identities(design, grids, "test")
    swap = {"clean": [1, 2, 3, 2], "corrupt": [1, 3, 2, 2], "changed": [1, 2], "readout": 3,
            "activation": {"denoising": {"resid_pre": [[0.0] * 4, [0.0] * 4]}}}  # fmt: skip
    assert cells.hybrid(swap, "resid_pre", 0, 1) == cells.HYBRID and cells.by_construction(swap, "resid_pre", 0, 1) == ""
    assert cells.hybrid(swap, "resid_pre", 0, 3) == "" and cells.by_construction(swap, "resid_pre", 0, 3).startswith("an identity")


def test_the_page_checks_catch_a_broken_identity_or_split():
    from residlab.course.lab07.page import check_report

    report = _small_report(gap=20.0, floor=0.01)
    del report["distribution"]
    report["designs"]["copied_token"]["error"] = {k: [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]] for k in ("resid_pre", "attn_write", "mlp_write", "resid_post")}
    for cells in report["designs"]["copied_token"]["bends"].values():
        cells[0][2] = {**cells[0][2], **{key: 0.0 for key in cells[0][2] if key.startswith(("upstream", "final_norm"))}}
    report["designs"]["copied_token"]["attribution"] = report["designs"]["copied_token"]["activation"]["denoising"]
    check_report(report)
    split = json.loads(json.dumps(report))
    split["designs"]["copied_token"]["activation"]["denoising"]["resid_post"][0][2] = 0.3
    with pytest.raises(AssertionError, match=r"resid_pre 1 at 2 \(0.9\) is not resid_post 0's \(0.3\)"):
        check_report(split)
    renamed = json.loads(json.dumps(report))  # one intervention under two names: block 0's attention write, its output
    renamed["designs"]["copied_token"]["activation"]["noising"]["attn_write"][0][2] = 0.5
    with pytest.raises(AssertionError, match=r"noising: attn_write 0 at 2 \(0.5\) is not resid_post 0's \(0.9\): the same intervention"):
        check_report(renamed)
    moved = json.loads(json.dumps(report))
    moved["designs"]["copied_token"]["activation"]["noising"]["mlp_write"][1][0] = 0.1
    with pytest.raises(AssertionError, match="a cell before 1 moved"):
        check_report(moved)
    forced = json.loads(json.dumps(report))
    forced["designs"]["copied_token"]["activation"]["noising"]["resid_post"][1][2] = 0.9
    with pytest.raises(AssertionError, match="noising blocks.1.resid_post at 2: 0.9, not 1 by construction"):
        check_report(forced)
    parts = json.loads(json.dumps(report))
    parts["designs"]["copied_token"]["bends"]["mlp_write"][1][2]["final_norm_final_first"] = 0.01  # one order only
    with pytest.raises(AssertionError, match="mlp_write block 1 position 2: the error's parts do not sum to it"):
        check_report(parts)


def test_the_grid_sentence_counts_a_tensor_once_and_names_the_identities():
    report = _small_report(gap=20.0, floor=0.01)
    text = sentences.grid_sentence(report, "copied_token", "denoising")
    assert text.startswith("On the worked example, the cells that move at least half of the gap when restored alone: "
                           "blocks.0.resid_pre at position 1 (1.00, an identity: the prompts differ only there: patching "
                           "it makes one run the other); blocks.0.mlp_write at position 2 (0.90); blocks.0.resid_post = "
                           "blocks.1.resid_pre = blocks.0.attn_write at position 2 (0.90); blocks.1.resid_post at position 2 "
                           "(1.00, an identity: the final state at the readout: all the metric reads).")
    # 4 kinds x 2 blocks x 3 positions, less block 1's input (block 0's output) and block 0's attention write where the
    # prompts agree (positions 0 and 2: its output there): 19 interventions, 6 of them above 0.01
    assert ("Of the 19 distinct interventions on the worked example (cells; each block's input is the block before's output and block 0's "
            "attention write where the prompts agree is the same intervention as its output there, each counted once), "
            "4 observed cells move a larger share of the gap in size (|share|, either sign) than any cell of the 64 null "
            "pairs does (") in text
    assert "; 2 identities are larger too, fixed by construction, not findings; " in text  # counted apart, not read
    # position 0 of each of the 6 distinct interventions, block 0's input where the prompts agree, and the last block's
    # attention write, MLP write and output at position 1, which nothing downstream reads
    assert text.endswith("10 are 0 by an identity (6 before the first position where the prompts differ: attention is "
                         "causal; 1 block 0's input where the prompts agree: the same token, so the same tensor in both "
                         "runs; 3 the last block at a position other than the readout: nothing downstream reads it).")
    assert cells.distinct_cells(report["designs"]["copied_token"])[7][:2] == (
        "blocks.0.resid_post = blocks.1.resid_pre = blocks.0.attn_write", 0)
    report["designs"]["copied_token"]["changed"] = [1, 2]  # two changed positions: no one cell makes one run the other
    assert "differ only there" not in sentences.grid_sentence(report, "copied_token", "denoising")


def test_the_figure_and_the_explorer_read_the_same_numbers():
    from residlab.course.lab07 import figures

    report = _small_report(gap=20.0, floor=0.01)
    over = {d: {k: [[_summary(v) for v in row] for row in rows] for k, rows in grids.items()}
            for d, grids in report["designs"]["copied_token"]["activation"].items()}  # fmt: skip
    report["distribution"]["designs"]["copied_token"]["activation"] = over
    svg = figures.activation_figure(report, "copied_token")
    # the paper, the colour scale, kinds x directions x cells, then the same-intervention marks (block 0's attention
    # write at 0 and 2, where the prompts agree: its output's intervention, its value observed) and the legend's one
    assert svg.count("<rect") == 2 + 4 * 2 * 6 + 2 * 2 + 1
    # identity marks (and the legend's one: no hybrid prompt is drawn, so the legend names none): block 0's input at 1
    # (the one changed position) and at 2 (the prompts agree), block 1's output at the readout, block 1's writes and
    # output at position 1 (nothing reads them), in both directions; no hybrid-prompt mark in a design that swaps nothing
    assert svg.count("<circle") == 1 + 6 * 2
    assert "same intervention as block 0's output</text>" in svg  # short enough for the figure's width
    assert "hybrid prompt" not in svg
    # the attribution figure marks, in its error panels only, where the exact share is an identity (the error is the
    # estimate minus it, an observed value, said so); no hybrid prompt in a design that swaps nothing
    estimates = figures.attribution_figure(report, "copied_token")
    assert estimates.count("<circle") == 1 + 6 and "fixed by construction (an identity)" not in estimates
    assert "error panels: the exact share is an identity" in estimates and "in shares of the gap" in estimates
    assert "observed; the exact share here is an identity, so the error is the estimate minus it" in estimates
    assert ", an identity</title>" not in estimates
    assert "same intervention" not in estimates and "columns before the first *: 0 by construction" in estimates
    assert "blocks.0.attn_write, position 2: 0.900" in svg and "blocks.1.mlp_write, position 2: 0.200" in svg
    assert "−1 or less" in svg and "+1 or more" in svg  # the colour scale, ticked at both ends
    assert figures.colour(1.0) == "#ff0000" and figures.colour(-2.0) == "#0000ff" and figures.colour(0.0) == "#ffffff"
    island = figures.explorer_html(report, "x.js")
    payload = json.loads(island.split('">', 1)[1].split("</script>", 1)[0])
    assert payload["designs"]["copied_token"]["activation"]["denoising"]["attn_write"][0][2] == 0.9
    assert payload["designs"]["copied_token"]["over_pairs"]["denoising"]["attn_write"][0][2] == [0.9, 0.8, 1.0]


def test_a_swap_is_named_as_an_identity_and_checked_on_the_tensors(random_pair):
    from residlab.course.lab07.patching import prepare

    matched = designs.make_design("matched_position")
    design = {"clean": matched.clean, "corrupt": matched.corrupt, "changed": list(matched.changed), "readout": matched.readout}
    (mirror,) = [cell for cell in cells.identities(design, 2) if cell.get("mirror")]
    assert mirror["positions"] == list(matched.changed) and mirror["site"] == "blocks.0.resid_pre"
    pair = prepare(random_pair.model, matched)
    cells.check_mirror(design, pair)
    a, b = matched.changed
    pair.corrupt["blocks.0.resid_pre"] = pair.corrupt["blocks.0.resid_pre"].clone()
    pair.corrupt["blocks.0.resid_pre"][b] += 1.0
    with pytest.raises(AssertionError, match=f"blocks.0.resid_pre at {a} \\(clean\\) is not the corrupt run's at {b}"):
        cells.check_mirror(design, pair)
    assert not cells.is_swap({**design, "changed": [a]})  # one changed position is no swap


def test_a_near_one_by_structure_is_named_as_such():
    report = _small_report(gap=20.0, floor=0.01)
    design = report["designs"]["copied_token"]
    design["readout_reach"] = 0.002  # block 0's heads at the readout barely read the changed position
    said = sentences.by_structure(design, "attn_write", 1, 2)
    assert "near 1 because block 0's heads at the readout barely attend to the changed positions (observed: at most 0.0020" in said
    assert "structure" not in said  # a learned attention pattern, observed, not the model's structure
    design["readout_reach"] = 0.00214  # printed rounded up, so that at most it stays true
    assert "at most 0.0022 of their attention" in sentences.by_structure(design, "attn_write", 1, 2)
    assert sentences.by_structure(design, "attn_write", 1, 1) == ""  # not the readout
    design["readout_reach"] = 0.3  # they read it: the share is no longer structure alone
    assert sentences.by_structure(design, "attn_write", 1, 2) == ""
    rows = sentences.null_rows(report, "copied_token")
    assert rows[0][:3] == ["null, block 0", "the null bar: 97.5th percentile over 64 null pairs of the block's largest "
                           "absolute share in a pair", "0.01 (largest 0.02)"]


def test_thresholds_print_so_they_stay_true_and_error_parts_keep_their_order():
    report = _small_report(gap=20.0, floor=0.01)
    report["untrained"]["highest_head_score"] = {"previous_token": 0.0925, "induction": 0.05}
    text = sentences.known_heads_sentence(report)
    assert "no head scores above 0.093 as previous-token or 0.050 as induction" in text  # 0.0925 is above 0.09
    cell = {part: _summary(0.0) for part in distribution.ERROR_PARTS}
    cell.update(total=_summary(-0.75), final_norm_shapley=_summary(-0.17, 0.01), upstream_shapley=_summary(-0.58, 0.01),
                final_norm=_summary(-0.33), final_norm_final_first=_summary(-0.02))  # fmt: skip
    report["distribution"]["designs"]["copied_token"]["head_error"] = [[cell]]
    text = error_sentences.head_error_sentence(report, "copied_token")
    assert "by the Shapley split on average its larger part is upstream (final LayerNorm -0.17, upstream -0.58)" in text
    # upstream first: final -0.33 of -0.75 (upstream -0.42); final first: -0.02 (upstream -0.73): both upstream
    assert text.endswith("the final LayerNorm's part is -0.33 (upstream first) and -0.02 (final LayerNorm first), the two "
                         "orders agreeing on the larger part.")
    cell.update(final_norm=_summary(-0.57))  # upstream first, the final LayerNorm is the larger part: the orders disagree
    assert error_sentences.head_error_sentence(report, "copied_token").endswith(
        "so which part is larger depends on the order: the Shapley split is their average.")
    cell.update(final_norm_shapley=_summary(-0.58, 0.01), upstream_shapley=_summary(-0.17, 0.01))  # the larger part moves; the order does not
    assert "split on average its larger part is the final LayerNorm (final LayerNorm -0.58, upstream -0.17)" in error_sentences.head_error_sentence(report, "copied_token")
    cell.update(final_norm_shapley=_summary(-0.15, 0.01), upstream_shapley=_summary(-0.14, 0.001))  # within EVEN_MARGIN
    text = error_sentences.head_error_sentence(report, "copied_token")
    assert "its error is split about evenly (final LayerNorm -0.15, upstream -0.14)" in text and "larger part is" not in text
    # means far apart: not "evenly" (-0.58 is most of -0.75); pair by pair, how often each part is the larger
    cell.update(final_norm_shapley=_summary(-0.17, 0.3), upstream_shapley=_summary(-0.58, 0.4), upstream_larger_fraction=0.8)
    text = error_sentences.head_error_sentence(report, "copied_token")
    assert ("on average its larger part is upstream (final LayerNorm -0.17, upstream -0.58); pair by pair the upstream "
            "part is the larger in size in 80 % of pairs, the final LayerNorm's in 20 %") in text and "evenly" not in text


def test_a_hybrid_prompts_share_beyond_0_or_1_is_read_through_its_metric():
    report = _small_report(gap=20.0, floor=0.01)  # M(clean) 10, M(corrupt) -10, target 2, rival 4
    cell = {"direction": "denoising", "position": 1, "prompt": [1, 2, 1], "earlier": [(0, 2)], "metric": 12.6, "share": 1.13,
            "target_present": True, "rival_present": False}  # fmt: skip
    noised = {**cell, "direction": "noising", "share": -0.13}
    report["designs"]["copied_token"]["hybrids"] = [cell, noised]
    text = sentences.hybrid_sentence(report, "copied_token")
    assert ("denoising at position 1 gives 1.13: the target follows an earlier occurrence of the readout's token and the "
            "rival follows none; its M (12.60) is above the clean run's (10.00), so the share is above 1") in text
    assert "noising at position 1 gives -0.13: the target follows" in text and text.count("so the share is below 0") == 1
    # one prompt run twice, denoising at one swapped position and noising at the other: an identity, said and checked
    assert ("run the same hybrid prompt, so their shares sum to 1 by construction, an identity" in text
            and ("denoising at position 1 and noising at position 1: 1.13 − 0.13. So of these 2 rows only 1 carries observed values of "
                 "their own; the other is 1 minus its partner's share.") in text)
    from residlab.course.lab07.page import check_hybrids

    check_hybrids({"hybrids": [cell, noised]}, "copied_token")
    with pytest.raises(AssertionError, match="the shares of one hybrid prompt do not sum to 1"):
        check_hybrids({"hybrids": [cell, {**noised, "share": 0.1}]}, "copied_token")
    cell.update(metric=-11.0, share=-0.05, earlier=[(0, 4)])
    text = sentences.hybrid_sentence(report, "copied_token")
    assert "the rival follows an earlier occurrence" in text and "is below the corrupt run's (-10.00), so the share is below 0" in text
    cell.update(metric=3.0, share=0.65, earlier=[(0, 4), (1, 2)])  # between the runs, with both tokens copyable
    said = sentences.hybrid_sentence(report, "copied_token").split("; noising")[0]
    assert said.endswith("both the target and the rival follow earlier occurrences of the readout's token; its M (3.00) "
                         "lies between the corrupt run's (-10.00) and the clean run's (10.00), so the share is between 0 "
                         "and 1, and M above 0: the prompt still favours the target (which of two copyable tokens the "
                         "model favours, and by how much, is observed here, not derived)")  # fmt: skip
    cell.update(metric=-3.0, share=0.35, earlier=[(0, 4)])
    said = sentences.hybrid_sentence(report, "copied_token").split("; noising")[0]
    assert said.endswith("and M at or below 0: the prompt does not favour the target") and "copyable" not in said


def test_which_comparisons_are_tests_is_read_from_the_verdicts_and_a_complement_is_no_second_test():
    named = {"previous_token": [[0, 1], [0, 2]], "current_token": [[0, 0], [0, 3]], "induction": [[1, h] for h in range(4)]}

    def entry(kind, block, chance, owners):
        return {"kind": kind, "block": block, "chance": chance, "unnamed_heads": 0, "owner_kinds": owners}

    kinds = {"previous_token/0": entry("previous_token", 0, 0.5, ["current_token"]),
             "current_token/0": entry("current_token", 0, 0.5, ["previous_token"]),
             "induction/1": entry("induction", 1, 1.0, [])}  # fmt: skip
    report = {"heads": {"named": named}, "designs": {"matched_position": {"changed": [5, 6]}}, "distribution": {
        "period": 8, "pairs": 64, "designs": {"matched_position": {"not_testable": [], "heads": {"denoising": {"kinds": kinds}}}}}}
    text = goal_sentences.which_are_tests(report)
    lines = text.splitlines()  # a Markdown list, a kind an item
    # the scope of a test said with it: one period, the positions the design changes
    assert lines[0] == ("- **previous-token heads** (block 0 head 1, block 0 head 2): compared with a random pick in the matched-position design "
                        "(at period 8 in every pair, positions 5 and 6 changed).")
    assert lines[1].startswith("- **current-token heads** (block 0 head 0, block 0 head 3): in the matched-position design "
                               "the complement of the previous-token heads' verdict, not a test of its own")
    assert lines[2].startswith("- **induction heads** (block 1 head 0, block 1 head 1, block 1 head 2, block 1 head 3): no "
                               "test of which head tops their block in the matched-position design")
    assert lines[2].endswith("but a test of their sizes against the null pairs.")  # what no design decides
    kinds["current_token/0"]["unnamed_heads"] = 1  # a head the rule names no kind could be on top: its own test
    assert ("current-token heads** (block 0 head 0, block 0 head 3): compared with a random pick in the matched-position design"
            in goal_sentences.which_are_tests(report))
    # the verdict words leave out "a head the rule names no kind" where the block has none: 0 by construction
    verdict = {"kind": "current_token", "fractions": {"found": 0.05, "other_kind": 0.95, "unnamed": 0.0, "nothing": 0.0},
               "other_kinds": ["previous_token"], "unnamed_heads": 0}  # fmt: skip
    said = [words for words, _ in verdicts.verdict_parts(verdict, verdicts.VERDICT_WORDS)]
    assert said == ["a named head on top", "a head of another named kind (previous-token) on top", "no head above the null bar"]
    assert verdicts.verdict_fractions(verdict, verdicts.VERDICT_WORDS) == (
        "of the pairs, 5 % with a named head on top, 95 % with a head of another named kind (previous-token) on top, "
        "0 % with no head above the null bar")  # fmt: skip
    verdict["unnamed_heads"] = 2
    assert "a head the rule names no kind on top" in [w for w, _ in verdicts.verdict_parts(verdict, verdicts.VERDICT_WORDS)]


def test_directions_that_typically_agree_still_name_their_widest_spread():
    report = _small_report(gap=20.0, floor=0.01)
    design = report["designs"]["copied_token"]
    measured = report["distribution"]["designs"]["copied_token"]
    measured["activation"] = {d: {k: [[_summary(v) for v in row] for row in rows] for k, rows in grids.items()}
                              for d, grids in design["activation"].items()}  # fmt: skip
    difference = {k: [[_differences([0.0] * 4) for _ in row] for row in rows] for k, rows in design["activation"]["denoising"].items()}
    difference["mlp_write"][1][2] = _differences([0.02, -0.18, 0.15, -0.01])  # small typically, wide pair by pair
    measured["activation_difference"] = difference
    text = compare_sentences.direction_sentence(report, "copied_token")
    assert text.startswith("On every cell the typical difference of denoising and noising is small")
    assert "most widely at blocks.1.mlp_write, position 2 (" in text and "is small (the identities" in text


def test_a_block_named_whole_is_no_test_and_its_heads_shares_are_said():
    report = _small_report(gap=20.0, floor=0.01)
    report["heads"]["named"] = {"induction": [[1, h] for h in range(4)]}
    report["heads"]["name_scores"]["induction"] = {"scores": [[0.0] * 4, [0.82, 0.93, 0.86, 0.93]]}
    heads = report["distribution"]["designs"]["copied_token"]["heads"]["denoising"]["heads"]
    heads[1] = [_summary(0.09), _summary(0.31), _summary(0.07), _summary(0.41)]
    text = head_sentences.all_named_sentence(report)
    assert text == ("Every head of block 1 scores as induction (0.820 to 0.930), so which one a method puts on top is no test "
                    "of the rule; in the copied-token design per-head denoising gives head 1.0 0.09, head 1.1 0.31, head "
                    "1.2 0.07, head 1.3 0.41 on average, shares that differ by up to 0.34: the rule gives one name to heads "
                    "whose causal shares differ.")
    heads[1] = [_summary(0.3), _summary(0.31), _summary(0.28), _summary(0.3)]
    assert head_sentences.all_named_sentence(report).endswith(" 0.30 on average; their causal shares are alike too.")
    report["heads"]["named"]["induction"] = [[1, 1], [1, 3]]
    assert head_sentences.all_named_sentence(report) == ""


def test_the_null_bar_is_the_upper_percentile_of_the_blocks_top_share_over_the_null_pairs():
    # 40 null pairs: block 0's top head takes 0.01 .. 0.40 (one per pair), one outlier pair 2.0 in block 1
    def pair(index):
        top = (index + 1) / 100
        heads = [[-top, top / 2, 0.0, 0.0], [2.0 if index == 7 else 0.01, 0.0, 0.0, 0.0]]
        return {"heads": {m: heads if m != "path_keys" else [heads[0], [None] * 4] for m in distribution.HEAD_METHODS},
                "activation": {d: {"resid_pre": [[0.0]]} for d in distribution.DIRECTIONS},
                "path": {"keys": 0.0}, "gap": 1.0}  # fmt: skip

    bounds = distribution.null_bounds([pair(i) for i in range(40)])
    tops = torch.tensor([(i + 1) / 100 for i in range(40)], dtype=torch.float64)
    assert bounds["heads"]["denoising"][0] == pytest.approx(float(torch.quantile(tops, 0.975)), abs=1e-6)
    assert bounds["heads_largest"]["denoising"][0] == {"largest": 0.4, "pairs": 40}
    # one outlier pair sets the largest, not the bar: 39 of 40 pairs' top is 0.01
    assert bounds["heads"]["denoising"][1] < 0.1 and bounds["heads_largest"]["denoising"][1]["largest"] == 2.0
    assert len(bounds["heads"]["path_keys"]) == 1  # a block the method cannot reach has no bar


def test_a_kind_one_method_cannot_test_is_said_so_and_leaves_the_named_heads_no_competitor():
    assert designs.untestable("matched_position", "noising") == ("current_token",)
    assert designs.untestable("matched_position", "denoising") == ()
    assert designs.untestable("copied_token", "noising") == ("previous_token",)
    assert designs.untestable("matched_position", "path_keys") == ("current_token",)  # predicted near 0, checked
    report = _small_report(gap=20.0, floor=0.01)
    measured = report["distribution"]["designs"]["matched_position"] = copy.deepcopy(report["distribution"]["designs"]["copied_token"])
    measured["not_testable_by_method"] = {"noising": ["current_token"]}
    measured["null"]["heads"]["noising"] = [0.021, 0.01]
    quiet = {**_summary(0.0, 0.04), "clears_fraction": 0.0, "beyond_fraction": 0.03, "null_beyond_fraction": 0.03, "beyond_p": 0.66,
             "mean_interval": [-0.004, 0.005], "positive_fraction": 0.5}
    rows = [[quiet] * 4, [_summary(0.1)] * 4]
    measured["heads"]["noising"] = {"heads": rows}
    report["heads"]["named"]["current_token"] = [[0, 0], [0, 3]]
    text = head_sentences.kind_sentence(report, "matched_position", "noising", "current_token")
    # the reason, then what was observed, on the held-out and on the null pairs, and the test of the two
    assert text.startswith(f"not identifiable by this method: {designs.by_method_reason('matched_position', 'noising')}. "
                           "Observed over the pairs: head 0.0 0.00 [-0.04, 0.04] (mean 0.000, its 95 % interval [-0.004, 0.005], "
                           "positive in 50 % of pairs), past the null bar (0.021 of the gap) in size in 3 % of the held-out "
                           "pairs and 3 % of the null pairs (p = 0.66); head 0.3 ")  # fmt: skip
    assert "the prediction is not rejected here" in text
    # the check's rule said once (check_rule): uncorrected and corrected, and why both; here how large a failure the
    # test can see, head by head where it differs
    assert ("by the check (read as Part 6 says, before its tables); with these null counts it rejects only at "
            f"{predictions.fewest_rejected(2, 64, 0.05)} or more held-out pairs past the bar") in text
    rule = predictions.check_rule(report)
    assert ("read at 0.05 uncorrected (a rejection counts against the mechanism, so a correction would favour it) and at "
            "0.025, Bonferroni over the page's 2 such checks: 0 of them reject uncorrected (about 0.1 would by chance "
            "alone were each an exact test at 0.05: a rough guide, for these discrete tests reject less often than their "
            "level, and the in-sample null, below, leans them the other way), 0 corrected") in rule
    assert "null pairs' rate is in-sample" in rule and "which a test of two independent rates ignores" in rule
    assert "not 0 on average" not in text
    rows[0][3] = {**quiet, "beyond_fraction": 0.2, "beyond_p": 0.004, "mean_interval": [0.011, 0.028]}  # fails in size
    text = head_sentences.kind_sentence(report, "matched_position", "noising", "current_token")
    assert ("the prediction fails for head 0.3: it passes the bar more often on the held-out pairs than on the null pairs, "
            "its p below 0.025, even after the correction") in text
    assert "not rejected" not in text and ("head 0.3 is not 0 on average (its mean's interval excludes 0; positive in 50 % "
                                           "of pairs), but within the bar in size: a consistent share below the bar, "
                                           "which this test cannot see") in text
    assert "head 0.3's mean share, 0.000 of the gap, is smaller in size than the bar (0.021), its mean's interval excluding 0" in text
    assert predictions.failed_predictions(report, "matched_position", "noising") == [(0, 3)]
    rows[0][0] = {**quiet, "null_beyond_fraction": 0.0}  # a head with no null pass can be rejected at fewer passes
    text = head_sentences.kind_sentence(report, "matched_position", "noising", "current_token")
    assert (f"rejects only at {predictions.fewest_rejected(0, 64, 0.05)} or more held-out pairs past the bar for head 0.0, "
            f"{predictions.fewest_rejected(2, 64, 0.05)} or more held-out pairs past the bar for head 0.3") in text
    rows[0][3].update(beyond_p=0.03)  # rejected uncorrected only: weak evidence, not a failure shown
    text = head_sentences.kind_sentence(report, "matched_position", "noising", "current_token")
    assert "the prediction fails" not in text and ("weak evidence against the prediction for head 0.3, not a failure shown: "
                                                   "it passes the bar more often on the held-out pairs than on the null "
                                                   "pairs, its p below 0.05 uncorrected but not below 0.025") in text
    assert predictions.failed_predictions(report, "matched_position", "noising", corrected=True) == []
    # a verdict that leaves the head out says it rests on a prediction the check rejects, how strongly, and whether
    # the verdict depends on it (how often the head would top its block were it competing)
    entry = {"kind": "previous_token", "block": 0, "named": [1, 2], "fixed": [0, 3], "movable": 2, "chance": 1.0,
             "fractions": {"found": 1.0, "other_kind": 0.0, "unnamed": 0.0, "nothing": 0.0}, "by_head": {"1": 0.1, "2": 0.9}}
    measured["heads"]["noising"]["kinds"] = {"previous_token/0": entry}
    measured["per_pair"] = {"heads": {"noising": [[[0.0, 0.2, 0.5, 0.01], [0.1] * 4]] * 63 + [[[0.0, 0.2, 0.1, 0.3], [0.1] * 4]]}}
    report["verdict_words"] = verdicts.VERDICT_WORDS
    verdict = head_sentences.kind_sentence(report, "matched_position", "noising", "previous_token")
    # no null comparison of which head tops in this test's entry; the sizes against the null pairs, whatever they show
    assert verdict.startswith("**No test against chance.** Block 0")  # this test's cells hold no paired null comparison
    for cell in rows[0]:
        cell.update(null_clears_fraction=0.0, clears_range=[0.0, 0.0],
                    null_paired={"mean": 0.0, "mean_interval": [0.0, 0.0], "higher": 0, "lower": 0, "p": 1.0})
    verdict = head_sentences.kind_sentence(report, "matched_position", "noising", "previous_token")
    # heads 0 and 3 are left out by the method (per-head noising), not by the design
    assert verdict.startswith("**Which head tops the block: no test (the mechanism predicts the other heads near 0 under this method); "
                              "share minus its own null pair's, mean [95 % interval], pairs above (sign test): "
                              "0.1 0.00 [0.00, 0.00], above in 0 of 64 (p = 1), 0.2 0.00 [0.00, 0.00], above in 0 of 64 (p = 1)")
    assert ("no test against chance: the block's other heads are not identifiable here (the mechanism predicts them near 0); "
            "this leaves out head 0.3 on a prediction the check below rejects (at 0.05 uncorrected only, weak evidence); "
            "competing, head 0.3 would have the block's largest share (the bar aside) in 1 of the 64 pairs") in verdict
    measured["per_pair"]["heads"]["noising"][-1] = [[0.0, 0.2, 0.5, 0.3], [0.1] * 4]
    assert "in 0 of the 64 pairs, so the verdict does not depend on leaving it out" in head_sentences.kind_sentence(
        report, "matched_position", "noising", "previous_token")
    assert goal_sentences.checks_item(report) == (
        "**predictions near 0**: the page checks 2 against the null pairs (Parts 4 and 6: every head a design or a "
        "method cannot identify); 1 reject at 0.05 uncorrected and 0 after a "
        "Bonferroni correction (head 0.3 by per-head noising in the matched-position design): weak evidence against "
        "those predictions, not failures shown")  # fmt: skip


def test_a_head_passes_a_bar_more_often_than_on_the_null_pairs_by_fishers_exact_test():
    assert predictions.more_often_p(6, 64, 2, 64) == pytest.approx(0.136624, abs=1e-6)  # scipy.stats.fisher_exact, greater
    assert predictions.more_often_p(0, 64, 0, 64) == 1.0  # nothing passes: nothing to tell apart
    assert predictions.more_often_p(20, 64, 0, 64) < 1e-6
    # with no null pass, 5 of 64 give p = 0.029 and 6 give 0.014 (scipy): the fewest that reject below 0.025
    assert predictions.fewest_rejected(0, 64, 0.025) == 6
    assert predictions.fewest_rejected(64, 64, 0.025) is None  # every null pair passes: nothing can be more often


def test_each_cause_of_a_direction_difference_is_said_for_the_sign_it_predicts():
    report = _small_report(gap=20.0, floor=0.01)
    heads = report["distribution"]["designs"]["copied_token"]["heads"]
    heads["noising"] = {"heads": [[_summary(0.1)] * 4, [_summary(0.3)] * 4]}
    flat, quiet = _differences([0.0, 0.1, -0.1, 0.05]), _differences([0.01, -0.02, 0.0, 0.01])
    rows = [[flat] * 4, [flat] * 4]
    rows[1][1] = _differences([-0.3, -0.4, -0.2, -0.1])  # noising above denoising only
    report["distribution"]["designs"]["copied_token"].update(head_difference=rows, null_head_difference=[[quiet] * 4] * 2)
    text = compare_sentences.head_direction_sentence(report, "copied_token")
    assert "noising above denoising can come from a head that works only together with others" in text
    assert "backup" not in text  # backup predicts the other sign


def test_the_naming_sequences_are_counted_from_the_report():
    spread = [[{"pairs": 576}]]
    report = {"heads": {"name_scores": {"previous_token": {"spread": spread, "spread_periods": list(range(4, 13))}}},
              "distribution": {"pairs": 64, "period": 8}}  # fmt: skip
    assert sentences.naming_sequences(report) == (
        "576 sequences of periods 4 to 12, 64 of each (each period weighted equally), drawn by the site's rule from a "
        "generator of their own, none of them a pair's sequence or used in training")  # fmt: skip
    spread[0][0]["pairs"] = 575  # not one count per period: the total alone
    assert sentences.naming_sequences(report).startswith("575 sequences of periods 4 to 12 (each")


def test_the_heads_are_named_on_sequences_apart_from_the_pairs(monkeypatch):
    drawn, held_out = naming.naming_sequences(), measures.held_out_sequences()
    assert drawn.keys() == held_out.keys() and all(drawn[p].shape == held_out[p].shape for p in drawn)
    # a naming draw that repeats a pair's sequence is refused, not used
    monkeypatch.setattr(naming, "NAMING_SEED", measures.HELD_OUT_SEED)
    with pytest.raises(ValueError, match="shares 64 sequence"):
        naming.naming_sequences()


def test_a_bound_that_rounds_to_0_keeps_its_sign_and_a_negligible_mean_is_said_so():
    # one precision for a mean and its interval: two significant figures where a nonzero one would print as 0.00
    assert sentences._small_interval(-0.0048, -0.0099, -0.00098) == "-0.0048 [-0.0099, -0.00098]"
    assert sentences._small_interval(0.0075, 0.0014, 0.0136) == "0.0075 [0.0014, 0.014]"
    assert sentences._small_interval(-0.09, -0.18, 0.0) == "-0.09 [-0.18, 0.00]"  # 0 itself is 0.00
    assert sentences.observed(1.0049) == "1.005" and sentences.observed(0.83) == "0.83"  # never an identity's 1.00
    assert sentences.observed_interval({"mean": 1.0008, "low": 0.97, "high": 1.03}) == "1.001 [0.970, 1.030]"  # one precision
    assert sentences.observed_interval({"mean": 0.7, "low": 0.33, "high": 0.92}) == "0.70 [0.33, 0.92]"
    told = {**_differences([0.002, 0.0018, 0.0016, 0.0021]), "mean_interval": [0.0016, 0.0022]}
    apart = {**_differences([0.3, 0.2, 0.25, 0.35]), "mean_interval": [0.2, 0.35]}
    spread = {"attn_write": [[None, told, apart]]}
    pairs = [(0, 0, "blocks.0.attn_write", position, 0, 0, "attn_write", 0) for position in (1, 2)]
    text = compare_sentences.told_apart(pairs, spread, " Beside it, ")
    assert "blocks.0.attn_write, position 1: 0.0019 [0.0016, 0.0022]" in text  # not [0.00, 0.00], which would hold 0
    assert "1 of them is under 0.01 of the gap in size: told apart, but negligible" in text
    assert ("about 0.1 would be by chance alone; blocks.0.attn_write, position 2; blocks.0.attn_write, position 1 survive a "
            "Bonferroni correction over them (p below 0.05 / 2 by the normal approximation): findings about those cells; "
            "the others are not read.") in text
    spread["attn_write"][0][1] = {**told, "mean_interval": [0.0001, 0.0037]}  # about 2 standard errors: not corrected
    assert "blocks.0.attn_write, position 2 survives a Bonferroni correction over them" in compare_sentences.told_apart(
        pairs, spread, " Beside it, ")  # fmt: skip


def test_the_null_bar_is_placed_among_the_null_pairs_values_as_torch_interpolates():
    assert chance.null_bar_position(64) == ("between the 3rd largest and the 2nd largest of those values, nearer the "
                                               "3rd largest")  # 0.975 * 63 = 61.4 (0-based, ascending)
    assert chance.null_bar_position(41) == "at the 2nd largest of those values"  # 0.975 * 40 = 39 exactly
    assert chance.null_bar_position(3) == "between the 2nd largest and the largest of those values, nearer the largest"
    assert chance.null_bar_exceeded(64) == "2 of the 64 null pairs (3 %, ties aside)"  # above index 61.4: 62 and 63
    assert chance.null_bar_exceeded(41) == "1 of the 41 null pairs (2 %, ties aside)"


def test_a_cells_bar_that_is_mostly_its_null_pairs_own_gap_is_said_so():
    measured = {"null": {"cells": {"denoising": 0.25}, "cells_at": {"denoising": {"site": "blocks.1.attn_write",
                "position": 14, "pair": 1}}}, "per_pair": {"gap": [20.0, 20.0], "null_gap": [0.1, 6.0]}}  # fmt: skip
    report = {"distribution": {"designs": {"matched_position": measured}}}
    said = sentences._bar_cell(report, "matched_position", "denoising")
    assert said == (", set by blocks.1.attn_write at position 14 in null pair 1, which there moves M by 83% of that null "
                    "pair's own gap (that gap is 0.300 of the design's): the bar is about that null pair's whole gap, which "
                    "reaches the readout through this site (the null changes tokens the mechanism does not read, not routes "
                    "it does not use)")
    measured["per_pair"]["null_gap"][1] = -6.0  # the null gap's sign kept: the swap raised M
    assert "(that gap is -0.300 of the design's)" in sentences._bar_cell(report, "matched_position", "denoising")
    measured["per_pair"]["null_gap"][1] = 6.0
    for null_gap in (20.0, 1.0):  # a quarter of its null pair's gap, or five times it: a site's bar either way
        measured["per_pair"]["null_gap"][1] = null_gap
        assert sentences._bar_cell(report, "matched_position", "denoising") == (
            ", set by blocks.1.attn_write at position 14 in null pair 1")


def test_a_head_told_apart_on_average_but_not_by_one_sign_is_said_and_read_only_if_it_survives():
    report = _small_report(gap=20.0, floor=0.01)
    heads = report["distribution"]["designs"]["copied_token"]["heads"]
    heads["noising"] = {"heads": [[_summary(0.1)] * 4, [_summary(0.3)] * 4]}
    flat, quiet = _differences([0.0, 0.1, -0.1, 0.05]), _differences([0.01, -0.02, 0.0, 0.01])
    rows = [[flat] * 4, [flat] * 4]
    report["distribution"]["designs"]["copied_token"].update(head_difference=rows, null_head_difference=[[quiet] * 4] * 2)
    rows[1][3] = _differences([0.3, 0.25, 0.35, 0.3, 0.28, -0.01, 0.32, -0.02, 0.3, 0.29, -0.03, 0.31])  # 75 % above 0
    rows[1][3]["above_zero"] = 0.74  # just under the one-sign rule: not flagged, yet its mean is far from 0
    text = compare_sentences.head_direction_sentence(report, "copied_token")
    assert "no head is flagged here" in text
    assert "Not flagged by one sign, yet told apart from 0 on average by the mean's own 95 % interval" in text
    assert "head 1.3 (0.22 [0.14, 0.30], above 0 in 74 % of pairs" in text and "above 0 in 74 % of pairs; apart from its null pairs' mean" in text
    assert "1 of them survives a Bonferroni correction over the 8 heads" in text
    assert ("for head 1.3 on average denoising exceeds noising (mean 0.2200 [0.1370, 0.3030], p = 2e-07), a difference of "
            "the mean, not of most pairs") in text  # unrounded, so the printed interval shows what the correction reads
    rows[1][3] = _differences([0.005, 0.004, 0.006, 0.005, -0.001, 0.005])  # told apart, but overlapping its null's mean
    rows[1][3]["above_zero"] = 0.7
    text = compare_sentences.head_direction_sentence(report, "copied_token")
    assert "overlapping its null pairs' mean" in text and "so none is read" in text
    rows[1][3] = flat  # nothing told apart: nothing added
    assert "on average" not in compare_sentences.head_direction_sentence(report, "copied_token")


def test_the_worked_example_is_placed_among_the_pairs_cell_by_cell():
    report = _small_report(gap=20.0, floor=0.01)
    design = report["designs"]["copied_token"]
    measured = report["distribution"]["designs"]["copied_token"]
    measured["activation"] = {d: {k: [[_summary(v) for v in row] for row in rows] for k, rows in grids.items()}
                              for d, grids in design["activation"].items()}  # fmt: skip
    text = compare_sentences.example_place_sentence(report, "copied_token")
    assert text.startswith("Every one of the worked example's ") and "a typical draw, cell by cell" in text
    measured["activation"]["noising"]["mlp_write"][0][2] = _summary(0.3, 0.05)  # the example's 0.90 lies far outside
    text = compare_sentences.example_place_sentence(report, "copied_token")
    assert "1 fall outside the pairs' interval (noising at blocks.0.mlp_write, position 2: 0.90 on the example, 0.30 [0.25, 0.35] over the pairs)" in text
    assert "by construction" not in text  # the identities are left out, never placed


def test_the_named_heads_scores_are_said_once_in_score_order_with_every_neighbouring_tie():
    report = _small_report(gap=20.0, floor=0.01)
    scores = report["heads"]["name_scores"]["previous_token"]["scores"][0]
    text = head_sentences.score_order_sentence(report)
    assert f"block 0's previous-token heads, head 1 {scores[1]:.3f}, head 2 {scores[2]:.3f}" in text
    scores[2] = scores[1] - 0.01  # within the tie threshold of Lab 06's rule
    text = head_sentences.score_order_sentence(report)
    assert "(tied: heads 1 and 2)" in text and "Two heads tie when their scores are within 0.05 on average" in text
    scores[2] = scores[1] - 0.2
    assert "tied" not in head_sentences.score_order_sentence(report)


def test_chance_over_namings_is_a_permutation_over_every_naming_of_the_movable_heads():
    # block 0 of 4 heads, heads 1 and 2 named, the bar 0.1: head 2 on top in 3 pairs, head 0 in 1, nothing above in 1
    grids = [[[0.0, 0.2, 0.5, 0.0]]] * 3 + [[[0.4, 0.0, 0.2, 0.0]], [[0.05, 0.0, 0.0, 0.0]]]
    report = {"distribution": {"designs": {"d": {"per_pair": {"heads": {"denoising": grids}},
                                                 "null": {"heads": {"denoising": [0.1]}}}}}}  # fmt: skip
    entry = {"block": 0, "named": [1, 2], "fixed": []}
    p, namings, best = chance.naming_permutation(report, "d", "denoising", entry)
    # 6 namings of 2 among 4: {0,2} does best (4 of 5), {1,2} {2,3} tie at 3 of 5 and beat the rest
    assert namings == 6 and best == 0.8 and p == 3 / 6
    assert chance.naming_permutation(report, "d", "denoising", {**entry, "named": [0, 2]})[0] == 1 / 6
    assert chance.naming_permutation(report, "d", "denoising", {**entry, "fixed": [3]})[1] == 3  # only 3 heads can be named
    said = chance.naming_sentence(chance.naming_permutation(report, "d", "denoising", entry), len(entry["named"]))
    assert "of the 6 ways to name 2" in said and "a permutation p of 0.5" in said and "could go below 0.17" in said
    assert chance.naming_outcome(chance.naming_permutation(report, "d", "denoising", entry)) == "over the 6 namings p = 0.5, no test"
    assert chance.naming_sentence(None, 2) == chance.naming_outcome(None) == ""  # a report without per-pair shares


def test_a_named_heads_size_is_read_signed_against_the_null_pairs():
    # a share past the bar the wrong way counts in size (the checks of predictions near 0), not as a detection
    held = [{"heads": {"denoising": [[0.3, -0.3, 0.0, 0.0]]}}] * 4
    null = [{"heads": {"denoising": [[0.0, 0.0, 0.0, 0.0]]}}] * 4
    table = distribution.head_table(held, "denoising", [0.1], {"previous_token": [[0, 0], [0, 1]]}, null_pairs=null)
    head0, head1 = table["heads"][0][0], table["heads"][0][1]
    assert head0["beyond_fraction"] == head1["beyond_fraction"] == 1.0  # in size, both pass
    assert head0["clears_fraction"] == 1.0 and head1["clears_fraction"] == 0.0  # signed, only head 0
    assert head1["null_clears_fraction"] == 0.0
    # the size test is pair by pair against the null pair's share, with no bar: head 0 above in all 4 (p = 1/16),
    # head 1 below in all 4 (p = 1)
    assert head0["null_paired"] == {"mean": 0.3, "mean_interval": [0.3, 0.3], "higher": 4, "lower": 0, "p": 0.0625}
    assert head1["null_paired"]["higher"] == 0 and head1["null_paired"]["p"] == 1.0
    ranged = distribution.head_table(held, "denoising", [0.1], {}, null_pairs=null, bar_range=[[0.05, 0.35]])
    assert ranged["heads"][0][0]["clears_range"] == [0.0, 1.0]  # above the range's top bar in none, its bottom in all
    maxima = [0.01] * 62 + [0.2, 0.5]  # two outliers of 64: the bar lies between them and the bulk
    low, high = distribution.bar_interval(maxima, torch.Generator().manual_seed(0))
    assert low < 0.2 < high <= 0.5  # resampled, the bar moves from near the bulk to the largest


def test_the_plain_summary_is_chosen_from_its_numbers():
    def kinds(top, null, discordant):
        return {"previous_token/0": {"block": 0, "named": [1, 2], "top_named": top, "null_top_named": null,
                                     "top_named_discordant": discordant, "top_named_p": predictions.paired_p(*discordant)}}

    def design(keys, values, current=None, attribution_head2=None):
        heads = [[{"mean": m, "null_paired": {"higher": 60, "lower": 4, "p": 1e-9}} for m in current or [0.0, 0.1, 0.78, 0.0]]]
        per_pair = {"heads": {"attribution": [[[0.0, 0.0, v, 0.0]] for v in attribution_head2 or [0.0]]}}
        return {"path": {"keys": {"mean": keys}, "values": {"mean": values}}, "per_pair": per_pair,
                "heads": {"denoising": {"kinds": kinds(0.95, 0.38, [39, 2]), "heads": heads},
                          "attribution": {"kinds": kinds(0.42, 0.42, [14, 14])}}}  # fmt: skip
    report = {"distribution": {"pairs": 64, "period": 8, "designs": {
        "copied_token": design(-0.02, 0.79, current=[0.5, 0.0, 0.0, 0.25]),
        "matched_position": design(0.70, 0.13, attribution_head2=[-0.1] * 42 + [0.3] * 22)}},
        "heads": {"named": {"current_token": [[0, 0], [0, 3]]}}}  # fmt: skip
    said = goal_sentences.plain_summary(report)
    items = said.strip().split("\n")
    assert all(item.startswith("- **") for item in items)  # a list, one result an item
    assert "copied-token design mostly through block 1's values (keys alone -0.02 of the gap, values alone 0.79)" in said
    assert "matched-position design mostly through block 1's keys" in said
    # nothing counted against the bar: the rates with the bar aside, beside the model's own null
    assert ("In the matched-position design, per-head denoising gives a named one the largest share in block 0, the null "
            "bar set aside, in 95 % of pairs (95 % Wilson [86.6 %, 98.3 %]), against 38 % of the model's own null pairs") in said
    assert "Head 0.2 carries 0.78 of the gap on average, more than on its own null pair in 60 of 64 pairs" in said
    assert ("gives a named one the largest share, the bar set aside, no more often, by the paired test, than on the null pairs (42 % of pairs "
            "against 42 %). It gives head 0.2 a mean share of 0.04 against the exact patch's 0.78, negative in 42 of 64 "
            "pairs (66 %, 95 % Wilson [") in said
    assert "): it misses most of that head's share;" in said  # negative in 66 %: not "most pairs" (at least 90 %)
    assert "the key route" not in said  # no path patching's per-head sizes in this report: no reading of roles
    assert "they carry on average 0.50 (head 0.0) and 0.25 (head 0.3) of the gap" in said
    report["distribution"]["designs"]["matched_position"] = design(0.40, 0.30, attribution_head2=[0.7] * 64)
    said = goal_sentences.plain_summary(report)
    assert "through block 1's keys and values alike" in said and "): close to the exact patch in size;" in said
    report["distribution"]["designs"]["matched_position"] = design(0.40, 0.30, attribution_head2=[-0.1] * 60 + [0.1] * 4)
    assert "negative in 60 of 64 pairs (94 %, 95 % Wilson [" in (said := goal_sentences.plain_summary(report))
    assert "): it reverses that head's sign in most pairs;" in said


def test_the_nulls_reach_at_the_end_of_the_prompt_is_said_from_the_attention():
    def design(changed, first):
        return {"null": {"changed": [2, 3], "attention": {"changed": [[changed, 0.0], [0.01, 0.0]], "first": [[first, 0.0], [0.0, 0.0]]}}}
    report = {"distribution": {"designs": {"matched_position": design(0.03, 0.75)}}}
    said = chance.null_reach_sentence(report)
    assert "its positions (2 and 3) get at most 0.03 of a head's attention (head 0.0), the prompt's first 2 positions up to 0.75 (head 0.0)" in said
    assert "the null leaves the first positions alone because this model's heads read them more from there" in said
    report["distribution"]["designs"]["matched_position"] = design(0.4, 0.1)  # a model that reads the null's positions
    assert "leaving them alone gains nothing" in chance.null_reach_sentence(report)
    assert chance.null_reach_sentence({"distribution": {"designs": {"d": {"null": {}}}}}) == ""


def test_attention_where_the_design_acts_is_read_beside_the_whole_sequence_score():
    from residlab.course.lab07 import position_sentences

    pairs = 4
    report = {"heads": {"named": {"previous_token": [[0, 1], [0, 2]]},
                        "name_scores": {"previous_token": {
                            "scores": [[0.05, 0.85, 0.81, 0.1]],
                            "by_query": [[[0.05] * 5, [0.9] * 5, [0.97, 0.97, 0.97, 0.3, 0.1], [0.1] * 5]],
                            "at_changed": {"queries": [3, 4], "pair_sequences": [[[0.0] * pairs, [0.9] * pairs, [0.96, 0.96, 0.96, 0.5], [0.1] * pairs]]}}}},
              "distribution": {"designs": {"matched_position": {"per_pair": {"heads": {"denoising": [
                  [[0.0, 0.1, 0.6, 0.0]], [[0.0, 0.1, 0.6, 0.0]], [[0.0, 0.6, 0.1, 0.0]], [[0.0, 0.6, 0.1, 0.0]]]}}}}}}  # fmt: skip
    said = position_sentences.changed_positions_sentence(report)
    # head 2 (the lower whole-sequence score) leads where the design acts in 3 of 4 pairs; its share is the larger in 2
    assert "(3 and 4), head 2 gives the previous token 0.84 of its attention on average and head 1 0.90" in said
    assert "head 2's is the higher in 3 of the 4 pairs, so there head 2 leads" in said
    assert "agrees with per-head denoising's (whose share is the larger) in 3 of the 4 pairs, within what independent orders" in said
    assert "from position 4 on head 2 gives the previous token less than half of its attention (0.30, 0.10;" in said
    report["heads"]["name_scores"]["previous_token"]["by_query"][0][2] = [0.97] * 5  # no turn: no such clause
    assert "less than half" not in position_sentences.changed_positions_sentence(report)
    report["heads"]["name_scores"]["previous_token"]["scores"][0][2] = 0.5  # no tie: nothing to read apart
    assert position_sentences.changed_positions_sentence(report) == ""


def test_the_bar_is_said_as_one_draw_s_and_a_reversed_sign_is_said():
    from residlab.course.lab07 import size_sentences

    null = {"heads": {"denoising": [0.05, 0.03]}, "heads_bar_range": {"denoising": [[0.03, 0.08], [0.02, 0.06]]},
            "heads_largest": {"denoising": [{"largest": 0.08, "pairs": 2}, {"largest": 0.06, "pairs": 2}]}}
    per_pair = {"gap": [2.0, 2.0], "null_gap": [0.1, -1.0],  # the null's whole change: 0.05 and 0.5 of the gap
                "null_heads": {"denoising": [[[0.0, 0.07], [0.01, 0.0]], [[0.2, 0.0], [0.0, 0.0]]]}}
    report = {"distribution": {"designs": {"matched_position": {"null": null, "per_pair": per_pair}}}}
    said = chance.bar_range_sentence(report)
    assert "block 0's 0.050 between 0.030 and 0.080 and block 1's 0.030 between 0.020 and 0.060" in said
    assert "a rough range for another draw's bar, which understates how far it can move" in said
    assert "cannot go past this draw's largest value (block 0's 0.080, block 1's 0.060), so another draw's bar can lie outside" in said
    assert chance.bar_range_sentence({"distribution": {"designs": {"matched_position": {"null": {}}}}}) == ""
    cell = {"pairs": 64, "null_paired": {"higher": 25, "lower": 39, "p": 0.97}}
    assert size_sentences._paired(cell) == ("above it in 25 of 64 pairs, below in 39 (one-sided "
                                            "sign test, p = 0.97; below more often: p = 0.052)")
    cell["null_paired"].update(higher=39, lower=25, p=0.05)
    assert "below more often" not in size_sentences._paired(cell)
