"""Lab 07 as this session's render built it, read back: the report is the one the render computed once
(``patching_report`` in its render cache, ``run_lab`` on the model ``induction_training`` trained for it), and the
page must show that report: in its data island (every cell), in its SVG figures (every cell's value), in its
sentences, and with the explorer's script and the runner served from the site itself; the served runner prints the
page's verdict words for the same cells. That ``run_lab`` gives this report from those weights is the unit tests'
job, and the learner's run of the runner must write this very report (tests/site/test_page_commands.py); computing
it again here would cost the suite a minute for the same check."""

from __future__ import annotations

import importlib.util
import json
import pickle
import re
import sys
from pathlib import Path

import pytest
from built_text import shown

pytestmark = pytest.mark.slow

PAGE = "labs/07-patching-methods.html"


def rendered_value(project: Path, name: str):
    """The value of the shared computation ``name`` (``residlab.course.shared``) that the render of ``project``
    computed, exactly once, and its pages show."""
    from residlab.render import render_cache

    folder = project / render_cache.RENDER_CACHE_DIR
    computed = [use for use in render_cache.read_uses(folder) if use["name"] == name and use["how"] == "computed"]
    assert len(computed) == 1, (name, computed)
    (entry,) = folder.glob(f"*/{computed[0]['entry']}")
    return pickle.loads(entry.read_bytes())


def rendered_report(project: Path) -> dict:
    """The Lab 07 report the render of ``project`` computed (once, on the model ``induction_training`` trained once)
    and its page shows, as JSON reads it back."""
    rendered_value(project, "induction_training")
    return json.loads(json.dumps(rendered_value(project, "patching_report"), allow_nan=False))


@pytest.fixture(scope="module")
def report(built_site):
    return rendered_report(built_site.project)


@pytest.fixture(scope="module")
def page_html(built_site) -> str:
    return (built_site.site / PAGE).read_text(encoding="utf-8")


def _agree(shown_value, value, where: str) -> None:
    """The same structure, every number within 1e-4 (the page's JSON and this test's may round differently)."""
    if isinstance(value, dict):
        assert set(shown_value) == set(value), where
        for key in value:
            _agree(shown_value[key], value[key], f"{where}/{key}")
    elif isinstance(value, list):
        assert len(shown_value) == len(value), where
        for index, (a, b) in enumerate(zip(shown_value, value)):
            _agree(a, b, f"{where}[{index}]")
    elif isinstance(value, float):
        assert shown_value == pytest.approx(value, abs=1e-4), where
    else:
        assert shown_value == value, where


def test_the_data_island_holds_every_cell_of_the_report(page_html, report):
    payload = re.search(r'<script type="application/json" id="patching-explorer-data">(.*?)</script>', page_html, re.S)
    data = json.loads(payload.group(1))
    for name, design in report["designs"].items():
        for key in ("activation", "attribution", "error", "bends", "clean", "corrupt", "changed", "readable", "identities"):
            _agree(data["designs"][name][key], design[key], f"{name}/{key}")
        over = report["distribution"]["designs"][name]["activation"]
        for direction, grids in over.items():
            for kind, rows in grids.items():
                _agree(data["designs"][name]["over_pairs"][direction][kind],
                       [[[cell["mean"], cell["low"], cell["high"]] for cell in row] for row in rows], f"{name}/over/{kind}")


def test_every_figure_cell_shows_the_report(page_html, report):
    from residlab.course.lab07 import cells as cells_module

    figures = re.findall(r'<svg[^>]*aria-label="activation patching shares, (\w+) design".*?</svg>', page_html, re.S)
    assert sorted(figures) == sorted(report["designs"])
    for name in report["designs"]:
        svg = re.search(rf'aria-label="activation patching shares, {name} design".*?</svg>', page_html, re.S).group(0)
        cells = re.findall(r"<title>[^<:]*: (blocks\.(\d)\.(\w+)), position (\d+): ([^<]+)</title>", svg)
        assert len(cells) == 2 * 4 * 2 * len(report["designs"][name]["clean"])  # directions x kinds x blocks x positions
        values = {}
        for _, block, kind, position, value in cells:
            values.setdefault((kind, int(block), int(position)), []).append(value)
        design = report["designs"][name]
        for (kind, block, position), pair in values.items():
            for direction, value in zip(("denoising", "noising"), pair):
                expected = design["activation"][direction][kind][block][position]
                number, _, named = value.partition(", ")
                assert abs(float(number) - expected) < 2e-3, (name, direction, kind, block, position)
                # an identity in two decimals and named so, as the page's text prints it; an observed share in three
                identity = bool(cells_module.by_construction(design, kind, block, position)) or position < min(design["changed"])
                assert (named.startswith("an identity") and number == f"{expected:.2f}") if identity else len(number.split(".")[1]) == 3


