"""Lab 05's two explorers in headless Chromium, on the built site served from 127.0.0.1.

The toy explorer is typed into and every value it shows is compared with ``residlab.course.lab05.toy.build_report`` for the
same input; the capture explorer is switched through positions and boundaries and every number it shows is
compared with ``observations.json`` (the selected position) and with ``residlab.course.lab05.explorer_data`` (every
position). Both must work with no request beyond the site's own host, at phone width, with labelled controls,
and without moving anything on the page when values change."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from test_browser import open_page, requested_urls, wait_for

from residlab.course.lab05 import toy

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
LAB = "labs/05-trace-residual-stream.html"
CAPTURE = ROOT / "assets" / "captures" / "synthetic-specimen-seed0"
INPUT_IDS = ["toy-x-1", "toy-x-2", "toy-x-3", "toy-second-1", "toy-second-2", "toy-second-3"]
PHONE_WIDTH = 390

# (x, second position) as a reader types them: integers, fractions and decimals, negatives, large values, and
# x2 = -2, which makes G(y) zero and the cosine undefined.
TOY_CASES = [
    (["1", "2", "-1"], ["-2", "0", "3"]),
    (["3", "-1", "2"], ["-2", "0", "3"]),
    (["1/3", "0.5", "-7/4"], ["2.25", "-1/6", "0"]),
    (["-12", "-5", "-8"], ["-0.125", "-3", "-1/7"]),
    (["987654", "-123457", "1e5"], ["40000", "99991", "-31337"]),
    (["5", "-2", "1"], ["0", "0", "0"]),
]


@pytest.fixture(scope="module")
def lab_url(built_site, served):
    return f"{served(built_site.site)}/{LAB}"


@pytest.fixture
def lab(browser, lab_url):
    """Lab 05 freshly loaded, both explorers built."""
    loaded = open_page(browser, lab_url)
    wait_for(browser, lambda b: b.find_elements("css selector", "#toy-explorer output[data-field]"), "the toy explorer was never built")
    wait_for(browser, lambda b: b.find_elements("css selector", "#capture-explorer select"), "the capture explorer was never built")
    return loaded


def report_text(value) -> str:
    """What the explorer shows for one report value: exact vectors as residlab.course.lab05.toy's str(Vector), floats as
    JSON (Python's repr), booleans as yes/no."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "undefined (an update is zero)"
    if isinstance(value, list):
        return "[" + ", ".join(str(item) for item in value) + "]"
    return json.dumps(value) if isinstance(value, float) else str(value)


def field(report: dict, path: str):
    value = report
    for key in path.split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def type_inputs(browser, values: list[str]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    for input_id, value in zip(INPUT_IDS, values):
        box = browser.find_element(By.ID, input_id)
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.BACKSPACE)
        if value:
            box.send_keys(value)


def shown_fields(browser) -> dict[str, str]:
    return browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#toy-explorer output[data-field]')]"
        ".map(o => [o.dataset.field, o.textContent]))"
    )


def status_text(browser) -> str:
    return browser.execute_script("return document.getElementById('toy-explorer-status').textContent")


@pytest.mark.parametrize("x, second", TOY_CASES, ids=[",".join(x) for x, _ in TOY_CASES])
def test_toy_explorer_shows_residlab_toy_report(browser, lab, x, second):
    type_inputs(browser, x + second)
    expected_x = toy.Vector(tuple(Fraction(v) for v in x))
    wait_for(browser, lambda b: f"x = {expected_x}" in status_text(b), f"the explorer never showed x = {expected_x}")
    report = toy.build_report(expected_x, toy.Vector(tuple(Fraction(v) for v in second)))
    shown = shown_fields(browser)
    assert len(shown) == 54  # every field the explorer shows, each compared below
    mismatches = {path: (text, report_text(field(report, path))) for path, text in shown.items() if text != report_text(field(report, path))}
    assert mismatches == {}, "explorer value != residlab.course.lab05.toy's report (shown, expected)"


def random_entries(rng) -> list[str]:
    """Six entries as a reader might type them; at most one fraction, so residlab.course.lab05.toy's exact norms (which
    factor the squared norm by trial division) stay quick."""
    def integer():
        return str(rng.randint(-300, 300))
    forms = [lambda: f"{rng.randint(-99, 99)}.{rng.randint(0, 9)}", lambda: f"{rng.randint(1, 9)}e{rng.randint(0, 2)}",
             lambda: f"{rng.randint(-40, 40)}/{rng.randint(1, 8)}", lambda: f"-{rng.randint(0, 9)}.{rng.randint(0, 99):02d}",
             lambda: f"1_{rng.randint(100, 999)}", lambda: f".{rng.randint(1, 9)}", lambda: f"+{rng.randint(0, 50)}."]
    entries = [integer() for _ in range(6)]
    entries[rng.randrange(6)] = rng.choice(forms)()
    return entries


