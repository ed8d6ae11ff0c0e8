"""The page's model in headless Chromium, with every host but 127.0.0.1 unreachable: the worker Lab 05 Part 4 starts
(assets/explorers/onnx-worker.js) runs the export the build step puts into the site (residlab/build/onnx_files.py)
with onnxruntime-web, and agrees with the numbers the build wrote from the capture floor's recording (parity.json)
within 1e-4 at every site, the sampled logits and the logit lens, clean and with a write zeroed; its patch of one
block input from a second prompt agrees with residlab's own patch of that block input (the capture floor's
``taken_from``) at every boundary; its tokenizer (@huggingface/tokenizers) gives Python's ids for every string of
tokenizer-parity.json. A tokenizer.json whose normaliser was changed, and a worker that patches through the wrong
write, must fail those comparisons. Lab 05's block, as built, is then driven as a reader would: a prompt, a zeroed
write against the audit's total effect, a patched block input against residlab's metric and patch recovery.

The folder served is what the post-render step writes (the export cached by its weights' digest, so this costs a
copy), the worker beside it where the site has it, and a page of this test's that asks the worker; the whole site's
render is not needed for these numbers.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from test_python_in_page import offline_browser, wait_until  # noqa: F401 - the fixture: Chromium that reaches only 127.0.0.1
from test_browser import axe_violations, requested_urls
from test_dark_mode import page_mode

from residlab.build import onnx_files

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-4
LOAD_SECONDS = 180  # 71 MB from loopback and the WebAssembly compiled, on a CPU other suites share

ASKING_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>worker</title></head><body><script>
const worker = new Worker("assets/explorers/onnx-worker.js", { type: "module" });
let next = 0;
const waiting = new Map();
worker.onmessage = ({ data }) => { waiting.get(data.id)(data); waiting.delete(data.id); };
// Typed arrays made plain for WebDriver; the logits only at the columns the reference sampled.
function plain(outputs, sampled) {
  if (!outputs) return null;
  const result = {};
  for (const [name, { dims, data }] of Object.entries(outputs)) {
    if (name === "logits") {
      const vocabulary = dims[2], rows = [];
      for (let p = 0; p < dims[1]; p++) rows.push(sampled.map((id) => data[p * vocabulary + id]));
      result[name] = rows;
    } else result[name] = { dims, data: Array.from(data) };
  }
  return result;
}
window.ask = (request, sampled) => new Promise((resolve) => {
  const id = ++next;
  waiting.set(id, (answer) => resolve(answer.type === "result"
    ? { ...answer, clean: plain(answer.clean, sampled), zeroed: plain(answer.zeroed, sampled),
        source: plain(answer.source, sampled), patched: plain(answer.patched, sampled) } : answer));
  worker.postMessage({ id, ...request });
});
</script></body></html>
"""


def served_folder(tmp_path_factory, name: str, change=None) -> Path:
    folder = tmp_path_factory.mktemp(name)
    onnx_files.copy_into_site(ROOT, folder)
    (folder / "assets/explorers").mkdir(parents=True)
    shutil.copyfile(ROOT / "assets/explorers/onnx-worker.js", folder / "assets/explorers/onnx-worker.js")
    (folder / "ask.html").write_text(ASKING_PAGE, encoding="utf-8")
    if change:
        change(folder / onnx_files.MODEL_DIR)
    return folder


def ask(browser, request: dict, sampled=()) -> dict:
    browser.set_script_timeout(LOAD_SECONDS)
    answer = browser.execute_async_script("ask(arguments[0], arguments[1]).then(arguments[2]);", request, list(sampled))
    assert answer["type"] != "error", answer["message"]
    return answer


@pytest.fixture(scope="module")
def page_model():
    """The model the site exported, in Python, with its tokenizer."""
    from residlab.pythia import onnx_export
    from tokenizers import Tokenizer

    source = onnx_export.page_model_source()
    tokenizer = Tokenizer.from_str(source.tokenizer_json.decode("utf-8"))
    return {"model": source.build(), "tokenizer": tokenizer,
            "encode": lambda text: tokenizer.encode(text, add_special_tokens=False).ids}  # fmt: skip


@pytest.fixture(scope="module")
def model_page(tmp_path_factory, served, offline_browser):  # noqa: F811 - the fixture imported above
    folder = served_folder(tmp_path_factory, "onnx-site")
    base = served(folder)
    offline_browser.get(f"{base}/ask.html")
    ask(offline_browser, {"type": "load"})
    return offline_browser, folder, base


