"""``site_verify.answer_problems`` on pages shaped as Quarto builds them: a question marked ``.exercise``, its
solution one of the site's collapsed callouts marked ``.solution``. Each planted fault is named: the filled table
shown above its question as well as in the solution (issue 51: Lab 04 Part 6), a solution before its question,
one shown open, one naming no question, a question without a solution."""

from __future__ import annotations

from residlab.build.site_verify import answer_problems

QUESTION = '<div id="exercise-three-blocks" class="exercise"><p>Fill in your own version of this table.</p></div>'
FILLED = ("<table><thead><tr><th>block</th><th>writes are added</th></tr></thead><tbody>"
          "<tr><td>Paper (post-LN)</td><td>to the sublayer's own input, then normalised</td></tr></tbody></table>")


def solution(body: str, answers: str = "exercise-three-blocks", collapse: str = "callout-collapse collapse") -> str:
    """A solution callout as Quarto 1.10 writes one with ``collapse="true"``."""
    return (f'<div class="solution callout callout-style-default callout-note callout-titled" data-answers="{answers}">'
            '<div class="callout-header d-flex align-content-center collapsed" data-bs-toggle="collapse">'
            '<div class="callout-title-container flex-fill">Part 6: three blocks</div></div>'
            f'<div id="callout-1" class="callout-1-contents {collapse}"><div class="callout-body">{body}</div></div></div>')


def test_a_question_answered_only_inside_its_collapsed_solution_passes():
    assert answer_problems(f"<main>{QUESTION}<p>Part 7 begins here, well after it.</p>{solution(FILLED)}</main>") == []


def test_the_filled_table_shown_above_its_question_is_named():
    page = f"<main>{FILLED}{QUESTION}{solution(FILLED)}</main>"
    assert answer_problems(page) == ["the answer to #exercise-three-blocks also stands outside its solution: "
                                     "Paper (post-LN) | to the sublayer's own input, then normalised"]


def test_a_solution_that_comes_first_or_shows_open_is_named():
    assert answer_problems(f"{solution(FILLED)}{QUESTION}") == ["the solution to #exercise-three-blocks comes before "
                                                                "its question"]
    assert answer_problems(f"{QUESTION}{solution(FILLED, collapse='callout-collapse collapse show')}") == [
        "the solution to #exercise-three-blocks is shown open, not collapsed"]


def test_every_solution_names_its_questions_and_every_question_has_one():
    assert answer_problems(f"{QUESTION}{solution(FILLED, answers='')}") == [
        "a solution names no question it answers (data-answers)", "#exercise-three-blocks has no solution"]
    assert answer_problems(f"{QUESTION}{solution(FILLED, answers='exercise-three-blocks exercise-other')}") == [
        "a solution answers #exercise-other, which is no question on the page"]


def test_a_header_row_or_a_short_block_may_stand_on_both_sides():
    """The question's own table may share the solution's column names; a short block ("Yes.") recurs by chance."""
    header = "<table><thead><tr><th>block</th><th>writes are added</th></tr></thead></table>"
    page = f"{QUESTION}{header}<p>Yes.</p>{solution(FILLED + '<p>Yes.</p>')}"
    assert answer_problems(page) == []
