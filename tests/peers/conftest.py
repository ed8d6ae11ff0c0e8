"""The peer suite's fixtures: the synthetic specimen as a model directory and as the model loaded from it, the
fixed sentence's ids, and Lesson 2.1's trained copy model with its clean tokens; ``run_snippet``, which executes
one of the pages' snippets (``assets/peers/``) with the names its box says it is given, is in
``snippet_runner``. Runs only in ``.venv-peers`` (``make test-peers``)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    torch.set_num_threads(1)  # deterministic reductions, and the suite shares a 2-core runner


@pytest.fixture
def specimen_model():
    """A fresh specimen model for each test: a peer's wrapper may leave state on the model it wraps."""
    from residlab.pythia.specimen import build_specimen_model

    return build_specimen_model(seed=0)


@pytest.fixture(scope="session")
def trained_copy_model():
    """Lesson 2.1's copy model, trained once for the suite (its default training); snippets work on copies."""
    from residlab.course.models import copy_model

    return copy_model.default_training()[0]


@pytest.fixture(scope="session")
def lesson_tokens():
    from residlab.course.models import lesson_lab

    return torch.tensor([lesson_lab.CLEAN_TOKENS])


@pytest.fixture(scope="session")
def fixed_sentence_ids():
    from tokenizers import Tokenizer

    from residlab.pythia import observe
    from residlab.pythia.specimen import TOKENIZER_SOURCE

    return torch.tensor([Tokenizer.from_file(str(TOKENIZER_SOURCE)).encode(observe.FIXED_TEXT).ids])


def pytest_configure(config):
    import importlib.util

    missing = [name for name in ("transformer_lens", "nnsight") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.exit(f"tests/peers needs {' and '.join(missing)}: run it in .venv-peers (make test-peers)", returncode=4)
