"""The tokenizer entry's counts come from the shipped file and agree with the published facts: GPT-NeoX-20B's
tokenizer, and so every Pythia tokenizer, has 50,277 ids (EleutherAI/pythia issue 68); Pythia-14M's embedding has
50,304 rows; the shipped file is not the pinned tokenizer.json."""

from __future__ import annotations

import json

from residlab.course.glossary import tokenizer_facts
from residlab.pythia.lock import load_lock
from residlab.pythia.specimen import PINNED_CONFIG

PUBLISHED_PYTHIA_TOKENIZER_IDS = 50_277


def test_the_shipped_files_own_ids_are_gpt_neoxs_and_the_appended_ones_are_named():
    facts = tokenizer_facts.shipped_tokenizer_facts()
    assert facts.gpt_neox_ids == PUBLISHED_PYTHIA_TOKENIZER_IDS
    assert facts.ids == facts.gpt_neox_ids + len(facts.appended)
    assert [content for _, content in facts.appended] == ["<|im_start|>", "<|im_end|>", "assistant", "RWKV"]
    assert PINNED_CONFIG["vocab_size"] - facts.gpt_neox_ids == 27 and PINNED_CONFIG["vocab_size"] % 128 == 0
    pinned = next(entry for entry in load_lock().files if entry.name == "tokenizer.json")
    assert (facts.file_bytes, facts.file_sha256) != (pinned.size, pinned.sha256)


def test_a_file_without_appended_tokens_counts_them_as_none(tmp_path, monkeypatch):
    document = json.loads(tokenizer_facts.SHIPPED_TOKENIZER.read_text())
    document["added_tokens"] = [entry for entry in document["added_tokens"] if entry["id"] < 50_277]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document))
    monkeypatch.setattr(tokenizer_facts, "SHIPPED_TOKENIZER", path)
    facts = tokenizer_facts.shipped_tokenizer_facts()
    assert facts.appended == () and facts.ids == facts.gpt_neox_ids == PUBLISHED_PYTHIA_TOKENIZER_IDS