def compare(answer: dict, expected: dict, where: str) -> float:
    """The largest difference over every site, the sampled logits and the lens, with the lens' ids equal."""
    largest = 0.0
    for name, values in expected["sites"].items():
        found = np.array(answer[name]["data"], dtype=np.float64).reshape(np.array(values).shape)
        largest = max(largest, float(np.abs(found - np.array(values)).max()))
    largest = max(largest, float(np.abs(np.array(answer["logits"]) - np.array(expected["logits_sampled"])).max()))
    top = np.array(answer["lens.top_logits"]["data"]).reshape(np.array(expected["lens_top_logits"]).shape)
    largest = max(largest, float(np.abs(top - np.array(expected["lens_top_logits"])).max()))
    ids = np.array(answer["lens.top_ids"]["data"]).reshape(np.array(expected["lens_top_ids"]).shape)
    assert (ids == np.array(expected["lens_top_ids"])).all(), f"{where}: the logit lens' top tokens differ"
    return largest


def test_the_worker_agrees_with_the_recording_at_every_site_clean_and_zeroed(model_page):
    browser, folder, base = model_page
    reference = json.loads((folder / onnx_files.MODEL_DIR / onnx_files.PARITY_FILE).read_text(encoding="utf-8"))
    zeroed_cases = 0
    for prompt in reference["prompts"]:
        zero = None
        if "zeroed" in prompt:
            block, site = int(prompt["zeroed"]["site"].split(".")[1]), prompt["zeroed"]["site"].split(".")[2]
            zero = {"site": site, "block": block, "position": prompt["zeroed"]["position"]}
        answer = ask(browser, {"type": "run", "text": prompt["text"], "zero": zero}, reference["sampled_ids"])
        assert answer["ids"] == prompt["ids"], prompt["text"]  # the page's tokenizer, on the prompt itself
        assert compare(answer["clean"], prompt["clean"], prompt["text"]) <= TOLERANCE
        if zero:
            zeroed_cases += 1
            assert compare(answer["zeroed"], prompt["zeroed"], prompt["text"] + " (zeroed)") <= TOLERANCE
            # the zero did something a comparison within the tolerance could tell apart
            shift = np.abs(np.array(answer["zeroed"]["logits"]) - np.array(answer["clean"]["logits"])).max()
            assert shift > 100 * TOLERANCE
    assert zeroed_cases >= 1 and len({len(prompt["ids"]) for prompt in reference["prompts"]}) == len(reference["prompts"])
    remote = [url for url in requested_urls(browser) if not url.startswith(base) and url.startswith("http")]
    assert remote == [], "requested other hosts"


def test_the_pages_tokenizer_gives_pythons_ids_for_every_string(model_page):
    browser, folder, _ = model_page
    reference = json.loads((folder / onnx_files.MODEL_DIR / onnx_files.TOKENIZER_PARITY_FILE).read_text(encoding="utf-8"))
    assert len(reference["strings"]) >= 300
    found = ask(browser, {"type": "tokenize", "strings": reference["strings"]})["ids"]
    differing = [text for text, ids, expected in zip(reference["strings"], found, reference["ids"]) if ids != expected]
    assert differing == []


def patch_disagreement(browser, runs: dict) -> float:
    """The largest difference between the worker's patch of PATCHED (SECOND into PROMPT) and residlab's in Python:
    every boundary of the second prompt's and the patched run at every position, and the logits at the sampled
    columns at the last position."""
    from residlab.pythia.onnx_reference import SAMPLED_IDS

    block, position = PATCHED
    answer = ask(browser, {"type": "run", "text": PROMPT, "patch": {"text": SECOND, "block": block, "position": position}},
                 SAMPLED_IDS)  # fmt: skip
    depth = sum(name.endswith("resid_pre") for name in runs["first"])
    names = [f"blocks.{b}.resid_pre" for b in range(depth)] + [f"blocks.{depth - 1}.resid_post"]
    largest = 0.0
    for found, expected in ((answer["source"], runs["second"]), (answer["patched"], runs["patched"])):
        for name in names:
            values = expected[name][0].numpy()
            largest = max(largest, float(np.abs(np.array(found[name]["data"]).reshape(values.shape) - values).max()))
        logits = expected["logits"][0, -1, list(SAMPLED_IDS)].numpy()
        largest = max(largest, float(np.abs(np.array(found["logits"][-1]) - logits).max()))
    return largest


def test_the_workers_patch_of_a_block_input_is_residlabs(model_page, patch_runs):
    assert patch_disagreement(model_page[0], patch_runs) <= TOLERANCE