def test_the_sentences_are_the_ones_this_report_chooses(built_site, report):
    from residlab.course.lab07 import compare_sentences, error_sentences, head_sentences, sentences

    text = shown(built_site.site, PAGE).replace("\u2019", "'")  # Quarto's typographic apostrophe, as typed
    for said in (sentences.known_heads_sentence, sentences.chance_sentence, head_sentences.disagreement_sentence,
                 head_sentences.outside_sentence, head_sentences.score_order_sentence, error_sentences.nonlinearities_sentence,
                 compare_sentences.lab06_sentence):  # fmt: skip
        assert said(report) in text, said.__name__
    for name in report["designs"]:
        assert sentences.gap_sentence(report, name) in text
        assert sentences.path_sentence(report, name) in text
        assert compare_sentences.example_place_sentence(report, name) in text
        assert compare_sentences.head_direction_sentence(report, name) in text
        assert error_sentences.attribution_sentence(report, name) in text
        assert error_sentences.first_order_sentence(report, name) in text
        assert error_sentences.head_error_sentence(report, name) in text
        assert compare_sentences.direction_sentence(report, name) in text
        assert compare_sentences.head_direction_sentence(report, name) in text
        if report["designs"][name]["hybrids"]:
            assert sentences.hybrid_sentence(report, name) in text
        for direction in ("denoising", "noising"):
            assert sentences.grid_sentence(report, name, direction) in text
        for method in sentences.METHOD_NAMES:
            for kind in report["heads"]["named"]:
                assert head_sentences.kind_sentence(report, name, method, kind).replace("**", "") in text  # bold in Markdown
    assert "noise floor" not in text  # the null is the same model's null pairs, not a floor
    assert "**" not in text  # Markdown emphasis in an inline expression's text is shown, not rendered
    from residlab.course.lab07 import goal_sentences

    # the verdicts at a glance: a table, a row a design and kind, a column a method; every cell on the page
    rows = goal_sentences.results_at_a_glance(report).splitlines()[2:]
    cells = [cell.strip() for row in rows for cell in row.strip("|").split(" | ")]
    assert len(rows) >= 4 and all(cell in text for cell in cells), [cell for cell in cells if cell not in text]
    assert any(row.startswith("| matched-position, previous-token heads | ") for row in rows)  # the one tested kind's row
    summary = goal_sentences.plain_summary(report).splitlines()  # the results in plain words, before the caveats
    assert len(summary) >= 4 and all(item.removeprefix("- ").replace("**", "") in text for item in summary), summary


def test_no_figure_legend_runs_past_the_figure(report):
    """Every legend line of the page's figures ends inside the figure (12 px text, at most about 7 px a character)."""
    import html

    from residlab.course.lab07 import figures

    for name in report["designs"]:
        for svg in (figures.activation_figure(report, name), figures.attribution_figure(report, name)):
            width = float(re.search(r'viewBox="0 0 (\S+) ', svg).group(1))
            lines = re.findall(r'<text x="([\d.]+)" y="[\d.]+" font-size="12">([^<]*)</text>', svg)
            assert lines and all(float(x) + 7 * len(html.unescape(line)) <= width for x, line in lines), name


def test_the_explorer_and_the_runner_are_served_by_the_site(built_site, page_html):
    assert 'data-residlab-scripts="../assets/explorers/patching-explorer.js"' in page_html  # fetched by the site's loader
    assert (built_site.site / "assets/explorers/patching-explorer.js").is_file()
    served = built_site.site / "assets/labs/patching_methods.py"
    assert served.read_bytes() == (built_site.project / "assets/labs/patching_methods.py").read_bytes()
    assert 'href="../assets/labs/patching_methods.py"' in page_html
    assert not re.search(r'<script[^>]+src="https?://', page_html)  # no script from another site


