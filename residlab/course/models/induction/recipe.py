"""The induction model's recipe: its configuration, its data, its training, and the directory it is saved as.

The model is Transformers' own ``GPTNeoXForCausalLM`` (Pythia's class), two sequential pre-LN blocks with rotary
attention and a GELU MLP, over a vocabulary of ``VOCAB_SIZE`` abstract tokens (ids with no meaning). It is trained
on sequences whose second half repeats the first: ``P`` distinct tokens drawn at random, then the same ``P`` again.
The period ``P`` is drawn afresh for every batch from ``PERIODS``, so the distance between a token and its repeat,
and the position where the repeat starts, change from batch to batch: no head can predict the repeat by reading a
fixed offset back, and the only rule that works for every period is induction (find the earlier occurrence of the
current token, copy the token that followed it). The tokens of a half are distinct, so that rule has exactly one
answer; they are fresh for every sequence, so no token or pair of tokens carries information across sequences.

The loss is the cross-entropy of the predictions the rule can make: every token of the second half but its first
(at position ``t`` of the repeat the model sees the token at ``t - P`` already followed once, at ``t - P + 1``).
The first half is not trained on: its tokens are unpredictable by construction.

Training stops early, at a measured criterion: once each of the last ``STOP_WINDOW`` batches, scored before the
update it drives (so on sequences the model has never been trained on), had a top-1 accuracy of at least
``STOP_ACCURACY`` on those predictions; at the latest after ``TRAINING_STEPS`` steps. Induction forms abruptly
(seed 0: repeat accuracy 0.3 at step 150, 0.97 at step 200), and the steps after it only sharpen what already
works, so the criterion cuts the training to the steps that form the mechanism.

Determinism: on the CPU, one thread, ``torch.manual_seed(seed)`` fixes the initial weights (Transformers' own
initialisation, in the model's creation order) and a ``torch.Generator`` seeded from ``seed`` draws every batch;
the same seed and the same library versions give the same weights bit for bit.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from residlab.course.models.threads import single_thread
from residlab.capture.versions import import_transformers_quietly

VOCAB_SIZE = 32
PERIODS = tuple(range(4, 13))  # P, the tokens of each half: the distance from a token to its repeat
TRAINING_SEED = 0
TRAINING_STEPS = 400  # at most; the stop criterion ends it earlier (seeds 0 to 2: after 224 to 279 steps)
STOP_ACCURACY = 0.98
STOP_WINDOW = 10  # batches in a row, 64 sequences of every period between them
BATCH_SIZE = 64
LEARNING_RATE = 3e-3
WARMUP_STEPS = 50
WEIGHT_DECAY = 0.01
LOGGED_EVERY = 50

# transformers' GPTNeoXConfig values: Pythia's block with sequential residuals (attention, then the MLP reading
# what attention wrote) so a depth trajectory has a state between the two writes of each block. Rotary on every
# coordinate of a head, with base 100 rather than Pythia's 10000: over 24 positions its 8 frequencies then span
# fast to slow turns, so one head can single out the previous position and another match tokens at any distance
# (with base 10000 the same training stalled near 0.25 accuracy on the repeat for 600 steps).
MODEL_CONFIG = {
    "model_type": "gpt_neox", "vocab_size": VOCAB_SIZE, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 2 * max(PERIODS),
    "rotary_pct": 1.0, "rotary_emb_base": 100, "use_parallel_residual": False, "layer_norm_eps": 1e-5,
    "hidden_act": "gelu", "attention_bias": True, "attention_dropout": 0.0, "hidden_dropout": 0.0,
    "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 0, "initializer_range": 0.02,
}  # fmt: skip
SAVED_MODEL_FILES = ("config.json", "model.safetensors")  # what the saved directory holds, nothing else


def recipe() -> dict:
    """Everything the training depends on besides the seed and the library versions, as the manifest states it."""
    return {
        "model_class": "GPTNeoXForCausalLM",
        "config": dict(MODEL_CONFIG),
        "data": {"vocabulary": VOCAB_SIZE, "periods": [min(PERIODS), max(PERIODS)],
                 "sequence": "P distinct tokens drawn uniformly at random, then the same P tokens again; P drawn "
                             "uniformly from the periods for every batch"},  # fmt: skip
        "loss": "cross-entropy of every prediction of the second half but its first (positions P to 2P-2)",
        "training": {"max_steps": TRAINING_STEPS, "batch": BATCH_SIZE, "optimizer": "AdamW",
                     "stop": f"after the first step at which each of the last {STOP_WINDOW} batches, scored before "
                             f"its own update, had a top-1 accuracy of at least {STOP_ACCURACY} on the predictions "
                             "the loss covers",
                     "learning_rate": LEARNING_RATE, "warmup_steps": WARMUP_STEPS, "weight_decay": WEIGHT_DECAY,
                     "threads": 1, "device": "cpu", "dtype": "float32"},  # fmt: skip
        "code": "residlab.course.models.induction.recipe.train_induction_model",
    }


def induction_config():
    """A fresh ``GPTNeoXConfig`` of the recipe, with eager attention (the attention weights are read)."""
    transformers = import_transformers_quietly()
    values = {key: value for key, value in MODEL_CONFIG.items() if key != "model_type"}
    config = transformers.GPTNeoXConfig(**values)
    config._attn_implementation = "eager"
    return config


def build_model():
    """A model of the recipe with Transformers' initialisation from the global generator as it stands."""
    transformers = import_transformers_quietly()
    return transformers.GPTNeoXForCausalLM(induction_config()).to(torch.float32)


