"""Every interpretive sentence of Lab 05 Part 4 and Lab 06 Part 3 is chosen from the numbers: the same capture
edited to show each pattern (a rising, falling or flat norm; aligned, opposed or mixed updates; a position 0 apart)
and audits with each pair of logit differences must read accordingly."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest

from residlab.course.models import capture_page
from residlab.course.lab05 import capture_reading
from residlab.course.lab06 import pythia_audit

CAPTURE = Path(__file__).resolve().parents[3] / "assets" / "captures" / "synthetic-specimen-seed0"


@pytest.fixture(scope="module")
def committed():
    return capture_page.read_capture(CAPTURE)


def edited(capture, norms=None, cosines=None, update_norms=None, position_zero_scale=None):
    """The capture with its selected position's norms, update cosines or update norms replaced, or position 0's
    captured states scaled."""
    observations = copy.deepcopy(capture.observations)
    observation = observations["positions"][observations["selected_position"]]
    for row, value in zip(observation["boundaries"], norms or []):
        row["norm"] = value
    for row, value in zip(observation["block_updates"], cosines or []):
        row["cosine_update_with_incoming"] = value
    for row, value in zip(observation["block_updates"], update_norms or []):
        row["difference_norm"] = value
    captures = capture.captures
    if position_zero_scale is not None:
        captures = copy.deepcopy(captures)
        for entry in captures["tensors"]:
            entry["values"][0][0] = [x * position_zero_scale for x in entry["values"][0][0]]
    return dataclasses.replace(capture, observations=observations, captures=captures)


def test_the_norms_direction_is_read_from_the_capture(committed):
    assert "Its raw norm **rises** with depth" in capture_reading.trend_sentence(committed)
    falling = edited(committed, norms=[2.0, 1.8, 1.6, 1.5, 1.2, 1.1, 1.0])
    assert "Its raw norm **falls** with depth" in capture_reading.trend_sentence(falling)
    assert "a factor of 0.50" in capture_reading.trend_sentence(falling) and "up in 0 of the 6 blocks" in capture_reading.trend_sentence(falling)
    flat = edited(committed, norms=[1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02])
    assert "**neither rises nor falls** by more than 5%" in capture_reading.trend_sentence(flat)


def test_the_explanation_favoured_follows_the_alignment_numbers_read_against_their_null(committed):
    # The committed capture's cosines (at most 0.047) are inside the band random directions in 128 dimensions give:
    # no verdict for a mechanism, whatever the accumulation formula predicts.
    seen = capture_reading.alignment(committed)
    assert seen["null"]["width"] == 128 and seen["null"]["band"] == pytest.approx(3 / 128**0.5)
    assert seen["favoured"] == "null" and seen["null_low"] < seen["observed"] < seen["null_high"]
    verdict = capture_reading.verdict_sentence(committed)
    assert "cannot tell the updates from writes unrelated to the state" in verdict and "favour the first" not in verdict
    assert "±0.265" in verdict and "1/√128 = 0.088" in verdict
    along = edited(committed, cosines=[0.5, 0.4, 0.6, 0.3, 0.5, 0.4])
    assert "favour the second explanation**, writes along the state" in capture_reading.verdict_sentence(along)
    against = edited(committed, cosines=[-0.5, -0.4, -0.6, -0.3, -0.5, -0.4])
    assert "writes against the state" in capture_reading.verdict_sentence(against)
    mixed = edited(committed, cosines=[0.5, -0.5, 0.5, -0.5, 0.1, -0.1])
    assert "favour neither explanation" in capture_reading.verdict_sentence(mixed)
    # One cosine just outside the band decides; just inside it, nothing does.
    band = seen["null"]["band"]
    outside = edited(committed, cosines=[0.0, 0.0, band * 1.01, 0.0, 0.0, 0.0])
    assert capture_reading.alignment(outside)["outside"] == {2: pytest.approx(band * 1.01)}
    assert "block 2 (" in capture_reading.verdict_sentence(outside)
    assert capture_reading.alignment(edited(committed, cosines=[band * 0.99] * 6))["favoured"] == "null"


def test_a_trained_capture_is_read_beside_the_random_weight_null(committed):
    assert "itself the random-weight run" in capture_reading.null_sentence(committed)
    trained = dataclasses.replace(committed, manifest={**committed.manifest, "synthetic": False, "repository": "a/b"})
    sentence = capture_reading.null_sentence(trained, null=committed)
    null_trend = capture_reading.norm_trend(committed)
    assert f"a factor of {capture_page.number(null_trend['factor'], 2)}" in sentence
    assert capture_page.number(capture_reading.alignment(committed)["largest_abs_cosine"], 3) in sentence
    # A trained model's position 0 apart is named as the trained decoders' trait it is; random weights' is not.
    apart = dataclasses.replace(edited(committed, position_zero_scale=10.0), manifest=trained.manifest)
    assert "Expect this in trained decoders" in capture_reading.position_zero_sentence(apart)
    assert "can arise without training" in capture_reading.position_zero_sentence(edited(committed, position_zero_scale=10.0))


def test_the_largest_writer_and_position_zero_are_read_from_the_capture(committed):
    largest = edited(committed, update_norms=[0.1, 9.0, 0.1, 0.1, 0.1, 0.1])
    assert capture_reading.largest_write_sentence(largest).startswith("Block 1 writes the most at this position: its update is 9.000 long")
    assert "does not stand apart" in capture_reading.position_zero_sentence(committed)
    apart = edited(committed, position_zero_scale=10.0)
    assert "**stands apart**" in capture_reading.position_zero_sentence(apart)
    assert capture_reading.position_zero(apart)["ratio"] == pytest.approx(10 * capture_reading.position_zero(committed)["ratio"])


def audit_with(clean: float, corrupt: float) -> pythia_audit.PythiaAudit:
    packet = {"measurement": {"baseline": {"clean": {"value": clean}, "corrupt": {"value": corrupt}}}}
    return pythia_audit.PythiaAudit(packet, None, "someone/model", "0" * 40, False, "x.lock.json (digest 0)", ())


@pytest.mark.parametrize(
    "clean, corrupt, start",
    [
        (2.5, -1.0, "The model separates the two prompts"),
        (3.0, 0.5, "The model leans the way copying would"),
        (0.2, 0.1, "The model does not separate the two prompts"),
        (-1.0, 1.5, "The model does not separate the two prompts"),
    ],
)
def test_lab06_says_whether_the_model_separates_the_prompts_from_the_two_differences(clean, corrupt, start):
    sentence = pythia_audit.separation(audit_with(clean, corrupt))
    assert sentence.startswith(start) and f"{clean:+.3f} after the clean prompt and {corrupt:+.3f}" in sentence
    assert ("wrong way round" in sentence) == (corrupt - clean >= 1)


def test_lab06_says_whether_its_rival_is_the_one_the_lessons_rule_names():
    named = dataclasses.replace(audit_with(1.0, 0.0), corrupt_top=pythia_audit.RIVAL)
    assert "is also the one the lesson's rule names" in pythia_audit.rival_sentence(named)
    other = dataclasses.replace(named, corrupt_top=" the")
    assert f"would be the model's top token after the corrupt prompt, ' the'; the command names" in (
        pythia_audit.rival_sentence(other))


def test_only_the_pinned_repositorys_own_files_are_called_pythia(committed):
    real = audit_with(1.0, 0.0)
    assert "`someone/model`" in pythia_audit.model_callout(real) and "Pythia-14M," not in pythia_audit.model_callout(real)
    pinned = dataclasses.replace(real, repository="EleutherAI/pythia-14m")
    assert 'title="Pythia-14M, revision 000000000000"' in pythia_audit.model_callout(pinned)
    synthetic = dataclasses.replace(pinned, synthetic=True)
    assert "Untrained baseline" in pythia_audit.model_callout(synthetic)
    from residlab.course.models import capture_source

    assert "Untrained baseline" in capture_source.model_callout(committed) and not capture_source.is_pinned_model(committed)
