"""Lab 05 Part 4's numbers (the synthetic specimen's observation) against references written here.

- The captured tensors (the committed ``captures.json`` and a fresh capture) are recomputed by a plain float64
  GPT-NeoX forward written in this file from the specimen's stored weights: embedding, LayerNorm, attention
  with partial rotary embeddings and a causal mask, exact GELU, the parallel residual sum, the final LayerNorm.
- Every published observation (boundary norms, difference norms, relative differences, the three cosines per
  block, the write norms, the final normalisation row, the logit-lens readouts) is recomputed in float64 from
  the captured tensors and compared with ``observations.json`` (the committed one the page shows, and a fresh
  run of the package).
- The token ids come from the ``tokenizers`` library reading the tokenizer file directly, not from transformers.

These are the specimen's numbers (random weights), never Pythia-14M's.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from residlab.pythia import observe  # noqa: E402
from residlab.pythia.artifacts import verify_artifacts  # noqa: E402
from residlab.pythia.load import load_offline  # noqa: E402
from residlab.pythia.lock import load_lock  # noqa: E402
from residlab.pythia.specimen import PINNED_CONFIG, TOKENIZER_SOURCE, specimen_tensors  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "assets" / "captures" / "synthetic-specimen-seed0"

# The package computes in float32 and the reference in float64. Through six blocks of width 128 (inner 512) the
# captured entries (at most ~1 in size) carry float32 rounding of ~1e-6 (1.5e-6 measured on the committed
# capture); 2e-5 absolute leaves a margin of ten and is still ~1e4 times smaller than any write, so a wrong
# site, block or formula cannot hide inside it.
FORWARD_ABS = 2e-5
# Norms and cosines of float32 vectors, recomputed in float64 from the same float32 values: the package sums
# 128 float32 squares (relative error below 128 * 6e-8 = 8e-6), so 2e-5 relative; cosines are bounded by 1, so
# the same figure absolute.
STATISTIC_REL = 2e-5


# ---- the float64 reference forward ---------------------------------------------------------------------------


class NeoXFloat64:
    """GPT-NeoX (parallel residual) computed by hand from the specimen's weights, widened from F16 to float64."""

    def __init__(self, seed: int = 0) -> None:
        self.w = {name: tensor.to(torch.float64) for name, tensor in specimen_tensors(seed).items()}
        self.width = PINNED_CONFIG["hidden_size"]
        self.heads = PINNED_CONFIG["num_attention_heads"]
        self.head_size = self.width // self.heads
        self.rotary = int(self.head_size * PINNED_CONFIG["rotary_pct"])
        self.eps = PINNED_CONFIG["layer_norm_eps"]

    def layer_norm(self, x, prefix: str):
        mean = x.mean(-1, keepdim=True)
        variance = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(variance + self.eps) * self.w[prefix + ".weight"] + self.w[prefix + ".bias"]

    def linear(self, x, prefix: str):
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def rotate(self, x, positions):  # x (heads, n, head_size): rotary on the first `rotary` dims, halves paired
        half = self.rotary // 2
        inverse_frequency = 1.0 / (PINNED_CONFIG["rotary_emb_base"] ** (torch.arange(0, half, dtype=torch.float64) * 2 / self.rotary))
        angles = positions[:, None] * inverse_frequency[None, :]  # (n, half)
        cos, sin = torch.cos(angles), torch.sin(angles)
        first, second, rest = x[..., :half], x[..., half : self.rotary], x[..., self.rotary :]
        return torch.cat([first * cos - second * sin, second * cos + first * sin, rest], dim=-1)

    def attention(self, x, prefix: str):  # x (n, width)
        n = x.shape[0]
        qkv = self.linear(x, prefix + ".query_key_value").view(n, self.heads, 3 * self.head_size).transpose(0, 1)
        q, k, v = qkv.split(self.head_size, dim=-1)  # each (heads, n, head_size)
        positions = torch.arange(n, dtype=torch.float64)
        q, k = self.rotate(q, positions), self.rotate(k, positions)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_size)
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        mixed = (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(n, self.width)
        return self.linear(mixed, prefix + ".dense")

    def mlp(self, x, prefix: str):
        hidden = self.linear(x, prefix + ".dense_h_to_4h")
        return self.linear(0.5 * hidden * (1 + torch.erf(hidden / math.sqrt(2))), prefix + ".dense_4h_to_h")

    def run(self, token_ids: list[int]) -> dict:
        """Site name (as captures.json names them) -> (n, width) float64."""
        x = self.w["gpt_neox.embed_in.weight"][token_ids]
        sites = {"blocks.0.resid_pre": x}
        for block in range(PINNED_CONFIG["num_hidden_layers"]):
            prefix = f"gpt_neox.layers.{block}"
            attn = self.attention(self.layer_norm(x, prefix + ".input_layernorm"), prefix + ".attention")
            mlp = self.mlp(self.layer_norm(x, prefix + ".post_attention_layernorm"), prefix + ".mlp")
            x = x + attn + mlp
            sites.update({f"blocks.{block}.attn_write": attn, f"blocks.{block}.mlp_write": mlp, f"blocks.{block}.resid_post": x})
        sites["final_norm.out"] = self.layer_norm(x, "gpt_neox.final_layer_norm")
        return sites

    def logit_lens(self, state, k: int = 5):
        logits = self.layer_norm(state, "gpt_neox.final_layer_norm") @ self.w["embed_out.weight"].T
        return torch.softmax(logits, dim=-1).topk(k)


@pytest.fixture(scope="module")
def reference() -> NeoXFloat64:
    return NeoXFloat64(seed=0)


def read(directory: Path, name: str) -> dict:
    return json.loads((directory / name).read_text(encoding="utf-8"))


def committed_tensors() -> dict:
    captures = read(COMMITTED, "captures.json")
    return captures["token_ids"], {entry["name"]: torch.tensor(entry["values"], dtype=torch.float64)[0] for entry in captures["tensors"]}


# ---- the expected observation, computed here from captured tensors ----------------------------------------------


def cosine(a, b):
    norm_a, norm_b = a.norm().item(), b.norm().item()
    return None if norm_a == 0 or norm_b == 0 else (a @ b).item() / (norm_a * norm_b)


def expected_observation(sites: dict, position: int, blocks: int = 6) -> dict:
    """Every number observe_position publishes, from (n, width) tensors, in float64."""
    states = [sites["blocks.0.resid_pre"][position]] + [sites[f"blocks.{b}.resid_post"][position] for b in range(blocks)]
    updates = []
    for block in range(blocks):
        before, after = states[block], states[block + 1]
        attn, mlp = sites[f"blocks.{block}.attn_write"][position], sites[f"blocks.{block}.mlp_write"][position]
        updates.append({
            "difference_norm": (after - before).norm().item(),
            "relative_difference": (after - before).norm().item() / before.norm().item(),
            "cosine_consecutive": cosine(before, after),
            "cosine_update_with_incoming": cosine(after - before, before),
            "attn_write_norm": attn.norm().item(),
            "mlp_write_norm": mlp.norm().item(),
            "cosine_attn_mlp_writes": cosine(attn, mlp),
        })
    raw, normalised = states[-1], sites["final_norm.out"][position]
    final = {
        "raw_norm": raw.norm().item(),
        "normalised_norm": normalised.norm().item(),
        "difference_norm": (normalised - raw).norm().item(),
        "cosine": cosine(raw, normalised),
    }
    return {"norms": [s.norm().item() for s in states], "updates": updates, "final": final, "states": states}


def assert_observation_matches(observation: dict, expected: dict) -> None:
    assert [row["norm"] for row in observation["boundaries"]] == pytest.approx(expected["norms"], rel=STATISTIC_REL)
    assert len(observation["block_updates"]) == len(expected["updates"])
    for row, want in zip(observation["block_updates"], expected["updates"]):
        for key, value in want.items():
            assert row[key] == pytest.approx(value, rel=STATISTIC_REL, abs=STATISTIC_REL), (row["block"], key)
    for key, value in expected["final"].items():
        assert observation["final_normalisation"][key] == pytest.approx(value, rel=STATISTIC_REL, abs=STATISTIC_REL), key


def assert_logit_lens_matches(observation: dict, expected: dict, reference: NeoXFloat64) -> None:
    for row, state in zip(observation["boundaries"], expected["states"]):
        probabilities, ids = reference.logit_lens(state)
        published = row["logit_lens_top"]
        # Probabilities of a 50,304-way softmax of a random-weight model are ~5e-5 each; float32 keeps them to
        # ~2e-7 relative (measured), so 1e-5 relative. Ids are compared where the next probability is further
        # apart than that, so a float32 tie cannot decide the order.
        assert [entry["probability"] for entry in published] == pytest.approx(probabilities.tolist(), rel=1e-5), row["label"]
        gaps = (probabilities[:-1] - probabilities[1:]).tolist() + [math.inf]
        for entry, token, gap, probability in zip(published, ids.tolist(), gaps, probabilities.tolist()):
            if gap > 1e-5 * probability:
                assert entry["id"] == token, row["label"]


# ---- the committed capture the page shows ---------------------------------------------------------------------


def test_committed_token_ids_are_the_tokenizer_files_encoding():
    from tokenizers import Tokenizer

    ids, _ = committed_tensors()
    assert ids == Tokenizer.from_file(str(TOKENIZER_SOURCE)).encode(observe.FIXED_TEXT, add_special_tokens=False).ids
    assert len(ids) == 8


def test_committed_captures_are_the_float64_forward_of_the_specimen_weights(reference):
    ids, tensors = committed_tensors()
    expected = reference.run(ids)
    assert sorted(tensors) == sorted(expected)
    for name, tensor in tensors.items():
        error = (tensor - expected[name]).abs().max().item()
        assert error <= FORWARD_ABS, f"{name}: max |captured - float64 forward| = {error:.3g}"
    # The tolerance is far below the signal: each write is several orders of magnitude larger.
    assert min(expected[f"blocks.{b}.attn_write"].abs().max().item() for b in range(6)) > 100 * FORWARD_ABS


def test_committed_observations_are_recomputed_from_the_committed_captures(reference):
    _, tensors = committed_tensors()
    observations = read(COMMITTED, "observations.json")
    assert observations["selected_position"] == len(observations["tokens"]) - 1  # the page's rule: the last token
    assert len(observations["positions"]) == len(observations["tokens"])
    for position, observation in enumerate(observations["positions"]):  # every position, as the explorer shows it
        expected = expected_observation(tensors, position)
        assert_observation_matches(observation, expected)
        assert_logit_lens_matches(observation, expected, reference)


def test_committed_checks_table_is_recomputed_from_the_committed_captures():
    # The checks table's numbers, from the stored float32 tensors with the same float32 additions: the stored
    # values round-trip float32 exactly, so each figure is reproduced exactly.
    captures = read(COMMITTED, "captures.json")
    tensors = {entry["name"]: torch.tensor(entry["values"], dtype=torch.float32)[0] for entry in captures["tensors"]}
    checks = read(COMMITTED, "observations.json")["checks"]
    state = tensors["blocks.0.resid_pre"]
    for row in checks["identity"]["blocks"]:
        block = row["block"]
        attn, mlp, out = (tensors[f"blocks.{block}.{site}"] for site in ("attn_write", "mlp_write", "resid_post"))
        largest = max(t.abs().max().item() for t in (state, attn, mlp, out))
        assert row["max_abs_error"] == (out - (state + attn + mlp)).abs().max().item(), block
        assert row["max_abs_error_in_source_order"] == (out - ((mlp + attn) + state)).abs().max().item() == 0.0, block
        assert row["largest_term"] == largest, block
        assert row["tolerance"] == 1e-5 + 1e-6 * largest, block  # the declared rule, written out
        state = out
    assert checks["identity"]["max_abs_error"] == max(row["max_abs_error"] for row in checks["identity"]["blocks"])
    hidden = checks["model_hidden_states"]
    difference = (tensors["final_norm.out"] - tensors["blocks.5.resid_post"]).abs().max().item()
    assert hidden["last_entry_vs_raw_last_block_output_max_abs"] == difference


def test_the_pages_worked_example_is_recomputed_from_the_committed_captures():
    from residlab.course.models import capture_page
    from residlab.course.lab05 import capture_reading

    _, tensors = committed_tensors()
    shown = capture_page.read_capture(COMMITTED)
    expected = expected_observation(tensors, shown.observations["selected_position"])
    norms, updates = expected["norms"], expected["updates"]
    predicted = norms[0]
    for row in updates:
        predicted = math.hypot(predicted, row["difference_norm"])  # orthogonal accumulation, one block at a time
    trend, seen = capture_reading.norm_trend(shown), capture_reading.alignment(shown)
    assert trend["first"] == pytest.approx(norms[0], rel=STATISTIC_REL) and trend["last"] == pytest.approx(norms[-1], rel=STATISTIC_REL)
    assert trend["blocks_up"] == sum(b > a for a, b in zip(norms, norms[1:])) and trend["blocks"] == 6
    assert trend["direction"] == ("rises" if norms[-1] >= 1.05 * norms[0] else "falls" if norms[-1] <= 0.95 * norms[0] else "neither")
    assert seen["predicted"] == pytest.approx(predicted, rel=STATISTIC_REL)
    alignments = [row["cosine_update_with_incoming"] for row in updates]
    assert seen["largest_abs_cosine"] == pytest.approx(max(map(abs, alignments)), rel=STATISTIC_REL, abs=STATISTIC_REL)
    assert seen["mean_cosine"] == pytest.approx(sum(alignments) / len(alignments), rel=STATISTIC_REL, abs=STATISTIC_REL)
    largest = max(range(6), key=lambda block: updates[block]["difference_norm"])
    assert capture_reading.largest_write(shown)["block"] == largest
    # Position 0 against the others: each position's mean raw norm over H_0..H_6, from the tensors in float64.
    states = [tensors["blocks.0.resid_pre"]] + [tensors[f"blocks.{b}.resid_post"] for b in range(6)]
    per_position = torch.stack([state.norm(dim=-1) for state in states]).mean(dim=0).tolist()
    zero = capture_reading.position_zero(shown)
    assert zero["norm"] == pytest.approx(per_position[0], rel=1e-9)
    assert zero["others"] == pytest.approx(statistics.median(per_position[1:]), rel=1e-9)
    assert zero["apart"] == (not 0.5 < per_position[0] / zero["others"] < 2.0)


# ---- a fresh run of the package -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loaded(specimen_dir, specimen_lock_path):
    return load_offline(verify_artifacts(specimen_dir, load_lock(specimen_lock_path)))


@pytest.mark.parametrize("position", [None, 3])
def test_a_fresh_observation_matches_the_float64_reference(loaded, reference, position):
    model, tokenizer = loaded
    result = observe.observe(model, tokenizer, position=position)
    observations, capture = result["observations"], result["capture"]
    ids = [token["id"] for token in observations["tokens"]]
    chosen = observations["selected_position"]
    assert chosen == (len(ids) - 1 if position is None else position)
    forward = reference.run(ids)
    for name, tensor in capture.sites.items():
        if name.endswith(".resid_pre") and name != "blocks.0.resid_pre":
            block = int(name.split(".")[1])
            want = forward[f"blocks.{block - 1}.resid_post"]
        else:
            want = forward[name]
        error = (tensor[0].to(torch.float64) - want).abs().max().item()
        assert error <= FORWARD_ABS, f"{name}: max |captured - float64 forward| = {error:.3g}"
    assert observations["selected_position"] == chosen and len(observations["positions"]) == len(ids)
    for position, observation in enumerate(observations["positions"]):
        expected = expected_observation(forward, position)
        assert_observation_matches(observation, expected)
        assert_logit_lens_matches(observation, expected, reference)
    # captures.json as written: what the page reads back, recomputed the same way.
    written = observe.capture_tensors_json(capture, observations["tokens"])
    assert written["token_ids"] == ids
    for entry in written["tensors"]:
        values = torch.tensor(entry["values"], dtype=torch.float64)[0]
        assert (values - forward[entry["name"]]).abs().max().item() <= FORWARD_ABS, entry["name"]
        # Nine significant digits identify every float32 exactly: the file holds the captured values, bit for bit.
        assert torch.equal(values.to(torch.float32), capture.sites[entry["name"]][0]), entry["name"]
