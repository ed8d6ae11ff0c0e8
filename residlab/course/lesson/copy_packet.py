"""The lesson's audit of the trained copy model as a packet, written and verified: what ``residual_stream_lab.py
packet DIR`` and ``verify DIR`` run (and ``residlab audit --copy-model``, through ``copy_audit``).

The subject is the copy model trained from its seed (``copy_model.default_training``); the input is the lesson's
clean and corrupt sequences and target, with the rival its rule picks (``lesson_lab.audit_model``); the declared
writes are both writes of the one block at the query position. Verifying retrains the model from its seed, so a
packet verifies on any machine whose torch trains it to the same weights.
"""

from __future__ import annotations

from pathlib import Path

from residlab.audit.packet import audit_to_directory, summary_lines
from residlab.audit.runs import AuditInput, DeclaredSite
from residlab.audit.subject import Subject
from residlab.audit.verify import verify_packet
from residlab.capture.blocks import COPY_MODEL
from residlab.capture.outdir import check_output_directory
from residlab.course.lesson.copy_model import (
    BATCH_SIZE, LEARNING_RATE, SEQUENCE_LENGTH, TRAINING_SEED, TRAINING_STEPS, default_training,
)
from residlab.course.lesson.lesson_lab import audit_model


def copy_model_subject(model=None) -> Subject:
    """The lesson's trained copy model (700 steps, seed 7): ``model`` if given (a page passes the one its render
    trained), else trained once per process."""
    source = {
        "kind": "copy_model",
        "training": {"seed": TRAINING_SEED, "steps": TRAINING_STEPS, "batch": BATCH_SIZE,
                     "learning_rate": LEARNING_RATE},  # fmt: skip
        "code": "residlab.course.lesson.copy_model.train_copy_model",
    }
    model = default_training()[0] if model is None else model
    return Subject(model, COPY_MODEL, source, fixed_length=SEQUENCE_LENGTH)


def lesson_audit_input(subject: Subject) -> AuditInput:
    """The lesson's clean and corrupt sequences, target, and the rival its rule picks for the subject's model."""
    audit = audit_model(subject.model)
    return AuditInput(audit.clean_tokens, audit.corrupt_tokens, audit.target, audit.rival)


def lesson_sites() -> list[DeclaredSite]:
    """Both writes of the one block, at the query position."""
    query = SEQUENCE_LENGTH - 1
    return [DeclaredSite("attn", 0, query), DeclaredSite("mlp", 0, query)]


def write_copy_model_packet(output_dir: Path, model=None) -> dict:
    """The lesson's audit as a packet (one thread, as the lesson computes it); ``model`` as ``copy_model_subject``."""
    subject = copy_model_subject(model)
    return audit_to_directory(subject, lesson_audit_input(subject), lesson_sites(), output_dir, threads=1)


def verify_copy_model_packet(packet_dir: Path, model=None):
    return verify_packet(packet_dir, copy_model_subject(model))


def packet_command(command: str, directory: Path) -> int:
    """``packet DIR``: write the packet (DIR new or empty, checked before training); ``verify DIR``: retrain the
    model from its seed and check the packet against it. Prints what the audit command prints; 0, or 1 when the
    packet is not verified."""
    if command == "packet":
        check_output_directory(directory)
        for line in summary_lines(write_copy_model_packet(directory)):
            print(line)
        print(f"wrote model.json, input.json, intervention.json, measurement.json into {directory}")
        return 0
    report = verify_copy_model_packet(directory)
    for line in report.lines:
        print(line)
    for failure in report.failures:
        print(f"FAIL {failure}")
    print("verified: every check passed" if report.passed else f"NOT verified: {len(report.failures)} problem(s)")
    return 0 if report.passed else 1