def test_toy_explorer_arithmetic_equals_residlab_toy_on_many_inputs(browser, lab):
    import random

    rng = random.Random(14)
    cases = [random_entries(rng) for _ in range(60)] + [["0", "-2", "0", "0", "0", "0"], ["-0", "0.0", "0/5", "1e0", "2E1", "3"]]
    results = browser.execute_script("return arguments[0].map(entries => window.residlabToyExplorer.compute(entries))", cases)
    for entries, result in zip(cases, results):
        values = [toy.parse_vector_text(",".join(entries[:3])), toy.parse_vector_text(",".join(entries[3:]))]
        report = toy.build_report(*values)
        assert "error" not in result, (entries, result)
        wrong = {path: (text, report_text(field(report, path))) for path, text in result["fields"].items() if text != report_text(field(report, path))}
        assert wrong == {}, entries


def test_toy_explorer_refuses_what_the_runner_refuses(browser, lab):
    refused = ["", " ", "abc", "nan", "-inf", "Infinity", "1/0", "1.2.3", "--1", "1/2/3", "0x10", "1e", "e5", ".", "1 2", "1__0", "½"]
    results = browser.execute_script(
        "return arguments[0].map(entry => window.residlabToyExplorer.compute([entry, '2', '-1', '-2', '0', '3']))", refused)
    for entry, result in zip(refused, results):
        with pytest.raises(toy.ToyInputError):
            toy.parse_vector_text(f"{entry},2,-1")
        assert result.get("error", "").startswith("entry 0 "), (entry, result)


@pytest.mark.parametrize("entry, named", [("", "is empty"), ("two", "“two”, which is not a number"),
                                          ("nan", "not finite"), ("1/0", "zero denominator")])
def test_toy_explorer_names_bad_input_and_never_shows_nan(browser, lab, entry, named):
    type_inputs(browser, ["1", entry, "-1", "-2", "0", "3"])
    wait_for(browser, lambda b: named in status_text(b), f"no message naming {entry!r}")
    assert status_text(browser).startswith("x₂")
    shown = shown_fields(browser)
    assert set(shown.values()) == {"—"}
    assert "NaN" not in browser.find_element("id", "toy-explorer").text
    assert browser.find_element("id", "toy-x-2").get_attribute("aria-invalid") == "true"
    type_inputs(browser, ["1", "2", "-1", "-2", "0", "3"])  # a good entry brings the values back
    wait_for(browser, lambda b: shown_fields(b)["baseline.final.exact"] == "[4, 0, -1]", "the values did not come back")
    assert browser.find_element("id", "toy-x-2").get_attribute("aria-invalid") == "false"


def box_layout(browser, root_id: str) -> list:
    """The explorer's box, the heading after it, and the height of every box inside it that shows values."""
    return browser.execute_script(
        "const root = document.getElementById(arguments[0]); const r = root.getBoundingClientRect();"
        "const after = document.getElementById('submit-an-explanation').getBoundingClientRect();"
        "return [r.top + scrollY, r.height, r.width, after.top + scrollY,"
        " ...[...root.querySelectorAll('.rl-value, .rl-status, svg, tr')].map(e => e.getBoundingClientRect().height)]",
        root_id,
    )


def test_toy_explorer_layout_does_not_move_when_values_change(browser, lab):
    before = box_layout(browser, "toy-explorer")
    type_inputs(browser, ["-98765432109876/3", "0.000001", "1e30", "7", "-1/999999", "12345678901234567890"])
    wait_for(browser, lambda b: "12345678901234567890]." in status_text(b), "the long input was never computed")
    assert box_layout(browser, "toy-explorer") == before
    type_inputs(browser, ["1", "", "-1", "-2", "0", "3"])
    wait_for(browser, lambda b: "empty" in status_text(b), "no message for the empty entry")
    assert box_layout(browser, "toy-explorer") == before


