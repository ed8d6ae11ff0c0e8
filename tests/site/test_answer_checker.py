"""Lab 05's "Check your trace" in headless Chromium: typed right answers, wrong ones, equivalent forms and
malformed input, each verdict compared with one decided here from residlab.course.lab05.toy.

The reference does not parse anything: every typed string below comes with what it means, written by hand
(``exact(...)``, ``root(...)``, ``decimal(...)``, or None for input that is not a number), and the verdict
follows from comparing that meaning with the toy's exact value.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from test_browser import open_page, wait_for

from residlab.course.lab05 import toy

pytestmark = pytest.mark.slow
LAB = "labs/05-trace-residual-stream.html"


# ---- the toy's answers, by the key each checker entry carries -------------------------------------------------

def toy_answers() -> dict:
    x = toy.Vector(toy.DEFAULT_INPUT)
    baseline = toy.sequential_trace(x)
    cases = toy.run_interventions(x, baseline)
    vectors = {
        "input": x, "first_update": baseline.first_update, "intermediate": baseline.intermediate,
        "second_update": baseline.second_update, "final": baseline.final, "total_change": baseline.final - x,
        "first_suppressed.final": cases.first_suppressed.final, "second_suppressed.final": cases.second_suppressed.final,
        "parallel.final": cases.parallel.final, "shortcut": cases.shortcut,
    }
    answers = dict(vectors)
    traced = ("input", "first_update", "intermediate", "second_update", "final", "total_change")  # Part 1's norms
    answers.update({f"{key}.norm": vectors[key].norm() for key in traced})
    s = {"baseline": toy.readout(baseline.final), "parallel": toy.readout(cases.parallel.final),
         "first_suppressed": toy.readout(cases.first_suppressed.final),
         "second_suppressed": toy.readout(cases.second_suppressed.final)}
    answers.update({f"readout.{name}": value for name, value in s.items()})
    answers.update({f"effect.{name}": abs(s[name] - s["baseline"]) for name in ("first_suppressed", "second_suppressed")})
    return answers


ANSWERS = toy_answers()


# ---- what a typed string means: (sign, square) for an exact value, or a decimal with its places ----------------

def exact(value) -> tuple:
    value = Fraction(value)
    return ("exact", (value > 0) - (value < 0), value * value)


def root(factor, radicand) -> tuple:
    factor = Fraction(factor)
    return ("exact", (factor > 0) - (factor < 0), factor * factor * Fraction(radicand))


def decimal(text: str) -> tuple:
    return ("decimal", Fraction(text), len(text.split(".")[1]))


def number_verdict(meaning: tuple, sign: int, square: Fraction) -> str:
    """right; imprecise (a decimal of fewer than three places, right to the places it has); or wrong. A decimal
    of d places is right to them when it lies less than 10**-d from the value: rounded or truncated there."""
    if meaning[0] == "exact":
        return "right" if meaning[1:] == (sign, square) else "wrong"
    _, value, places = meaning
    if (value > 0) - (value < 0) == sign and value * value == square:
        return "right"
    if abs(float(value) - sign * math.sqrt(square)) >= 10.0 ** -places:
        return "wrong"
    return "right" if places >= 3 else "imprecise"


def reference_verdict(key: str, text: str, meaning) -> str:
    if not text.strip():
        return "empty"
    if meaning is None:
        return "malformed"
    answer = ANSWERS[key]
    if isinstance(answer, toy.Vector):
        verdicts = {number_verdict(m, (v > 0) - (v < 0), v * v) for m, v in zip(meaning, answer.entries)}
    elif key.endswith(".norm"):
        verdicts = {number_verdict(meaning, 1 if answer.squared else 0, answer.squared)}
    else:
        verdicts = {number_verdict(meaning, (answer > 0) - (answer < 0), answer * answer)}
    return next(verdict for verdict in ("wrong", "imprecise", "right") if verdict in verdicts)


def right_answers() -> list:
    """Every entry answered in the toy's own forms: vectors as printed, norms as sqrt(N) and simplified."""
    cases = []
    for key, answer in ANSWERS.items():
        if isinstance(answer, toy.Vector):
            cases.append((key, str(answer), [exact(v) for v in answer.entries]))
        elif key.endswith(".norm"):
            meaning = ("exact", 1 if answer.squared else 0, answer.squared)
            cases += [(key, answer.exact, meaning), (key, answer.simplified, meaning)]
        else:
            cases.append((key, str(toy.exact_json(answer)), exact(answer)))
    return [case for case in cases if case[0] != "input"]  # x is given, not asked


