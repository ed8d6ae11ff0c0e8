"""What Lab 05's capture explorer shows: the observation of every token position of a capture, computed at
render time by the same ``observe_position`` that wrote the capture's ``observations.json``.

``observations.json`` holds one selected position; ``captures.json`` holds the raw states and branch writes
of every position. The explorer needs every position, so this module rebuilds the capture's tensors from
``captures.json`` and runs ``residlab.pythia.observe.observe_position`` on each position. The logit lens
needs the model's final LayerNorm and output embedding: for the synthetic specimen they are rebuilt from its
seed, for a fresh capture they are loaded again from the verified files named by
``RESIDLAB_PYTHIA_ARTIFACTS``. The selected position is computed too and must agree with
``observations.json``; a capture whose files disagree stops the render with a message naming them.

The browser only formats what this module writes (``assets/explorers/capture-explorer.js``).
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from pathlib import Path

from residlab.course.lab05_observation.capture_page import ARTIFACTS_ENV, PageCapture

CAPTURES_FILE = "captures.json"
SPECIMEN_LOCK_LABEL = re.compile(r"write_specimen\(seed=(?P<seed>\d+)\)")
# The recomputed selected position must equal what the capture recorded, up to float32 rounding.
AGREEMENT_RELATIVE = 1e-5
AGREEMENT_ABSOLUTE = 1e-6
DATA_ELEMENT_ID = "capture-explorer-data"


class ExplorerDataError(RuntimeError):
    """The capture's files cannot feed the explorer; the message names the file and the problem."""


def captured_tensors(capture: PageCapture, captures: dict):
    """A ``ResidualCapture`` rebuilt from ``captures.json``: every tensor (1, n, d) float32, checked against the
    token ids and the layer count that ``observations.json`` records."""
    import torch

    from residlab.capture.sites import EMBEDDING_SITE, FINAL_NORM_SITE, site_name
    from residlab.pythia.observe import ResidualCapture

    where = capture.directory / CAPTURES_FILE
    token_ids = [token["id"] for token in capture.observations["tokens"]]
    if captures.get("token_ids") != token_ids:
        raise ExplorerDataError(f"{where}: its token ids are not those of observations.json: another run's file")
    tensors = {}
    for entry in captures.get("tensors", []):
        values = torch.tensor(entry["values"], dtype=torch.float32)
        if list(values.shape) != entry["shape"]:
            raise ExplorerDataError(f"{where}: {entry['name']} holds shape {list(values.shape)}, says {entry['shape']}")
        tensors[entry["name"]] = values
    layers = len(capture.observation["block_updates"])
    names = [EMBEDDING_SITE, FINAL_NORM_SITE] + [
        site_name(block, site) for block in range(layers) for site in ("attn_write", "mlp_write", "resid_out")
    ]
    missing = [name for name in names if name not in tensors]
    if missing:
        raise ExplorerDataError(f"{where}: no tensor {', '.join(missing)}")
    expected = [1, len(token_ids), tensors[EMBEDDING_SITE].shape[-1]]
    wrong = [name for name in names if list(tensors[name].shape) != expected]
    if wrong:
        raise ExplorerDataError(f"{where}: {', '.join(wrong)} not of shape {expected}")
    outputs = [tensors[site_name(block, "resid_out")] for block in range(layers)]
    return ResidualCapture(
        block_input=tensors[EMBEDDING_SITE],
        block_inputs=[tensors[EMBEDDING_SITE], *outputs[:-1]],  # captures.json stores each once (continuity)
        block_outputs=outputs,
        final_norm_output=tensors[FINAL_NORM_SITE],
        attention_writes=[tensors[site_name(block, "attn_write")] for block in range(layers)],
        mlp_writes=[tensors[site_name(block, "mlp_write")] for block in range(layers)],
        block_return_kind=capture.manifest["block_return_kind"],
        residual_kind=capture.manifest["residual_kind"],
        sites={name: tensors[name] for name in names},
    )