def test_explorer_controls_are_labelled_and_keyboard_operable(browser, lab):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    controls = browser.find_elements(By.CSS_SELECTOR, "#toy-explorer input, #capture-explorer select")
    assert len(controls) == 8
    for control in controls:
        label = browser.find_element(By.CSS_SELECTOR, f"label[for='{control.get_attribute('id')}']")
        assert label.text.strip(), control.get_attribute("id")
    # Keyboard only: focus the boundary menu and step it with the arrow key.
    boundary = browser.find_element(By.ID, "capture-boundary")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].focus()", boundary)
    before = boundary.get_attribute("value")
    boundary.send_keys(Keys.ARROW_UP)
    wait_for(browser, lambda b: boundary.get_attribute("value") != before, "the arrow key did not change the boundary")
    chosen = browser.find_element(By.CSS_SELECTOR, "#capture-explorer tr.rl-chosen th").text
    assert chosen == f"H_{boundary.get_attribute('value')}"
    figures = browser.find_elements(By.CSS_SELECTOR, "#capture-explorer svg")
    assert [figure.get_attribute("role") for figure in figures] == ["img", "img"]
    norms_label, writes_label = (figure.get_attribute("aria-label") for figure in figures)
    assert "H_0" in norms_label and "H_6" in norms_label
    assert "block 0 attention" in writes_label and "block 5 attention" in writes_label


def test_explorers_work_at_phone_width(browser, lab_url):
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    try:
        open_page(browser, lab_url)
        wait_for(browser, lambda b: b.find_elements("css selector", "#capture-explorer select"), "the explorers were never built")
        type_inputs(browser, ["3", "-1", "2", "-2", "0", "3"])
        wait_for(browser, lambda b: shown_fields(b)["readouts.baseline.exact"] == "2", "the toy explorer did not update at phone width")
        choose(browser, "capture-position", 2)
        wait_for(browser, lambda b: capture_shown(b)["summary"].startswith("Position 2"), "the capture explorer did not switch at phone width")
        # Each explorer fits the 390 px viewport; only its value boxes and wide tables scroll sideways inside it.
        boxes = browser.execute_script(
            "return [document.documentElement.clientWidth, ...['toy-explorer', 'capture-explorer'].map(id => {"
            " const e = document.getElementById(id); return [e.getBoundingClientRect().left, e.getBoundingClientRect().right, e.scrollWidth, e.clientWidth]; })]")
        viewport, *explorers = boxes
        assert viewport == PHONE_WIDTH
        for left, right, scroll_width, client_width in explorers:
            assert 0 <= left and right <= viewport and scroll_width <= client_width, boxes
        cut = browser.execute_script(  # a number cut short by an ellipsis would be unreadable
            "return [...document.querySelectorAll('#capture-explorer tbody td')].filter(c => c.scrollWidth > c.clientWidth).length")
        assert cut == 0
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def capture_shown(browser) -> dict:
    return browser.execute_script(
        "const cells = tr => [...tr.children].map(c => c.textContent);"
        "return {summary: document.getElementById('capture-summary').textContent,"
        " boundaries: [...document.querySelectorAll('#capture-explorer table')[0].tBodies[0].rows].map(cells),"
        " lens: [...document.querySelectorAll('#capture-explorer table')[1].tBodies[0].rows].map(cells),"
        " figures: [...document.querySelectorAll('#capture-explorer svg')].map(s => s.getAttribute('aria-label'))}"
    )


def expected_capture_rows(observation: dict, boundary: int) -> tuple[list, list]:
    def fixed(value):
        return "undefined" if value is None else f"{value:.4f}"

    rows = []
    for row in observation["boundaries"]:
        update = observation["block_updates"][row["index"] - 1] if row["index"] else None
        rows.append([row["label"], fixed(row["norm"])] + (
            [fixed(update[key]) for key in ("attn_write_norm", "mlp_write_norm", "difference_norm", "cosine_consecutive", "cosine_update_with_incoming")]
            if update else ["—"] * 5))
    lens = [[str(rank + 1), str(entry["id"]), json.dumps(entry["piece"], ensure_ascii=False), f"{entry['probability']:.2e}"]
            for rank, entry in enumerate(observation["boundaries"][boundary]["logit_lens_top"])]
    return rows, lens


def choose(browser, select_id: str, value: int) -> None:
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", select_id)).select_by_value(str(value))


