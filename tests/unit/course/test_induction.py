"""The induction model (issue 27), checked by code that shares nothing with residlab: the saved directory loaded
by Transformers itself and run by a plain forward, the attention recomputed by a hand-written float64 GPT-NeoX
forward (rotary included) from the safetensors weights, one patching cell recomputed by that forward.

The model is trained once per module by the command a learner runs (``residlab induction train``); the
held-out sequences are regenerated from the manifest by this file's own reading of the recipe's rule.
"""

from __future__ import annotations

import hashlib
import json
import math

import pytest
import torch
from safetensors.torch import load_file

from residlab.cli import main as residlab_main

MODEL_FILES = {"config.json", "model.safetensors"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(directory, manifest, config, float64 weights) of one ``residlab induction train`` run."""
    directory = tmp_path_factory.mktemp("induction") / "model"
    assert residlab_main(["induction", "train", "--output", str(directory)]) == 0
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    weights = {name: tensor.double() for name, tensor in load_file(directory / "model.safetensors").items()}
    return directory, manifest, config, weights


def sequences(seed: int, periods, per_period: int) -> dict[int, torch.Tensor]:
    """The recipe's rule as the manifest states it: per period, distinct tokens drawn by ranking uniform numbers
    (one draw of (count, vocabulary) per period, in period order), then the same tokens again."""
    generator = torch.Generator().manual_seed(seed)
    drawn = {}
    for period in periods:
        first = torch.rand(per_period, 32, generator=generator).argsort(dim=-1)[:, :period]
        drawn[period] = torch.cat([first, first], dim=1)
    return drawn


def held_out(manifest) -> dict[int, torch.Tensor]:
    setting = manifest["measurements"]["held_out"]
    return sequences(setting["seed"], setting["periods"], setting["per_period"])


def plain_model(directory):
    import transformers

    return transformers.GPTNeoXForCausalLM.from_pretrained(directory, local_files_only=True).eval()


# ---- a float64 GPT-NeoX forward written from the weights -----------------------------------------------------


def layer_norm(x, weights, prefix, eps):
    mean = x.mean(-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * weights[prefix + ".weight"] + weights[prefix + ".bias"]


def rotate(t, positions, rotary_dims, base):
    """Rotary embedding on the first ``rotary_dims`` coordinates of each head: pairs (i, i + rotary_dims/2)
    turned by position x base^(-2i/rotary_dims)."""
    half = rotary_dims // 2
    frequencies = base ** (-torch.arange(0, rotary_dims, 2, dtype=torch.float64) / rotary_dims)
    angles = positions[:, None].double() * frequencies[None, :]  # (n, half)
    cos, sin = torch.cos(angles), torch.sin(angles)
    first, second, rest = t[..., :half], t[..., half:rotary_dims], t[..., rotary_dims:]
    return torch.cat([first * cos - second * sin, second * cos + first * sin, rest], dim=-1)


def forward64(weights, config, ids, patch=None):
    """ids (n,) or (batch, n) -> (logits (..., n, vocab), attention per block (blocks, ..., heads, n, n), states).
    ``patch``: (site, position, vector) replaces the value at one position: site "block1_input" (the output of
    block 0) or "attn1"."""
    width, heads = config["hidden_size"], config["num_attention_heads"]
    head_width = width // heads
    rope = config.get("rope_parameters") or {}
    rotary_dims = int(head_width * rope.get("partial_rotary_factor", config.get("rotary_pct", 1.0)))
    base = rope.get("rope_theta", config.get("rotary_emb_base", 10000))
    eps = config["layer_norm_eps"]
    n = ids.shape[-1]
    positions = torch.arange(n)
    x = weights["gpt_neox.embed_in.weight"][ids]
    attentions, states = [], {}
    for block in range(config["num_hidden_layers"]):
        p = f"gpt_neox.layers.{block}."
        if block == 1 and patch and patch[0] == "block1_input":
            x = x.clone()
            x[..., patch[1], :] = patch[2]
        states[f"block{block}_input"] = x
        h = layer_norm(x, weights, p + "input_layernorm", eps)
        qkv = h @ weights[p + "attention.query_key_value.weight"].T + weights[p + "attention.query_key_value.bias"]
        qkv = qkv.view(*ids.shape, heads, 3 * head_width).transpose(-3, -2)  # (..., heads, n, 3 * head_width)
        q, k, v = qkv[..., :head_width], qkv[..., head_width : 2 * head_width], qkv[..., 2 * head_width :]
        q, k = rotate(q, positions, rotary_dims, base), rotate(k, positions, rotary_dims, base)
        scores = q @ k.transpose(-1, -2) / math.sqrt(head_width)
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        attention = scores.softmax(-1)
        attentions.append(attention)
        mixed = (attention @ v).transpose(-3, -2).reshape(*ids.shape, width)
        write = mixed @ weights[p + "attention.dense.weight"].T + weights[p + "attention.dense.bias"]
        if patch and patch[0] == f"attn{block}":
            write = write.clone()
            write[..., patch[1], :] = patch[2]
        states[f"attn{block}"] = write
        x = x + write
        m = layer_norm(x, weights, p + "post_attention_layernorm", eps)
        hidden = torch.nn.functional.gelu(m @ weights[p + "mlp.dense_h_to_4h.weight"].T + weights[p + "mlp.dense_h_to_4h.bias"])
        x = x + hidden @ weights[p + "mlp.dense_4h_to_h.weight"].T + weights[p + "mlp.dense_4h_to_h.bias"]
    head = weights.get("embed_out.weight", weights.get("lm_head.weight"))
    logits = layer_norm(x, weights, "gpt_neox.final_layer_norm", eps) @ head.T
    return logits, torch.stack(attentions), states


# ---- the tests ------------------------------------------------------------------------------------------------


def test_the_directory_holds_config_safetensors_and_the_manifest(trained):
    directory, manifest, config, _ = trained
    assert {path.name for path in directory.iterdir()} == MODEL_FILES | {"manifest.json"}
    assert config["architectures"] == ["GPTNeoXForCausalLM"] and config["num_hidden_layers"] == 2
    assert isinstance(manifest["seed"], int) and manifest["recipe"]["config"]["num_hidden_layers"] == 2
    assert set(manifest["versions"]) >= {"python", "torch", "transformers"}
    for name in MODEL_FILES:
        assert manifest["files"][name]["sha256"] == hashlib.sha256((directory / name).read_bytes()).hexdigest()
    assert [path.name for path in directory.parent.iterdir()] == [directory.name]  # no staging folder left behind
    measured = manifest["measurements"]  # the training stopped at its criterion, before its step limit
    assert measured["steps_trained"] == measured["training_log"][-1]["step"] < manifest["recipe"]["training"]["max_steps"]
    assert measured["training_log"][-1]["batch_accuracy"] >= 0.98


def test_residlab_audit_takes_the_directory_as_it_takes_pythias(trained, tmp_path, capsys):
    """``residlab audit --model DIR`` on the directory as written: it reads config.json and model.safetensors (the
    files and digests the manifest states, and nothing else: the manifest is no model file), its clean logit
    difference is the manifest's patching metric on the same input, and ``verify`` passes."""
    directory, manifest, _, _ = trained
    experiment = manifest["measurements"]["patching"]["experiment"]
    ids = lambda tokens: ",".join(map(str, tokens))  # noqa: E731
    packet = tmp_path / "packet"
    assert residlab_main(["audit", "--model", str(directory), "--clean-ids", ids(experiment["clean"]),
                          "--corrupt-ids", ids(experiment["corrupt"]), "--target-id", str(experiment["target"]),
                          "--rival-id", str(experiment["rival"]), "--site", "attn:1:-1", "--output", str(packet)]) == 0  # fmt: skip
    model_record = json.loads((packet / "model.json").read_text(encoding="utf-8"))
    assert model_record["source"]["kind"] == "directory"
    read = {entry["name"]: entry["sha256"] for entry in model_record["source"]["files"]}
    assert read == {name: manifest["files"][name]["sha256"] for name in MODEL_FILES}
    measurement = json.loads((packet / "measurement.json").read_text(encoding="utf-8"))
    clean_metric = manifest["measurements"]["patching"]["clean_metric"]
    assert measurement["baseline"]["clean"]["value"] == pytest.approx(clean_metric, abs=1e-4)
    capsys.readouterr()
    assert residlab_main(["audit", "verify", str(packet), "--model", str(directory)]) == 0, capsys.readouterr().out


def test_the_repeated_half_is_predicted_and_the_first_half_is_not(trained):
    """A plain forward of the saved model on fresh sequences (this file's own seed) and on the manifest's held-out
    sequences: accuracy per half, the latter equal to what the manifest states."""
    directory, manifest, _, _ = trained
    model = plain_model(directory)

    def accuracy(drawn):
        correct = {"first": 0, "repeated": 0}
        total = {"first": 0, "repeated": 0}
        with torch.no_grad():
            for period, tokens in drawn.items():
                predicted = model(input_ids=tokens).logits.argmax(-1)
                for half, start in (("first", 0), ("repeated", period)):
                    hits = predicted[:, start : start + period - 1] == tokens[:, start + 1 : start + period]
                    correct[half] += int(hits.sum())
                    total[half] += hits.numel()
        return {half: correct[half] / total[half] for half in correct}

    fresh = accuracy(sequences(99, range(4, 13), 48))
    assert fresh["repeated"] >= 0.95
    assert fresh["first"] < 3 / 32  # about chance: 1/32 uniform, at most 1/21 for a guess among unseen tokens
    stated = manifest["measurements"]["halves"]
    recomputed = accuracy(held_out(manifest))
    assert recomputed["repeated"] == pytest.approx(stated["repeated"]["accuracy"], abs=1e-12)
    assert recomputed["first"] == pytest.approx(stated["first"]["accuracy"], abs=1e-12)


def test_head_scores_recomputed_by_a_float64_attention(trained):
    """Every head's previous-token and induction score from this file's float64 forward, equal to the manifest's;
    and the heads its rule finds: the previous-token head in block 0, the induction head in block 1."""
    _, manifest, config, weights = trained
    previous, induction = [], []
    for period, tokens in held_out(manifest).items():
        patterns = forward64(weights, config, tokens)[1].transpose(0, 1)  # (batch, blocks, heads, n, n)
        n = 2 * period
        previous.append(torch.stack([patterns[..., t, t - 1] for t in range(1, n)]).mean(dim=(0, 1)))
        induction.append(torch.stack([patterns[..., t, t - period + 1] for t in range(period, n)]).mean(dim=(0, 1)))
    scores = {"previous_token": torch.stack(previous).mean(0), "induction": torch.stack(induction).mean(0)}
    measured = manifest["measurements"]
    for kind, table in scores.items():
        assert torch.allclose(table, torch.tensor(measured["head_scores"][kind], dtype=torch.float64), atol=1e-4)
        block, head = divmod(int(table.argmax()), table.shape[1])
        found = measured["heads_found"][kind]
        assert (found["block"], found["head"]) == (block, head)
        assert found["score"] == pytest.approx(float(table[block, head]), abs=1e-4)
    assert measured["heads_found"]["previous_token"]["block"] == 0
    assert measured["heads_found"]["induction"]["block"] == 1


def test_one_patching_cell_recomputed(trained):
    """The recovery of putting the clean block-1 input at the position after the earlier occurrence into the
    corrupted run, from this file's float64 forward, equal to the manifest's heatmap cell."""
    _, manifest, config, weights = trained
    patching = manifest["measurements"]["patching"]
    experiment = patching["experiment"]
    clean, corrupt = torch.tensor(experiment["clean"]), torch.tensor(experiment["corrupt"])
    target, rival, position = experiment["target"], experiment["rival"], experiment["first_occurrence_next"]
    assert position == len(clean) // 2  # P - 1 for a sequence of 2P - 1 tokens
    metric = lambda logits: float(logits[-1, target] - logits[-1, rival])  # noqa: E731
    clean_logits, _, clean_states = forward64(weights, config, clean)
    corrupt_logits, _, _ = forward64(weights, config, corrupt)
    patched_logits, _, _ = forward64(weights, config, corrupt, ("block1_input", position, clean_states["block1_input"][position]))
    recovery = (metric(patched_logits) - metric(corrupt_logits)) / (metric(clean_logits) - metric(corrupt_logits))
    row = patching["rows"].index("block 1 input (block 0 output)")
    assert patching["recovery"][row][position] == pytest.approx(recovery, abs=1e-3)
    assert patching["clean_metric"] == pytest.approx(metric(clean_logits), abs=1e-3)


def test_training_is_deterministic_from_its_seed():
    from residlab.course.models.induction.recipe import train_induction_model

    first, second = (train_induction_model(seed=3, steps=4).state_dict() for _ in range(2))
    assert all(torch.equal(first[name], second[name]) for name in first)
    other = train_induction_model(seed=4, steps=4).state_dict()
    assert not all(torch.equal(first[name], other[name]) for name in first)


def _non_empty(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine", encoding="utf-8")
    return tmp_path / "taken", "is not empty"


def _a_file(tmp_path):
    (tmp_path / "taken").write_text("mine", encoding="utf-8")
    return tmp_path / "taken", "exists and is not a directory"


def _under_a_file(tmp_path):
    (tmp_path / "taken").write_text("mine", encoding="utf-8")
    return tmp_path / "taken" / "model", "is not a directory"


@pytest.mark.parametrize("occupy", [_non_empty, _a_file, _under_a_file])
def test_train_refuses_an_unusable_output_in_one_line_before_training(tmp_path, capsys, occupy, monkeypatch):
    from residlab.course.models.induction import induction_lab

    monkeypatch.setattr(induction_lab, "train_and_measure", lambda *a: pytest.fail("trained despite the refusal"))
    output, reason = occupy(tmp_path)
    before = {path: path.read_bytes() if path.is_file() else None for path in tmp_path.rglob("*")}
    assert residlab_main(["induction", "train", "--output", str(output)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("residlab induction: ") and reason in error
    assert {path: path.read_bytes() if path.is_file() else None for path in tmp_path.rglob("*")} == before


@pytest.mark.parametrize("seed, reason", [(str(2**64), "is outside 0 to 2**64 - 1"), ("-1", "is outside 0 to 2**64 - 1"),
                                          ("seven", "is not an integer")])  # fmt: skip
def test_train_refuses_a_seed_torch_cannot_take_as_the_audit_does(tmp_path, capsys, seed, reason, monkeypatch):
    from residlab.course.models.induction import induction_lab

    monkeypatch.setattr(induction_lab, "train_and_measure", lambda *a: pytest.fail("trained despite the refusal"))
    with pytest.raises(SystemExit) as stopped:
        residlab_main(["induction", "train", "--output", str(tmp_path / "model"), "--seed", seed])
    assert stopped.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert (f"argument --seed: {seed!r} " if seed == "seven" else f"argument --seed: {seed} ") in error
    assert reason in error and not (tmp_path / "model").exists()
