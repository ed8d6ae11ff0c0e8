#!/usr/bin/env python3
"""Plant value bugs one at a time in a temporary copy of the site and check that the tests catch each one.

Each mutation is a text patch to one package file or page. For each: copy the working tree (no virtual environments,
no build output) into a temporary folder, apply the patch, run `residlab sync` there (so every runner carries
the bug too and no drift test can be what notices), run the tests named for it, and count it caught when
pytest reports a failing test. A patch whose target text is not found stops the script with an error: a
refactor must update the mutation list, never silently shrink it.

Run it from the repository root with the project's environment, after changing any code a page's numbers come
from and before each release (tests/README.md, "Mutation check"):

    .venv/bin/python tests/mutation_check.py            # every mutation
    .venv/bin/python tests/mutation_check.py --list     # names only
    .venv/bin/python tests/mutation_check.py toy-float-rounded-6dp median-to-mean

Exit status: 0 when every planted bug was caught, 1 when one survived, 2 on a patch that did not apply or a
baseline that does not pass.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# .git comes along: the page tests render a clean copy of the copy, listed by `git ls-files`.
IGNORED = shutil.ignore_patterns(
    ".venv*", "_site", "_freeze", ".quarto", ".jupyter_cache", "__pycache__", ".pytest_cache", "*.egg-info"
)
TEST_TIMEOUT_S = 900  # one mutation's tests; the slowest set takes about two minutes on a busy machine

LESSON_TESTS = ("tests/unit/course/test_published_values.py",)
OBSERVATION_TESTS = ("tests/unit/pythia/test_observation_reference.py",)
SYNC_TESTS = ("tests/unit/build/test_sync_coverage.py",)
TOY_TESTS = ("tests/unit/course/test_toy_exact.py",)
RECORDING_TESTS = ("tests/unit/capture/test_recording.py",)
LESSON_PAGE_TESTS = ("tests/site/test_page_values.py::test_the_lesson_page_shows_the_documents_figures",)
INDUCTION = "tests/unit/course/test_induction.py::"
INDUCTION_HEAD_TESTS = (INDUCTION + "test_head_scores_recomputed_by_a_float64_attention",)
INDUCTION_ACCURACY_TESTS = (INDUCTION + "test_the_repeated_half_is_predicted_and_the_first_half_is_not",)
LAB_PAGE_TESTS = ("tests/site/test_page_values.py::test_the_lab_page_shows_the_closed_form_solutions",)
# One sign for every effect (what the write adds): a last write's direct and total effects are one number.
ONE_SIGN_TESTS = ("tests/unit/audit/test_audit.py::test_a_last_write_has_one_effect_whether_removed_from_the_final_state_or_zeroed",)


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str  # relative to the repository root
    find: str  # must occur exactly once
    replace: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation(
        "lesson-clean-mlp-patch-no-op",
        "residlab/course/models/lesson_lab.py",
        '"corrupt + clean MLP patch": run_traced(model, corrupt_tokens, patch_mlp=clean_mlp)',
        '"corrupt + clean MLP patch": run_traced(model, corrupt_tokens)',
        LESSON_TESTS,
    ),
    Mutation(
        "lesson-logit-difference-reversed",
        "residlab/course/models/lesson_lab.py",
        "logit_difference=_logit_difference(run.logits, target, rival)",
        "logit_difference=_logit_difference(run.logits, rival, target)",
        LESSON_TESTS,
    ),
    Mutation(
        "measure-survival-cosine-wrong-state",
        "residlab/audit/measures.py",
        "survival_cosine=cosine(w, final_state),",
        "survival_cosine=cosine(w, final_state - w),",
        LESSON_TESTS,
    ),
    Mutation(
        "measure-recovery-from-the-clean-side",
        "residlab/audit/measures.py",
        "return None if gap == 0 else (patched - corrupt) / gap",
        "return None if gap == 0 else (patched - clean) / gap",
        LESSON_TESTS,
    ),
    Mutation(
        "lesson-write-norms-swapped",
        "residlab/course/models/lesson_lab.py",
        "attention=_query_vector(clean.trace.attn_write).norm().item(),\n        mlp=_query_vector(clean.trace.mlp_write).norm().item(),",
        "attention=_query_vector(clean.trace.mlp_write).norm().item(),\n        mlp=_query_vector(clean.trace.attn_write).norm().item(),",
        LESSON_TESTS,
    ),
    Mutation(
        "lesson-learning-rate-changed",
        "residlab/course/models/copy_model.py",
        "LEARNING_RATE = 2e-3",
        "LEARNING_RATE = 2.5e-3",
        LESSON_TESTS,
    ),
    Mutation(
        "lesson-readout-wrong-stage",
        "residlab/course/models/lesson_lab.py",
        '"after attention": model.readout(clean.trace.resid_mid),',
        '"after attention": model.readout(clean.trace.resid_post),',
        LESSON_TESTS,
    ),
    Mutation(
        "median-to-mean",
        "residlab/course/models/gradient_profile.py",
        "medians[arrangement] = [statistics.median(run[layer] for run in runs) for layer in range(depth)]",
        "medians[arrangement] = [statistics.mean(run[layer] for run in runs) for layer in range(depth)]",
        LESSON_TESTS,
    ),
    Mutation(
        "profile-block-norm-max-not-mean",
        "residlab/course/models/gradient_profile.py",
        "statistics.mean(p.grad.norm().item() for p in block.parameters() if p.grad is not None)",
        "max(p.grad.norm().item() for p in block.parameters() if p.grad is not None)",
        LESSON_TESTS,
    ),
    Mutation(
        "profile-control-without-final-norm",
        "residlab/course/models/gradient_profile.py",
        "normaliser = nn.LayerNorm(width) if final_norm else nn.Identity()",
        "normaliser = nn.Identity()",
        LESSON_TESTS,
    ),
    Mutation(
        "training-counts-skip-model-creation",
        "residlab/course/models/copy_model.py",
        "        _seeded_model(seed)\n        for _ in range(steps):",
        "        torch.manual_seed(seed)\n        for _ in range(steps):",
        ("tests/unit/course/test_lesson_wording.py",),
    ),
    Mutation(
        "dla-term-without-the-frozen-scale",
        "residlab/audit/attribution.py",
        "return direction * gain / scale, centres, scale",
        "return direction * gain, centres, scale",
        ("tests/unit/audit/test_attribution.py",),
    ),
    Mutation(
        "copy-model-hook-point-reads-the-wrong-value",
        "residlab/course/models/copy_model.py",
        "resid_mid = self.hook_resid_mid(resid_pre + attn_write)",
        "resid_mid = self.hook_resid_mid(resid_pre) + attn_write",
        LESSON_TESTS,
    ),
    Mutation(
        "patching-set-one-position-early",
        "residlab/capture/patching.py",
        "tensor[:, index] = value.to(dtype=tensor.dtype, device=tensor.device)",
        "tensor[:, [i - 1 for i in index] if isinstance(index, list) else index] = value.to(dtype=tensor.dtype)",
        RECORDING_TESTS,
    ),
    Mutation(
        "observation-cosine-against-wrong-state",
        "residlab/pythia/observe.py",
        '"cosine_update_with_incoming": cosine(after - before, before)',
        '"cosine_update_with_incoming": cosine(after - before, after)',
        OBSERVATION_TESTS,
    ),
    Mutation(
        "observation-write-norms-swapped",
        "residlab/pythia/observe.py",
        '"attn_write_norm": float(attn.norm().item()),\n                "mlp_write_norm": float(mlp.norm().item()),',
        '"attn_write_norm": float(mlp.norm().item()),\n                "mlp_write_norm": float(attn.norm().item()),',
        OBSERVATION_TESTS,
    ),
    Mutation(
        "observation-relative-difference-over-outgoing",
        "residlab/pythia/observe.py",
        '"relative_difference": difference_norm / before_norm if before_norm > 0 else None,',
        '"relative_difference": difference_norm / float(after.norm().item()) if before_norm > 0 else None,',
        OBSERVATION_TESTS,
    ),
    Mutation(
        "observation-final-norm-cosine-wrong-pair",
        "residlab/pythia/observe.py",
        '"cosine": cosine(raw_last, normalised),',
        '"cosine": cosine(states[-2], normalised),',
        OBSERVATION_TESTS,
    ),
    Mutation(
        "observation-logit-lens-skips-final-norm",
        "residlab/pythia/observe.py",
        "probabilities = torch.softmax(head(norm(state)), dim=-1)",
        "probabilities = torch.softmax(head(state), dim=-1)",
        OBSERVATION_TESTS,
    ),
    Mutation(
        "observation-captures-rounded-6-digits",
        "residlab/pythia/observe.py",
        'flat = [float(f"{value:.9g}") for value in tensor.reshape(-1).tolist()]',
        'flat = [float(f"{value:.6g}") for value in tensor.reshape(-1).tolist()]',
        OBSERVATION_TESTS,
    ),
    Mutation(
        "toy-float-rounded-6dp",
        "residlab/course/lab05/exact_vectors.py",
        '"exact": self.exact, "simplified": self.simplified, "float": self.value}',
        '"exact": self.exact, "simplified": self.simplified, "float": round(self.value, 6)}',
        TOY_TESTS,
    ),
    Mutation(
        "toy-number-float-rounded-6dp",
        "residlab/course/lab05/toy.py",
        'return {"exact": exact_json(value), "float": float(value)}',
        'return {"exact": exact_json(value), "float": round(float(value), 6)}',
        TOY_TESTS,
    ),
    Mutation(
        "toy-cosine-over-sum-of-norms",
        "residlab/course/lab05/toy.py",
        "cosine = float(update_dot) / (first_norm.value * second_norm.value)",
        "cosine = float(update_dot) / (first_norm.value + second_norm.value)",
        TOY_TESTS,
    ),
    Mutation(
        "lesson-page-quotes-the-wrong-row",
        "lessons/04-residual-stream.qmd",
        'p_mlp_patched=f3(cases["corrupt + clean MLP patch"].p_target),',
        'p_mlp_patched=f3(cases["corrupt"].p_target),',
        LESSON_PAGE_TESTS,
    ),
    Mutation(
        "lab-page-quotes-the-wrong-norm",
        "labs/05-trace-residual-stream.qmd",
        "($\\lVert F(x)\\rVert\\approx$ `{python} round(effects['first_update_norm']['float'], 3)`)",
        "($\\lVert F(x)\\rVert\\approx$ `{python} round(effects['second_update_norm']['float'], 3)`)",
        LAB_PAGE_TESTS,
    ),
    Mutation(
        "sync-skips-one-runner",
        "residlab/build/runners.py",
        "outputs = {assets_dir / runner.filename: build_runner(runner) for runner in RUNNERS}",
        "outputs = {assets_dir / runner.filename: build_runner(runner) for runner in RUNNERS[:-1]}",
        SYNC_TESTS,
    ),
    Mutation(
        "sync-skips-compat-requirements",
        "residlab/build/pins.py",
        '        site_root / "tests" / "compat-requirements.txt": compat_requirements(lock, requirements_text),\n',
        "",
        SYNC_TESTS,
    ),
    Mutation(
        "sync-writes-all-but-variables",
        "residlab/build/sync.py",
        "    for path, text in derived_files(root).items():\n        if not path.exists()",
        "    for path, text in derived_files(root).items():\n        if path.name == \"_variables.yml\":\n            continue\n        if not path.exists()",
        SYNC_TESTS,
    ),
    Mutation(  # the four effects' signs, one planted flip each: direct, DLA, total (zero ablation), patch
        "effect-sign-direct-flipped",
        "residlab/audit/measures.py",
        "direct_effect = final - readout_metric(final_state - w)",
        "direct_effect = readout_metric(final_state - w) - final",
        ONE_SIGN_TESTS + LESSON_TESTS,
    ),
    Mutation(
        "effect-sign-dla-flipped",
        "residlab/audit/attribution.py",
        "return float(readout @ (write - write.mean() if centres else write))",
        "return -float(readout @ (write - write.mean() if centres else write))",
        ("tests/unit/audit/test_attribution.py",),
    ),
    Mutation(
        "effect-sign-total-flipped",
        "residlab/audit/measures.py",
        "total_effect=clean - ablated,",
        "total_effect=ablated - clean,",
        ONE_SIGN_TESTS + LESSON_TESTS,
    ),
    Mutation(
        "effect-sign-patch-recovery-flipped",
        "residlab/audit/measures.py",
        "    gap = clean - corrupt\n    return None if gap == 0",
        "    gap = corrupt - clean\n    return None if gap == 0",
        LESSON_TESTS,
    ),
    Mutation(
        "induction-heads-swapped",
        "residlab/course/models/induction/measures.py",
        'return {"previous_token": torch.stack(previous).mean(0), "induction": torch.stack(induction).mean(0)}',
        'return {"previous_token": torch.stack(induction).mean(0), "induction": torch.stack(previous).mean(0)}',
        INDUCTION_HEAD_TESTS,
    ),
    Mutation(
        "induction-score-offset-off-by-one",
        "residlab/course/models/induction/measures.py",
        "weights.diagonal(offset=-(period - 1), dim1=-2, dim2=-1)[..., 1:]",
        "weights.diagonal(offset=-period, dim1=-2, dim2=-1)",
        INDUCTION_HEAD_TESTS,
    ),
    Mutation(
        "induction-training-skipped",
        "residlab/course/models/induction/recipe.py",
        "        for step in range(1, steps + 1):\n            period = PERIODS",
        "        for step in range(1, 1):\n            period = PERIODS",
        INDUCTION_ACCURACY_TESTS,
    ),
)


class PatchError(RuntimeError):
    pass


def copy_tree(destination: Path) -> Path:
    shutil.copytree(ROOT, destination, ignore=IGNORED, symlinks=True)
    return destination


def apply(mutation: Mutation, tree: Path) -> None:
    path = tree / mutation.file
    if not path.exists():
        raise PatchError(f"{mutation.name}: {mutation.file} does not exist")
    text = path.read_text(encoding="utf-8")
    count = text.count(mutation.find)
    if count != 1:
        raise PatchError(
            f"{mutation.name}: patch did not apply: its target text occurs {count} times in {mutation.file} "
            "(update the mutation after a refactor)"
        )
    path.write_text(text.replace(mutation.find, mutation.replace), encoding="utf-8")


def environment(tree: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)  # the copy's residlab, not the editable install's
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(command: list[str], tree: Path, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=tree, env=environment(tree), capture_output=True, text=True, timeout=timeout)


def sync_and_test(tree: Path, tests: tuple[str, ...]) -> tuple[int, str]:
    """Re-sync the copy, make sure it imports its own residlab, then run the tests; (pytest status, tail)."""
    probe = run([sys.executable, "-c", "import residlab, sys; print(residlab.__file__)"], tree, 60)
    if not Path(probe.stdout.strip()).resolve().is_relative_to(tree.resolve()):
        raise PatchError(f"the copy imports residlab from {probe.stdout.strip()!r}, not from {tree}")
    synced = run([sys.executable, "-m", "residlab", "sync"], tree, 300)
    if synced.returncode not in (0, 1):  # 1: pin drift, reported by the tests too
        return 2, synced.stderr[-2000:]
    tested = run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests], tree, TEST_TIMEOUT_S)
    failed = [line for line in tested.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    return tested.returncode, "\n".join(failed) if tested.returncode == 1 else tested.stdout[-1500:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only these mutations (default: all)")
    parser.add_argument("--list", action="store_true", help="print the mutations' names and exit")
    parser.add_argument("--skip-baseline", action="store_true", help="do not first check that the unmutated copy passes")
    args = parser.parse_args(argv)
    if args.list:
        for mutation in MUTATIONS:
            print(f"{mutation.name:48s} {mutation.file}")
        return 0
    unknown = sorted(set(args.names) - {m.name for m in MUTATIONS})
    if unknown:
        parser.error(f"unknown mutation(s): {', '.join(unknown)}")
    chosen = [m for m in MUTATIONS if not args.names or m.name in args.names]

    with tempfile.TemporaryDirectory(prefix="residlab-mutation-") as scratch:
        scratch = Path(scratch)
        # Every patch is tried on one copy first, so a stale target fails the run before any test time is spent.
        probe_tree = copy_tree(scratch / "probe")
        try:
            for mutation in chosen:
                apply(mutation, probe_tree)
        except PatchError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        shutil.rmtree(probe_tree)

        if not args.skip_baseline:
            started = time.monotonic()
            tests = tuple(dict.fromkeys(test for m in chosen for test in m.tests))
            status, tail = sync_and_test(copy_tree(scratch / "baseline"), tests)
            if status != 0:
                print(f"error: the unmutated copy does not pass {' '.join(tests)}:\n{tail}", file=sys.stderr)
                return 2
            print(f"baseline passes ({time.monotonic() - started:.0f} s)")

        caught = []
        for index, mutation in enumerate(chosen):
            tree = copy_tree(scratch / f"mutant-{index}")
            apply(mutation, tree)
            started = time.monotonic()
            status, tail = sync_and_test(tree, mutation.tests)
            seconds = time.monotonic() - started
            # pytest exits 1 when a test failed; anything else (2-5) is an error of the run, not a catch.
            if status == 1:
                caught.append(mutation.name)
                print(f"caught    {mutation.name} ({seconds:.0f} s)\n          by {tail.splitlines()[0] if tail else '?'}")
            else:
                print(f"SURVIVED  {mutation.name} (pytest exit {status}, {seconds:.0f} s)\n{tail}")
            shutil.rmtree(tree)

    print(f"{len(caught)}/{len(chosen)} planted bugs caught")
    return 0 if len(caught) == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