def printed_answers() -> list:
    """Every entry answered as the page prints it, for a learner who copies it: the minus sign U+2212 of the
    solutions' formulas, a vector's transpose mark, a root as √ after its factor."""
    cases = []
    for key, text, meaning in right_answers():
        printed = text.replace("-", "\u2212").replace("sqrt(", "√(").replace("*", "")
        cases.append((key, printed + ("\u1d40" if text.startswith("[") else ""), meaning))
    return cases


# Typed by hand: wrong values, equivalent forms, decimals, and input that is not a number.
TYPED = [
    ("first_update", "[1, 2, 0]", [exact(1), exact(2), exact(0)]),  # the sign of the first coordinate
    ("first_update", "-1 2 0", [exact(-1), exact(2), exact(0)]),  # spaces instead of commas
    ("intermediate", "(0, 4, -1)", [exact(0), exact(4), exact(-1)]),
    ("intermediate", "[0, 3, -1]", [exact(0), exact(3), exact(-1)]),
    ("second_update", "[4, -4, 0.000]", [exact(4), exact(-4), decimal("0.000")]),
    ("final", "[4, 0, 1]", [exact(4), exact(0), exact(1)]),
    ("total_change", "[3, -2, 0]", [exact(3), exact(-2), exact(0)]),
    ("second_update.norm", "sqrt(32)", root(1, 32)),
    ("second_update.norm", "4*sqrt(2)", root(4, 2)),
    ("second_update.norm", "4 sqrt(2)", root(4, 2)),
    ("second_update.norm", "√32", root(1, 32)),
    ("second_update.norm", "8*sqrt(1/2)", root(8, Fraction(1, 2))),
    ("second_update.norm", "5.657", decimal("5.657")),
    ("second_update.norm", "5.66", decimal("5.66")),  # too few places, not exact
    ("second_update.norm", "5.659", decimal("5.659")),
    ("second_update.norm", "5.656", decimal("5.656")),  # sqrt(32) = 5.65685...: truncated, not rounded
    ("second_update.norm", "5.6568", decimal("5.6568")),
    ("second_update.norm", "5.6", decimal("5.6")),  # right to one place
    ("second_update.norm", "5.7", decimal("5.7")),  # rounded to one place: right as far as it goes
    ("second_update.norm", "5.5", decimal("5.5")),
    ("intermediate.norm", "4.12", decimal("4.12")),
    ("intermediate.norm", "4.124", decimal("4.124")),  # sqrt(17) = 4.12310...
    ("second_update.norm", "32", exact(32)),  # the squared norm
    ("second_update.norm", "-sqrt(32)", root(-1, 32)),
    ("intermediate.norm", "sqrt(17)", root(1, 17)),
    ("intermediate.norm", "4.123", decimal("4.123")),
    ("intermediate.norm", "2*sqrt(4.25)", root(2, Fraction(17, 4))),
    ("intermediate.norm", "sqrt(17)/2", root(Fraction(1, 2), 17)),
    ("first_update.norm", "sqrt(5)", root(1, 5)),
    ("first_update.norm", "2.236", decimal("2.236")),
    ("input.norm", "sqrt(6)", root(1, 6)),
    ("input.norm", "2.45", decimal("2.45")),
    ("total_change.norm", "sqrt(13)", root(1, 13)),
    ("readout.baseline", "-1", exact(-1)),
    ("readout.baseline", "1", exact(1)),
    ("readout.baseline", "-1.000", decimal("-1.000")),
    ("readout.parallel", "-1/2", exact(Fraction(-1, 2))),
    ("readout.parallel", "-0.5", decimal("-0.5")),
    ("effect.first_suppressed", "4", exact(4)),
    ("effect.second_suppressed", "0", exact(0)),
    ("effect.second_suppressed", "0.0", decimal("0.0")),
    ("first_suppressed.final", "[2, -2, 1]", [exact(2), exact(-2), exact(1)]),
    # the characters the page prints: minus sign, dashes, multiplication signs, fraction slash, transpose marks
    ("total_change", "[3, \u22122, 0]", [exact(3), exact(-2), exact(0)]),
    ("total_change", "[3, -2, 0]^T", [exact(3), exact(-2), exact(0)]),
    ("total_change", "[3,\u22122,0]T", [exact(3), exact(-2), exact(0)]),
    ("total_change", "[3, 2, 0]\u1d40", [exact(3), exact(2), exact(0)]),
    ("first_update", "\u22121 2 0", [exact(-1), exact(2), exact(0)]),
    ("readout.baseline", "\u22121", exact(-1)),
    ("readout.baseline", "\u20131", exact(-1)),
    ("readout.baseline", "\u22121.000", decimal("-1.000")),
    ("readout.parallel", "\u22121\u20442", exact(Fraction(-1, 2))),
    ("second_update.norm", "4\u00d7\u221a2", root(4, 2)),
    ("second_update.norm", "4\u00b7sqrt(2)", root(4, 2)),
    ("second_update.norm", "4\u00a0*\u2009sqrt(2)", root(4, 2)),
    ("parallel.final", "[2, 2, 1]", [exact(2), exact(2), exact(1)]),
    # the column the page asks for, as Part 1 writes it
    ("total_change", "[3;-2;0]", [exact(3), exact(-2), exact(0)]),
    ("total_change", "[3; \u22122; 0]", [exact(3), exact(-2), exact(0)]),
    ("total_change", "3;-2;0", [exact(3), exact(-2), exact(0)]),
    ("total_change", "[3;-2;1]", [exact(3), exact(-2), exact(1)]),
    ("total_change", "[3;-2;0.0]", [exact(3), exact(-2), decimal("0.0")]),
    # not numbers
    ("second_update.norm", "abc", None),
    ("second_update.norm", "sqrt(-2)", None),
    ("second_update.norm", "1/0", None),
    ("second_update.norm", "2 + 3", None),
    ("first_update", "[1, 2]", None),
    ("first_update", "[1, 2, x]", None),
    ("first_update", "[1; 2, 0]", None),  # mixes the column's ; and the row's ,
    ("readout.baseline", "- 1", None),  # as the toy refuses a space inside a number
    ("readout.baseline", "", None),
]
CASES = right_answers() + printed_answers() + TYPED


