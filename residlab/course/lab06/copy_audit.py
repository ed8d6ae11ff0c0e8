"""``residlab audit``: the audit command of the package, which can also audit Lesson 2.1's trained copy model.

The copy model lives in ``residlab.course.models.copy_model`` (its audit input in ``residlab.course.models.lesson_lab``), which the
downloadable audit runner does not bundle, so the ``--copy-model`` source is offered here only; everything else is
``residlab.audit.cli``.
"""

from __future__ import annotations

from pathlib import Path

from residlab.capture.blocks import COPY_MODEL
from residlab.audit import AuditInput, DeclaredSite, Subject, audit_to_directory, verify_packet
from residlab.course.models import copy_model, lesson_lab


def copy_model_subject(model=None) -> Subject:
    """The lesson's trained copy model (700 steps, seed 7): ``model`` if given (a page passes the one its render
    trained), else trained once per process."""
    source = {
        "kind": "copy_model",
        "training": {"seed": copy_model.TRAINING_SEED, "steps": copy_model.TRAINING_STEPS,
                     "batch": copy_model.BATCH_SIZE, "learning_rate": copy_model.LEARNING_RATE},  # fmt: skip
        "code": "residlab.course.models.copy_model.train_copy_model",
    }
    model = copy_model.default_training()[0] if model is None else model
    return Subject(model, COPY_MODEL, source, fixed_length=copy_model.SEQUENCE_LENGTH)


def lesson_audit_input(subject: Subject) -> AuditInput:
    """The lesson's clean and corrupt sequences, target, and the rival its rule picks for the subject's model."""
    audit = lesson_lab.audit_model(subject.model)
    return AuditInput(audit.clean_tokens, audit.corrupt_tokens, audit.target, audit.rival)


def lesson_sites() -> list[DeclaredSite]:
    """Both writes of the one block, at the query position."""
    query = copy_model.SEQUENCE_LENGTH - 1
    return [DeclaredSite("attn", 0, query), DeclaredSite("mlp", 0, query)]


def write_copy_model_packet(output_dir: Path, model=None) -> dict:
    """The lesson's audit as a packet (one thread, as the lesson computes it); ``model`` as ``copy_model_subject``."""
    subject = copy_model_subject(model)
    return audit_to_directory(subject, lesson_audit_input(subject), lesson_sites(), output_dir, threads=1)


def verify_copy_model_packet(packet_dir: Path, model=None):
    return verify_packet(packet_dir, copy_model_subject(model))


EXTRA_SOURCES = {"copy-model": ("Lesson 2.1's trained copy model (package only)", copy_model_subject)}


def main(argv: list[str] | None = None) -> int:
    from residlab.audit.cli import main as audit_main

    return audit_main(argv, prog="residlab audit", extra_sources=EXTRA_SOURCES)
