"""The boxes that show a page's capture or patch in TransformerLens and nnsight, the tools learners meet next.

Each snippet is a file in ``assets/peers/``; a page shows it exactly as written (``peer_box``), and
``tests/peers/`` executes the same file in the peer environment (``.venv-peers``, built by ``make .venv-peers``
from ``benchmarks/peer-requirements.txt``) and compares its numbers with residlab's on the same weights. The
traps each box lists are checked there too. Standard library only: a page that shows a box imports no peer.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SNIPPETS = ROOT / "assets" / "peers"
PEER_REQUIREMENTS = ROOT / "benchmarks" / "peer-requirements.txt"
PEERS = {"TransformerLens": "transformer-lens", "nnsight": "nnsight"}  # shown name -> distribution

# The traps a box lists: those of a Hugging Face GPT-NeoX model, or the copy model's. Each is checked by
# tests/peers/test_traps.py, on the synthetic specimen or on the copy model.
TRAPS = (
    "**TransformerLens's processed weights.** Asked for HookedTransformer's numbers, TransformerLens folds each "
    "LayerNorm's gain and bias into the next weights and centres the writing weights: "
    "`enable_compatibility_mode()` does so in 4.x, as `HookedTransformer.from_pretrained` did in 2.x and 3.x. "
    "The `hook_resid_*` values and their norms then differ from Hugging Face hooks'. To compare with them, use the "
    "bridge's default forward (Hugging Face's own), `enable_compatibility_mode(no_processing=True)`, or, in the "
    "older versions, `HookedTransformer.from_pretrained_no_processing`.",
    "**`post_attention_layernorm` in a parallel block.** In Hugging Face's GPT-NeoX with "
    "`use_parallel_residual: true`, that LayerNorm normalises the block input for the MLP: its name says where it "
    "sits in the code, not that it reads a state after attention. A parallel block has no `resid_mid`.",
    "**`hidden_states[-1]`.** With `output_hidden_states=True` the model returns the embedding and one state per "
    "block, but the last entry has already been through the final LayerNorm: it is not the raw last block "
    "output. Take `resid_post` of the last block from a hook.",
)


COPY_MODEL_TRAPS = (
    "**Hook points are TransformerLens's own modules.** `run_with_cache` caches `HookPoint` modules only: on the "
    "copy model as residlab builds it (its hook points are residlab's), TransformerLens's cache is empty, which is "
    "why the snippet swaps them on a copy. nnsight needs no swap: it traces any module.",
)


# kind -> what the snippets are given, what they leave behind, their files (shown name -> file) and the traps.
BOXES = {
    "capture": {
        "given": "`model_dir`, a directory holding a GPT-NeoX model (Lab 05 Part 4's verified `pythia-artifacts`); "
        "`hf_model`, the `GPTNeoXForCausalLM` loaded from it as the runner loads it (float32, eager attention, "
        "evaluation mode); `input_ids`, the token ids (1, n); `torch` imported",
        "result": "`resid_pre`, `attn_out`, `mlp_out` and `resid_post`, one tensor (1, n, d) per block, and `final`, "
        "the final LayerNorm's output: the tests find each equal, bit for bit, to residlab's capture of the same "
        "site on the synthetic specimen",
        "files": {"TransformerLens": "capture_transformer_lens.py", "nnsight": "capture_nnsight.py"},
        "traps": TRAPS,
    },
    "patch": {
        "given": "`model_dir`, a directory holding a GPT-NeoX model; `hf_model`, the `GPTNeoXForCausalLM` loaded "
        "from it (float32, eager attention, evaluation mode); `clean_ids` and `corrupt_ids`, two prompts of the "
        "same length as token ids (1, n); `block` and `position`, the attention write to intervene on; `target` "
        "and `rival`, two token ids; `torch` imported",
        "result": "`patched`, logit(target) − logit(rival) at the last position of the corrupt run with the clean "
        "write patched in, and `ablated`, the same of the clean run with the write zeroed: the tests find both "
        "within the audit's declared tolerance of its packet (patch recovery, and total effect: the clean run's "
        "logit difference minus `ablated`) on the synthetic specimen",
        "files": {"TransformerLens": "patch_transformer_lens.py", "nnsight": "patch_nnsight.py"},
        "traps": TRAPS,
    },
    "lesson_capture": {
        "what": "capture of the copy model",
        "given": "`copy_model`, the lesson's trained copy model (a torch module of residlab's, not a Hugging Face "
        "model); `tokens`, the token ids (1, 5); `torch` imported",
        "result": "`resid_pre`, `attn_out`, `resid_mid`, `mlp_out` and `resid_post`, each (1, 5, d): the tests find "
        "each equal, bit for bit, to the hook point of the same name in `residlab`'s trace of the copy model",
        "files": {"TransformerLens": "copy_capture_transformer_lens.py", "nnsight": "copy_capture_nnsight.py"},
        "traps": COPY_MODEL_TRAPS,
    },
}

def peer_versions() -> dict[str, str]:
    """Shown name -> the version ``benchmarks/peer-requirements.txt`` pins (what the tests ran)."""
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", PEER_REQUIREMENTS.read_text(encoding="utf-8"), re.M))
    return {name: pins[distribution] for name, distribution in PEERS.items()}


def snippet(file_name: str) -> str:
    """One snippet's text, exactly as the peer tests execute it."""
    return (SNIPPETS / file_name).read_text(encoding="utf-8").rstrip("\n")


def peer_box(kind: str, residlab_line: str) -> str:
    """A collapsed callout (Markdown) with the ``kind`` box's snippets, what they are given, what they leave, and
    the traps. ``residlab_line``: the page's own sentence naming what residlab computes there. For a page one folder
    below the site's root (its links to the snippets start ``../``) whose bibliography is the lessons' (it cites
    the two libraries)."""
    box = BOXES[kind]
    versions = peer_versions()
    parts = [
        '::: {.callout-tip title="The same in TransformerLens and nnsight" collapse="true"}',
        f"{residlab_line} Here is the same {box.get('what', kind)} in the two libraries you are likely to meet next, at the "
        "versions the site's tests run each snippet under: TransformerLens [@nanda2022transformerlens] and nnsight "
        "[@fiottokaufman2024nnsight].",
        f"*Each snippet is given* {box['given']}.",
        f"*It leaves* {box['result']}.",
    ]
    for name, file_name in box["files"].items():
        parts += [f"**{name} {versions[name]}** (the site's file [`assets/peers/{file_name}`](../assets/peers/{file_name})):",
                  f"```python\n{snippet(file_name)}\n```"]
    parts.append("Traps when comparing numbers across tools:")
    parts.append("\n".join(f"- {trap}" for trap in box["traps"]))
    parts.append(":::")
    return "\n\n".join(parts) + "\n"
