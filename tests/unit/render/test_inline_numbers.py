"""residlab.render.inline_numbers: an inline result is spliced exactly as Quarto would, inside a span naming its
expression, and only in a kernel Quarto started for this project."""

from __future__ import annotations

from residlab.render import inline_numbers


def test_text_is_escaped_as_quartos_as_escaped_markdown():
    # Quarto's class [\\`*_{}\[\]()>#+-.!] holds the range + , - . : the comma is escaped too.
    assert inline_numbers.quarto_text("'1,234.5 (a*b)'") == r"1\,234\.5 \(a\*b\)"
    assert inline_numbers.quarto_text("3.25") == "3.25"  # not a string: as it is


def test_a_result_with_a_digit_is_marked_and_others_are_left(monkeypatch):
    ok = {"status": "ok", "data": {"text/plain": "'accuracy 0.93'"}, "metadata": {}}
    assert inline_numbers.mark_result('f"{a}"', ok)["data"] == {
        "text/markdown": '[accuracy 0\\.93]{.rl-number expr="f\\"{a}\\""}'}
    name = {"status": "ok", "data": {"text/plain": "'pythia'"}, "metadata": {}}
    html = {"status": "ok", "data": {"text/html": "<b>1</b>", "text/plain": "1"}, "metadata": {}}
    assert inline_numbers.mark_result("x", name) is name and inline_numbers.mark_result("x", html) is html


def test_only_a_quarto_kernel_is_wrapped(monkeypatch):
    class Shell:
        def user_expressions(self, expressions):
            return {key: {"status": "ok", "data": {"text/plain": "7"}} for key in expressions}

    shell = Shell()
    monkeypatch.delenv("QUARTO_PROJECT_ROOT", raising=False)
    assert not inline_numbers.install(shell) and shell.user_expressions({"0": "n"})["0"]["data"] == {"text/plain": "7"}
    monkeypatch.setenv("QUARTO_PROJECT_ROOT", "/site")
    assert inline_numbers.install(shell) and inline_numbers.install(shell)  # once
    assert shell.user_expressions({"0": "n"})["0"]["data"] == {"text/markdown": '[7]{.rl-number expr="n"}'}
