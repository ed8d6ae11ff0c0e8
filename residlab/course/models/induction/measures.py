"""What the trained induction model learned, measured on held-out sequences.

- ``half_scores``: loss and top-1 accuracy on the first half and on the repeated half, beside the best accuracy
  any predictor can reach on the first half (a token not yet seen, guessed uniformly).
- ``head_scores`` and ``find_heads``: per head, the previous-token score (attention from position t to t - 1)
  and the induction score (attention from a repeated token at t to t - P + 1, the token after its earlier
  occurrence); the heads are found by the rule "highest score of its kind over every head", never named by hand.
- ``lens_trajectory``: the logit lens (the model's own final LayerNorm and unembedding) at every residual state
  of a repeated sequence, as the probability and rank of the right next token.
- ``patching_experiment`` and ``patching_heatmap``: the corrupted run (the repeat kept, only the token after the
  earlier occurrence of the readout's token changed) with one clean activation put back at one position, for
  every site of ``PATCH_SITES`` and every position: the share of the clean metric recovered.

Activations are read with the capture floor's one mechanism (``residlab.capture.recording``) and replaced with
its patching primitive (``residlab.capture.patching``), at the sites its block table names
(``residlab.capture.sites``); attention weights come from the model's own eager
attention (``output_attentions``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from residlab.audit.measures import choose_rival, logit_difference, patch_recovery
from residlab.capture.blocks import block_type_for
from residlab.capture.patching import patch_grid, taken_from
from residlab.capture.recording import record_sites
from residlab.capture.sites import resolve_sites, site_name
from residlab.course.models.induction.recipe import PERIODS, VOCAB_SIZE, repeated_sequences
from residlab.course.models.threads import single_thread

HELD_OUT_SEED = 2027  # a generator apart from every training seed's
HELD_OUT_PER_PERIOD = 64
EXAMPLE_PERIOD = 8  # the sequence the figures and the patching show: 8 tokens, then the same 8
HEAD_RULE_THRESHOLD = 0.5  # a head "attends mostly" to a position when its mean weight there exceeds this

# The residual states the logit lens reads, in depth order: (label, block, state). resid_mid is the state
# between a block's two writes (resid_pre + the attention write), resid_post the block's output.
LENS_STATES = (
    ("embedding", 0, "resid_pre"),
    ("block 0, after attention", 0, "resid_mid"),
    ("after block 0", 0, "resid_post"),
    ("block 1, after attention", 1, "resid_mid"),
    ("after block 1 (the output)", 1, "resid_post"),
)
# The patching heatmap's rows, in depth order: (label, capture site name).
PATCH_SITES = (
    ("block 0 input (embedding)", site_name(0, "resid_pre")),
    ("block 0 attention write", site_name(0, "attn_write")),
    ("block 1 input (block 0 output)", site_name(0, "resid_post")),
    ("block 1 attention write", site_name(1, "attn_write")),
)


def held_out_sequences(seed: int = HELD_OUT_SEED, per_period: int = HELD_OUT_PER_PERIOD) -> dict[int, torch.Tensor]:
    """Period -> (per_period, 2P) repeated sequences from a generator no training uses, one draw per period."""
    generator = torch.Generator().manual_seed(seed)
    return {period: repeated_sequences(generator, per_period, period) for period in PERIODS}


def example_sequence() -> torch.Tensor:
    """(2 * EXAMPLE_PERIOD,): the first held-out sequence of the example period."""
    return held_out_sequences()[EXAMPLE_PERIOD][0]


def _logits(model, tokens: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=tokens, use_cache=False).logits.float()


@dataclass(frozen=True)
class HalfScores:
    predictions: int
    loss: float  # mean cross-entropy, nats
    accuracy: float  # top-1


def half_scores(model, sequences: dict[int, torch.Tensor]) -> dict:
    """Loss and top-1 accuracy of the predictions of the first half's tokens after its first (positions 0 .. P-2)
    and of the repeated half's after its first (positions P .. 2P-2), pooled over every sequence; and the
    first-half accuracy of the best predictor without memory of other sequences (uniform over unseen tokens)."""
    totals = {"first": [0, 0.0, 0], "repeated": [0, 0.0, 0]}
    best_first = 0.0
    with single_thread():
        for period, tokens in sequences.items():
            logits = _logits(model, tokens)
            for half, start in (("first", 0), ("repeated", period)):
                predicted = logits[:, start : start + period - 1]
                targets = tokens[:, start + 1 : start + period]
                count = targets.numel()
                totals[half][0] += count
                totals[half][1] += F.cross_entropy(predicted.reshape(-1, VOCAB_SIZE), targets.reshape(-1),
                                                   reduction="sum").item()  # fmt: skip
                totals[half][2] += int((predicted.argmax(-1) == targets).sum())
            # the token at position t + 1 of the first half is uniform over the VOCAB_SIZE - t - 1 not yet seen
            best_first += tokens.shape[0] * sum(1 / (VOCAB_SIZE - t - 1) for t in range(period - 1))
    scores = {half: HalfScores(n, loss / n, correct / n) for half, (n, loss, correct) in totals.items()}
    return {"first": scores["first"], "repeated": scores["repeated"], "first_best_possible": best_first / totals["first"][0],
            "uniform_chance": 1 / VOCAB_SIZE}  # fmt: skip


def attention_weights(model, tokens: torch.Tensor) -> torch.Tensor:
    """(blocks, heads, batch, n, n): every head's attention weights (rows: queries) for a batch of sequences."""
    with single_thread(), torch.inference_mode():
        attentions = model(input_ids=tokens, use_cache=False, output_attentions=True).attentions
    return torch.stack([layer.float() for layer in attentions]).transpose(1, 2)


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """weights (..., batch, n, n) -> (...,): mean attention from position t to t - 1, over t = 1 .. n-1."""
    n = weights.shape[-1]
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(-2, -1)) if n > 1 else weights.new_zeros(weights.shape[:-3])


