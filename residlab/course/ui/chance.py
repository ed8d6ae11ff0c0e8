"""``against_chance``: where an accuracy stands against its chance level, with two standard errors of a proportion
over the predictions it counts; the one reading every page's accuracy sentence takes (the lesson's copy model,
the induction model)."""

from __future__ import annotations

import math


def against_chance(accuracy: float, chance: float, count: int) -> tuple[str, float]:
    """("below" | "at" | "above", the margin): two standard errors of a proportion ``chance`` over ``count``
    predictions (no margin without a count)."""
    margin = 2 * math.sqrt(chance * (1 - chance) / count) if count else 0.0
    if accuracy < chance - margin:
        return "below", margin
    return ("at" if accuracy <= chance + margin else "above"), margin