def test_a_changed_normaliser_fails_the_tokenizer_comparison(tmp_path_factory, served, offline_browser):  # noqa: F811
    """The planted fault: the served tokenizer.json lowercases (a normaliser the real one lacks)."""

    def lowercasing(model_dir: Path) -> None:
        tokenizer = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
        tokenizer["normalizer"] = {"type": "Lowercase"}
        (model_dir / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")

    folder = served_folder(tmp_path_factory, "onnx-site-lowercase", lowercasing)
    offline_browser.get(f"{served(folder)}/ask.html")
    reference = json.loads((folder / onnx_files.MODEL_DIR / onnx_files.TOKENIZER_PARITY_FILE).read_text(encoding="utf-8"))
    found = ask(offline_browser, {"type": "tokenize", "strings": reference["strings"]})["ids"]
    differing = [text for text, ids, expected in zip(reference["strings"], found, reference["ids"]) if ids != expected]
    assert len(differing) > 10 and "The capital is Paris" in differing


def test_a_patch_through_the_wrong_write_fails_the_comparison(tmp_path_factory, served, offline_browser, patch_runs):  # noqa: F811
    """The planted fault: the worker adds the difference to block b's MLP write (after block b's input) instead of
    block b - 1's."""
    folder = served_folder(tmp_path_factory, "onnx-site-patch-fault")
    worker = folder / "assets/explorers/onnx-worker.js"
    right = 'adding(ids, "mlp_write", block - 1, position'
    assert worker.read_text(encoding="utf-8").count(right) == 1
    worker.write_text(worker.read_text(encoding="utf-8").replace(right, 'adding(ids, "mlp_write", block, position'), encoding="utf-8")
    offline_browser.get(f"{served(folder)}/ask.html")
    assert patch_disagreement(offline_browser, patch_runs) > 100 * TOLERANCE


# ---------------------------------------------------------------------------------------------------------------
# Lab 05 Part 4's block, as built.

LAB = "labs/05-trace-residual-stream.html"


@pytest.fixture(scope="module")
def lab_site(request) -> Path:
    built = os.environ.get("RESIDLAB_BUILT_SITE")  # a site `make page` rendered, while writing the page
    return Path(built).resolve() if built else request.getfixturevalue("built_site").site


def by_id(browser, name):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, name)


PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def lab05_run(lab_site, served, offline_browser, page_model):  # noqa: F811
    """Lab 05 loaded, what it fetched before the button, then PROMPT run by the button; and the model in Python."""
    browser = offline_browser
    base = served(lab_site)
    requested_urls(browser)  # the log read empty: what the other tests' pages requested is not this page's
    browser.get(f"{base}/{LAB}")
    browser.execute_script("document.getElementById('onnx-explorer').scrollIntoView()")
    run = wait_until(lambda: browser.find_elements("id", "onnx-run"), 30, "the block's script never built it")[0]
    button_text, before = run.text, requested_urls(browser)
    by_id(browser, "onnx-prompt").clear()
    by_id(browser, "onnx-prompt").send_keys(PROMPT)
    run.click()
    wait_until(lambda: by_id(browser, "onnx-results").is_displayed(), LOAD_SECONDS, "no result after the button")
    return {"browser": browser, "base": base, "button": button_text, "before": before, **page_model}


