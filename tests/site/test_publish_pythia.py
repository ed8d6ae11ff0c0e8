"""The publish workflow's Pythia steps, run here as Actions runs them, against a fake hub on 127.0.0.1 that serves
two stand-ins under a test lock (tests/standins.py: another repository and revision, the specimen of another
seed, and weights that make the norm fall with depth).

The steps come from .github/workflows/publish.yml itself: the cache restore (a miss here), ``make pythia`` with
the lock the test names, then the render, each stopping the job on failure. To keep this lean the render step
renders only a page that shows the model (one per stand-in), into a temporary folder (``residlab site render PAGE...``, what
``make render`` runs for the whole site), and the values no Pythia file enters come from the session's render
(``seed_render_cache``). The rendered pages must say the numbers were captured during this
render, name the test lock's repository and revision (never calling a stand-in Pythia-14M), and choose their
sentences to match each stand-in, checked here against a forward pass of its own. A hub failing mid-file must
stop the job at the fetch with one line naming the file, leaving ``_site/`` unbuilt.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from residlab.build import site

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PAGES_WITH_PYTHIA = ("labs/05-trace-residual-stream.qmd", "labs/06-audit-a-decoder.qmd")
VENV = Path(sys.executable).parent.parent


def build_steps() -> list[dict]:
    flow = yaml.safe_load((ROOT / ".github/workflows/publish.yml").read_text(encoding="utf-8"))
    steps = flow["jobs"]["build"]["steps"]
    first = next(index for index, step in enumerate(steps) if step.get("uses", "").startswith("actions/cache@"))
    last = next(index for index, step in enumerate(steps) if step.get("run") == "make render")
    return steps[first : last + 1]


# The shared values no Pythia file enters (``residlab.course.shared``): Lab 06 reads them beside its Pythia audit.
WITHOUT_PYTHIA = ("audited_decoder", "induction_training", "patching_report", "scaled_audit")


def seed_render_cache(rendered: Path, copy: Path) -> None:
    """Copy the session render's entries of WITHOUT_PYTHIA into ``copy``'s render cache, under the same key (the
    digest of the execution inputs, equal for a copy of the same sources), with the stamp that tells the freeze guard
    they are current: the stand-in's render then computes what depends on the stand-in, not the induction model's
    training and Lab 07's report again (what they are is the session render's tests' business)."""
    from residlab.build.freeze_guard import FREEZE_DIR, STAMP
    from residlab.render import render_cache

    digest = render_cache.execution_inputs_digest(copy)
    source = rendered / render_cache.RENDER_CACHE_DIR / digest[:16]
    assert source.is_dir(), f"the session's render used other execution inputs than {copy}"
    target = copy / render_cache.RENDER_CACHE_DIR / digest[:16]
    target.mkdir(parents=True)
    for name in WITHOUT_PYTHIA:
        entries = sorted(source.glob(f"{name}-*.pickle"))
        assert entries, f"the session's render computed no {name}"
        for entry in entries:
            shutil.copyfile(entry, target / entry.name)
    (copy / FREEZE_DIR).mkdir(exist_ok=True)
    (copy / FREEZE_DIR / STAMP).write_text(digest + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def project(tmp_path_factory, built_site) -> Path:
    """A clean copy of the project (as a fresh checkout has it) using this test's environment as its .venv, its
    render cache seeded with the session render's values no Pythia file enters (``seed_render_cache``)."""
    if not (os.environ.get("QUARTO") or shutil.which("quarto")):
        pytest.fail(site.QUARTO_MISSING, pytrace=False)
    copy = site.clean_copy(ROOT, tmp_path_factory.mktemp("publish") / "project")
    (copy / ".venv").symlink_to(VENV, target_is_directory=True)
    seed_render_cache(built_site.project, copy)
    # As a fresh shell runs it: under `make test` the outer make's MAKEFLAGS and MAKELEVEL would reach this one.
    fresh_shell = {key: value for key, value in os.environ.items() if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    planned = subprocess.run(["make", "-n", "pythia"], cwd=copy, env=fresh_shell, capture_output=True, text=True,
                             timeout=60)  # fmt: skip
    assert planned.stdout.splitlines() == [".venv/bin/residlab pythia fetch --cache"], (
        "make would rebuild the environment first: run `make venv`, then the tests", planned.stdout)
    return copy


def run_steps(project: Path, env: dict, output: Path, pages=PAGES_WITH_PYTHIA) -> list[tuple[str, subprocess.CompletedProcess | None]]:
    """The steps from the cache restore to the render, as Actions runs them on a push: each in bash -e, the job
    stopping at the first failure. The restore is a miss (a fresh runner: no folder to restore); the render renders
    ``pages`` only, into ``output``, with the step's own environment."""
    shutil.rmtree(project / ".residlab-pythia", ignore_errors=True)
    ran = []
    for step in build_steps():
        if "uses" in step:
            ran.append((step["name"], None))
            continue
        command = step["run"]
        step_env = {key: value.replace("${{ inputs.capture || 'fresh' }}", "fresh") for key, value in step.get("env", {}).items()}
        if command == "make render":
            command = f".venv/bin/residlab site render {' '.join(pages)} --output-dir {output}"
        completed = subprocess.run(["bash", "-e", "-c", command], cwd=project, env={**env, **step_env},
                                   capture_output=True, text=True, timeout=1500)  # fmt: skip
        ran.append((step["name"], completed))
        if completed.returncode != 0:
            break
    return ran


def hub_for(kind: str, tmp_path: Path):
    from fakehub import FakeHub
    from standins import standin

    files, lock = standin(kind)
    lock_path = tmp_path / f"standin-{kind}.lock.json"
    lock_path.write_text(json.dumps(lock, indent=2) + "\n", encoding="utf-8")
    return FakeHub(lock["repository"], lock["revision"], files), lock, lock_path


def environment(project: Path, hub, lock_path: Path) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env.update(HF_ENDPOINT=hub.endpoint, RESIDLAB_PYTHIA_LOCK=str(lock_path),
               RESIDLAB_PYTHIA_CACHE=str(project / ".residlab-pythia"))  # fmt: skip
    env.pop("RESIDLAB_PYTHIA_ARTIFACTS", None)
    return env


def page_text(path: Path) -> str:
    """The page's text, tags removed and entities decoded, whitespace collapsed (none before punctuation)."""
    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", path.read_text(encoding="utf-8"), flags=re.S)
    text = text.replace("<wbr>", "")  # an identifier's break opportunity (assets/site/reading.lua), not a space
    return re.sub(r"\s+([,.;:)])", r"\1", re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text))))


