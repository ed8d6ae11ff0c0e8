"""What the executed pages show, not only that their cells ran: the Lesson 2.1 tables and prose against the
document's published figures, and Lab 05's solutions against closed forms.

Each page is read from the site Quarto built (``built_site``), formulas as their TeX source
(``built_text.shown``); the expected text is written here from the source document or from exact arithmetic.
"""

from __future__ import annotations

import math

import pytest
from built_text import shown

pytestmark = pytest.mark.slow


def test_the_lesson_page_shows_the_documents_figures(built_site):
    text = shown(built_site.site, "lessons/04-residual-stream.html")
    # The readout and intervention tables, row by row (Lesson 2.1's figures; the MLP patch row as issue 13 records it).
    for row in (
        "| embedding | 0.000 |",
        "| after attention | 0.860 | 7 |",
        "| after MLP | 1.000 | 7 |",
        "| clean | 1.000 | 7 |",
        "| attention ablated | 0.007 | 8 |",
        "| MLP ablated | 0.860 | 7 |",
        "| corrupt | 0.000 | 2 |",
        "| corrupt + clean attention patch | 1.000 | 7 |",
        "| corrupt + clean MLP patch | 0.014 | 2 | -4.23 |",  # logit difference -4.228, shown to two decimals
    ):
        assert row in text, row
    # The prose that quotes them.
    assert "drops it to 0.007 with token 8 on top" in text
    assert "Zeroing the MLP write gives p(target) = 0.860, which is the after-attention readout again" in text
    # Whether the audited sequences were trained on, counted in the replayed batches (issue 29).
    assert "Neither sequence is held out: the training batches, replayed from the seed, hold 89,600 sequences, in " \
        "which the clean sequence occurs 2 times and the corrupt one occurs 3 times." in text
    assert "held-out" not in text
    # The gradient figure's prose covers the control as well as the document's two stacks.
    assert "The control’s gradient is larger than the post-LN one at none of the 18 depths" in text
    # Direct logit attribution beside the removal effects: the terms add up to the clean logit difference.
    assert "| attention write | 0.438 | -1.734 | 9.553 |" in text  # the total effect: what zeroing it removes
    assert "The terms sum to 10.252 against a logit difference of 10.252" in text
    assert "For the attention write the DLA term (0.44) and the direct effect (-1.73) are of opposite signs" in text
    assert "Patching the clean MLP write instead does not: p(target) is 0.014 and token 2 stays on top" in text
    assert "By the last step the batch accuracy is 1.000" in text


def test_the_lab_page_shows_the_closed_form_solutions(built_site):
    text = shown(built_site.site, "labs/05-trace-residual-stream.html")
    # x = [1,2,-1]: z - x = [3,-2,0]; |F| = sqrt 5, |G| = sqrt 32; cos(F, G) = -12 / sqrt(160) = -3 / sqrt(10).
    assert rf"with norm $\sqrt{{13}}\approx{math.sqrt(13):.3f}$" in text
    assert rf"\sqrt{{5}}+\sqrt{{32}}\approx{math.sqrt(5) + math.sqrt(32):.3f}$" in text
    assert f"dot product $-12$ (cosine ${-3 / math.sqrt(10):.3f}$)" in text
    assert r"| baseline | $[4,0,-1]^\mathsf{T}$ | -1 |" in text
    assert r"| first branch suppressed | $[3,0,1]^\mathsf{T}$ | 1 |" in text
    assert r"| parallel | $[2,2,1]^\mathsf{T}$ | 1 |" in text
    assert r"| shortcut (old $z$ − old $F(x)$) | $[5,-2,-1]^\mathsf{T}$ | -1 |" in text
    assert rf"($\lVert F(x)\rVert\approx$ {round(math.sqrt(5), 3)})" in text
    assert rf"($\lVert G(y)\rVert\approx$ {round(math.sqrt(32), 3)})" in text


def test_the_fetch_and_pin_bounds_the_pages_state_are_the_ones_the_code_enforces(built_site):
    from residlab.pythia.artifacts import FetchLimits
    from residlab.pythia.pin import GIT_FILE_MAX_BYTES

    limits = FetchLimits()
    instructors = shown(built_site.site, "instructors.html")
    assert f"--timeout SECONDS , {limits.deadline_s / 60:g} minutes by default)" in instructors
    assert f"a connection silent for {limits.stall_s:g} s counts as stalled, {limits.attempts} attempts per file" in instructors
    assert f"says is over {GIT_FILE_MAX_BYTES / 1e6:g} MB (more than the Hub keeps outside LFS)" in instructors
    lab = shown(built_site.site, "labs/05-trace-residual-stream.html")
    assert f"stops after a deadline ({limits.deadline_s / 60:g} minutes; change it with --timeout SECONDS )" in lab


def test_lab05_part4_counts_and_versions_are_the_codes_and_the_locks(built_site):
    from residlab.build.pins import load_lock_data
    from residlab.pythia.observe import LIBRARIES
    from residlab.pythia.specimen import PINNED_CONFIG

    also_tested = load_lock_data()["also_tested"]["transformers"]
    lab = shown(built_site.site, "labs/05-trace-residual-stream.html")
    assert f"the versions of Python and the {len(LIBRARIES)} libraries, the repository" in lab
    assert f"each of the {PINNED_CONFIG['num_hidden_layers']} raw block outputs" in lab
    assert f"a block returns a tuple in Transformers {also_tested} and a bare tensor in 5.x" in lab
    source = f"https://github.com/huggingface/transformers/blob/v{also_tested}/src/transformers/models/gpt_neox/modeling_gpt_neox.py"
    assert f'href="{source}"' in (built_site.site / "labs/05-trace-residual-stream.html").read_text(encoding="utf-8")


def test_the_peer_boxes_show_exactly_the_snippets_the_peer_suite_runs(built_site):
    import re

    from residlab.course import peers

    boxes = {"labs/05-trace-residual-stream.html": "capture", "glossary/activation-cache.html": "capture",
             "labs/06-audit-a-decoder.html": "patch", "glossary/activation-patching.html": "patch",
             "lessons/04-residual-stream.html": "lesson_capture"}  # fmt: skip
    for page, kind in boxes.items():
        text = shown(built_site.site, page)
        assert text.count("The same in TransformerLens and nnsight") == 1, page
        squeezed = re.sub(r"\s", "", text)  # highlighting splits code into spans; compare without whitespace
        for name, file_name in peers.BOXES[kind]["files"].items():
            assert re.sub(r"\s", "", peers.snippet(file_name)) in squeezed, (page, file_name)
            assert f"{name} {peers.peer_versions()[name]}" in text, (page, name)
        if peers.BOXES[kind]["traps"] is peers.COPY_MODEL_TRAPS:
            assert "run_with_cache caches HookPoint modules only" in text, page
        else:
            assert "enable_compatibility_mode(no_processing=True)" in text and "hidden_states[-1]" in text, page