def new_model(seed: int):
    """The untrained model: Transformers' initialisation after ``torch.manual_seed(seed)``."""
    torch.manual_seed(seed)
    return build_model()


def repeated_sequences(generator: torch.Generator, count: int, period: int) -> torch.Tensor:
    """(count, 2 * period) long: each row ``period`` distinct tokens drawn at random, then the same tokens again."""
    first_half = torch.rand(count, VOCAB_SIZE, generator=generator).argsort(dim=-1)[:, :period]
    return torch.cat([first_half, first_half], dim=1)


def repeat_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the predictions made at positions P .. 2P-2 (of the tokens at P+1 .. 2P-1)."""
    period = tokens.shape[1] // 2
    predicted = logits[:, period:-1]
    return F.cross_entropy(predicted.reshape(-1, predicted.shape[-1]), tokens[:, period + 1 :].reshape(-1))


def repeat_accuracy(logits: torch.Tensor, tokens: torch.Tensor) -> float:
    """Top-1 accuracy of the predictions ``repeat_loss`` covers."""
    period = tokens.shape[1] // 2
    return (logits[:, period:-1].argmax(-1) == tokens[:, period + 1 :]).float().mean().item()


def train_induction_model(seed: int = TRAINING_SEED, steps: int = TRAINING_STEPS, log: list | None = None,
                          stop_early: bool = True):  # fmt: skip
    """Train the recipe's model for at most ``steps`` steps, ending at the stop criterion unless ``stop_early`` is
    False; append (step, loss, batch accuracy) every ``LOGGED_EVERY`` steps and at the last to ``log``. Returns
    the model in eval mode."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    accuracies: list[float] = []  # each batch's, scored before its update
    with single_thread():
        model = new_model(seed)
        generator = torch.Generator().manual_seed(seed)
        optimiser = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: min(1.0, (step + 1) / WARMUP_STEPS))
        model.train()
        for step in range(1, steps + 1):
            period = PERIODS[int(torch.randint(len(PERIODS), (1,), generator=generator))]
            tokens = repeated_sequences(generator, BATCH_SIZE, period)
            logits = model(input_ids=tokens, use_cache=False).logits
            loss = repeat_loss(logits, tokens)
            accuracies.append(repeat_accuracy(logits.detach(), tokens))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            warmup.step()
            done = stop_early and len(accuracies) >= STOP_WINDOW and min(accuracies[-STOP_WINDOW:]) >= STOP_ACCURACY
            if log is not None and (step % LOGGED_EVERY == 0 or step == steps or done):
                log.append((step, loss.item(), accuracies[-1]))
            if done:
                break
    return model.eval()


def saved_model_files(model) -> dict[str, bytes]:
    """The model as a directory Transformers (and ``residlab audit --model``) loads: config.json and
    model.safetensors, as ``save_pretrained`` writes them, and nothing else."""
    logging = import_transformers_quietly().utils.logging
    bars = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()  # save_pretrained's "Writing model shards" bar: a page prints no such line
    try:
        with tempfile.TemporaryDirectory(prefix="residlab-induction-") as scratch:
            model.save_pretrained(scratch, safe_serialization=True)
            files = {name: (Path(scratch) / name).read_bytes() for name in SAVED_MODEL_FILES}
    finally:
        if bars:
            logging.enable_progress_bar()
    config = json.loads(files["config.json"])
    if config.get("architectures") != ["GPTNeoXForCausalLM"]:
        raise RuntimeError(f"save_pretrained wrote architectures {config.get('architectures')}")
    return files


def load_induction_model(directory: Path):
    """The saved model from its directory alone (offline, safetensors, eager attention, float32, eval mode)."""
    transformers = import_transformers_quietly()
    shown = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # a few tensors: no "Loading weights" bar in a runner's output
    try:
        model = transformers.GPTNeoXForCausalLM.from_pretrained(
            str(directory), local_files_only=True, use_safetensors=True, attn_implementation="eager",
            dtype=torch.float32,
        )  # fmt: skip
    finally:
        if shown:
            transformers.utils.logging.enable_progress_bar()
    return model.eval()
