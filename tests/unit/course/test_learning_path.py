"""A learner reading Lab 05 Part 4 and Lab 06 top to bottom meets the residual stream first: the integrity
engineering (pinned hashes, deadlines, refusals, verify, the tamper exercise) sits in one section marked optional,
after every part about the writes. Read from the pages' sources, so no render is needed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OPTIONAL_CALLOUT = '::: {.callout-tip title="Optional: integrity, not the residual stream"}'


def headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of each Markdown heading outside code blocks, without its attributes ({...})."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#{2,4}) (.+?)(?: \{[^}]*\})?$", line)):
            found.append((len(match[1]), match[2]))
    return found


def optional_section(text: str, title: str) -> str:
    """The section whose heading starts with ``title``, up to the next heading of its level or higher."""
    found = headings(text)
    level = next(level for level, heading in found if heading.startswith(title))
    start = text.index(f"{'#' * level} {title}")
    ends = [text.find(f"\n{'#' * up} ", start + 1) for up in range(2, level + 1)]
    return text[start:min([end for end in ends if end != -1] or [len(text)])]


def test_lab05_part4_keeps_hashes_and_deadlines_in_its_last_optional_section():
    text = (ROOT / "labs/_part4-observation.qmd").read_text(encoding="utf-8")
    titles = [title for level, title in headings(text) if level == 3]
    assert titles[-1].startswith("Optional: what the runner checks"), titles
    section = optional_section(text, "Optional: what the runner checks")
    assert section.count(OPTIONAL_CALLOUT) == 1
    main_flow = text[: text.index(section)]
    for integrity in ("sha256", "every SHA-256 the lock records", "deadline", "stalled connection"):
        assert integrity in section and integrity not in main_flow, integrity
    assert "(#sec-part4-integrity)" in main_flow  # the main flow says where it went


def test_lab06_verify_and_the_tamper_exercise_come_after_every_part_in_a_section_marked_optional():
    text = (ROOT / "labs/06-audit-a-decoder.qmd").read_text(encoding="utf-8")
    found = headings(text)
    parts = [title for level, title in found if level == 2]
    assert parts[-2].startswith("Optional — Check a packet") and parts[-1] == "What to record", parts
    assert [title for title in parts if title.startswith("Part ")] == [
        "Part 1 — Where the writes are, per block type",
        "Part 2 — Audit a trained decoder, then a random one",
        "Part 3 — Run it on Pythia-14M",
    ]
    section = optional_section(text, "Optional — Check a packet")
    assert section.count(OPTIONAL_CALLOUT) == 1
    inside = [title for level, title in headings(section) if level == 3]
    assert inside[:3] == ["Verify it", "Break it on purpose", "Open your packet"], inside
    main_flow = text[: text.index(section)]
    for integrity in ("tampered_failures", "relinked_failures", "verification.lines", "files_table", "SHA-256"):
        assert integrity in section and integrity not in main_flow, integrity