def induction_score(weights: torch.Tensor, period: int) -> torch.Tensor:
    """weights (..., batch, 2P, 2P) -> (...,): mean attention from each repeated position t = P .. 2P-1 to
    t - P + 1, the position after the earlier occurrence of the token at t."""
    return weights.diagonal(offset=-(period - 1), dim1=-2, dim2=-1)[..., 1:].mean(dim=(-2, -1))


def head_scores(model, sequences: dict[int, torch.Tensor]) -> dict[str, torch.Tensor]:
    """"previous_token" and "induction": (blocks, heads) scores, each the mean over periods (equal weight) of the
    mean over that period's sequences."""
    previous, induction = [], []
    for period, tokens in sequences.items():
        weights = attention_weights(model, tokens)
        previous.append(previous_token_score(weights))
        induction.append(induction_score(weights, period))
    return {"previous_token": torch.stack(previous).mean(0), "induction": torch.stack(induction).mean(0)}


@dataclass(frozen=True)
class FoundHead:
    kind: str  # "previous-token" or "induction"
    block: int
    head: int
    score: float
    above_threshold: bool  # score > HEAD_RULE_THRESHOLD
    runner_up: float  # the highest score of this kind among the other heads


def find_heads(scores: dict[str, torch.Tensor]) -> dict[str, FoundHead]:
    """The head with the highest score of each kind, over every head of every block."""
    found = {}
    for key, kind in (("previous_token", "previous-token"), ("induction", "induction")):
        table = scores[key]
        flat = int(table.argmax())
        block, head = divmod(flat, table.shape[1])
        others = torch.cat([table.reshape(-1)[:flat], table.reshape(-1)[flat + 1 :]])
        score = float(table[block, head])
        found[key] = FoundHead(kind, block, head, score, score > HEAD_RULE_THRESHOLD, float(others.max()))
    return found


def _readout(model, states: torch.Tensor) -> torch.Tensor:
    """The logit lens: the model's final LayerNorm (where its block table says), then its unembedding."""
    final_norm = model.get_submodule(block_type_for(model.config).final_norm)
    return model.get_output_embeddings()(final_norm(states))


