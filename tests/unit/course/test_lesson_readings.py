"""Lesson 2.1's readings of its accuracy and its logit-lens probabilities are chosen from the numbers and read
against chance, a uniform guess among the vocabulary: each flips when its number crosses."""

from __future__ import annotations

from residlab.course.lesson.lesson_figures import accuracy_sentence, loss_sentence, readout_sentence


def test_the_readout_is_worded_against_chance():
    text = readout_sentence(0.05, 0.7, 0.99, vocab=10)
    assert text.startswith("The target is no more readable than chance from the embedding (p = 0.050)")
    assert "readable as the top token after the attention write (0.700)" in text
    assert "nearly certain after the MLP (0.990)" in text and "against the 0.100 of a uniform guess" in text
    assert "above chance but not the top token for sure from the embedding" in readout_sentence(0.3, 0.7, 0.99, vocab=10)
    assert readout_sentence(0.001, 0.7, 0.99, vocab=10).startswith(
        "The target is less readable than a uniform guess would make it (the readout puts its weight on other tokens)")


def test_the_accuracy_is_read_against_chance_with_its_sampling_error():
    assert "above the chance level of 0.100" in accuracy_sentence(1.0, vocab=10, batch=256)
    assert "at the chance level" in accuracy_sentence(0.11, vocab=10, batch=256)  # within 2 SE (0.0375)
    below = accuracy_sentence(0.02, vocab=10, batch=256)
    assert "below the chance level" in below and "prefers a wrong token" in below


def test_the_losses_are_read_against_a_uniform_guess():
    # ln 12 = 2.485: a first loss far above it is the initial weights' confident wrong guesses
    assert "ln 12 = 2.485. The loss at step 1, 28.540, is above it: the random initial weights" in loss_sentence(1, 28.54, 1e-4, 12)
    assert loss_sentence(1, 28.54, 1e-4, 12).endswith("At the last step the loss is 0.0001, below ln 12.")
    assert "is at about that of the uniform guess" in loss_sentence(1, 2.5, 2.49, 12)
    assert "not below ln 12: the model predicts no better than a uniform guess" in loss_sentence(1, 2.5, 2.49, 12)
    assert "is already below it" in loss_sentence(1, 1.0, 0.5, 12)


def test_the_recovery_control_is_read_only_over_a_readable_gap():
    from residlab.course.lesson.lesson_figures import recovery_control_sentence

    assert "recovers 0.10 of the gap of 6.00, a partial recovery" in recovery_control_sentence(0.1, 6.0)
    assert recovery_control_sentence(0.8, 6.0).startswith("The control does not separate them")
    assert recovery_control_sentence(0.1, 0.05).startswith("The control cannot be read")
    assert recovery_control_sentence(None, 0.0).startswith("The control cannot be read")
