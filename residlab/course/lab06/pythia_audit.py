"""Lab 06 Part 3: the audit run on the model of the build's verified files (Pythia-14M when its pinned files are
there), with a prompt pair a 14M-parameter model can be expected to answer.

A model this small knows few facts, but small trained transformers learn to repeat: having seen "... A B ... A",
they predict B (induction). The clean prompt repeats a sequence whose next token, the target, it has already
seen once; the corrupt prompt is the same with the rival in that first place. A model that copies prefers the
target after the clean prompt and the rival after the corrupt one. Whether this model does is measured, never
assumed: ``separation`` chooses the sentence the page prints from the two logit differences.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from residlab import audit

CLEAN = "apple river stone candle. apple river stone"
CORRUPT = "apple river stone ladder. apple river stone"
TARGET, RIVAL = " candle", " ladder"
# A difference of one logit between the prompts (odds changed e-fold) counts as separating them; a random-weight
# model's logits differ by far less.
SEPARATION_LOGITS = 1.0


@dataclass(frozen=True)
class PythiaAudit:
    packet: dict  # record name -> record, as written
    verification: audit.Verification
    repository: str
    revision: str
    synthetic: bool
    lock_label: str
    files: tuple  # (name, sha256 the model record holds, the lock's sha256 or None)
    corrupt_top: str = ""  # the corrupt run's top token at the readout, decoded: the rival by the lesson's rule


def build_files(environ: dict | None = None):
    """(the lock this build uses, its verified files or None, whether the publisher chose on purpose to run
    nothing): ``RESIDLAB_PYTHIA_LOCK`` else the pinned lock; the files ``RESIDLAB_PYTHIA_ARTIFACTS`` names, else
    the lock's cache folder (``make pythia``); none when ``RESIDLAB_PYTHIA_CAPTURE=committed``."""
    import os

    from residlab.course.models.capture_source import CHOICE_ENV
    from residlab.pythia.cache import active_lock, verified_files

    environ = os.environ if environ is None else environ
    lock = active_lock(environ)
    if environ.get(CHOICE_ENV) == "committed":
        return lock, None, True
    return lock, verified_files(lock, environ), False


def run_pythia_audit(verified) -> PythiaAudit:
    """Audit every write of every block at the last position of ``CLEAN``/``CORRUPT`` on the verified files, write
    the packet into a scratch folder, verify it, and return both (the folder is removed)."""
    from residlab.pythia.cache import lock_label

    subject = audit.load_model_directory(verified.directory)
    clean = audit.tokenize_prompt(subject, CLEAN, "clean")
    corrupt = audit.tokenize_prompt(subject, CORRUPT, "corrupt")
    target, rival = audit.single_token(subject, TARGET, "target"), audit.single_token(subject, RIVAL, "rival")
    audit_input = audit.AuditInput(tuple(clean), tuple(corrupt), target, rival, CLEAN, CORRUPT, TARGET, RIVAL)
    corrupt_top = subject.tokenizer.decode([_top_token(subject, corrupt)])
    sites = [audit.DeclaredSite(c, b, len(clean) - 1) for b in range(len(subject.blocks)) for c in ("attn", "mlp")]
    with tempfile.TemporaryDirectory(prefix="residlab-lab06-pythia-") as scratch:
        packet_dir = Path(scratch) / "pythia-packet-01"
        packet = audit.audit_to_directory(subject, audit_input, sites, packet_dir)
        verification = audit.verify_packet(packet_dir, subject)
    lock = verified.lock
    recorded = {entry["name"]: entry["sha256"] for entry in packet["model"]["source"]["files"]}
    files = tuple((entry.name, recorded.get(entry.name), entry.sha256) for entry in lock.files if entry.name in recorded)
    return PythiaAudit(packet, verification, lock.repository, lock.revision, lock.synthetic, lock_label(lock), files,
                       corrupt_top)


def _top_token(subject, ids) -> int:
    """The model's top token at the last position of ``ids``."""
    import torch

    with torch.inference_mode():
        return int(subject.model(input_ids=torch.tensor([list(ids)]), use_cache=False).logits[0, -1].argmax())


def rival_sentence(result: PythiaAudit) -> str:
    """Whether the rival the command names is the one the lesson's rule names (the corrupt run's top token)."""
    if result.corrupt_top == RIVAL:
        return (f"The rival {RIVAL!r} is also the one the lesson's rule names: the model's top token after the "
                "corrupt prompt.")  # fmt: skip
    return (f"By the lesson's rule the rival would be the model's top token after the corrupt prompt, "
            f"{result.corrupt_top!r}; the command names the token copying would give there, {RIVAL!r}, which this "
            "model does not put first.")  # fmt: skip


def differences(result: PythiaAudit) -> tuple[float, float]:
    """The clean and corrupt logit differences, logit(target) - logit(rival), as the packet measured them."""
    baseline = result.packet["measurement"]["baseline"]
    return baseline["clean"]["value"], baseline["corrupt"]["value"]


def separation(result: PythiaAudit) -> str:
    """One sentence, chosen from the two measured differences: does the model tell the prompts apart?"""
    clean, corrupt = differences(result)
    measured = (f"`logit({TARGET!r}) − logit({RIVAL!r})` is {clean:+.3f} after the clean prompt and {corrupt:+.3f} "
                "after the corrupt one")  # fmt: skip
    if clean - corrupt >= SEPARATION_LOGITS and clean > 0 > corrupt:
        return (f"The model separates the two prompts: {measured}, so it prefers whichever token followed the "
                "repeated words, as copying (induction) would.")  # fmt: skip
    if clean - corrupt >= SEPARATION_LOGITS:
        return (f"The model leans the way copying would without changing its preference: {measured}, a shift of "
                f"{clean - corrupt:.3f} that leaves the same token ahead after both prompts.")  # fmt: skip
    why = "the wrong way round" if corrupt - clean >= SEPARATION_LOGITS else f"less than {SEPARATION_LOGITS:g} logit apart"
    return (f"The model does not separate the two prompts: {measured}, {why}. The writes measured below are of a "
            "behaviour this model does not show here.")


def model_callout(result: PythiaAudit) -> str:
    """Whose numbers these are: Pythia-14M only for its own files; the synthetic kind is one untrained draw, labelled as such."""
    from residlab.course.models.capture_source import PINNED_REPOSITORY

    if result.synthetic:
        return ('::: {.callout-warning title="Untrained baseline: one random-weight draw, not Pythia-14M"}\n'
                f"`{result.repository}` has random weights: the numbers below show what the audit measures on an "
                "untrained network, nothing a trained model learned.\n:::\n")  # fmt: skip
    name = "Pythia-14M" if result.repository == PINNED_REPOSITORY else f"`{result.repository}`"
    return (f'::: {{.callout-note title="{name.strip("`")}, revision {result.revision[:12]}"}}\n'
            f"Every number below was measured on {name} at revision `{result.revision}` during this render, from "
            f"files verified against {result.lock_label}.\n:::\n")  # fmt: skip


def files_table(result: PythiaAudit) -> str:
    """The files the audit read, their SHA-256 as the model record holds them, and whether the lock pins the same."""
    from residlab.course.ui.tables import markdown_table

    rows = [[f"`{name}`", f"`{recorded[:16]}…`", "yes" if pinned == recorded else ("no sha256 in the lock" if pinned is None else "NO")]
            for name, recorded, pinned in result.files]  # fmt: skip
    return markdown_table(["file", "sha256 in model.json", "the lock's"], rows)
