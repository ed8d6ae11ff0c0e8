"""Lab 05 Part 4's "Run it in the page" block: its first line says what the model is (random weights, not
Pythia-14M, for the specimen; the name and revision for the real model), and the megabytes its button states are the
files the page fetches, summed from the export and the runtime install."""

from __future__ import annotations

import json

from residlab.course.lab05 import run_in_page
from residlab.pythia import onnx_export


def test_the_first_line_names_the_model_it_runs():
    specimen = {"name": "residlab/synthetic-gpt-neox-specimen", "revision": None, "synthetic": True, "seed": 0}
    assert run_in_page.first_line(specimen).startswith("Random weights, not Pythia-14M: residlab/synthetic-gpt-neox-specimen")
    assert "seed 0" in run_in_page.first_line(specimen)
    assert "seed not recorded" in run_in_page.first_line({**specimen, "seed": None})
    real = {"name": "EleutherAI/pythia-14m", "revision": "a" * 40, "synthetic": False, "seed": None}
    line = run_in_page.first_line(real)
    assert line.startswith(f"EleutherAI/pythia-14m at revision {'a' * 40}") and "Random" not in line


def test_the_block_states_the_bytes_the_button_fetches():
    data = run_in_page.run_in_page_data()
    folder = onnx_export.exported(onnx_export.page_model_source())
    files = [*(folder / name for name in (*onnx_export.EXPORTED_FILES, onnx_export.MANIFEST_FILE))]
    runtime = [run_in_page.PROJECT / run_in_page.RUNTIME_DIR / "node_modules" / package / name
               for package, (names, _) in run_in_page.RUNTIME_SHIPPED.items() for name in names]  # fmt: skip
    assert data["download_bytes"] == sum(path.stat().st_size for path in files + runtime)
    assert data["download_bytes"] > 70_000_000  # the weights alone are 56 MB: a sum that left them out would show
    assert data["first_line"] == run_in_page.first_line(onnx_export.read_manifest(folder)["model"])
    block = run_in_page.run_in_page_block("../assets/explorers/onnx-explorer.js")
    payload = block.split('id="onnx-explorer-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(payload) == data and 'data-residlab-scripts="../assets/explorers/onnx-explorer.js"' in block
