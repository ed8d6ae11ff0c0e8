"""What the tokenizer entry says about the tokenizer file the site ships, counted from the file itself, beside the
pinned Pythia-14M ``tokenizer.json`` as the lock records it (a different file, which a build does not read).

The shipped file is GPT-NeoX-20B's tokenizer as a third party redistributed it: its byte-level BPE vocabulary, the
two special tokens ``<|endoftext|>`` and ``<|padding|>`` and the added runs of spaces are GPT-NeoX's; the special
tokens appended after them (chat markers and a model name) are the redistributor's, and Pythia's tokenizer has
none of them. EleutherAI gives every Pythia tokenizer 50,277 ids (github.com/EleutherAI/pythia, issue 68); the
count below is taken from the file, and a unit test holds the two together.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from residlab.course.glossary.cache_layouts import SHIPPED_TOKENIZER

GPT_NEOX_SPECIALS = ("<|endoftext|>", "<|padding|>")  # GPT-NeoX-20B's own special tokens, ids 0 and 1


@dataclass(frozen=True)
class TokenizerFacts:
    file_name: str
    file_bytes: int
    file_sha256: str
    ids: int  # every id the shipped file defines
    gpt_neox_ids: int  # those of GPT-NeoX-20B's own tokenizer: the BPE vocabulary, its two specials, the space runs
    appended: tuple[tuple[int, str], ...]  # (id, content) of the redistributor's later special tokens


def shipped_tokenizer_facts() -> TokenizerFacts:
    data = SHIPPED_TOKENIZER.read_bytes()
    document = json.loads(data)
    vocabulary = set(document["model"]["vocab"].values())
    added = {entry["id"]: entry["content"] for entry in document["added_tokens"]}
    own = {i for i, content in added.items() if content in GPT_NEOX_SPECIALS or (content.strip() == "" and content)}
    appended = tuple(sorted((i, content) for i, content in added.items() if i not in own and i not in vocabulary))
    every = vocabulary | set(added)
    return TokenizerFacts(
        file_name=SHIPPED_TOKENIZER.name,
        file_bytes=len(data),
        file_sha256=hashlib.sha256(data).hexdigest(),
        ids=len(every),
        gpt_neox_ids=len(vocabulary | own),
        appended=appended,
    )
