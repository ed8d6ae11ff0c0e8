"""The induction pages' sentences are chosen from the numbers: each reading flips when its number does."""

from __future__ import annotations

from residlab.course.models.induction import sentences


def report(repeated=1.0, first=0.04, previous_block=0, previous_score=0.9, induction_block=1, top1=(0.0, 0.0, 0.0, 1.0, 1.0),
           runner_up=0.1, clean=5.0, corrupt=-1.0):
    states = ["embedding", "block 0, after attention", "after block 0", "block 1, after attention", "after block 1 (the output)"]
    head = lambda kind, block, score: {"kind": kind, "block": block, "head": 2, "score": score,  # noqa: E731
                                       "above_threshold": score > 0.5, "runner_up": 0.1}
    return {
        "halves": {"first": {"accuracy": first, "predictions": 2500}, "repeated": {"accuracy": repeated},
                   "first_best_possible": 0.04, "uniform_chance": 0.02},
        "held_out": {"periods": [4, 8]},
        "head_scores": {kind: [[runner_up, 0.0, (score if block == this else 0.0), 0.0] for block in range(2)]
                        for kind, this, score in (("previous_token", previous_block, previous_score),
                                                  ("induction", induction_block, 0.95))},
        "heads_found": {"previous_token": head("previous-token", previous_block, previous_score),
                        "induction": head("induction", induction_block, 0.95)},
        "head_rule_threshold": 0.5,
        "lens": {"held_out": {state: {"top1": value} for state, value in zip(states, top1)}},
        "patching": {"rows": ["a", "b"], "recovery": [[0.1, 0.9], [0.2, 0.3]], "clean_metric": clean,
                     "corrupt_metric": corrupt, "experiment": {"clean": [5, 6], "corrupt": [4, 6]}},
    }


def test_accuracy_sentence_follows_the_accuracies():
    assert "has learned to predict the repeat" in sentences.accuracy_sentence(report())
    assert "has not reached the goal" in sentences.accuracy_sentence(report(repeated=0.6))
    assert "at the chance level, 0.040" in sentences.accuracy_sentence(report())
    assert "shortcut" in sentences.accuracy_sentence(report(first=0.5))
    # Below chance (beyond two standard errors of 2500 predictions, 0.008) is said and explained.
    below = sentences.accuracy_sentence(report(first=0.02))
    assert "below chance" in below and "already" in below and "0.008" in below
    assert "at the chance level" in sentences.accuracy_sentence(report(first=0.035))


def test_head_sentence_follows_the_rule_and_the_block():
    assert "where the mechanism needs it" in sentences.head_sentence(report(), "previous_token")
    assert "not in block 0" in sentences.head_sentence(report(previous_block=1), "previous_token")
    assert sentences.head_sentence(report(previous_score=0.3), "previous_token").startswith("No head attends mostly")
    # the runner-up named by block and head; a near-equal runner-up makes a tie, said as one
    assert "the next highest is 0.10, in block 0, head 0" in sentences.head_sentence(report(), "previous_token")
    tie = sentences.head_sentence(report(runner_up=0.88), "previous_token")
    assert tie.startswith("The highest previous-token scores are a tie: 0.900 in block 0, head 2 and 0.880 in block 0, head 0")
    assert "both where the mechanism needs it" in tie and not sentences.tie_across_blocks(report(runner_up=0.88), "previous_token")
    across = report(runner_up=0.88)
    across["head_scores"]["previous_token"][0][0] = 0.0  # the runner-up now sits in block 1 only
    assert "in different blocks" in sentences.head_sentence(across, "previous_token")
    assert sentences.tie_across_blocks(across, "previous_token")


def test_head_scores_are_read_against_a_head_that_attends_evenly():
    null = sentences.uniform_attention_scores([4])
    # n = 8 positions: previous-token weight 1/(t+1) for t = 1..7; induction weight 1/(t+1) for t = P..2P-1 = 4..7
    assert abs(null["previous_token"] - sum(1 / (t + 1) for t in range(1, 8)) / 7) < 1e-6
    assert abs(null["induction"] - sum(1 / (t + 1) for t in range(4, 8)) / 4) < 1e-6
    assert f"attending evenly to every position it may read scores" in sentences.head_sentence(report(), "induction")


def test_lens_and_patching_sentences_name_what_the_numbers_show():
    assert "at the state named block 1, after attention (" in sentences.lens_sentence(report())
    assert sentences.lens_sentence(report(top1=(0.0,) * 5)).startswith("At no state")
    assert "a at position 1 (R = 0.90)" in sentences.patching_sentence(report())
    assert "uniform guess is right 0.020" in sentences.lens_sentence(report())
    # a gap below the floor is not read at all
    small = sentences.patching_sentence(report(clean=0.03, corrupt=0.0))
    assert "no recovery is read" in small and "R =" not in small
    assert "no finding" not in sentences.patching_sentence(report())


