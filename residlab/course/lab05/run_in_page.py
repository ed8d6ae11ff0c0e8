"""Lab 05 Part 4's "Run it in the page": the block that runs the model the page describes in the reader's browser.

The model is ``residlab.pythia.onnx_export``'s export of ``page_model_source()`` (the verified files of the build's
lock, else the synthetic specimen), which ``residlab/build/onnx_files.py`` copies into the site with the runtime
files named here (``RUNTIME_SHIPPED``: onnxruntime-web's WebAssembly build, @huggingface/tokenizers). The block's data
says what the model is (its first line: "random weights, not Pythia-14M" for the specimen, the name and revision for
the real model) and how many bytes the button fetches, summed from those very files; nothing is fetched before the
reader presses it (``assets/explorers/onnx-explorer.js``, the model run in ``onnx-worker.js``). The block's two
interventions are computed there, through the export's additive inputs: one write zeroed (its total effect) and one
block input patched from a second prompt (its patch recovery, ``residlab.audit.measures.patch_recovery``'s
definition); ``depth`` here sets which blocks the patch offers (1 to depth - 1: block 0's input is the embedding,
which no write precedes).
"""

from __future__ import annotations

from pathlib import Path

from residlab.course.ui.explorer import explorer_block

EXPLORER_ID = "onnx-explorer"
RUNTIME_DIR = Path("assets/onnx-runtime")  # package.json and its lock; node_modules/ once installed
# npm package -> the files the page loads, relative to the package (the licence the site serves beside them)
RUNTIME_SHIPPED = {
    "onnxruntime-web": (("dist/ort.wasm.min.mjs", "dist/ort-wasm-simd-threaded.mjs", "dist/ort-wasm-simd-threaded.wasm"),
                        "LICENSE-onnxruntime-web"),  # the npm package carries no licence file: the project's MIT text
    "@huggingface/tokenizers": (("dist/tokenizers.min.mjs",), "LICENSE-tokenizers"),
}
PROJECT = Path(__file__).resolve().parents[3]


def runtime_bytes(root: Path = PROJECT) -> int:
    """What the page fetches of the runtime, from the pinned install (the pre-render step installs it)."""
    total = 0
    for package, (files, _) in RUNTIME_SHIPPED.items():
        for name in files:
            path = root / RUNTIME_DIR / "node_modules" / package / name
            if not path.is_file():
                raise FileNotFoundError(f"{path.relative_to(root)} is missing: run `npm ci --prefix {RUNTIME_DIR}`")
            total += path.stat().st_size
    return total


def first_line(model: dict) -> str:
    """The block's first line, from the export manifest's ``model``: said of the model itself, never of the capture
    above it, since a build may show a committed capture of Pythia-14M while it had no verified files to export
    (RESIDLAB_PYTHIA_CAPTURE=committed), and then runs the specimen here."""
    if model["synthetic"]:
        seed = f"seed {model['seed']}" if model.get("seed") is not None else "seed not recorded"
        return (f"Random weights, not Pythia-14M: {model['name']}, a synthetic specimen (Pythia-14M's architecture and "
                f"tokenizer, {seed}); this build had no verified Pythia-14M files to export.")  # fmt: skip
    return f"{model['name']} at revision {model['revision']}, exported from the verified files this site was built from."


def run_in_page_data(environ: dict | None = None) -> dict:
    """What the block shows before the button: which model, and the bytes the button fetches."""
    from residlab.pythia import onnx_export

    folder = onnx_export.exported(onnx_export.page_model_source(environ), environ)
    manifest = onnx_export.read_manifest(folder)
    model = manifest["model"]
    fetched = sum(entry["size"] for entry in manifest["files"]) + (folder / onnx_export.MANIFEST_FILE).stat().st_size
    first = first_line(model)
    return {
        "first_line": first,
        "synthetic": model["synthetic"],
        "download_bytes": fetched + runtime_bytes(),
        "depth": manifest["depth"],
        "lens_top_k": manifest["lens_top_k"],
    }


def run_in_page_block(script_src: str, environ: dict | None = None) -> str:
    """For a page cell with ``output: asis``: the block, its script named for the site's loader."""
    data = run_in_page_data(environ)
    return explorer_block(EXPLORER_ID, data, script_src,
                          f"{data['first_line']} Running the model in the page needs JavaScript.")  # fmt: skip