def test_capture_explorer_shows_observations_json_at_the_selected_position(browser, lab):
    observations = json.loads((CAPTURE / "observations.json").read_text(encoding="utf-8"))
    selected = observations["selected_position"]
    observation = observations["positions"][selected]
    assert browser.find_element("id", "capture-position").get_attribute("value") == str(selected)
    for boundary in (len(observation["boundaries"]) - 1, 0, 3):
        choose(browser, "capture-boundary", boundary)
        rows, lens = expected_capture_rows(observation, boundary)
        wait_for(browser, lambda b: capture_shown(b)["lens"] == lens, f"logit lens at H_{boundary} != observations.json")
        shown = capture_shown(browser)
        assert shown["boundaries"] == rows
        assert f"H_{boundary}" in shown["summary"] and f"norm {observation['boundaries'][boundary]['norm']:.4f}" in shown["summary"]
        assert all(f"{row['norm']:.4f}" in shown["figures"][0] for row in observation["boundaries"])
        assert all(f"{row['mlp_write_norm']:.4f}" in shown["figures"][1] for row in observation["block_updates"])


def test_capture_explorer_switches_position_and_boundary(browser, lab):
    from residlab.course.lab05 import explorer_data
    from residlab.course.models.capture_page import read_capture

    capture = read_capture(CAPTURE)
    data = explorer_data.explorer_data(capture)
    assert len(data["positions"]) == len(capture.observations["tokens"]) > 2
    for position, boundary in ((0, 2), (3, 6), (5, 0), (capture.observations["selected_position"], 4)):
        choose(browser, "capture-position", position)
        choose(browser, "capture-boundary", boundary)
        rows, lens = expected_capture_rows(data["positions"][position], boundary)
        wait_for(browser, lambda b: capture_shown(b)["boundaries"] == rows and capture_shown(b)["lens"] == lens,
                 f"position {position}, H_{boundary}: the explorer does not show explorer_data's numbers")
        piece = json.dumps(capture.observations["tokens"][position]["piece"])
        assert capture_shown(browser)["summary"].startswith(f"Position {position} ({piece}), H_{boundary}")
    # Other positions really differ: the explorer is not showing one position under many names.
    assert data["positions"][0]["boundaries"][-1]["norm"] != data["positions"][3]["boundaries"][-1]["norm"]


def test_capture_explorer_sits_next_to_the_synthetic_warning(browser, lab):
    nearby = browser.execute_script(
        "let e = document.getElementById('capture-explorer'); const seen = [];"
        "for (let i = 0; i < 4 && e; i++) { e = e.previousElementSibling; if (e) seen.push(e.textContent); }"
        "return seen.join(' ')")
    assert "Untrained baseline: one random-weight draw, not Pythia-14M" in nearby


def test_explorers_request_nothing_beyond_the_site(lab, lab_url):
    origin = urlsplit(lab_url).netloc
    scripts = [url for url in lab["requested"] if "/assets/explorers/" in url]
    # the registry's scripts of Lab 05 from the site itself (their small stylesheet is written into the page when the
    # site is built), each fetched once as its block neared the screen, all but the editor's worker, which only a
    # first Run or Check starts, and the model's, which only the "Run it in the page" button starts
    from residlab.course import pages

    expected = set(pages.family_of("labs/05-trace-residual-stream.qmd").explorers) - {"python-worker.js", "onnx-worker.js"}
    assert sorted(url.rsplit("/", 1)[1] for url in scripts) == sorted(expected), lab["requested"]
    assert [url for url in lab["requested"] if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).netloc != origin] == []
    assert lab["failed"] == [] and [e for e in lab["console"] if e["level"] == "SEVERE"] == []


def test_explorers_load_when_a_reader_nears_them(browser, lab_url):
    """Nothing in assets/explorers/ is fetched with the page: a block's scripts are fetched, in the order its
    data-residlab-scripts names them, once the block nears the screen (assets/site/explorers.html); until then the
    block keeps its text for readers without JavaScript."""
    loaded = open_page(browser, lab_url, explorers=False)
    assert [url for url in loaded["requested"] if "/assets/explorers/" in url] == []
    assert "needs JavaScript" in browser.find_element("id", "toy-explorer").text
    browser.get_log("performance")
    browser.execute_script("document.querySelector('.residlab-checker[data-part=\"1\"]').scrollIntoView()")
    wait_for(browser, lambda b: b.find_elements("css selector", ".residlab-checker[data-part='1'] form"), "the answer checker was never built")
    wait_for(browser, lambda b: b.find_elements("css selector", "#toy-explorer output[data-field]"), "toy-trace.js did not build the toy explorer")
    assert browser.execute_script("return document.querySelectorAll('[aria-busy]').length") == 0
    fetched = [url.rsplit("/", 1)[1] for url in requested_urls(browser) if "/assets/explorers/" in url]
    # the checker's arithmetic first, then the checker; the toy explorer's block names toy-trace.js too: once
    assert fetched[:2] == ["toy-trace.js", "answer-checker.js"] and fetched.count("toy-trace.js") == 1, fetched