def served_runner(site: Path):
    """The runner the page links, imported as a module from the site (its ``__main__`` block does not run)."""
    spec = importlib.util.spec_from_file_location("patching_methods_served", site / "assets/labs/patching_methods.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def test_the_runner_prints_the_verdict_words_the_page_shows_for_each_cell(built_site, report):
    """Lab 07's sentences name each cell's verdicts (per design, method and head kind, over the pairs) in the words
    of the report's one table; the download prints the same words for the same cells, "not identifiable" included, and
    says why not once per design in the one function's words, as Part 4 does."""
    from residlab.course.lab07 import head_sentences, sentences
    from residlab.course.lab07.designs import PREDICTED_NEAR_ZERO, UNTESTABLE, not_testable_reason
    from residlab.course.lab07.verdicts import HEAD_KINDS, METHOD_NAMES

    method_of = {said: method for method, said in METHOD_NAMES.items()}  # the runner names them as the page does
    kind_of = {said: kind for kind, said in HEAD_KINDS.items()}

    runner = served_runner(built_site.site)
    assert runner.VERDICT_WORDS == report["verdict_words"]  # the download's table is the package's
    words = set(report["verdict_words"].values())
    lines = runner.summary_lines(report)
    printed, design = {}, None
    for line in lines:
        header = re.match(r"^(\w+): worked example gap", line)
        cell = re.match(r"^  (.+?), ([\w-]+) heads\b", line)
        if header:
            design = header[1]
        elif cell:  # a verdict word may hold a colon ("no test: ..."): every word the cell's line prints
            printed[(design, method_of[cell[1]], kind_of[cell[2]])] = sorted(word for word in words if word in line)
    page = {(name, method, kind): sorted(word for word in words if word in head_sentences.kind_sentence(report, name, method, kind))
            for name, method, kind in printed}  # fmt: skip
    assert printed and printed == page
    assert [report["verdict_words"]["not_testable"]] in printed.values()  # the cells a design cannot test, too
    for name, kinds in UNTESTABLE.items():
        for kind in kinds:
            reason = not_testable_reason(name, kind, report)  # with what this report observed, said once a design
            assert reason and reason in sentences.path_sentence(report, name)
            assert f"  {HEAD_KINDS[kind]} heads not identifiable in this design: {reason}" in lines
            assert f"  per-head denoising, {HEAD_KINDS[kind]} heads: not identifiable: {PREDICTED_NEAR_ZERO}" in lines
            assert f"not identifiable: {PREDICTED_NEAR_ZERO}" in head_sentences.kind_sentence(report, name, "denoising", kind)


def test_the_page_cites_the_methods_it_runs(built_site):
    text = shown(built_site.site, PAGE)
    for cited in ("Vig et al. 2020", "Meng et al. 2022", "Zhang and Nanda 2024", "Heimersheim and Nanda 2024",
                  "Wang et al. 2022", "Goldowsky-Dill et al. 2023", "Nanda 2023", "Syed et al. 2023",
                  "Olsson et al. 2022", "Kramár et al. 2024", "Geiger et al. 2021", "Chan et al. 2022",
                  "Elhage et al. 2021"):  # fmt: skip
        assert cited in text, cited


def test_the_explorer_shows_each_cell_on_focus_and_moves_with_the_arrow_keys(built_site, served, browser, report):
    """In headless Chromium: choose a design, a direction and a site kind, focus a cell from the keyboard, and read
    the numbers the explorer shows against the report."""
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
    from test_browser import open_page, wait_for

    loaded = open_page(browser, f"{served(built_site.site)}/{PAGE}")
    assert loaded["failed"] == [] and not [entry for entry in loaded["console"] if entry["level"] == "SEVERE"]
    wait_for(browser, lambda b: b.find_elements("css selector", "#patching-grid td"), "the patching explorer was never built")
    Select(browser.find_element("id", "patching-design")).select_by_value("matched_position")
    Select(browser.find_element("id", "patching-direction")).select_by_value("noising")
    Select(browser.find_element("id", "patching-kind")).select_by_value("attn_write")
    design = report["designs"]["matched_position"]
    position = design["changed"][-1]
    cell = browser.find_element("css selector", f'#patching-grid td[data-block="0"][data-position="{position}"]')
    browser.execute_script("arguments[0].focus()", cell)
    cell.send_keys(Keys.ARROW_RIGHT)  # to the next position, by the keyboard
    focused = browser.switch_to.active_element
    assert focused.get_attribute("data-position") == str(position + 1)
    shown_text = browser.find_element("id", "patching-cell").text
    noising = design["activation"]["noising"]["attn_write"][0][position + 1]
    denoising = design["activation"]["denoising"]["attn_write"][0][position + 1]
    attribution = design["attribution"]["attn_write"][0][position + 1]
    assert f"blocks.0.attn_write, position {position + 1}" in shown_text
    assert f"denoising {denoising:.3f}, noising {noising:.3f}, attribution of the denoising share {attribution:.3f}" in shown_text
    over = report["distribution"]["designs"]["matched_position"]["activation"]["noising"]["attn_write"][0][position + 1]
    assert f"Over {report['distribution']['pairs']} held-out pairs, noising {over['mean']:.3f}" in shown_text
    assert focused.get_attribute("data-value") == f"{noising:.3f}"
    # an identity in two decimals with the figures' filled dot, as the page prints one; no number cut short
    Select(browser.find_element("id", "patching-kind")).select_by_value("resid_post")
    last = len(design["activation"]["noising"]["resid_post"]) - 1
    readout = browser.find_element("css selector", f'#patching-grid td[data-block="{last}"][data-position="{design["readout"]}"]')
    assert (readout.text, readout.get_attribute("data-value")) == ("1.00\u2009\u2022", "1.00"), readout.text
    clipped = ("return [...document.querySelectorAll('#patching-grid td, #patching-grid th')]"
               ".filter((c) => c.scrollWidth > c.clientWidth).map((c) => c.textContent)")
    assert browser.execute_script(clipped) == []
    browser.set_window_size(412, 900)  # a phone's width: the grid's box scrolls sideways instead
    try:
        assert browser.execute_script(clipped) == []
    finally:
        browser.set_window_size(1280, 900)