def test_lab05_runs_a_typed_prompt_and_a_zeroed_write_equals_the_audits_total_effect(lab_site, lab05_run, specimen_dir):
    import torch
    from residlab import audit
    from residlab.pythia import onnx_export
    from residlab.pythia.onnx_reference import recorded_run
    from selenium.webdriver.support.ui import Select

    browser, base, encode, model = lab05_run["browser"], lab05_run["base"], lab05_run["encode"], lab05_run["model"]
    assert by_id(browser, "onnx-model-line").text.startswith("Random weights, not Pythia-14M")  # the specimen build
    megabytes = float(lab05_run["button"].split()[1])
    served_bytes = sum(path.stat().st_size for folder in ("assets/onnx-model", "assets/onnx-runtime")
                       for path in (lab_site / folder).iterdir()
                       if path.name in (*onnx_export.EXPORTED_FILES, onnx_export.MANIFEST_FILE)
                       or path.suffix in (".mjs", ".wasm"))  # fmt: skip
    assert abs(megabytes - served_bytes / 1e6) <= 0.05
    assert not [url for url in lab05_run["before"] if "/assets/onnx-" in url or "onnx-worker" in url], "fetched before the button"

    ids = encode(PROMPT)
    recorded = recorded_run(model, torch.tensor([ids]))
    depth = model.config.num_hidden_layers
    names = [f"blocks.{b}.resid_pre" for b in range(depth)] + [f"blocks.{depth - 1}.resid_post"]
    rows = by_id(browser, "onnx-boundaries").find_elements("css selector", "tbody tr")
    assert len(rows) == depth + 1
    last = len(ids) - 1
    for row, name in zip(rows, names):
        shown = float(row.find_elements("css selector", "td")[0].text)
        assert abs(shown - float(recorded[name][0, last].norm())) <= 1e-3, name  # printed with 3 decimals

    Select(by_id(browser, "onnx-write")).select_by_value("mlp_write:3")
    Select(by_id(browser, "onnx-zero-position")).select_by_value("2")
    by_id(browser, "onnx-zero").click()
    effect = wait_until(lambda: "Total effect" in by_id(browser, "onnx-effect").text and by_id(browser, "onnx-effect").text,
                        60, "no effect shown")  # fmt: skip
    shown_effect = float(effect.rsplit(":", 1)[1].strip().rstrip("."))
    target, rival = (encode(word)[0] for word in (" Paris", " Madrid"))
    corrupt = encode("The capital of Spain is")
    site = audit.DeclaredSite("mlp", 3, 2)
    packet = audit.build_packet(audit.load_model_directory(specimen_dir), audit.AuditInput(tuple(ids), tuple(corrupt), target, rival), [site])
    expected = packet["measurement"]["results"][0]["total_effect"]["value"]
    assert abs(shown_effect - expected) <= 1e-4  # printed with 4 decimals: rounding takes at most 5e-5 of it
    assert len(by_id(browser, "onnx-changes").find_elements("css selector", "tbody tr")) == depth + 1
    assert axe_violations(browser, within="onnx-explorer") == []  # the tables and boxes the run drew, too
    remote = [url for url in requested_urls(browser) if url.startswith("http") and not url.startswith(base)]
    assert remote == []


SECOND = "The capital of Spain is"
PATCHED = (2, 4)  # block 2's input at position 4 (" is", the last), taken from the second prompt


def patched_runs(model, encode, first: str, second: str, block: int, position: int) -> dict:
    """The patch computed by residlab in Python: the capture floor's recording of both prompts, then the first with
    block ``block``'s input at ``position`` taken from the second (``capture.patching.taken_from``)."""
    import torch
    from residlab.capture.patching import taken_from
    from residlab.capture.sites import site_name
    from residlab.pythia.onnx_reference import recorded_run

    name = site_name(block, "resid_pre")
    runs = {"first": recorded_run(model, torch.tensor([encode(first)])),
            "second": recorded_run(model, torch.tensor([encode(second)]))}  # fmt: skip
    runs["patched"] = recorded_run(model, torch.tensor([encode(first)]), {name: taken_from(runs["second"][name], position)})
    return runs


@pytest.fixture(scope="module")
def patch_runs(page_model) -> dict:
    """``patched_runs`` of PATCHED, SECOND into PROMPT, computed once for the tests that compare with it."""
    return patched_runs(page_model["model"], page_model["encode"], PROMPT, SECOND, *PATCHED)


def patch_reference(runs: dict, tokens: tuple[int, int], block: int, position: int) -> dict:
    """``patched_runs`` read with the audit's own metric and recovery (``audit.measures``: clean = the second
    prompt, the patch's source; corrupt = the first, the run that receives it), and how far each boundary from
    block ``block``'s input on moved, at ``position`` and at the last position."""
    from residlab.audit.measures import logit_difference, patch_recovery
    from residlab.capture.sites import site_name

    target, rival = tokens
    metric = {key: logit_difference(run["logits"][0, -1], target, rival) for key, run in runs.items()}
    depth = sum(name.endswith("resid_pre") for name in runs["first"])
    names = [site_name(b, "resid_pre") for b in range(depth)] + [site_name(depth - 1, "resid_post")]
    moved = [[float((runs["patched"][n][0, at] - runs["first"][n][0, at]).norm()) for at in (position, -1)] for n in names[block:]]
    recovery = patch_recovery(clean=metric["second"], corrupt=metric["first"], patched=metric["patched"])
    return {**metric, "recovery": recovery, "moved": moved}


