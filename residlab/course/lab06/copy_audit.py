"""``residlab audit``: the audit command of the package, which can also audit Lesson 2.1's trained copy model.

The copy model's packet is written and verified by ``lesson_lab`` (the lesson's runner:
``residual_stream_lab.py packet DIR`` and ``verify DIR``); the downloadable audit runner does not, so the
``--copy-model`` source is offered here only; everything else is ``residlab.audit.cli``.
"""

from __future__ import annotations

from residlab.course.models.lesson_lab import (  # noqa: F401  (also reached here: tests and pages)
    copy_model_subject, lesson_audit_input, lesson_sites, verify_copy_model_packet, write_copy_model_packet,
)

EXTRA_SOURCES = {"copy-model": ("Lesson 2.1's trained copy model (package only)", copy_model_subject)}


def main(argv: list[str] | None = None) -> int:
    from residlab.audit.cli import main as audit_main

    return audit_main(argv, prog="residlab audit", extra_sources=EXTRA_SOURCES)