def test_the_first_rows_cell_where_the_inputs_differ_is_called_no_finding():
    # Patching the first block's input at the only position the inputs differ turns the corrupted run into the
    # clean one: its R = 1 holds by construction, whatever the model.
    trivial = report()
    trivial["patching"] |= {"recovery": [[0.1, 1.0], [0.2, 0.3]], "experiment": {"clean": [5, 6], "corrupt": [5, 7]}}
    text = sentences.patching_sentence(trivial)
    assert "a at position 1 (R = 1.00)" in text  # the identity, in two decimals
    trivial["patching"]["recovery"][1][1] = 0.998  # observed, near 1: three decimals
    assert "b at position 1 (R = 0.998)" in sentences.patching_sentence(trivial)
    assert text.endswith("The a at position 1 is no finding: it is the only place the two inputs differ, so patching "
                         "it makes the corrupted run the clean one and R = 1 by construction.")


def test_no_sentence_holds_a_quote_mark():
    texts = [sentences.accuracy_sentence(report()), sentences.head_sentence(report(), "induction"),
             sentences.lens_sentence(report()), sentences.patching_sentence(report())]
    assert not any(mark in text for text in texts for mark in "'\"`")


def test_audit_sentence_says_what_was_found_either_way():
    predicted = {"site": "blocks.1.attn_write", "position": 14, "total_effect": 9.0, "patch_recovery": 1.0}
    other = {"site": "blocks.0.attn_write", "position": 7, "total_effect": 1.0, "patch_recovery": 0.8}
    found = {"predicted": predicted, "largest_recovery": predicted, "largest_total": predicted,
             "found_by_recovery": True, "found_by_total": True}
    assert sentences.audit_sentence(found).startswith("The audit finds the write the mechanism predicts")
    missed = dict(found, largest_recovery=other, found_by_recovery=False)
    text = sentences.audit_sentence(missed)
    assert "By patch recovery it does not: blocks.0.attn_write at position 7 has a larger one (0.80)." in text
    assert "By total effect (in size) the audit finds it" in text


def test_experiment_sentence_names_the_one_changed_token_and_how_the_rule_named_the_rival():
    experiment = {"clean": (4, 9, 2, 8, 4, 9), "corrupt": (4, 9, 30, 8, 4, 9), "target": 2, "rival": 30,
                  "first_occurrence_next": 2, "corrupt_top": 30}
    text = sentences.experiment_sentence(experiment)
    assert "changes only the token at position 2, the one after the earlier occurrence of the last token, from 2 to 30" in text
    assert "top prediction of the corrupted run, token 30: the token induction would copy there." in text
    other = sentences.experiment_sentence(dict(experiment, rival=11, corrupt_top=11))
    assert "token 11: not the token induction would copy there, 30." in other
    fallback = sentences.experiment_sentence(dict(experiment, rival=8, corrupt_top=2))
    assert "still predicts the target 2, so by the rule of Lesson 2.1 the rival is the best other token of the clean run, 8." in fallback
    assert not any(mark in text + other + fallback for mark in "'\"`")


def test_the_corrupt_input_changes_only_the_token_induction_copies():
    """The design that isolates induction (Lab 06 Part 3's): the repeat is kept, one token differs, the one after
    the readout token's earlier occurrence; the rival follows the lesson's rule on the model's own logits."""
    import torch

    from residlab.audit.measures import choose_rival
    from residlab.course.models.induction import measures

    class Fixed(torch.nn.Module):  # a stand-in decoder whose readout prefers token 5, then 7
        def forward(self, input_ids, use_cache=False):
            logits = torch.zeros(input_ids.shape[0], input_ids.shape[1], measures.VOCAB_SIZE)
            logits[..., 5], logits[..., 7] = 2.0, 1.0
            return type("Output", (), {"logits": logits})()

    experiment = measures.patching_experiment(Fixed())
    period = measures.EXAMPLE_PERIOD
    differing = [p for p, (a, b) in enumerate(zip(experiment.clean, experiment.corrupt)) if a != b]
    assert differing == [experiment.first_occurrence_next] == [period - 1]
    assert experiment.clean[period:] == experiment.clean[: period - 1]  # the repeat, in the clean input ...
    assert experiment.corrupt[period:] == experiment.corrupt[: period - 1]  # ... and kept in the corrupt one
    assert experiment.corrupt[period - 1] not in experiment.clean
    assert experiment.target == measures.example_sequence()[2 * period - 1]
    assert experiment.corrupt_top == 5 and experiment.rival == (7 if experiment.target == 5 else 5)
    logits = torch.zeros(measures.VOCAB_SIZE)
    logits[experiment.target] = 3.0
    assert choose_rival(logits, logits, experiment.target) != experiment.target  # the rule never names the target


def test_a_recovery_the_two_block_layout_forces_is_said_to_be_forced():
    forced = sentences.forced_sentence(0.999, 0.001, 14)
    # an observed near-1 recovery in three decimals, so it is not read as an identity's 1.00
    assert forced.startswith("Block 1's attention write at position 14 recovers 0.999, and that is close to forced, not found")
    assert sentences.forced_sentence(0.7, 0.001, 14) == ""  # partial: read as a finding
    assert sentences.forced_sentence(0.999, 0.3, 14) == ""  # another route carries part of it
    assert sentences.forced_sentence(None, 0.0, 14) == sentences.forced_sentence(1.0, None, 14) == ""