def test_lab05_patches_a_block_input_from_a_second_prompt_as_residlab_computes_it(lab05_run, patch_runs):
    """The patch control on the site's model: before, the second prompt's and after metrics, the patch recovery in
    the audit's definition, and how far every later boundary moved, each against residlab's own computation of the
    same patch (test_the_workers_patch_of_a_block_input_is_residlabs compares the worker's runs at every boundary,
    and a planted fault fails that comparison)."""
    import re

    from selenium.webdriver.support.ui import Select

    browser, encode, model, tokenizer = (lab05_run[key] for key in ("browser", "encode", "model", "tokenizer"))
    # The two tokens the prompts separate most (each typed as one token): a gap the recovery is read over, on random
    # weights as on the real model.
    gaps = patch_runs["second"]["logits"][0, -1] - patch_runs["first"]["logits"][0, -1]
    typed = lambda order: next(token for token in order.tolist() if encode(tokenizer.decode([token])) == [token])  # noqa: E731
    tokens = typed(gaps.argsort(descending=True)), typed(gaps.argsort())
    for field, token in zip(("onnx-target", "onnx-rival"), tokens):
        by_id(browser, field).clear()
        by_id(browser, field).send_keys(tokenizer.decode([token]))
    by_id(browser, "onnx-source").clear()
    short = SECOND.rsplit(" ", 1)[0]
    by_id(browser, "onnx-source").send_keys(short)  # one token short: a clear refusal
    by_id(browser, "onnx-patch").click()
    refusal = wait_until(lambda: "Not patched" in by_id(browser, "onnx-patch-effect").text and by_id(browser, "onnx-patch-effect").text,
                         60, "no refusal shown")  # fmt: skip
    assert f"{len(encode(short))} tokens and yours {len(encode(PROMPT))}" in refusal
    by_id(browser, "onnx-source").send_keys(SECOND[len(short):])
    block, position = PATCHED
    Select(by_id(browser, "onnx-patch-block")).select_by_value(str(block))
    Select(by_id(browser, "onnx-patch-position")).select_by_value(str(position))
    by_id(browser, "onnx-patch").send_keys("\n")  # the keyboard's way to press it
    effect = wait_until(lambda: "Patch recovery R" in by_id(browser, "onnx-patch-effect").text and by_id(browser, "onnx-patch-effect").text,
                        60, "no patch shown")  # fmt: skip
    number = r"(-?\d+\.\d{4})"
    found = re.search(rf": {number} for your prompt, {number} for the second, {number} for yours with block {block}'s input "
                      rf"at position {position} .* through block {block - 1}'s MLP write there\. Patch recovery R[^:]*: {number}: ", effect)
    assert found, effect
    shown = dict(zip(("first", "second", "patched", "recovery"), map(float, found.groups())))
    expected = patch_reference(patch_runs, tokens, block, position)
    assert abs(expected["second"] - expected["first"]) > 0.1
    for key, value in shown.items():
        assert abs(value - expected[key]) <= 1e-4, key  # printed with 4 decimals: rounding takes at most 5e-5
    rows = by_id(browser, "onnx-patch-changes").find_elements("css selector", "tbody tr")
    assert [row.find_element("css selector", "th").text.split()[0] for row in rows] == [f"H{b}" for b in range(block, len(rows) + block)]
    assert len(rows) == model.config.num_hidden_layers + 1 - block
    for row, moved in zip(rows, expected["moved"]):
        cells = [float(cell.text) for cell in row.find_elements("css selector", "td")]
        assert max(abs(a - b) for a, b in zip(cells, moved)) <= 1e-3 + 1e-4  # printed with 3 decimals
    assert abs(shown["patched"] - shown["first"]) > 100 * TOLERANCE  # the patch did something

    # readable at 412 px and clean for axe in both colour schemes, with every table the tools drew
    browser.set_window_size(412, 900)
    try:
        time.sleep(0.5)  # a button the pointer now rests on is past its colour transition (0.15 s) before axe reads it
        overflow = browser.execute_script("const e = document.getElementById('onnx-explorer'); return e.scrollWidth - e.clientWidth")
        assert overflow <= 0, "the block is wider than a phone"
        assert axe_violations(browser, within="onnx-explorer") == []
        browser.execute_script("window.quartoToggleColorScheme()")
        wait_until(lambda: page_mode(browser)[0] == "dark" and page_mode(browser)[1] < 0.05, 10, "the dark stylesheet never applied")
        time.sleep(0.5)  # Bootstrap's colour transitions (0.15 s) over before axe reads the colours
        assert axe_violations(browser, within="onnx-explorer") == []
    finally:
        browser.execute_script("try { localStorage.removeItem('quarto-color-scheme'); } catch (e) {}")
        browser.set_window_size(1280, 900)