def key_is_norm(answer_element) -> bool:
    return answer_element.get_attribute("data-answer-for").endswith(".norm")


def judged(browser, key: str, text: str) -> dict:
    return browser.execute_script("return window.residlabAnswerChecker.judge(arguments[0], arguments[1])", key, text)


@pytest.fixture(scope="module")
def lab(built_site, served, browser):
    browser.set_window_size(1280, 900)
    open_page(browser, f"{served(built_site.site)}/{LAB}")
    wait_for(browser, lambda b: b.execute_script("return !!window.residlabAnswerChecker"), "the answer checker never started")
    return browser


def test_every_verdict_equals_the_toys(lab):
    expected_kinds = {"right", "imprecise", "wrong", "malformed", "empty"}
    seen = set()
    for key, text, meaning in CASES:
        verdict = judged(lab, key, text)
        assert verdict["verdict"] == reference_verdict(key, text, meaning), (key, text, verdict)
        seen.add(verdict["verdict"])
    assert seen == expected_kinds
    # the one named in the issue: two forms of one root
    assert judged(lab, "second_update.norm", "sqrt(32)")["verdict"] == judged(lab, "second_update.norm", "4*sqrt(2)")["verdict"] == "right"


def test_hints_point_without_giving_the_answer(lab):
    for key, text, meaning in CASES:
        verdict = judged(lab, key, text)
        if verdict["verdict"] in ("wrong", "malformed"):
            assert verdict["hint"], (key, text)
            answer = ANSWERS[key]
            for shown in ({str(answer)} if isinstance(answer, toy.Vector) else {answer.exact, answer.simplified} if key.endswith(".norm") else set()):
                assert shown not in verdict["hint"], (key, text, verdict["hint"])
    assert "sign of the first coordinate" in judged(lab, "first_update", "[1, 2, 0]")["hint"]
    assert "square root" in judged(lab, "second_update.norm", "32")["hint"]


