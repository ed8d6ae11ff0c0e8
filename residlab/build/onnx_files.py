"""Quarto post-render step: the model the page describes, exported to ONNX, and the runtime that runs it, copied
into the built site for Lab 05 Part 4's "Run it in the page".

- ``<site>/assets/onnx-model/``: the export of ``residlab.pythia.onnx_export.page_model_source()`` (the verified
  files of the lock the build uses, which the publish workflow fetches; else the synthetic specimen, labelled so in
  its manifest), cached by the weights' digest so an unchanged model is exported once: ``model.onnx``,
  ``model.onnx.data``, ``tokenizer.json``, ``manifest.json`` (which model, the weights' sha256, every file's sha256);
  ``LICENSE`` (Apache-2.0: Pythia's weights and the GPT-NeoX-20B tokenizer are published under it) and ``NOTICE``
  saying whose they are; and the numbers a browser's run is checked against (``parity.json``,
  ``tokenizer-parity.json``: ``residlab.pythia.onnx_reference``), which no page fetches.
- ``<site>/assets/onnx-runtime/``: from the npm packages ``assets/onnx-runtime/package.json`` pins and its lock locks
  (installed by the pre-render step, ``npm_installs.py``), only the files the page loads (``SHIPPED``): onnxruntime-web's
  WebAssembly-only loader and its single-threaded-capable build (the site is not cross-origin isolated), and
  ``@huggingface/tokenizers``' module, each with its licence (MIT, Apache-2.0).

Nothing here is fetched by a page before the reader asks. Quarto runs this in the project root and names the
output folder in QUARTO_PROJECT_OUTPUT_DIR. A missing or different install stops the render with one line saying
what to run.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

# What the page loads, the files the site serves: named once, beside the block that says how many MB they are.
from residlab.course.lab05.run_in_page import RUNTIME_DIR, RUNTIME_SHIPPED as SHIPPED

MODEL_DIR = Path("assets/onnx-model")  # in the site only
APACHE_SOURCE = ("@huggingface/tokenizers", "LICENSE")  # the Apache-2.0 text, as the tokenizers package ships it
PARITY_FILE, TOKENIZER_PARITY_FILE = "parity.json", "tokenizer-parity.json"


class OnnxFilesMissing(RuntimeError):
    """The runtime is not installed, or not at the pinned version; the message says what to run."""


def pinned_versions(root: Path) -> dict:
    return json.loads((root / RUNTIME_DIR / "package.json").read_text(encoding="utf-8"))["dependencies"]


def runtime_files(root: Path) -> dict[str, Path]:
    """Site file name -> its source in the install, checked against the pins."""
    files = {}
    for package, version in pinned_versions(root).items():
        installed = root / RUNTIME_DIR / "node_modules" / package
        manifest = installed / "package.json"
        if not manifest.is_file():
            raise OnnxFilesMissing(f"{package} {version} is not installed in {RUNTIME_DIR / 'node_modules'}: run "
                                   f"`npm ci --prefix {RUNTIME_DIR}`")  # fmt: skip
        found = json.loads(manifest.read_text(encoding="utf-8"))["version"]
        if found != version:
            raise OnnxFilesMissing(f"{installed} holds {package} {found}, but {RUNTIME_DIR}/package.json pins {version}: "
                                   f"run `npm ci --prefix {RUNTIME_DIR}`")  # fmt: skip
        shipped, licence = SHIPPED[package]
        for name in shipped:
            if not (installed / name).is_file():
                raise OnnxFilesMissing(f"{installed} lacks {name}: run `npm ci --prefix {RUNTIME_DIR}` again")
            files[Path(name).name] = installed / name
        committed = root / RUNTIME_DIR / licence
        files[licence] = committed if committed.is_file() else installed / "LICENSE"
    return files


def _copy(source: Path, destination: Path) -> None:
    """Copied unless the same bytes are there already (a re-render leaves 70 MB alone)."""
    if destination.is_file() and destination.stat().st_size == source.stat().st_size \
            and destination.read_bytes() == source.read_bytes():
        return
    shutil.copyfile(source, destination)


def _write_json(path: Path, value: dict) -> None:
    """Written whole or not at all (a render and a test may ask for the same file at once), unless already so."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False) + "\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    staging.write_text(text, encoding="utf-8")
    os.replace(staging, path)


def notice(manifest: dict) -> str:
    model = manifest["model"]
    if model["synthetic"]:
        whose = (f"The weights are random (a synthetic specimen with Pythia-14M's architecture, seed {model['seed']}), "
                 "drawn by residlab; they are NOT Pythia-14M's.")  # fmt: skip
    else:
        whose = f"The weights are {model['name']}'s at revision {model['revision']}, published by EleutherAI under Apache-2.0."
    return (f"{whose}\nThe tokenizer (tokenizer.json) is the GPT-NeoX-20B tokenizer, published by EleutherAI under "
            "Apache-2.0.\nLICENSE is the Apache License 2.0.\n")  # fmt: skip


def copy_into_site(root: Path, output: Path, environ: dict | None = None) -> list[Path]:
    from residlab.pythia import onnx_export, onnx_reference

    runtime = runtime_files(root)
    copied = []
    target = output / RUNTIME_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name, source in runtime.items():
        _copy(source, target / name)
        copied.append(target / name)
    source = onnx_export.page_model_source(environ)
    folder = onnx_export.exported(source, environ)
    manifest = onnx_export.read_manifest(folder)
    target = output / MODEL_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name in (*onnx_export.EXPORTED_FILES, onnx_export.MANIFEST_FILE):
        _copy(folder / name, target / name)
    package, licence = APACHE_SOURCE
    _copy(root / RUNTIME_DIR / "node_modules" / package / licence, target / "LICENSE")
    (target / "NOTICE").write_text(notice(manifest), encoding="utf-8")
    reference = folder / PARITY_FILE
    if not reference.is_file():  # computed once per export, beside it: the torch forward of three prompts
        _write_json(reference, onnx_reference.forward_reference(source.build(), source.tokenizer_json))
    _copy(reference, target / PARITY_FILE)
    _write_json(target / TOKENIZER_PARITY_FILE, onnx_reference.tokenizer_reference(source.tokenizer_json))
    copied += [target / name for name in sorted(os.listdir(target))]
    return copied


def main() -> int:
    from residlab.pythia.onnx_export import ExportError

    named = Path(os.environ.get("QUARTO_PROJECT_OUTPUT_DIR") or "_site")
    site = named if named.is_absolute() else Path.cwd() / named
    try:
        count = len(copy_into_site(Path.cwd(), site))
    except (OnnxFilesMissing, ExportError) as error:
        print(f"onnx_files: error: {error}", file=sys.stderr)
        return 1
    print(f"onnx_files: the page's model and its runtime, {count} files in {RUNTIME_DIR}/ and {MODEL_DIR}/ of the site")
    return 0


if __name__ == "__main__":
    sys.exit(main())
