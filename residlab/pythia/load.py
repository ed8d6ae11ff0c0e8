"""Load the specimen offline from the bytes verification hashed: the model, the tokenizer, and the one error
type of the observation.

``load_offline(verified)`` builds the built-in ``GPTNeoXForCausalLM`` and a fast tokenizer from the in-memory
bytes of ``VerifiedArtifacts`` (never re-read by path): no network, safetensors only, no remote code, eager
attention, float32, eval mode, CPU. Every file it reads is pinned by a sha256 in the lock
(``artifacts.OBSERVE_READS``); a file changed since verification is refused. Checkpoint tensors are matched to
the model's own parameters under the names packets record (``capture.blocks.canonical_path``: the untied head
is ``embed_out`` in the checkpoint and in transformers 4.x, ``lm_head`` in 5.x).

torch, transformers, tokenizers and safetensors are imported inside the functions that need them, so the
runner's ``--plan`` works before anything is installed.
"""

from __future__ import annotations

import json

from residlab.capture.blocks import canonical_path
from residlab.capture.versions import import_transformers_quietly
from residlab.pythia.artifacts import OBSERVE_READS, ArtifactError, VerifiedArtifacts


class ObservationError(RuntimeError):
    """The observation cannot run or its checks failed; the message names the problem."""


def _json_object(artifacts: VerifiedArtifacts, name: str) -> dict:
    try:
        value = json.loads(artifacts.bytes_for(name))
    except (ValueError, UnicodeDecodeError) as error:
        raise ObservationError(f"{name}: verified against the lock but not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise ObservationError(f"{name}: verified against the lock but not a JSON object")
    return value


def _special_token(value):
    """A special token as tokenizer_config.json / special_tokens_map.json store it: a string or an object."""
    return value.get("content") if isinstance(value, dict) else value


def _tokenizer_from_bytes(artifacts: VerifiedArtifacts):
    """The fast tokenizer built from the verified tokenizer.json text and the special tokens and decoding
    settings of tokenizer_config.json and special_tokens_map.json (read from the verified bytes, not by path)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    try:
        backend = Tokenizer.from_str(artifacts.bytes_for("tokenizer.json").decode("utf-8"))
    except Exception as error:  # noqa: BLE001 - tokenizers raises its own exception type
        raise ObservationError(f"tokenizer.json: verified against the lock but not a tokenizer ({error})") from None
    settings = _json_object(artifacts, "tokenizer_config.json")
    special = {**settings, **_json_object(artifacts, "special_tokens_map.json")}
    options = {key: _special_token(special[key]) for key in ("bos_token", "eos_token", "unk_token", "pad_token") if special.get(key)}
    for key in ("clean_up_tokenization_spaces", "model_max_length"):
        if key in settings:
            options[key] = settings[key]
    return PreTrainedTokenizerFast(tokenizer_object=backend, **options)


def under_own_names(stored: dict, own_names) -> dict:
    """Checkpoint tensors keyed by the model's own parameter names: a name the model lacks is taken under the
    name packets record (the checkpoint's ``embed_out`` is ``lm_head`` in transformers 5.x)."""
    return {(name if name in own_names else canonical_path(name)): tensor for name, tensor in stored.items()}


def _checkpoint_state(artifacts: VerifiedArtifacts, model) -> dict:
    """The weights from the verified bytes, under the model's own parameter names, exactly its tensors."""
    from safetensors.torch import load

    try:
        stored = load(artifacts.bytes_for("model.safetensors"))
    except Exception as error:  # noqa: BLE001 - safetensors raises its own exception type
        raise ObservationError(f"model.safetensors: verified against the lock but unreadable ({error})") from None
    own = model.state_dict()
    state = under_own_names(stored, own)
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise ObservationError(
            f"model.safetensors: its tensors do not match GPTNeoXForCausalLM (missing: {', '.join(missing) or 'none'}; "
            f"unexpected: {', '.join(unexpected) or 'none'})"
        )
    wrong = [name for name in own if tuple(state[name].shape) != tuple(own[name].shape)]
    if wrong:
        raise ObservationError(f"model.safetensors: tensors of the wrong shape: {', '.join(wrong)}")
    return state


def load_offline(artifacts: VerifiedArtifacts):
    """The built-in GPTNeoXForCausalLM and a fast tokenizer, built from the bytes verification hashed (never
    re-read by path; a file changed since is refused): no network, safetensors only, no remote code, eager
    attention, float32 (the file stores F16, widened exactly), eval mode, CPU. generation_config.json is not
    read: it only configures text generation, which the observation never does."""
    try:
        import torch
        from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    except ImportError as error:
        raise ObservationError(
            f"{error.name} is not installed: install the pinned requirements (residual-requirements.txt) first"
        ) from None
    try:
        for name in OBSERVE_READS:
            artifacts.bytes_for(name)  # every file it needs is pinned and unchanged, before any work
        config_values = _json_object(artifacts, "config.json")
        if config_values.get("model_type") != "gpt_neox":
            raise ObservationError(f"config.json: model_type {config_values.get('model_type')!r}, not 'gpt_neox'")
        config = GPTNeoXConfig.from_dict(config_values, attn_implementation="eager")
        model = GPTNeoXForCausalLM(config).to(device="cpu", dtype=torch.float32)
        model.load_state_dict(_checkpoint_state(artifacts, model), strict=True)
        tokenizer = _tokenizer_from_bytes(artifacts)
    except ArtifactError as error:
        raise ObservationError(str(error)) from None
    model = model.eval()
    model.config.use_cache = False
    if not tokenizer.is_fast:
        raise ObservationError("tokenizer.json: the tokenizer built is not a fast tokenizer")
    dtypes = sorted({str(p.dtype) for p in model.parameters()})
    if dtypes != ["torch.float32"]:
        raise ObservationError(f"the model computes in {dtypes}, not float32")
    if model.config._attn_implementation != "eager":
        raise ObservationError(f"attention implementation is {model.config._attn_implementation}, not eager")
    return model, tokenizer