def residual_states(model, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """LENS_STATES label -> (batch, n, d), recorded at the capture's sites in one forward."""
    block_type = block_type_for(model.config)
    sites = resolve_sites(model, block_type, model.config.num_hidden_layers)
    with single_thread(), record_sites(sites) as recorder, torch.inference_mode():
        model(input_ids=tokens, use_cache=False)
    record = recorder.records
    states = {}
    for label, block, state in LENS_STATES:
        resid_pre = record[site_name(block, "resid_pre")]
        states[label] = {"resid_pre": resid_pre, "resid_mid": resid_pre + record[site_name(block, "attn_write")],
                         "resid_post": record[site_name(block, "resid_post")]}[state]  # fmt: skip
    return states


def lens_trajectory(model, tokens: torch.Tensor) -> dict:
    """For a batch of repeated sequences (batch, 2P): per lens state, the probability of the right next token at
    each repeated position P .. 2P-2 (mean over the batch), its mean over those positions, and the top-1 accuracy."""
    period = tokens.shape[1] // 2
    targets = tokens[:, period + 1 :]
    trajectory = {}
    with torch.inference_mode():
        for label, states in residual_states(model, tokens).items():
            probabilities = _readout(model, states[:, period:-1]).float().softmax(-1)
            right = probabilities.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (batch, P-1)
            trajectory[label] = {
                "p_right_by_position": right.mean(0).tolist(),
                "p_right": right.mean().item(),
                "top1": (probabilities.argmax(-1) == targets).float().mean().item(),
            }
    return trajectory


@dataclass(frozen=True)
class PatchingExperiment:
    """Clean and corrupt inputs that differ only in what induction copies. Both keep the repeat, so the readout's
    token occurs earlier in both and the previous-token step finds the same position; only the token there, the
    one induction copies, differs. A recovery therefore cannot come from which tokens are present or repeated."""

    clean: tuple[int, ...]  # the example's first 2P - 1 tokens: the readout predicts the last token of the repeat
    corrupt: tuple[int, ...]  # the same, with only position P - 1 (the target's earlier occurrence) replaced by a
    # token that occurs nowhere in the clean sequence
    target: int  # the right next token in the clean run (what induction predicts)
    rival: int  # by the lesson's rule (``choose_rival``): the corrupted run's top token at the readout, or the clean
    # run's best other token if that is the target; induction predicts the token that replaced the target
    first_occurrence_next: int  # P - 1: the position after the earlier occurrence of the readout's token
    corrupt_top: int  # the corrupted run's top token at the readout, which the rule reads


def patching_experiment(model, sequence: torch.Tensor | None = None, seed: int = HELD_OUT_SEED) -> PatchingExperiment:
    sequence = example_sequence() if sequence is None else sequence
    period = sequence.shape[0] // 2
    clean = sequence[: 2 * period - 1]
    unused = torch.tensor([t for t in range(VOCAB_SIZE) if t not in set(sequence.tolist())])
    generator = torch.Generator().manual_seed(seed + 1)
    corrupt = clean.clone()
    corrupt[period - 1] = unused[torch.randint(len(unused), (1,), generator=generator)]
    target = int(sequence[2 * period - 1])
    with single_thread():
        clean_logits, corrupt_logits = (_logits(model, ids.unsqueeze(0))[0, -1] for ids in (clean, corrupt))
    return PatchingExperiment(tuple(clean.tolist()), tuple(corrupt.tolist()), target,
                              choose_rival(clean_logits, corrupt_logits, target), period - 1,
                              int(corrupt_logits.argmax().item()))  # fmt: skip


def _experiment_metric(logits: torch.Tensor, experiment: PatchingExperiment) -> float:
    return logit_difference(logits[0, -1], experiment.target, experiment.rival)


def patching_heatmap(model, experiment: PatchingExperiment | None = None) -> dict:
    """Metric M = logit(target) - logit(rival) at the last position. For every PATCH_SITES row and position p:
    R = (M(corrupt run with the clean activation at p) - M(corrupt)) / (M(clean) - M(corrupt)), None when the
    clean and corrupt metrics are equal (``residlab.audit.measures``)."""
    experiment = patching_experiment(model) if experiment is None else experiment
    sites = resolve_sites(model, block_type_for(model.config), model.config.num_hidden_layers)
    names = [name for _, name in PATCH_SITES]
    clean_ids = torch.tensor([experiment.clean])
    corrupt_ids = torch.tensor([experiment.corrupt])
    with single_thread():
        with record_sites(sites) as clean, torch.inference_mode():
            clean_metric = _experiment_metric(model(input_ids=clean_ids, use_cache=False).logits, experiment)
        corrupt_metric = _experiment_metric(_logits(model, corrupt_ids), experiment)

        def patched_metric() -> float:
            with torch.inference_mode():
                return _experiment_metric(model(input_ids=corrupt_ids, use_cache=False).logits, experiment)

        grid = patch_grid(patched_metric, sites, names, range(len(experiment.clean)),
                          lambda name, position: taken_from(clean.records[name], position))  # fmt: skip
    recovery = [[patch_recovery(clean_metric, corrupt_metric, patched) for patched in row] for row in grid]
    return {"rows": [label for label, _ in PATCH_SITES], "recovery": recovery, "clean_metric": clean_metric,
            "corrupt_metric": corrupt_metric}  # fmt: skip
