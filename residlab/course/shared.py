"""What several pages show, or what one page waits long for, computed once per render and prefetched.

Pages call these through the front door (``from residlab.course import trained_copy_model``); each is declared
with ``@shared_value``, which wraps the function that computes the value (the one a runner bundles, which never
caches) in ``render_cached`` under the declared function's own name, so during a Quarto render the first caller
computes and the others read (``residlab/render/render_cache.py``). Outside a render every call computes,
once per process where the computing function says so.

``PREFETCH`` lists them in the order the site's pages first need them. On a whole-site render in which every page
executes, the freeze guard (Quarto's pre-render step) starts ``python -m residlab.course.shared`` in the
background: Quarto executes one page at a time, so a second core is mostly idle, and the prefetch computes each
value there, through the same cache, while Quarto renders the pages before. It ends when it
has computed them all or when the render that started it is gone; a value it failed to compute is computed by the
page that asks for it (its output is in the cache folder's ``prefetch.log``).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from residlab.course.glossary.cache_layouts import EXAMPLE_PROMPT  # no torch: the page's prompt, the default key
from residlab.render.render_cache import RENDER_CACHE_DIR, render_cache_directory, render_cached

# The prefetch runs at the pages' own priority, not below it: pages wait on its values (the activation-patching entry,
# the fourth page to render, reads Lab 07's report), so beside other work (CI's other suites) a lowered priority made
# the render wait on it.
PREFETCH_LOG = "prefetch.log"


def shared_value(encode=lambda value: value, decode=lambda stored: stored):
    """Declare a value pages share: calls with the same arguments compute once per render, cached under the
    function's name (``render_cached``); ``encode``/``decode`` as there."""

    def declare(compute):
        signature = inspect.signature(compute)

        @functools.wraps(compute)
        def cached(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()  # one key however the arguments are spelled
            return render_cached(compute.__name__, tuple(bound.arguments.values()),
                                 lambda: compute(*bound.args, **bound.kwargs), encode, decode)  # fmt: skip

        return cached

    return declare


# ---- Lesson 2.1's copy model and gradient profile (lesson, Lab 04, the glossary) ------------------------------


def _rebuild_copy_model(stored):
    """The stored weights into a fresh CopyModel, equal bit for bit, and the training log."""
    from residlab.course.models.copy_model import CopyModel

    state, log = stored
    model = CopyModel()
    model.load_state_dict(state, strict=True)
    return model.eval(), log


@shared_value(encode=lambda trained: (trained[0].state_dict(), trained[1]), decode=_rebuild_copy_model)
def copy_model_training():
    """(trained copy model, training log): ``copy_model.default_training`` (700 steps, seed 7, one thread)."""
    from residlab.course.models import copy_model

    return copy_model.default_training()


def trained_copy_model():
    """The lesson's copy model (700 steps, seed 7), trained once per render."""
    return copy_model_training()[0]


def training_log():
    """The logged steps of that training."""
    return copy_model_training()[1]


@shared_value()
def gradient_profile():
    """The pre-LN/post-LN gradient profile at its defaults (``gradient_profile.gradient_profile()``)."""
    from residlab.course.models import gradient_profile as profile

    return profile.gradient_profile()


# ---- the synthetic GPT-NeoX specimen (the glossary) ---------------------------------------------------------


def _rebuild_specimen(state: dict):
    """The stored weights into a fresh model of the specimen's configuration, equal bit for bit."""
    import torch

    from residlab.capture.versions import import_transformers_quietly
    from residlab.pythia.specimen import _model_config

    transformers = import_transformers_quietly()  # before building: no tqdm notice in a kernel
    model = transformers.GPTNeoXForCausalLM(_model_config()).to(torch.float32)
    model.load_state_dict(state, strict=True)
    return model.eval()


@shared_value(encode=lambda model: model.state_dict(), decode=_rebuild_specimen)
def specimen_model(seed: int = 0):
    """``pythia.specimen.build_specimen_model(seed)``: the synthetic specimen, built once per render."""
    from residlab.capture.versions import import_transformers_quietly
    from residlab.pythia.specimen import build_specimen_model

    import_transformers_quietly()  # before building: no tqdm notice in a kernel
    return build_specimen_model(seed)


@shared_value()
def specimen_cache_layouts(text: str = EXAMPLE_PROMPT, seed: int = 0):
    """``cache_layouts.specimen_cache_layouts(text, seed)``: tensors only, so a page that reads it imports no
    transformers."""
    from residlab.course.glossary import cache_layouts

    return cache_layouts.specimen_cache_layouts(text, seed, model=specimen_model(seed))


# ---- Lab 06 -------------------------------------------------------------------------------------------------


@shared_value()
def audited_decoder():
    """Lab 06's audit, verification and two tampered packets (``decoder_audit.run_decoder_audit``): plain data, so
    the page imports no torch once the prefetch has computed it."""
    from residlab.course.lab06 import decoder_audit as lab06

    return lab06.run_decoder_audit()


@shared_value()
def scaled_audit():
    """Lab 06 Part 5's audit of the specimen again with most blocks on disk and in bfloat16
    (``scale_audit.run_scale_audit``): plain data, computed by the prefetch before the page asks."""
    from residlab.course.lab06 import scale_audit

    return scale_audit.run_scale_audit()


@shared_value()
def induction_training():
    """``induction_lab.InductionResults``: the induction model trained and measured
    (``induction_lab.train_and_measure``), Lab 06 Part 2's audit of it (``induction_audit.audit_induction_model``)
    and the model's directory files; no model, so a page reading it imports no Transformers."""
    from residlab.course.lab06 import induction_audit
    from residlab.course.models.induction import induction_lab, recipe

    run = induction_lab.train_and_measure()
    return induction_lab.InductionResults(run.report, induction_audit.audit_induction_model(run.model),
                                          recipe.saved_model_files(run.model))  # fmt: skip


# ---- Lab 07 -------------------------------------------------------------------------------------------------


@shared_value()
def patching_report():
    """Lab 07's report (``lab07.lab.run_lab``) on the induction model this render trained, the one the glossary and
    Lab 06 show (``induction_training``), loaded from its directory's files as a learner's runner loads it."""
    from residlab.course.lab07.lab import run_lab
    from residlab.course.models.induction.recipe import load_induction_model

    with tempfile.TemporaryDirectory(prefix="residlab-lab07-") as scratch:
        for name, data in induction_training().model_files.items():
            (Path(scratch) / name).write_bytes(data)
        model = load_induction_model(Path(scratch))
    return run_lab(model)


# ---- the prefetch --------------------------------------------------------------------------------------------

# In the order of the pages that first read each (Quarto renders glossary/, then the top-level pages, labs/ and
# lessons/). Not the specimen model itself: the first page to render (the activation cache) needs it as soon as the
# prefetch could have it, so it builds it, and the pages after it (and specimen_cache_layouts here) read it.
PREFETCH = (induction_training, patching_report, copy_model_training, specimen_cache_layouts, gradient_profile,
            audited_decoder, scaled_audit)  # patching_report: the glossary's activation-patching entry reads it (Lab 07's report)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def prefetch(plan=PREFETCH, render: int | None = None) -> int:
    """Compute every value of ``plan`` into this render's cache; 0 when all succeeded. Stops early (status 0) when
    ``render``, the process id of the render that started it, is gone."""
    if render_cache_directory() is None:
        print(f"residlab prefetch: not in a Quarto render of a project (no {RENDER_CACHE_DIR}): nothing to do",
              file=sys.stderr)  # fmt: skip
        return 0
    print(f"residlab prefetch: process {os.getpid()}, {len(plan)} values", file=sys.stderr, flush=True)
    failed = 0
    for compute in plan:
        if render is not None and not _alive(render):
            break
        try:
            compute()
        except Exception as error:  # the page that asks for it computes it, and shows its error
            failed += 1
            print(f"residlab prefetch: {compute.__name__} failed: {type(error).__name__}: {error}", file=sys.stderr)
    return 1 if failed else 0


PREFETCH_COMMAND = ("-m", "residlab.course.shared")


def start_prefetch(root: Path, render: int) -> subprocess.Popen:
    """``python -m residlab.course.shared --render PID`` in the project root, in the background, its output
    in the render cache's ``prefetch.log``; it outlives the freeze guard that starts it, not the render."""
    folder = Path(root) / RENDER_CACHE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ, QUARTO_PROJECT_ROOT=str(Path(root).resolve()))  # as Quarto sets it for the pages
    with open(folder / PREFETCH_LOG, "wb") as log:  # the child holds its own descriptor
        return subprocess.Popen([sys.executable, *PREFETCH_COMMAND, "--render", str(render)], cwd=root, env=environment,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m residlab.course.shared", description=prefetch.__doc__)
    parser.add_argument("--render", type=int, help="the process id of the render; stop when it is gone")
    sys.exit(prefetch(render=parser.parse_args().render))
