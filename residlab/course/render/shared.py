"""What several pages show, or what one page waits long for, computed once per render and prefetched.

Pages call these through the front door (``from residlab.course import trained_copy_model``); each wraps the
function that computes the value (the one a runner bundles, which never caches) in ``render_cached``, so during a
``residlab site render`` the first caller computes and the others read (``residlab/course/render/render_cache.py``).
Outside a render every call computes, once per process where the computing function says so.

``PREFETCH`` lists them in the order the site's pages first need them. On a fresh render ``residlab site render``
runs ``python -m residlab.course.render.shared`` in the project root beside Quarto: it computes each in turn (writing
the cache entries a page would write, and its progress in ``prefetch.json``) while Quarto renders the pages
before, so the kernels of later pages read instead of computing. A failure is recorded and printed, the rest
are still computed, and the prefetch exits with status 1: the pages compute that value themselves, and the render
fails on the status.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from residlab.course.render.render_cache import (
    PREFETCH_STATUS,
    render_cache_directory,
    render_cached,
    render_source_digest,
    write_atomically,
)

RUNNER_TIMEOUT_SECONDS = 600
# The prefetch runs on what Quarto leaves idle (a render is one page at a time): below the pages' priority, so it
# never slows the page that is executing.
PREFETCH_NICENESS = 10


# ---- Lesson 2.1's copy model and gradient profile (lesson, Lab 04, the glossary) ------------------------------


def copy_model_training():
    """(trained copy model, training log): ``copy_model.train_copy_model`` with the lesson's configuration."""
    from residlab.course.lesson import copy_model

    def rebuild(stored):  # the trained weights into a fresh CopyModel: equal bit for bit
        state, log = stored
        model = copy_model.CopyModel()
        model.load_state_dict(state, strict=True)
        return model.eval(), log

    arguments = (copy_model.TRAINING_STEPS, copy_model.TRAINING_SEED, copy_model.LEARNING_RATE, copy_model.BATCH_SIZE)
    return render_cached("copy_model_training", arguments, copy_model.default_training,
                         encode=lambda trained: (trained[0].state_dict(), trained[1]), decode=rebuild)  # fmt: skip


def trained_copy_model():
    """The lesson's copy model (700 steps, seed 7), trained once per render."""
    return copy_model_training()[0]


def training_log():
    """The logged steps of that training."""
    return copy_model_training()[1]


def gradient_profile():
    """The pre-LN/post-LN gradient profile at its defaults (``gradient_profile.gradient_profile()``)."""
    from residlab.course.lesson import gradient_profile as profile

    arguments = (profile.PROFILE_SEEDS, profile.PROFILE_DEPTH, profile.PROFILE_WIDTH)
    return render_cached("gradient_profile", arguments, profile.gradient_profile)


# ---- the synthetic GPT-NeoX specimen (the glossary) ---------------------------------------------------------


def specimen_model(seed: int = 0):
    """``pythia.specimen.build_specimen_model(seed)``; later pages of a render load its weights into a fresh model
    of the same configuration, equal bit for bit."""
    from residlab.pythia.load import import_transformers_quietly
    from residlab.pythia.specimen import _model_config, build_specimen_model

    transformers = import_transformers_quietly()  # before building or rebuilding: no tqdm notice in a kernel

    def rebuild(state: dict):
        import torch

        model = transformers.GPTNeoXForCausalLM(_model_config()).to(torch.float32)
        model.load_state_dict(state, strict=True)
        return model.eval()

    return render_cached("specimen_model", (seed,), lambda: build_specimen_model(seed),
                         encode=lambda model: model.state_dict(), decode=rebuild)  # fmt: skip


def specimen_cache_layouts(text: str | None = None, seed: int = 0):
    """``cache_layouts.specimen_cache_layouts(text, seed)``: tensors only, so a page that reads it imports no
    transformers."""
    from residlab.course.glossary import cache_layouts

    text = cache_layouts.EXAMPLE_PROMPT if text is None else text
    return render_cached("specimen_cache_layouts", (text, seed),
                         lambda: cache_layouts.specimen_cache_layouts(text, seed, model=specimen_model(seed)))  # fmt: skip


# ---- Lab 04, Lab 05 and Lab 06 -----------------------------------------------------------------------------