def reference_model(kind: str):
    """The stand-in's model built here from its tensors (float32, eager), for a forward pass of this test's own."""
    import torch
    from transformers import GPTNeoXForCausalLM

    from residlab.pythia.load import under_own_names
    from residlab.pythia.specimen import _model_config, specimen_tensors
    from standins import falling_tensors

    tensors = specimen_tensors(1) if kind == "seed1" else falling_tensors()
    model = GPTNeoXForCausalLM(_model_config()).to(torch.float32)
    model.load_state_dict(under_own_names({k: v.to(torch.float32) for k, v in tensors.items()}, set(model.state_dict())))
    return model.eval()


def expected_readings(kind: str) -> dict:
    """What the pages must say, from a plain forward pass: the norm's direction at the last token of the fixed
    sentence, and whether the model separates Lab 06's prompts."""
    import torch
    from tokenizers import Tokenizer

    from residlab.course import TOKENIZER_SOURCE, pythia_audit
    from residlab.pythia.observe import FIXED_TEXT

    model, tokenizer = reference_model(kind), Tokenizer.from_file(str(TOKENIZER_SOURCE))
    kept = {}
    hook = model.gpt_neox.layers[-1].register_forward_hook(lambda m, i, o: kept.update(out=o[0] if isinstance(o, tuple) else o))
    with torch.no_grad():
        ids = torch.tensor([tokenizer.encode(FIXED_TEXT).ids])
        first = model(ids, output_hidden_states=True).hidden_states[0][0, -1].norm().item()
        hook.remove()
        last = kept["out"][0, -1].norm().item()
        logits = {name: model(torch.tensor([tokenizer.encode(text).ids])).logits[0, -1]
                  for name, text in (("clean", pythia_audit.CLEAN), ("corrupt", pythia_audit.CORRUPT))}  # fmt: skip
    target, rival = tokenizer.encode(pythia_audit.TARGET).ids[0], tokenizer.encode(pythia_audit.RIVAL).ids[0]
    clean, corrupt = (float(logits[name][target] - logits[name][rival]) for name in ("clean", "corrupt"))
    direction = "rises" if last >= 1.05 * first else "falls" if last <= 0.95 * first else "neither rises nor falls"
    separates = clean - corrupt >= 1.0 and clean > 0 > corrupt
    return {"direction": direction, "separates": separates, "clean": clean, "corrupt": corrupt}


