"""The page's model in headless Chromium, with every host but 127.0.0.1 unreachable: the worker Lab 05 Part 4 starts
(assets/explorers/onnx-worker.js) runs the export the build step puts into the site (residlab/build/onnx_files.py)
with onnxruntime-web, and agrees with the numbers the build wrote from the capture floor's recording (parity.json)
within 1e-4 at every site, the sampled logits and the logit lens, clean and with a write zeroed; its tokenizer
(@huggingface/tokenizers) gives Python's ids for every string of tokenizer-parity.json. A tokenizer.json whose
normaliser was changed must fail that comparison.

The folder served is what the post-render step writes (the export cached by its weights' digest, so this costs a
copy), the worker beside it where the site has it, and a page of this test's that asks the worker; the whole site's
render is not needed for these numbers.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_python_in_page import offline_browser, wait_until  # noqa: F401 - the fixture: Chromium that reaches only 127.0.0.1
from test_browser import axe_violations, requested_urls

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
    ? { ...answer, clean: plain(answer.clean, sampled), zeroed: plain(answer.zeroed, sampled) } : answer));
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


def test_lab05_runs_a_typed_prompt_and_a_zeroed_write_equals_the_audits_total_effect(lab_site, served,
                                                                                      offline_browser, specimen_dir):  # noqa: F811
    from residlab import audit
    from residlab.pythia import onnx_export
    from residlab.pythia.onnx_reference import recorded_run
    from selenium.webdriver.support.ui import Select

    browser = offline_browser
    base = served(lab_site)
    requested_urls(browser)  # the log read empty: what the other tests' pages requested is not this page's
    browser.get(f"{base}/{LAB}")
    browser.execute_script("document.getElementById('onnx-explorer').scrollIntoView()")
    run = wait_until(lambda: browser.find_elements("id", "onnx-run"), 30, "the block's script never built it")[0]
    assert by_id(browser, "onnx-model-line").text.startswith("Random weights, not Pythia-14M")  # the specimen build
    megabytes = float(run.text.split()[1])
    served_bytes = sum(path.stat().st_size for folder in ("assets/onnx-model", "assets/onnx-runtime")
                       for path in (lab_site / folder).iterdir()
                       if path.name in (*onnx_export.EXPORTED_FILES, onnx_export.MANIFEST_FILE)
                       or path.suffix in (".mjs", ".wasm"))  # fmt: skip
    assert abs(megabytes - served_bytes / 1e6) <= 0.05
    before = requested_urls(browser)
    assert not [url for url in before if "/assets/onnx-" in url or "onnx-worker" in url], "fetched before the button"

    prompt = "The capital of France is"
    by_id(browser, "onnx-prompt").clear()
    by_id(browser, "onnx-prompt").send_keys(prompt)
    run.click()
    wait_until(lambda: by_id(browser, "onnx-results").is_displayed(), LOAD_SECONDS, "no result after the button")
    source = onnx_export.page_model_source()
    model = source.build()
    from tokenizers import Tokenizer

    ids = Tokenizer.from_str(source.tokenizer_json.decode("utf-8")).encode(prompt, add_special_tokens=False).ids
    import torch

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
    tokenizer = Tokenizer.from_str(source.tokenizer_json.decode("utf-8"))
    target, rival = (tokenizer.encode(word, add_special_tokens=False).ids[0] for word in (" Paris", " Madrid"))
    corrupt = tokenizer.encode("The capital of Spain is", add_special_tokens=False).ids
    site = audit.DeclaredSite("mlp", 3, 2)
    packet = audit.build_packet(audit.load_model_directory(specimen_dir), audit.AuditInput(tuple(ids), tuple(corrupt), target, rival), [site])
    expected = packet["measurement"]["results"][0]["total_effect"]["value"]
    assert abs(shown_effect - expected) <= 1e-4  # printed with 4 decimals: rounding takes at most 5e-5 of it
    assert len(by_id(browser, "onnx-changes").find_elements("css selector", "tbody tr")) == depth + 1
    assert axe_violations(browser, within="onnx-explorer") == []  # the tables and boxes the run drew, too
    remote = [url for url in requested_urls(browser) if url.startswith("http") and not url.startswith(base)]
    assert remote == []
