"""The two activation-cache layouts of the glossary's worked example, built from a real forward pass.

A model with L blocks has L + 1 residual boundaries H_0 (the embedding output) .. H_L (the last block's raw
output, before the final normalisation). Caches store them in different layouts; with the batch dimension
removed:

- "after each block": ``residual_after`` of shape (L, n, d_model); ``residual_after[k]`` is H_{k+1}, the
  state right after the block with zero-based index k.
- "every boundary": ``residual_boundaries`` of shape (L + 1, n, d_model); ``residual_boundaries[j]`` is H_j.

So the state after block k is ``residual_after[k]`` in one layout and ``residual_boundaries[k + 1]`` in the
other. The two layouts are recorded by two independent routes, so that their agreement is a check, not a
tautology: ``residual_after`` by forward hooks on the blocks (this module), ``residual_boundaries`` by the
model's own boundary capture (``residlab.pythia.observe.capture_residuals`` for the GPT-NeoX specimen, the
copy model's hook points ``hook_resid_pre`` and ``hook_resid_post`` for the lesson model). Both record with
``residlab.capture.recording.record_sites``.

Package only (torch, tokenizers; transformers for the specimen); never bundled into a runner.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from residlab.capture.blocks import block_type_for
from residlab.capture.recording import SiteFiredTwice, record_sites
from residlab.capture.sites import block_path
from residlab.capture.versions import import_transformers_quietly

if TYPE_CHECKING:  # torch is imported where it is used: the tokenizer page needs none of it
    import torch
    from torch import nn

SHIPPED_TOKENIZER = Path(__file__).resolve().parents[2] / "data" / "gpt-neox-20b-tokenizer.json"
EXAMPLE_PROMPT = "The capital is Paris"


@dataclass(frozen=True)
class EncodedPrompt:
    """A prompt as token ids and the tokenizer's pieces, one per position."""

    text: str
    ids: tuple[int, ...]
    pieces: tuple[str, ...]  # the tokenizer's own spelling of each token (byte-level BPE marks a space as "Ġ")

    @property
    def input_ids(self) -> torch.Tensor:
        """(1, n) long: the batch of one that models take."""
        import torch

        return torch.tensor([self.ids], dtype=torch.long)


def load_shipped_tokenizer():
    """The GPT-NeoX-20B tokenizer shipped in residlab/data (a ``tokenizers.Tokenizer``)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(SHIPPED_TOKENIZER))


def encode_prompt(text: str = EXAMPLE_PROMPT, tokenizer=None) -> EncodedPrompt:
    """Tokenize ``text`` (default tokenizer: the shipped GPT-NeoX-20B one). No special tokens are added."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"the prompt must be a non-empty string, got {text!r}")
    encoding = (tokenizer or load_shipped_tokenizer()).encode(text, add_special_tokens=False)
    return EncodedPrompt(text=text, ids=tuple(encoding.ids), pieces=tuple(encoding.tokens))


@dataclass(frozen=True)
class CacheLayouts:
    """One run's residual states in both layouts; batch removed."""

    source: str  # which model produced them, in words
    pieces: tuple[str, ...]  # a label per position
    residual_after: torch.Tensor  # (num_blocks, n, d_model); [k] = H_{k+1}
    residual_boundaries: torch.Tensor  # (num_blocks + 1, n, d_model); [j] = H_j

    def __post_init__(self) -> None:
        after, boundaries = self.residual_after, self.residual_boundaries
        if after.ndim != 3 or boundaries.ndim != 3:
            raise ValueError(
                f"both layouts must be 3-d (blocks or boundaries, n, d_model); got residual_after "
                f"{tuple(after.shape)} and residual_boundaries {tuple(boundaries.shape)}"
            )
        if boundaries.shape != (after.shape[0] + 1, *after.shape[1:]):
            raise ValueError(
                f"residual_boundaries must have shape (num_blocks + 1, n, d_model) = "
                f"{(after.shape[0] + 1, *after.shape[1:])}, got {tuple(boundaries.shape)}"
            )
        if len(self.pieces) != after.shape[1]:
            raise ValueError(f"{len(self.pieces)} position labels for {after.shape[1]} positions")

    @property
    def num_blocks(self) -> int:
        return self.residual_after.shape[0]

    @property
    def num_positions(self) -> int:
        return self.residual_after.shape[1]

    @property
    def d_model(self) -> int:
        return self.residual_after.shape[2]

    def after_block(self, block_index: int, position: int) -> torch.Tensor:
        """(d_model,): h after block ``block_index`` (zero-based) at ``position`` (negative counts from the end),
        read from the "after each block" layout."""
        self._check_index(block_index, self.num_blocks, "block_index")
        self._check_index(position, self.num_positions, "position")
        return self.residual_after[block_index, position]

    def boundary(self, boundary_index: int, position: int) -> torch.Tensor:
        """(d_model,): H_{boundary_index} at ``position``, read from the "every boundary" layout."""
        self._check_index(boundary_index, self.num_blocks + 1, "boundary_index")
        self._check_index(position, self.num_positions, "position")
        return self.residual_boundaries[boundary_index, position]

    @staticmethod
    def _check_index(index: int, length: int, name: str) -> None:
        if not -length <= index < length:
            raise IndexError(f"{name} {index} is out of range for a dimension of length {length}")


