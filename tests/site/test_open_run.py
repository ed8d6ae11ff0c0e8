"""A reader's own files opened in the built site, in headless Chromium: Lab 05's "open your own run" (a capture the
downloadable observation runner wrote on the synthetic specimen) and Lab 06's "open your packet" (packets the audit
runner wrote, one per block type).

Every number the page shows for them is compared with residlab's: the capture's every position with its
``observations.json``, and what the page checked each against with ``capture_page.recomputed_observation`` (exactly,
float for float); the packet's measurement with its records; the canonical JSON and SHA-256 the page computes with Python's
``canonical_json``/``sha256_json``, for every record and field and for awkward floats. Changed, truncated, mismatched,
oversized, malformed and old-layout files are each refused with a message naming the file and the check, and nothing of them
stays on the page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_browser import axe_violations, open_page, wait_for
from test_explorers import capture_shown, choose, expected_capture_rows

from residlab.audit.packet import RECORDS, SCHEMA, linked_records, packet_files, record_body
from residlab.audit.runs import canonical_json, sha256_json
from residlab.course.models import capture_page
from residlab.course import LEARNER_PYTHON
from residlab.course.lab05 import open_run

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
LAB05, LAB06 = "labs/05-trace-residual-stream.html", "labs/06-audit-a-decoder.html"
RESULT_FILES = ("manifest.json", "observations.json", "captures.json")
BLOCK_TYPES = ("gpt_neox", "gpt_neox_sequential", "gpt2", "llama")
PHONE_WIDTH = 390


def runner_env() -> dict:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "HF_ENDPOINT")}
    env["HF_HUB_OFFLINE"] = "1"
    return env


@pytest.fixture(scope="module")
def run_dir(specimen_dir, specimen_lock_path, tmp_path_factory) -> Path:
    """A capture written by the downloadable runner (assets/labs/inspect_residual_stream.py, run alone) from the
    synthetic specimen's verified files."""
    work = tmp_path_factory.mktemp("own-run")
    completed = subprocess.run(
        [sys.executable, str(ROOT / "assets" / "labs" / "inspect_residual_stream.py"), "--offline", "--artifacts",
         str(specimen_dir), "--lock", str(specimen_lock_path), "--output", "run-01", "--position", "3"],
        cwd=work, env=runner_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    return work / "run-01"


@pytest.fixture(scope="module")
def packet_dirs(tmp_path_factory) -> dict[str, Path]:
    """One packet per block type, written by the downloadable audit runner on its random-weight specimen."""
    work = tmp_path_factory.mktemp("own-packets")
    runner = str(ROOT / "assets" / "labs" / "audit_residual_writes.py")
    processes = {
        name: subprocess.Popen(
            [sys.executable, runner, "--specimen", name, "--clean-ids", "5,17,3,40", "--corrupt-ids", "9,17,3,40",
             "--target-id", "12", "--rival-id", "30", "--output", f"packet-{name}"],
            cwd=work, env=runner_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        for name in BLOCK_TYPES
    }
    for name, process in processes.items():
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, (name, stderr)
    return {name: work / f"packet-{name}" for name in BLOCK_TYPES}


@pytest.fixture(scope="module")
def urls(built_site, served):
    base = served(built_site.site)
    return {"lab05": f"{base}/{LAB05}", "lab06": f"{base}/{LAB06}"}


def severe(browser) -> list:
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def open_files(browser, input_id: str, paths: list[Path]) -> None:
    browser.find_element("id", input_id).send_keys("\n".join(str(path) for path in paths))


def status(browser, which: str) -> str:
    return browser.execute_script(f"return document.getElementById('open-{which}-status').textContent")


def wait_status(browser, which: str, starts: str) -> str:
    wait_for(browser, lambda b: status(b, which).startswith(starts), f"the {which} opener never said {starts!r}: {status(browser, which)!r}")
    return status(browser, which)


def copy_run(source: Path, target: Path, change=None, reseal: bool = False) -> Path:
    """The run's three files in ``target``; ``change(name, data) -> data`` edits them; ``reseal`` records the edited
    files' sizes and digests in the manifest again (a consistent forgery, left to the run checks to catch)."""
    import hashlib

    target.mkdir(parents=True)
    files = {name: (source / name).read_bytes() for name in RESULT_FILES}
    if change:
        files = {name: change(name, data) for name, data in files.items()}
    if reseal:
        manifest = json.loads(files["manifest.json"])
        for name in ("observations.json", "captures.json"):
            manifest["results"][name] = {"size": len(files[name]), "sha256": hashlib.sha256(files[name]).hexdigest()}
        files["manifest.json"] = json.dumps(manifest, indent=2).encode()
    for name, data in files.items():
        (target / name).write_bytes(data)
    return target


def edit_json(name: str, edit):
    def change(file_name, data):
        if file_name != name:
            return data
        value = json.loads(data)
        edit(value)
        return json.dumps(value, indent=1).encode()
    return change


# ---- canonical JSON --------------------------------------------------------------------------------------------

AWKWARD_FLOATS = [0.0, -0.0, 1.0, -3.0, 1e16, 1e15, 9007199254740993.0, 1e-5, 1e-4, 0.0001234, 5e-324, 2.2250738585072014e-308,
                  1.7976931348623157e308, 1e22, 1e21, 1e-7, 0.1 + 0.2, 1 / 3, 2.675, 0.0625, 1.0005, 123456.789, -2.5e-10,
                  12345678901234567890.0, 4.7298144636442885e-05, 1.0000000000000002, 0.30000000000000004, 9.995, 99.995]  # fmt: skip
AWKWARD_VALUES = [
    AWKWARD_FLOATS,
    {"b": 1, "a": [3, -0, 10, 1e5], "é": "snowman ☃ and 𝄞, quote \" backslash \\ newline \n tab \t nul \u0000 del \x7f",
     "\ud83d\ude00": None, "\uffff": True, "Z": {"nested": [[], {}, [0.5, -0.5]]}},
]


def test_canonical_json_and_digests_equal_pythons(browser, urls, packet_dirs):
    """Byte for byte: the page's canonical JSON of awkward values (as JSON text, so ints stay ints and floats floats)
    and of every record body and field of a packet of each block type, and the SHA-256 of each."""
    open_page(browser, urls["lab06"])
    texts = [json.dumps(value) for value in AWKWARD_VALUES] + ['{"x": 1E5, "y": -0, "z": 1.0e0, "w": 123456789012345678901234567890}']
    expected = [json.loads(text) for text in texts]
    for directory in packet_dirs.values():
        for name in RECORDS:
            record = json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
            texts.append((directory / f"{name}.json").read_text(encoding="utf-8"))
            expected.append(record)
    script = """
      const [texts, done] = arguments, J = window.residlabPythonJson;
      const envelope = ["links", "record", "schema"];
      Promise.all(texts.map(async (text) => {
        const tree = J.parse(text);
        const nodes = [tree];
        if (tree instanceof Map && tree.has("schema")) {
          const body = new Map([...tree].filter(([k]) => !envelope.includes(k)));
          nodes.push(body, ...[...body.values()]);
        }
        return Promise.all(nodes.map(async (node) => { const c = J.canonical(node); return [c, await J.sha256Hex(new TextEncoder().encode(c))]; }));
      })).then(done, (error) => done(String(error)));"""
    results = browser.execute_async_script(script, texts)
    assert isinstance(results, list), results
    compared = 0
    for value, shown in zip(expected, results):
        nodes = [value] + ([record_body(value), *record_body(value).values()] if "schema" in value else [])
        for node, (text, digest) in zip(nodes, shown, strict=True):
            assert text == canonical_json(node).decode("ascii")
            assert digest == sha256_json(node)
            compared += 1
    assert compared > 4 * 4 * 8
    reprs = browser.execute_script("return arguments[0].map(window.residlabPythonJson.floatRepr)", AWKWARD_FLOATS)
    assert reprs == [repr(value) for value in AWKWARD_FLOATS]
    fixed = browser.execute_script("return arguments[0].map(x => window.residlabPythonJson.fixed(x, 3))", AWKWARD_FLOATS)
    assert fixed == [f"{value:.3f}" for value in AWKWARD_FLOATS]
    refused = browser.execute_script(
        "return arguments[0].map(t => { try { window.residlabPythonJson.parse(t); return 'parsed'; } catch (e) { return e.message; } })",
        ["[NaN]", "[1e400]", "[-Infinity]", '{"a": 1,}', "[1] x", '"\\x"', "[" * 600 + "]" * 600])
    assert [message.split(" at ")[0] for message in refused] == [
        "a non-finite number (NaN)", "a number too large to be finite (1e400)", "a non-finite number (-Infinity)",
        "expected a property name in double quotes", "extra data after the JSON value", "an invalid escape in a string",
        "nesting deeper than 512"]  # fmt: skip


# ---- Lab 05: open your own run ---------------------------------------------------------------------------------


def test_a_runner_capture_opens_with_residlabs_numbers(browser, urls, run_dir):
    open_page(browser, urls["lab05"])
    open_files(browser, "open-capture-files", [run_dir / name for name in RESULT_FILES])
    said = wait_status(browser, "capture", "Verified in your browser")
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    observations = json.loads((run_dir / "observations.json").read_text(encoding="utf-8"))
    captures = json.loads((run_dir / "captures.json").read_text(encoding="utf-8"))
    selected = observations["selected_position"]
    assert selected == 3 and manifest["synthetic"] is True
    whose = browser.find_element("id", "capture-whose").text
    assert "Your run, not the site's" in whose and manifest["revision"] in whose and "NOT Pythia-14M" in whose
    assert manifest["revision"] in said
    # Every position is shown as observations.json holds it, and what the page checked it against equals residlab's
    # recomputation from captures.json float for float.
    run = browser.execute_script("return window.residlabOpenCapture.lastRun")
    assert run["positions"] == observations["positions"]
    for position in range(len(observations["tokens"])):
        expected, computed = capture_page.recomputed_observation(captures, position), run["computed"][position]
        assert [row["norm"] for row in computed["boundaries"]] == [row["norm"] for row in expected["boundaries"]]
        assert [{key: row[key] for key in expected["block_updates"][0]} for row in computed["block_updates"]] == expected["block_updates"]
        assert computed["final_normalisation"] == expected["final_normalisation"]
    # ... and the explorer shows them, logit lens included, at every position.
    layers = len(observations["positions"][selected]["block_updates"])
    for position, boundary in ((selected, layers), (selected, 0), (0, 2), (len(observations["tokens"]) - 1, layers)):
        choose(browser, "capture-position", position)
        choose(browser, "capture-boundary", boundary)
        rows, lens = expected_capture_rows(observations["positions"][position], boundary)
        wait_for(browser, lambda b: capture_shown(b)["boundaries"] == rows and capture_shown(b)["lens"] == lens,
                 f"position {position}, H_{boundary}: the explorer does not show residlab's numbers for the opened run")
    # The run's own tables: what the manifest says was observed, and the selected position's numbers.
    details = browser.find_element("id", "open-capture-details").text
    for shown in (manifest["repository"], manifest["revision"], *[str(v) for v in manifest["versions"].values() if v]):
        assert shown in details
    for row in observations["positions"][selected]["boundaries"]:
        assert f"{row['norm']:.3f}" in details
    assert severe(browser) == []
    # Back to the site's capture: its own label and numbers again.
    browser.find_element("id", "open-capture-back").click()
    wait_for(browser, lambda b: not b.find_elements("id", "capture-whose"), "the opened run's label stayed")


def refusal_cases(run: Path, base: Path):
    """(files to open, the start of the message) for each way a run can fail to be one run."""
    def flip_digit(name):
        def change(file_name, data):
            if file_name != name:
                return data
            at = data.index(b"0.", len(data) // 2) + 2  # a digit inside a number, same size
            return data[:at] + (b"1" if data[at:at + 1] != b"1" else b"2") + data[at + 1:]
        return change

    def files(directory, names=RESULT_FILES):
        return [directory / name for name in names]

    oversized = base / "oversized"
    oversized.mkdir()
    for name in RESULT_FILES:
        (oversized / name).write_bytes((run / name).read_bytes())
    with open(oversized / "manifest.json", "r+b") as handle:
        handle.truncate(capture_page.RESULT_MAX_BYTES["manifest.json"] + 1)
    limit = capture_page.RESULT_MAX_BYTES["manifest.json"]
    obs_size = (run / "observations.json").stat().st_size
    truncated = copy_run(run, base / "truncated", lambda n, d: d[: len(d) // 2] if n == "captures.json" else d)
    command = " ".join(json.loads((run / "manifest.json").read_text(encoding="utf-8"))["command"])

    def old_layout(observations):  # what the observation wrote before: the selected position alone, no schema
        positions = observations.pop("positions")
        del observations["schema"]
        observations["observation"] = positions[observations["selected_position"]]

    def boundaries_named_otherwise(file_name, data):  # schema 2: the boundaries, tensors too, under other names
        if file_name == "manifest.json":
            return data
        data = data.replace(b'.resid_pre"', b'.boundary_in"').replace(b'.resid_post"', b'.boundary_out"')
        return edit_json("observations.json", lambda o: o.update(schema=2))(file_name, data)

    layout = "every position observed, block boundaries named resid_pre and resid_post"
    return {
        "tampered observations": (files(copy_run(run, base / "t-obs", flip_digit("observations.json"))), "observations.json: its SHA-256 is "),
        "tampered captures": (files(copy_run(run, base / "t-cap", flip_digit("captures.json"))), "captures.json: its SHA-256 is "),
        "truncated captures": (files(truncated), "captures.json: "),
        "manifest of another size": (files(copy_run(run, base / "t-man", edit_json("manifest.json", lambda m: m["results"]["observations.json"].update(size=obs_size + 1)))),
                                     f"observations.json: {obs_size:,} bytes, but manifest.json records {obs_size + 1:,}"),
        "broken manifest": (files(copy_run(run, base / "b-man", lambda n, d: d[:-40] if n == "manifest.json" else d)), "manifest.json: not valid JSON"),
        "manifest without results": (files(copy_run(run, base / "n-man", edit_json("manifest.json", lambda m: m.pop("results")))), "manifest.json: records no results"),
        "another run's captures": (files(copy_run(run, base / "ids", edit_json("captures.json", lambda c: c["token_ids"].reverse()), reseal=True)),
                                   "captures.json: its token ids are not those of observations.json"),
        "observations not from these tensors": (files(copy_run(run, base / "norm", edit_json("observations.json", lambda o: o["positions"][1]["boundaries"][2].update(norm=o["positions"][1]["boundaries"][2]["norm"] * 1.01)), reseal=True)),
                                                "observations.json: disagrees with the tensors in captures.json: positions[1].boundaries[2].norm"),
        "the layout before every position was observed": (files(copy_run(run, base / "old", edit_json("observations.json", old_layout), reseal=True)),
                                                          f"observations.json: schema 1, not 3 ({layout}): refresh it by running `{command}` again into an empty folder"),
        "the layout before the boundaries were resid_pre and resid_post": (files(copy_run(run, base / "names", boundaries_named_otherwise, reseal=True)),
                                                                           f"observations.json: schema 2, not 3 ({layout}): refresh it by running `{command}` again into an empty folder"),
        "a missing tensor": (files(copy_run(run, base / "tensor", edit_json("captures.json", lambda c: c["tensors"].pop(3)), reseal=True)), "captures.json: "),
        "a non-finite number": (files(copy_run(run, base / "nan", lambda n, d: d.replace(b'"norm": ', b'"norm": NaN, "was": ', 1) if n == "observations.json" else d, reseal=True)),
                                "observations.json: not valid JSON (a non-finite number (NaN)"),
        "wrong shape": (files(copy_run(run, base / "shape", edit_json("observations.json", lambda o: o.update(tokens={"0": "The"})), reseal=True)),
                        "observations.json: no tokens: not the structure"),
        "an oversized manifest": (files(oversized), f"manifest.json: {limit + 1:,} bytes, more than the {limit:,} bytes allowed: not read"),
        "two of three": (files(run, RESULT_FILES[:2]), "captures.json: missing"),
    }


def test_changed_and_mismatched_runs_are_refused_naming_the_file(browser, urls, run_dir, tmp_path):
    cases = refusal_cases(run_dir, tmp_path)
    open_page(browser, urls["lab05"])
    site_rows = capture_shown(browser)["boundaries"]
    for label, (paths, message) in cases.items():
        browser.execute_script("document.getElementById('open-capture-status').textContent = ''")
        open_files(browser, "open-capture-files", paths)
        said = wait_status(browser, "capture", "Refused: ")
        assert said.startswith(f"Refused: {message}"), (label, said)
        assert "Verified" not in said
        assert not browser.find_elements("id", "capture-whose"), label  # nothing of a refused run stays shown
        assert capture_shown(browser)["boundaries"] == site_rows, label
        browser.execute_script("document.getElementById('open-capture-files').value = ''")
    assert severe(browser) == []


def test_without_web_crypto_a_run_is_never_called_verified(browser, urls, run_dir):
    open_page(browser, urls["lab05"])
    browser.execute_script("Object.defineProperty(window.crypto, 'subtle', {get: () => undefined})")
    open_files(browser, "open-capture-files", [run_dir / name for name in RESULT_FILES])
    said = wait_status(browser, "capture", "Your run cannot be verified in this browser")
    assert "Web Crypto" in said and "not shown" in said
    assert not browser.find_elements("id", "capture-whose")


# ---- Lab 06: open your packet ----------------------------------------------------------------------------------


def packet_paths(directory: Path) -> list[Path]:
    return [directory / f"{name}.json" for name in RECORDS]


def table_rows(browser, caption_start: str) -> list[list[str]]:
    return browser.execute_script(
        "return [...document.querySelectorAll('#open-packet-details table')].filter(t => t.caption.textContent.startsWith(arguments[0]))"
        ".flatMap(t => [...t.rows].map(r => [...r.cells].map(c => c.textContent)))", caption_start)


@pytest.mark.parametrize("block_type", BLOCK_TYPES)
def test_a_runner_packet_opens_with_every_link_checked(browser, urls, packet_dirs, block_type):
    directory = packet_dirs[block_type]
    packet = {name: json.loads((directory / f"{name}.json").read_text(encoding="utf-8")) for name in RECORDS}
    open_page(browser, urls["lab06"])
    open_files(browser, "open-packet-files", packet_paths(directory))
    said = wait_status(browser, "packet", "Links verified in your browser")
    fields = sum(len(record_body(packet[name])) for name in RECORDS) * (len(RECORDS) - 1)
    assert said == (f"Links verified in your browser: 12 of 12 record digests and {fields} of {fields} field digests match. "
                    "Values were not re-run.")  # fmt: skip
    links = table_rows(browser, "Every link")[1:]
    assert sorted(map(tuple, links)) == sorted((other, name, sha256_json(record_body(packet[name])), "yes")
                                               for name in RECORDS for other in RECORDS if other != name)  # fmt: skip
    results = packet["measurement"]["results"]
    columns = open_run.measurement_columns(results)
    measurement = table_rows(browser, "Measurement")
    assert measurement[0] == ["write", "position"] + [open_run.MEASUREMENT_COLUMNS[key] for key in columns]
    assert measurement[1:] == [[row["site"], str(row["position"])] + [open_run.measurement_cell(row[key]) for key in columns] for row in results]
    assert len(measurement) - 1 == len(packet["intervention"]["declared_sites"]) and len(columns) == 8
    sites = table_rows(browser, "Declared sites")[1:]
    assert sites == [[s["name"], s["component"], str(s["block"]), str(s["position"])] for s in packet["intervention"]["declared_sites"]]
    model = dict(table_rows(browser, "Model")[1:])
    assert model["model"].startswith(f"{packet['model']['model_class']} ({block_type}, {packet['model']['blocks']} blocks")
    assert model["parameters digest"] == packet["model"]["parameters"]["digest"]
    text = browser.find_element("id", "open-packet-details").text
    assert "describe no trained model" in text
    assert "Links checked, values not re-run" in text and f"{LEARNER_PYTHON} audit_residual_writes.py verify PACKET-DIR" in text
    clean = packet["measurement"]["baseline"]["clean"]["value"]
    assert f"clean {clean:.3f}" in text
    assert severe(browser) == []


def packet_refusals(directory: Path, base: Path):
    records = {name: json.loads((directory / f"{name}.json").read_text(encoding="utf-8")) for name in RECORDS}

    def write(label, change=None, relink=False, raw=None):
        target = base / label
        target.mkdir()
        edited = json.loads(json.dumps(records))
        if change:
            change(edited)
        if relink:  # a consistent forgery: every link recomputed over the edited records
            edited = linked_records({name: record_body(edited[name]) for name in RECORDS})
        files = packet_files(edited)
        for name, data in files.items():
            (target / name).write_bytes(raw(name, data) if raw else data)
        return packet_paths(target)

    oversized = write("oversized")
    with open(oversized[0], "r+b") as handle:
        handle.truncate(open_run.packet_opener_config()["max_bytes"] + 1)
    limit = open_run.packet_opener_config()["max_bytes"]
    return {
        "a changed value": (write("value", lambda p: p["measurement"]["results"][0]["total_effect"].update(value=p["measurement"]["results"][0]["total_effect"]["value"] + 0.5)),
                            "NOT verified: record measurement was changed: field(s) results no longer match"),
        "a changed link": (write("link", lambda p: p["input"]["links"]["model"].update(sha256="0" * 64)),
                           "NOT verified: record input, field links.model: names a SHA-256 that is not record model's"),
        "a float written another way": (write("float", raw=lambda n, d: d.replace(b'"length": 4', b'"length": 4.0') if n == "input.json" else d),
                                        "NOT verified: record input was changed: field(s) length"),
        "a truncated record": (write("cut", raw=lambda n, d: d[:100] if n == "model.json" else d), "Refused: model.json: not valid JSON"),
        "another schema": (write("schema", lambda p: p["intervention"].update(schema="other/1")), f"Refused: intervention.json: not a {SCHEMA} intervention record"),
        "a missing field": (write("field", lambda p: p["model"].pop("width"), relink=True), "Refused: model.json: no field width, which the page shows"),
        "an oversized record": (oversized, f"Refused: model.json: {limit + 1:,} bytes, more than the {limit:,} bytes allowed: not read"),
        "three of four": (packet_paths(directory)[1:], "Refused: model.json: missing"),
        "a stranger": (packet_paths(directory) + [directory.parent / "notes.txt"], "Refused: notes.txt: not one of a packet's records"),
    }


def test_changed_and_broken_packets_are_refused_naming_the_record(browser, urls, packet_dirs, tmp_path):
    (packet_dirs["gpt2"].parent / "notes.txt").write_text("not a record\n", encoding="utf-8")
    cases = packet_refusals(packet_dirs["gpt2"], tmp_path)
    open_page(browser, urls["lab06"])
    for label, (paths, message) in cases.items():
        browser.execute_script("document.getElementById('open-packet-status').textContent = ''")
        open_files(browser, "open-packet-files", paths)
        wait_for(browser, lambda b: status(b, "packet") not in ("", "Checking…"), f"{label}: no verdict")
        said = status(browser, "packet")
        assert said.startswith(message), (label, said)
        assert "Links verified" not in said and not table_rows(browser, "Measurement"), label
        browser.execute_script("document.getElementById('open-packet-files').value = ''")
    assert severe(browser) == []


# ---- phone width, keyboard, axe --------------------------------------------------------------------------------


def test_openers_work_at_phone_width_and_by_keyboard(browser, urls, run_dir, packet_dirs, screenshot_dir):
    from selenium.webdriver.common.keys import Keys

    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    try:
        for url, which, paths in ((urls["lab05"], "capture", [run_dir / name for name in RESULT_FILES]),
                                  (urls["lab06"], "packet", packet_paths(packet_dirs["llama"]))):  # fmt: skip
            open_page(browser, url)
            control = browser.find_element("id", f"open-{which}-files")
            label = browser.find_element("css selector", f"label[for='open-{which}-files']")
            assert label.text.strip()
            # The file input takes the keyboard focus (a native control: Enter or Space opens the file chooser).
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].focus()", control)
            assert browser.execute_script("return document.activeElement.id") == f"open-{which}-files"
            open_files(browser, f"open-{which}-files", paths)
            wait_status(browser, which, "Verified" if which == "capture" else "Links verified")
            if which == "capture":  # the back button is a real button: Enter on it restores the site's capture
                back = browser.find_element("id", "open-capture-back")
                browser.execute_script("arguments[0].focus()", back)
                shot = screenshot_dir / "open-capture-phone.png"
                browser.execute_script("document.getElementById('open-capture').scrollIntoView()")
                assert browser.save_screenshot(str(shot))
            else:
                browser.execute_script("document.getElementById('open-packet').scrollIntoView()")
                assert browser.save_screenshot(str(screenshot_dir / "open-packet-phone.png"))
            scroll_width, width = browser.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert scroll_width <= width == PHONE_WIDTH, which
            unreachable = browser.execute_script(
                f"return [...document.querySelectorAll('#open-{which} .rl-table-box')].filter(b => b.scrollWidth > b.clientWidth && b.getAttribute('tabindex') !== '0').length")
            assert unreachable == 0, which
            if which == "capture":
                back.send_keys(Keys.ENTER)
                wait_for(browser, lambda b: not b.find_elements("id", "capture-whose"), "Enter on the back button did nothing")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_axe_finds_nothing_in_an_opened_run_or_packet(browser, urls, run_dir, packet_dirs):
    """The page loads clean (test_browser); this checks the openers once they show a reader's files."""
    for page, which, paths in (("lab05", "capture", [run_dir / name for name in RESULT_FILES]),
                               ("lab06", "packet", packet_paths(packet_dirs["gpt_neox"]))):  # fmt: skip
        open_page(browser, urls[page])
        open_files(browser, f"open-{which}-files", paths)
        wait_status(browser, which, "Verified" if which == "capture" else "Links verified")
        assert axe_violations(browser, f"open-{which}") == [], page
        if which == "capture":
            assert axe_violations(browser, "capture-explorer") == []
