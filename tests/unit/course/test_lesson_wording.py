"""Lesson 2.1's statements that are chosen from numbers: how often the audited sequences were trained on, what
the gradient profile's three stacks show, what the retained share says; and the state names the code uses.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from residlab.capture import sites
from residlab.capture.blocks import BLOCK_TYPES, COPY_MODEL
from residlab.course.models import copy_model, lesson_lab
from residlab.course.lesson import lesson_figures
from residlab.course.models.gradient_profile import GradientProfile

ROOT = Path(__file__).resolve().parents[3]
CLEAN, CORRUPT = lesson_lab.CLEAN_TOKENS, lesson_lab.CORRUPT_TOKENS


# ---- the held-out question: counted in the batches training actually drew -----------------------------------


@pytest.mark.slow
def test_the_replayed_counts_are_the_counts_in_the_batches_training_drew(monkeypatch):
    drawn = []

    def recording_batch(size=copy_model.BATCH_SIZE):
        tokens, targets = synthetic_batch(size)
        drawn.append(tokens.clone())
        return tokens, targets

    synthetic_batch = copy_model.synthetic_batch
    monkeypatch.setattr(copy_model, "synthetic_batch", recording_batch)
    trained = copy_model.train_copy_model()
    monkeypatch.undo()
    # The recording changed nothing: the model is the default training's, bit for bit.
    assert copy_model.weights_sha256(trained) == copy_model.weights_sha256(copy_model.default_training()[0])
    sequences = [tuple(row) for batch in drawn for row in batch.tolist()]
    assert len(sequences) == copy_model.TRAINING_STEPS * copy_model.BATCH_SIZE == 89_600
    expected = (sequences.count(CLEAN), sequences.count(CORRUPT))
    assert copy_model.training_sequence_counts((CLEAN, CORRUPT)) == expected
    # The page's figures for this torch build: both sequences were trained on (about 4.3 expected each).
    assert expected == (2, 3)


def test_counting_leaves_the_callers_random_stream_as_it_was():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    copy_model.training_sequence_counts((CLEAN,), steps=3)
    assert torch.equal(torch.random.get_rng_state(), before)


def test_a_sequence_of_the_wrong_length_is_refused_in_one_line():
    with pytest.raises(ValueError, match="each sequence must hold 5 token ids"):
        copy_model.training_sequence_counts(((7, 3, 9),))


@pytest.mark.parametrize(
    ("counts", "lead", "clause"),
    [
        ((2, 3), "Neither sequence is held out:", "the clean sequence occurs 2 times and the corrupt one occurs 3 times"),
        ((0, 0), "Both sequences are held out, by chance:", "the clean sequence never occurs and the corrupt one never"),
        ((0, 1), "Only the clean sequence is held out, by chance:", "never occurs and the corrupt one occurs once"),
        ((4, 0), "Only the corrupt sequence is held out, by chance:", "occurs 4 times and the corrupt one never occurs"),
    ],
)
def test_the_exposure_sentence_is_chosen_from_the_counts(counts, lead, clause):
    text = lesson_figures.training_exposure(*counts, drawn=89_600, possible=12**4)
    assert text.startswith(lead) and clause in text
    assert "hold 89,600 sequences" in text and "With 20,736 possible sequences, each is expected about 4.3 times" in text
    assert ("it was trained on" in text) == any(counts)


# ---- the retained share and the gradient-profile prose -----------------------------------------------------------


@pytest.mark.parametrize(
    ("retained", "verdict"),
    [
        (1.4, "adds to its direction rather than cancelling any of it"),
        (1.004, "leaves its direction as it was"),
        (0.62, "cancels part of it, and 0.62 of its length along that direction is left"),
        (-0.2, "cancels all of it along that direction, or more"),
    ],
)
def test_the_retained_verdict_follows_the_printed_share(retained, verdict):
    assert lesson_figures.retained_verdict(retained) == verdict


def synthetic_profile(pre, post, control) -> GradientProfile:
    return GradientProfile(depth=len(pre), width=4, seeds=1, medians={"pre-LN": pre, "post-LN": post,
                                                                         "pre-LN + final LN": control})


def test_the_profile_prose_says_when_the_control_keeps_the_comparison_of_levels():
    # A control still above post-LN everywhere, leaning the other way from pre-LN.
    sentences = lesson_figures.profile_sentences(synthetic_profile([4.0, 3.0], [1.0, 2.0], [2.5, 2.8]))
    assert "larger than the post-LN one at every one of the 2 depths" in sentences["levels"]
    assert "lowers the gradient at every depth, by a factor between 1.07 and 1.60" in sentences["levels"]
    assert "leaves the comparison of levels as it was" in sentences["levels"]
    assert "with the final LayerNorm it rises from 2.500 at the first block to 2.800" in sentences["shapes"]
    assert "the opposite lean" in sentences["shapes"]


def test_the_profile_prose_says_when_the_control_raises_or_mixes():
    raised = lesson_figures.profile_sentences(synthetic_profile([1.0, 1.0], [3.0, 3.0], [2.0, 2.0]))["levels"]
    assert "raises the gradient at every depth, by a factor 2.00" in raised
    assert "larger than the post-LN one at none of the 2 depths" in raised
    mixed = lesson_figures.profile_sentences(synthetic_profile([1.0, 3.0], [0.5, 0.5], [2.0, 2.0]))["levels"]
    assert "lowers the gradient at 1 of the 2 depths and raises it elsewhere" in mixed


# ---- one naming: TransformerLens's resid_pre / resid_mid / resid_post --------------------------------------------


def test_the_trace_names_the_states_as_their_hook_points_do():
    assert list(lesson_lab.ResidualTrace.__dataclass_fields__) == [
        "resid_pre", "attn_write", "resid_mid", "mlp_write", "resid_post",
    ]
    for state in ("resid_pre", "resid_mid", "resid_post"):
        assert lesson_lab.TRACE_HOOK_POINTS[state] == f"hook_{state}"


def test_the_capture_names_the_block_boundaries_as_the_lesson_hook_points_do():
    """One naming of a block's two boundaries, the lesson's hook points' (hook_resid_pre, hook_resid_post) without
    the prefix: in the capture's site table, in the copy model's (each read from the hook point of its name), in a
    GPT-NeoX capture's site names and in the committed capture of the GPT-NeoX specimen that Lab 05 shows."""
    boundaries = ("resid_pre", "resid_post")
    assert [lesson_lab.TRACE_HOOK_POINTS[state] for state in boundaries] == ["hook_resid_pre", "hook_resid_post"]
    assert (sites.BLOCK_SITES[0], sites.BLOCK_SITES[-1]) == boundaries and sites.EMBEDDING_SITE == "blocks.0.resid_pre"
    for state in boundaries:
        assert getattr(COPY_MODEL.sites, state)[0] == lesson_lab.TRACE_HOOK_POINTS[state]
    for block_type in (COPY_MODEL, BLOCK_TYPES["gpt_neox"]):
        named = [name for name, _, _ in sites.site_paths(block_type, 2)]
        assert [name for name in named if ".resid_" in name] == [
            "blocks.0.resid_pre", "blocks.0.resid_post", "blocks.1.resid_pre", "blocks.1.resid_post"], block_type.name
    capture = ROOT / "assets" / "captures" / "synthetic-specimen-seed0"
    captured = [entry["name"] for entry in json.loads((capture / "captures.json").read_text(encoding="utf-8"))["tensors"]]
    depth = sum(name.endswith(".attn_write") for name in captured)
    assert [name for name in captured if ".resid_" in name] == ["blocks.0.resid_pre"] + [
        f"blocks.{block}.resid_post" for block in range(depth)]
    observations = json.loads((capture / "observations.json").read_text(encoding="utf-8"))
    assert [row["name"] for row in observations["positions"][0]["boundaries"]] == ["blocks.0.resid_pre"] + [
        f"blocks.{block}.resid_post" for block in range(depth)]


OLD_STATE_NAMES = re.compile(r"\b(?:trace|records?)\.r[012]\b|[\"']r[012][\"']|\br[012] = |cos\(w,r2\)")


@pytest.mark.parametrize(
    "path",
    [
        "assets/labs/residual_stream_lab.py",
        "assets/labs/audit_residual_writes.py",
        "residlab/course/models/copy_model.py",
        "residlab/course/models/lesson_lab.py",
        "residlab/course/glossary/cache_layouts.py",
        "lessons/04-residual-stream.qmd",
        "glossary/residual-stream.qmd",
        "glossary/logit-lens.qmd",
        "glossary/activation-patching.qmd",
    ],
)
def test_no_page_module_or_runner_uses_the_old_state_names(path):
    text = (ROOT / path).read_text(encoding="utf-8")
    assert not OLD_STATE_NAMES.findall(text), path