def record_block_outputs(blocks: Sequence[nn.Module], run: Callable[[], object]) -> torch.Tensor:
    """Call ``run()`` once, recording every block's output (``record_sites``); return the raw outputs stacked.

    Each block must run exactly once on a batch of one. A block may return a tensor (batch, n, d) or a tuple
    whose first element is that tensor (transformers 4.x GPT-NeoX layers do). Result: (len(blocks), n, d),
    detached. The hooks are removed even if ``run`` fails.
    """
    import torch

    if len(blocks) == 0:
        raise ValueError("no blocks to record")
    sites = [(f"block {index}", block, "output") for index, block in enumerate(blocks)]
    try:
        with record_sites(sites) as recorder, torch.no_grad():
            run()
    except SiteFiredTwice as error:
        twice = next(index for index in range(len(blocks)) if str(error).startswith(f"site block {index} fired"))
        raise RuntimeError(f"block {twice} ran 2 times in one forward pass; expected once") from error
    for index, name in enumerate(recorder.names):
        if name not in recorder.records:
            raise RuntimeError(f"block {index} ran 0 times in one forward pass; expected once")
        if recorder.records[name].ndim != 3 or recorder.records[name].shape[0] != 1:
            shape = tuple(recorder.records[name].shape)
            raise ValueError(f"block {index} returned shape {shape}; expected (1, n, d_model)")
    return torch.stack([recorder.records[name][0] for name in recorder.names])


def _check_input_ids(input_ids: torch.Tensor) -> None:
    import torch

    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype != torch.long:
        raise TypeError("input_ids must be a torch.long tensor of shape (1, n)")
    if input_ids.ndim != 2 or input_ids.shape[0] != 1 or input_ids.shape[1] < 1:
        raise ValueError(f"input_ids must have shape (1, n) with n >= 1, got {tuple(input_ids.shape)}")


def gpt_neox_cache_layouts(model, prompt: EncodedPrompt, source: str) -> CacheLayouts:
    """Both layouts for a GPT-NeoX causal LM: hooks on its blocks (where the block table says they live) give
    ``residual_after``; the observation capture (``capture_residuals(...).boundaries()``, raw H_0..H_L) gives
    ``residual_boundaries``. Two separate forward passes of the same eval-mode model on the same ids."""
    from residlab.pythia.observe import capture_residuals

    input_ids = prompt.input_ids
    _check_input_ids(input_ids)
    block_type = block_type_for(model.config)
    blocks = [model.get_submodule(block_path(block_type, block)) for block in range(model.config.num_hidden_layers)]
    residual_after = record_block_outputs(blocks, lambda: model(input_ids))
    residual_boundaries = capture_residuals(model, input_ids).boundaries().detach()
    return CacheLayouts(source, prompt.pieces, residual_after, residual_boundaries)


def specimen_cache_layouts(text: str = EXAMPLE_PROMPT, seed: int = 0, model=None) -> CacheLayouts:
    """The worked example on the synthetic GPT-NeoX specimen (Pythia-14M's architecture, seeded RANDOM
    weights: its values are not Pythia's) with the real GPT-NeoX-20B tokenizer. ``model``: that specimen, already
    built (``build_specimen_model(seed)`` otherwise)."""
    import_transformers_quietly()
    if model is None:
        from residlab.pythia.specimen import build_specimen_model

        model = build_specimen_model(seed)
    source = f"synthetic GPT-NeoX specimen (random weights, seed {seed}; not Pythia-14M's values)"
    return gpt_neox_cache_layouts(model, encode_prompt(text), source)


def library_hidden_states(model, input_ids: torch.Tensor) -> torch.Tensor:
    """(L + 1, n, d): the ``output_hidden_states`` tuple of a transformers model, stacked, batch removed.

    Its last entry is NOT the raw H_L: GPT-NeoX applies the final LayerNorm to it before returning it."""
    import torch

    _check_input_ids(input_ids)
    with torch.no_grad():
        hidden_states = model(input_ids, output_hidden_states=True).hidden_states
    return torch.stack([state[0] for state in hidden_states]).detach()


def copy_model_cache_layouts(model=None, tokens: Sequence[int] | None = None) -> CacheLayouts:
    """Both layouts for the lesson's one-block copy model: a hook on its block gives ``residual_after``
    (1, 5, 32); its hook points ``hook_resid_pre`` and ``hook_resid_post`` give the boundaries resid_pre = H_0 and
    resid_post = H_1 (resid_mid is inside the block)."""
    import torch

    from residlab.course.models import copy_model, lesson_lab

    model = model if model is not None else copy_model.default_training()[0]
    tokens = tuple(lesson_lab.CLEAN_TOKENS if tokens is None else tokens)
    batch = torch.tensor([tokens], dtype=torch.long)
    _check_input_ids(batch)
    boundaries = [
        ("resid_pre", model.block.hook_resid_pre, "output"),
        ("resid_post", model.block.hook_resid_post, "output"),
    ]
    with record_sites(boundaries) as recorder:
        residual_after = record_block_outputs([model.block], lambda: model(batch))
    residual_boundaries = torch.stack([recorder.records["resid_pre"][0], recorder.records["resid_post"][0]])
    return CacheLayouts("lesson copy model (trained, 1 block)", tuple(str(t) for t in tokens),
                        residual_after, residual_boundaries)