def lens_model(capture: PageCapture, environ: dict | None = None):
    """The (model, tokenizer) whose final LayerNorm and output embedding the capture's logit lens used."""
    if capture.synthetic:
        match = SPECIMEN_LOCK_LABEL.fullmatch(str(capture.manifest.get("lock", "")))
        if not match:
            raise ExplorerDataError(
                f"{capture.directory / 'manifest.json'}: a synthetic capture whose lock {capture.manifest.get('lock')!r} "
                "does not name the specimen's seed"
            )
        from transformers import PreTrainedTokenizerFast

        from residlab.pythia.specimen import TOKENIZER_CONFIG, TOKENIZER_SOURCE, build_specimen_model

        tokenizer = PreTrainedTokenizerFast(
            tokenizer_file=str(TOKENIZER_SOURCE),
            clean_up_tokenization_spaces=TOKENIZER_CONFIG["clean_up_tokenization_spaces"],
        )
        return build_specimen_model(int(match.group("seed"))), tokenizer
    environ = os.environ if environ is None else environ
    if not environ.get(ARTIFACTS_ENV):
        raise ExplorerDataError(
            f"{capture.directory}: a capture of real files; name them with {ARTIFACTS_ENV} to read its logit lens"
        )
    from residlab.pythia.artifacts import verify_artifacts
    from residlab.pythia.lock import load_lock
    from residlab.pythia.load import load_offline

    verified = verify_artifacts(Path(environ[ARTIFACTS_ENV]), load_lock())
    if verified.lock.revision != capture.manifest["revision"]:
        raise ExplorerDataError(
            f"{capture.directory / 'manifest.json'}: revision {capture.manifest['revision']}, but the files named by "
            f"{ARTIFACTS_ENV} are of revision {verified.lock.revision}"
        )
    return load_offline(verified)


def _disagreement(recorded, computed, path: str = "observation") -> str | None:
    """Where two observation trees differ beyond float32 rounding, or None."""
    if isinstance(recorded, dict) and isinstance(computed, dict):
        if recorded.keys() != computed.keys():
            return f"{path}: keys {sorted(recorded)} against {sorted(computed)}"
        return next((d for key in recorded if (d := _disagreement(recorded[key], computed[key], f"{path}.{key}"))), None)
    if isinstance(recorded, list) and isinstance(computed, list):
        if len(recorded) != len(computed):
            return f"{path}: {len(recorded)} entries against {len(computed)}"
        return next((d for i, pair in enumerate(zip(recorded, computed)) if (d := _disagreement(*pair, f"{path}[{i}]"))), None)
    if isinstance(recorded, float) and isinstance(computed, float):
        if math.isclose(recorded, computed, rel_tol=AGREEMENT_RELATIVE, abs_tol=AGREEMENT_ABSOLUTE):
            return None
    elif recorded == computed:
        return None
    return f"{path}: recorded {recorded!r}, recomputed {computed!r}"


def explorer_data(capture: PageCapture, model, tokenizer) -> dict:
    """Every position's observation of this capture, the selected one exactly as ``observations.json`` has it."""
    from residlab.pythia.observe import observe_position

    tensors = captured_tensors(capture, capture.captures)  # the bytes read_capture verified
    selected = capture.observations["selected_position"]
    positions = [observe_position(model, tokenizer, tensors, position) for position in range(len(capture.observations["tokens"]))]
    problem = _disagreement(capture.observation, positions[selected])
    if problem:
        raise ExplorerDataError(
            f"{capture.directory}: captures.json with this model does not reproduce observations.json at position "
            f"{selected} ({problem})"
        )
    positions[selected] = capture.observation
    return {
        "synthetic": capture.synthetic,
        "fresh": capture.fresh,
        "repository": capture.manifest["repository"],
        "revision": capture.manifest["revision"],
        "text": capture.observations["text"],
        "tokens": [{"position": t["position"], "id": t["id"], "piece": t["piece"]} for t in capture.observations["tokens"]],
        "selected_position": selected,
        "positions": positions,
    }


def explorer_html(data: dict, script_src: str) -> str:
    """The explorer's raw HTML block: its data as JSON, the element the script fills, and the script."""
    # "<" escaped, so no token piece can end the script element early.
    payload = json.dumps(data, ensure_ascii=True, allow_nan=False).replace("<", "\\u003c")
    return (
        "```{=html}\n"
        f'<script type="application/json" id="{DATA_ELEMENT_ID}">{payload}</script>\n'
        f'<div class="residlab-explorer" id="capture-explorer" data-source="{DATA_ELEMENT_ID}">'
        "<p>The capture explorer needs JavaScript. The tables above show the selected position.</p></div>\n"
        f'<script src="{html.escape(script_src)}"></script>\n'
        "```\n"
    )