# Each stand-in renders one page, to keep the suite lean: the falling-norm one Lab 05 (whose sentences it was built
# to turn), the seed-1 specimen Lab 06 (the falling one's audit would read like the specimen's: a random-weight
# model that separates nothing).
@pytest.mark.parametrize("kind, pages", [("seed1", PAGES_WITH_PYTHIA[1:]), ("falling", PAGES_WITH_PYTHIA[:1])])
def test_a_stand_in_is_fetched_captured_and_audited_during_the_render_and_described_as_it_is(kind, pages, project, tmp_path):
    hub, lock, lock_path = hub_for(kind, tmp_path)
    output = tmp_path / "site"
    with hub:
        ran = run_steps(project, environment(project, hub, lock_path), output, pages)
    failed = [(name, done.stdout[-3000:] + done.stderr[-3000:]) for name, done in ran if done and done.returncode]
    assert failed == [] and len(ran) == len(build_steps()), failed
    expected = expected_readings(kind)
    lab05, lab06 = (page_text(output / Path(page).with_suffix(".html")) if page in pages else None for page in PAGES_WITH_PYTHIA)
    for text in filter(None, (lab05, lab06)):
        assert "during this render" in text and lock["repository"] in text and lock["revision"] in text
        assert lock_path.name in text  # the lock its numbers came from
        assert "Pythia-14M's numbers" not in text and "Pythia-14M, revision" not in text
        assert "Untrained baseline: one random-weight draw, not Pythia-14M" in text  # a random-weight stand-in is an untrained baseline
    if kind == "falling":  # built so: its norm falls, every update points against the state it lands on
        assert "The numbers below were captured during this render from verified files of" in lab05
        assert expected["direction"] == "falls" and "Its raw norm falls with depth" in lab05
        assert "the numbers favour the second explanation, writes against the state" in lab05
        assert "and its MLP write" in lab05  # its attention writes nothing
    if lab06 is None:
        return
    sentence = "The model separates the two prompts" if expected["separates"] else "The model does not separate the two prompts"
    measured = re.search(r"is ([+-]\d+\.\d+) after the clean prompt and ([+-]\d+\.\d+) after the corrupt one", lab06)
    assert sentence in lab06 and measured, lab06[:2000]
    assert float(measured[1]) == pytest.approx(expected["clean"], abs=2e-3)
    assert float(measured[2]) == pytest.approx(expected["corrupt"], abs=2e-3)
    assert "verified: every check passed" in lab06


def test_a_hub_failing_mid_file_stops_the_job_at_the_fetch_with_one_line_and_nothing_is_built(project, tmp_path):
    hub, lock, lock_path = hub_for("seed1", tmp_path)
    hub.faults["model.safetensors"] = "cut"
    output = tmp_path / "site"
    with hub:
        ran = run_steps(project, environment(project, hub, lock_path), output)
    names = [name for name, _ in ran]
    fetch = ran[-1][1]
    assert "make pythia" in names[-1] and fetch.returncode != 0, names  # the job stopped at the fetch
    lines = [line for line in fetch.stderr.splitlines() if not line.startswith("make: ***")]
    assert len(lines) == 1 and lines[0].startswith("error: model.safetensors: download from "), fetch.stderr
    assert lock["repository"] in lines[0] and "Traceback" not in fetch.stderr
    assert not output.exists() and not (project / "_site").exists()
