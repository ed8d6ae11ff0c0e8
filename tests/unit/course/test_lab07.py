"""Lab 07's room: the designs' invariants, the patching identities any model satisfies, the verdict rules, the
sentences chosen from their numbers (the not-read branch included) and the page's build-time checks."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from residlab.course.lab07 import designs, lab, sentences


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


@pytest.mark.parametrize(("row", "known", "floor", "outcome"), [
    ([0.1, 0.8, 0.2, 0.0], [1], 0.01, "found"),
    ([0.1, 0.80, 0.78, 0.0], [1, 2], 0.01, "found"),  # a tie between two known heads
    ([0.1, 0.80, 0.78, 0.0], [1], 0.01, "tied"),
    ([0.9, 0.1, 0.2, 0.0], [1], 0.01, "other"),
    ([0.005, 0.001, 0.0, 0.0], [1], 0.01, "nothing"),
])  # fmt: skip
def test_head_verdicts(row, known, floor, outcome):
    assert lab.head_verdict(row, known, floor)["outcome"] == outcome


def _small_report(gap: float, floor: float) -> dict:
    """A report of the shape ``run_lab`` writes, one design, numbers chosen by the test."""
    grid = [[0.0, 0.0, 0.9], [0.0, 0.0, 0.2]]
    entry = [[0.0, 1.0, 0.9], [0.0, 0.0, 0.2]]  # block 0's input at the one changed position: 1 by construction
    output = [[0.0, 0.0, 0.2], [0.0, 0.0, 1.0]]  # block 1's input is block 0's output; the readout reads block 1's
    design = {"clean": [1, 2, 1], "corrupt": [1, 3, 1], "target": 2, "rival": 4, "changed": [1], "readout": 2, "clean_metric": gap / 2, "corrupt_metric": -gap / 2,
              "gap": gap, "readable": abs(gap) > lab.READ_FACTOR * floor,
              "activation": {d: {"resid_pre": entry, "attn_write": grid, "mlp_write": grid, "resid_post": output}
                             for d in ("denoising", "noising")},
              "attribution": {k: grid for k in ("resid_pre", "attn_write", "mlp_write", "resid_post")},
              "error": {k: [[0.0, 0.0, -0.5], [0.0, 0.0, 0.0]] for k in ("resid_pre", "attn_write", "mlp_write", "resid_post")},
              "bends": {k: [[{"attention_moved": 0.0, "scale_change": 0.0}] * 2 + [{"attention_moved": 0.4, "scale_change": 0.1}],
                            [{"attention_moved": 0.0, "scale_change": 0.0}] * 3] for k in ("resid_pre", "attn_write", "mlp_write", "resid_post")},
              "path": {"queries": 0.0, "keys": 0.7, "values": 0.0, "everything": 0.9}}  # fmt: skip
    return {"designs": {"copied_token": design}, "read_factor": lab.READ_FACTOR,
            "null": {"seeds": [0, 1, 2], "designs": {"copied_token": {"noise_floor": floor, "largest_cell_effect": floor}}}}


def test_a_gap_within_its_floor_is_not_read():
    report = _small_report(gap=0.05, floor=0.03)
    assert "no share computed from it is read" in sentences.gap_sentence(report, "copied_token")
    for say in (sentences.path_sentence, sentences.attribution_sentence):
        assert say(report, "copied_token") == "Not read: the gap is within its noise floor."
    assert sentences.grid_sentence(report, "copied_token", "denoising").startswith("Not read")


def test_sentences_follow_their_numbers():
    report = _small_report(gap=20.0, floor=0.01)
    assert "2000 times the floor" in sentences.gap_sentence(report, "copied_token")
    assert "keys alone carry 78%" in sentences.path_sentence(report, "copied_token")
    report["designs"]["copied_token"]["path"]["keys"] = 0.0
    assert "the keys carry nothing above the null" in sentences.path_sentence(report, "copied_token")
    text = sentences.attribution_sentence(report, "copied_token")
    assert "moves block 1's attention at the readout by 0.40" in text and "error -0.50" in text
    for cells in report["designs"]["copied_token"]["bends"].values():
        cells[0][2] = {"attention_moved": 0.0, "scale_change": 0.2}
    assert "changes the final LayerNorm's scale there by 20%" in sentences.attribution_sentence(report, "copied_token")


def test_the_page_checks_catch_a_moved_cell_before_the_first_difference():
    from residlab.course.lab07.page import check_report

    report = _small_report(gap=20.0, floor=0.01)
    report["designs"]["copied_token"]["error"] = {k: [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]] for k in ("resid_pre", "attn_write", "mlp_write", "resid_post")}
    report["designs"]["copied_token"]["attribution"] = report["designs"]["copied_token"]["activation"]["denoising"]
    check_report(report)
    split = json.loads(json.dumps(report))
    split["designs"]["copied_token"]["activation"]["denoising"]["resid_post"][0][2] = 0.3
    with pytest.raises(AssertionError, match="resid_pre 1 != resid_post 0"):
        check_report(split)
    moved = json.loads(json.dumps(report))
    moved["designs"]["copied_token"]["activation"]["noising"]["mlp_write"][1][0] = 0.1
    with pytest.raises(AssertionError, match="a cell before 1 moved"):
        check_report(moved)
    forced = json.loads(json.dumps(report))
    forced["designs"]["copied_token"]["activation"]["noising"]["resid_post"][1][2] = 0.9
    with pytest.raises(AssertionError, match="noising blocks.1.resid_post at 2: 0.9, not 1 by construction"):
        check_report(forced)


def test_the_grid_sentence_counts_a_tensor_once_and_says_what_holds_by_construction():
    report = _small_report(gap=20.0, floor=0.01)
    text = sentences.grid_sentence(report, "copied_token", "denoising")
    assert text.startswith("The cells that move at least half of the gap when restored alone: blocks.0.resid_pre at "
                           "position 1 (1.00, by construction: the prompts differ only there); blocks.0.resid_pre at "
                           "position 2 (0.90); blocks.0.attn_write at position 2 (0.90); blocks.0.mlp_write at position "
                           "2 (0.90); blocks.1.resid_post at position 2 (1.00, by construction: the metric reads only "
                           "this state).")
    # 4 kinds x 2 blocks x 3 positions, less block 1's input (block 0's output): 21 cells, 8 of them above 0.01
    assert ("Of the 21 distinct cells (each block's input is the block before's output, counted once), 8 (2 of them by "
            "construction) move M") in text
    assert text.endswith("the others are at the null, 7 of them exactly 0 by causality (before the first position "
                         "where the prompts differ).")  # position 0 of each of the 7 distinct sites
    assert sentences.distinct_cells(report["designs"]["copied_token"])[9][:2] == ("blocks.0.resid_post = blocks.1.resid_pre", 0)
    report["designs"]["copied_token"]["changed"] = [1, 2]  # two changed positions: no one cell makes one run the other
    assert "differ only there" not in sentences.grid_sentence(report, "copied_token", "denoising")


def test_the_figure_and_the_explorer_read_the_same_numbers():
    from residlab.course.lab07 import figures

    report = _small_report(gap=20.0, floor=0.01)
    svg = figures.activation_figure(report, "copied_token")
    assert svg.count("<rect") == 1 + 4 * 2 * 6  # the paper, then kinds x directions x cells
    assert "blocks.0.attn_write, position 2: 0.900" in svg and "blocks.1.mlp_write, position 2: 0.200" in svg
    assert figures.colour(1.0) == "#ff0000" and figures.colour(-2.0) == "#0000ff" and figures.colour(0.0) == "#ffffff"
    island = figures.explorer_html(report, "x.js")
    payload = island.split('">', 1)[1].split("</script>", 1)[0]
    assert json.loads(payload)["designs"]["copied_token"]["activation"]["denoising"]["attn_write"][0][2] == 0.9