def fill_and_check(browser, part: str, entries: dict) -> dict:
    """Empty the part's form, type each entry through the keyboard, submit with Enter; every field's verdict."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    form = browser.find_element(By.CSS_SELECTOR, f".residlab-checker[data-part='{part}'] form")
    # Emptying is not what is under test: one script for every field (WebDriver round trips dominate the time).
    browser.execute_script("for (const field of arguments[0].querySelectorAll('input[data-key]')) field.value = ''", form)
    inputs = form.find_elements(By.CSS_SELECTOR, "input[data-key]")
    keys = browser.execute_script("return arguments[0].map(field => field.dataset.key)", inputs)
    for field, key in zip(inputs, keys):
        if key in entries:
            field.send_keys(entries[key])
    inputs[-1].send_keys(Keys.ENTER)  # the keyboard submits the form
    return browser.execute_script(
        "return Object.fromEntries(arguments[0].map(field => [field.dataset.key, "
        "document.getElementById(field.getAttribute('aria-describedby')).dataset.verdict]))", inputs)


def test_typed_into_the_form_each_entry_gets_the_toys_verdict_and_nothing_is_shown_until_asked(lab):
    from selenium.webdriver.common.by import By

    checkers = lab.find_elements(By.CSS_SELECTOR, ".residlab-checker[data-part]")
    assert [checker.get_attribute("data-part") for checker in checkers] == ["1", "2"]
    solutions_top = lab.execute_script(
        "return [...document.querySelectorAll('.callout')].find(c => c.querySelector('.callout-collapse')).getBoundingClientRect().top")
    for checker in checkers:
        assert lab.execute_script("return arguments[0].getBoundingClientRect().top", checker) < solutions_top
        # every entry labelled; answers absent until asked
        for field in checker.find_elements(By.CSS_SELECTOR, "input[data-key]"):
            label = checker.find_element(By.CSS_SELECTOR, f"label[for='{field.get_attribute('id')}']")
            assert label.text.strip()
        assert all(not answer.is_displayed() and answer.text == "" for answer in checker.find_elements(By.CSS_SELECTOR, ".rl-answer"))
        assert checker.find_element(By.CSS_SELECTOR, "[role='status'][aria-live='polite']")
        text = checker.text
        for key, answer in ANSWERS.items():
            if key.endswith(".norm") and not answer.is_rational:
                assert answer.exact not in text and answer.simplified not in text, key
    # one round per distinct case of each key, typed through the keyboard
    rounds: list[dict] = []
    for key, text, meaning in CASES:
        round_ = next((r for r in rounds if key not in r), None)
        if round_ is None:
            rounds.append(round_ := {})
        round_[key] = (text, meaning)
    part_of = {field.get_attribute("data-key"): checker.get_attribute("data-part")
               for checker in checkers for field in checker.find_elements(By.CSS_SELECTOR, "input[data-key]")}
    assert set(part_of) == set(ANSWERS) - {"input"}
    for round_ in rounds:
        for part in ("1", "2"):
            typed = {key: text for key, (text, _) in round_.items() if part_of.get(key) == part}
            shown = fill_and_check(lab, part, typed)
            for key, verdict in shown.items():
                text, meaning = round_.get(key, ("", None))
                assert verdict == reference_verdict(key, text, meaning), (key, text, verdict)
    status = lab.find_element(By.CSS_SELECTOR, ".residlab-checker[data-part='1'] [role='status']").text
    assert "right" in status
    # asked: every answer appears, in the toy's exact form
    for checker in checkers:
        reveal = checker.find_element(By.XPATH, ".//button[normalize-space()='Show the answers']")
        lab.execute_script("arguments[0].scrollIntoView({block: 'center'})", reveal)
        reveal.click()
        assert reveal.get_attribute("aria-expanded") == "true"
        for answer in checker.find_elements(By.CSS_SELECTOR, ".rl-answer"):
            value = ANSWERS[answer.get_attribute("data-answer-for")]
            shown = value.exact if key_is_norm(answer) else str(value)
            assert answer.is_displayed() and answer.text == f"answer: {shown}"
        reveal.click()
        assert all(not answer.is_displayed() for answer in checker.find_elements(By.CSS_SELECTOR, ".rl-answer"))


def test_the_checker_fits_a_phone_screen(lab, screenshot_dir):
    from selenium.webdriver.common.by import By

    lab.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    try:
        checker = lab.find_element(By.CSS_SELECTOR, ".residlab-checker[data-part='1']")
        lab.execute_script("arguments[0].scrollIntoView()", checker)
        width = lab.execute_script("return document.documentElement.clientWidth")
        boxes = lab.execute_script(
            "return [...arguments[0].querySelectorAll('input, button, label')].map(e => e.getBoundingClientRect())"
            ".map(r => [r.left, r.right, r.width])", checker)
        assert all(left >= 0 and right <= width + 0.5 for left, right, _ in boxes)
        assert min(w for _, _, w in boxes if w) > 40
        assert lab.save_screenshot(str(screenshot_dir / "labs__05-checker-phone.png"))
    finally:
        lab.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
