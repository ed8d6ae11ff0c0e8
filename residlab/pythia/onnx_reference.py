"""The numbers a browser's run of the exported model is checked against, computed at build time in Python.

- ``tokenizer_reference(tokenizer_json)``: a few hundred strings (``TOKENIZER_STRINGS``: the Tokenizer glossary's own
  examples, Unicode, emoji, whitespace runs, tabs and newlines, digits, code, the end-of-text token) and the ids
  Python's ``tokenizers`` gives each from the same ``tokenizer.json`` the page loads.
- ``forward_reference(model, tokenizer_json)``: for ``PROMPTS`` (lengths 1 to about 20 tokens), the ids and what the
  capture floor's recording (``record_sites``) holds at every exported site, the logits at ``SAMPLED_IDS`` of every
  position, and the logit lens' top tokens; clean, and with one write zeroed at one position (``ZEROED``), the
  intervention the page offers. The browser runs the same graph and must agree within 1e-4.

Values are rounded to 9 significant digits, which a float32 survives exactly (the page's numbers are float32).
torch and tokenizers are imported inside the functions.
"""

from __future__ import annotations

from residlab.capture.blocks import block_type_for
from residlab.capture.patching import zeroed
from residlab.capture.recording import record_sites
from residlab.capture.sites import FINAL_NORM_SITE, resolve_paths, resolve_sites, site_name
from residlab.pythia.onnx_export import LENS_TOP_K, exported_sites

# The Tokenizer glossary's examples (glossary/tokenizer.qmd; a test checks they are still there), then the cases a
# tokenizer port gets wrong: leading and repeated spaces, tabs and newlines, non-Latin scripts, combining marks,
# emoji with joiners, digits (GPT-NeoX splits numbers digit by digit), code, and the special token.
GLOSSARY_EXAMPLES = ("Pythia-14M reads residual streams", "unbelievably", " The capital is Paris", "The capital is Paris")
_PIECES = (
    "The", " the", "  two spaces", "\ttab", "line\nbreak", "\r\n", "   ", "", "café", "naïve", "e\u0301", "Ωμέγα",
    "Привет, мир", "日本語のテキスト", "한국어", "مرحبا", "שלום", "हिन्दी", "🙂", "👩‍👩‍👧", "🇫🇷", "1", "12", "123",
    "2026-12-06", "3.14159", "1,000,000", "0x1F", "x = [i**2 for i in range(10)]", "def f(a, b):\n    return a + b",
    "<|endoftext|>", "end<|endoftext|>start", "don't", "DON'T", "it's", "U.S.A.", "e-mail", "C++", "#include <stdio.h>",
    "https://example.org/a?b=c", "—", "…", "«quoted»", "“curly”", "\u00a0non-breaking", "zero\u200bwidth", "ß", "ﬁ",
)
TOKENIZER_STRINGS = tuple(dict.fromkeys(
    list(GLOSSARY_EXAMPLES) + list(_PIECES) + [f"{a}{b}" for a in _PIECES[:12] for b in _PIECES[8:32]]
))  # fmt: skip

PROMPTS = ("Paris", "The small red boat crossed the lake.", "In 1987, 3 × 4 = 12 — naïve café owners said “nope” twice.")
ZEROED = ("attn_write", 2, 3)  # block 2's attention write at position 3 of the second prompt
SAMPLED_IDS = tuple(range(0, 50304, 397))  # 127 columns of the logits, spread over the vocabulary


def _rounded(values) -> list:
    """A tensor as nested lists of floats with 9 significant digits (a float32 round-trips)."""
    if isinstance(values, float):
        return float(f"{values:.9g}")
    return [_rounded(value) for value in values] if isinstance(values, list) else values


def _tokenizer(tokenizer_json: bytes):
    from tokenizers import Tokenizer

    return Tokenizer.from_str(tokenizer_json.decode("utf-8"))


def tokenizer_reference(tokenizer_json: bytes) -> dict:
    tokenizer = _tokenizer(tokenizer_json)
    return {"strings": list(TOKENIZER_STRINGS),
            "ids": [tokenizer.encode(text, add_special_tokens=False).ids for text in TOKENIZER_STRINGS]}  # fmt: skip


def recorded_run(model, ids, edits=None) -> dict:
    """Every exported site as the capture floor records it (edited where ``edits`` says), the logits, and the logit
    lens over every boundary H_0..H_L: the final normaliser and the unembedding, as the model reads its last state."""
    import torch

    block_type = block_type_for(model.config)
    depth = model.config.num_hidden_layers
    with torch.inference_mode(), record_sites(resolve_sites(model, block_type, depth), edits) as recorder:
        logits = model(input_ids=ids, use_cache=False).logits
    [(_, final_norm, _)] = resolve_paths(model, [(FINAL_NORM_SITE, block_type.final_norm, "output")])
    boundaries = [recorder.records[site_name(block, "resid_pre")] for block in range(depth)]
    boundaries.append(recorder.records[site_name(depth - 1, "resid_post")])
    with torch.inference_mode():
        lens = model.get_output_embeddings()(final_norm(torch.cat(boundaries)))
    return {"logits": logits, **{name: recorder.records[name] for name in exported_sites(depth)}, "lens": lens}


def _case(model, ids, edits=None) -> dict:
    run = recorded_run(model, ids, edits)
    top = run["lens"].topk(LENS_TOP_K, dim=-1)
    return {
        "sites": {name: _rounded(run[name][0].tolist()) for name in exported_sites(model.config.num_hidden_layers)},
        "logits_sampled": _rounded(run["logits"][0][:, list(SAMPLED_IDS)].tolist()),
        "lens_top_ids": top.indices.tolist(),
        "lens_top_logits": _rounded(top.values.tolist()),
    }


def forward_reference(model, tokenizer_json: bytes) -> dict:
    import torch

    tokenizer = _tokenizer(tokenizer_json)
    site, block, position = ZEROED
    prompts = []
    for text in PROMPTS:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        entry = {"text": text, "ids": ids, "clean": _case(model, torch.tensor([ids]))}
        if position < len(ids):
            entry["zeroed"] = {"site": site_name(block, site), "position": position,
                               **_case(model, torch.tensor([ids]), {site_name(block, site): zeroed(position)})}  # fmt: skip
        prompts.append(entry)
    return {"sampled_ids": list(SAMPLED_IDS), "lens_top_k": LENS_TOP_K, "prompts": prompts}