def runner_output(runner: Path) -> str:
    """The standard output of a downloadable runner run alone by this Python (a separate process, no arguments,
    at most ``RUNNER_TIMEOUT_SECONDS``); once per render for the same runner bytes."""
    runner = Path(runner)
    digest = hashlib.sha256(runner.read_bytes()).hexdigest()

    def run() -> str:
        completed = subprocess.run([sys.executable, str(runner)], capture_output=True, text=True,
                                   timeout=RUNNER_TIMEOUT_SECONDS, check=True)  # fmt: skip
        return completed.stdout

    return render_cached("runner_output", (runner.name, digest), run)


def capture_explorer_data(capture) -> dict:
    """``explorer_data.explorer_data`` of a capture the page shows; cached for the committed synthetic capture
    (its manifest pins the other two files' digests, which ``read_capture`` checked), computed for a fresh one."""
    from residlab.course.lab05_observation import explorer_data

    def compute() -> dict:
        return explorer_data.explorer_data(capture, *explorer_data.lens_model(capture))

    if capture.fresh:
        return compute()
    manifest = hashlib.sha256(json.dumps(capture.manifest, sort_keys=True).encode()).hexdigest()
    return render_cached("capture_explorer_data", (manifest,), compute)


def page_explorer(capture, script_src: str) -> str:
    """For a page cell with ``output: asis``: the explorer of the capture the page shows."""
    from residlab.course.lab05_observation.explorer_data import explorer_html

    return explorer_html(capture_explorer_data(capture), script_src)


def audited_decoder():
    """Lab 06's audit, verification and two tampered packets (``decoder_audit.run_decoder_audit``)."""
    from residlab.course.lab06_audit import decoder_audit as lab06

    return render_cached("decoder_audit", (), lab06.run_decoder_audit)


# ---- the prefetch --------------------------------------------------------------------------------------------


def _cached_capture_explorer() -> None:
    from residlab.course.lab05_observation.capture_page import ARTIFACTS_ENV, page_capture

    if not os.environ.get(ARTIFACTS_ENV):  # a fresh capture of real files is the page's own work
        capture_explorer_data(page_capture())


# (cache name, what computes it): the order of the pages that first read each (Quarto renders glossary/, then
# the top-level pages, labs/ and lessons/); paths are relative to the project root, the prefetch's directory.
# Not the specimen model: the first page to render (the activation cache) needs it as soon as the prefetch could
# have it, so it builds it itself, and the pages after it (and specimen_cache_layouts here) read it.
PREFETCH = (
    ("copy_model_training", copy_model_training),
    ("specimen_cache_layouts", specimen_cache_layouts),
    ("gradient_profile", gradient_profile),
    ("runner_output", lambda: runner_output(Path("assets/labs/read_transformer_paper.py"))),
    ("capture_explorer_data", _cached_capture_explorer),
    ("decoder_audit", audited_decoder),
)


def prefetch(plan=PREFETCH, parent: int | None = None) -> int:
    """Compute every value of ``plan`` into this render's cache, recording progress; 0 when all succeeded.
    Stops early (status 0) if ``parent``, the render that started it, is gone."""
    folder = render_cache_directory()
    if folder is None:
        print("residlab prefetch: no render cache (RESIDLAB_RENDER_CACHE is not set): nothing to do", file=sys.stderr)
        return 0
    status = {"pid": os.getpid(), "source": render_source_digest(), "planned": [name for name, _ in plan],
              "finished": [], "failed": {}, "seconds": {}, "exited": False}  # fmt: skip

    def record() -> None:
        write_atomically(folder / PREFETCH_STATUS, json.dumps(status, indent=1).encode())

    record()
    try:
        for name, compute in plan:
            if parent is not None and os.getppid() != parent:
                break
            start = time.perf_counter()
            try:
                compute()
            except Exception as error:  # recorded and reported: the page computes the value itself
                status["failed"][name] = f"{type(error).__name__}: {error}"
                print(f"residlab prefetch: {name} failed: {type(error).__name__}: {error}", file=sys.stderr)
            else:
                status["finished"].append(name)
            status["seconds"][name] = round(time.perf_counter() - start, 3)
            record()
    finally:
        status["exited"] = True
        record()
    return 1 if status["failed"] else 0


if __name__ == "__main__":
    os.nice(PREFETCH_NICENESS)
    sys.exit(prefetch(parent=os.getppid()))
