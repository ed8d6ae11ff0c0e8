"""Lab 06's section for bigger models: the lab's specimen audit run again the two ways a learner runs a model that
does not fit, each compared with the float32 packet the page shows (``decoder_audit``).

- dispatched by accelerate (``--device-map auto``) under a CPU budget that keeps one block in memory and offloads
  the others to disk: whether every record is byte-identical to the plain packet's;
- in bfloat16 (``--dtype bfloat16``): its tolerance scale, its metric beside float32's, how many of its values lie
  within their declared tolerance of float32's, and whether it verifies.

Everything is ``residlab.audit``; the packets are written into a scratch folder removed before this returns, and
the result is plain data.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

from residlab import audit
from residlab.audit import loading
from residlab.course.lab06.decoder_audit import CLEAN_IDS, CORRUPT_IDS, RIVAL_ID, SPECIMEN, TARGET_ID

BLOCKS_IN_MEMORY = 1


@dataclass(frozen=True)
class ScaleAudit:
    max_memory: str  # the --max-memory value the dispatched run used, as the page prints it
    blocks: int
    blocks_on_disk: int
    dispatched_identical: bool  # every record byte-identical to the undispatched packet's
    dispatched_verified: bool
    scales: dict  # dtype -> its tolerance scale
    metric_float32: float
    metric_bfloat16: float
    metric_tolerance_bfloat16: float  # the absolute tolerance the bfloat16 packet declares for its clean metric
    within: tuple[int, int]  # bfloat16 values within their declared tolerance of float32's, of those compared
    bfloat16_verified: bool


def _packet(subject, directory: Path) -> dict:
    sites = [audit.DeclaredSite(c, b, len(CLEAN_IDS) - 1) for b in range(len(subject.blocks)) for c in ("attn", "mlp")]
    audit.audit_to_directory(subject, audit.AuditInput(CLEAN_IDS, CORRUPT_IDS, TARGET_ID, RIVAL_ID), sites, directory)
    return {name: (directory / f"{name}.json").read_bytes() for name in audit.RECORDS}


def run_scale_audit() -> ScaleAudit:
    plain_subject = loading.place_specimen(SPECIMEN)
    budget = loading.cpu_budget(plain_subject.model, plain_subject.block_type, BLOCKS_IN_MEMORY)
    max_memory = f"cpu={math.ceil(budget / 1000)}KB"  # rounded up by under a kilobyte: the same placement
    dispatched_subject = loading.place_specimen(SPECIMEN, 0, loading.Placement(
        device_map="auto", max_memory=loading.parse_max_memory(max_memory)))  # fmt: skip
    bfloat16_subject = loading.place_specimen(SPECIMEN, 0, loading.Placement(dtype="bfloat16"))
    with tempfile.TemporaryDirectory(prefix="residlab-lab06-scale-") as scratch:
        work = Path(scratch)
        plain = _packet(plain_subject, work / "plain")
        dispatched = _packet(dispatched_subject, work / "dispatched")
        dispatched_verified = audit.verify_packet(work / "dispatched", plain_subject).passed
        _packet(bfloat16_subject, work / "bfloat16")
        bfloat16_verified = audit.verify_packet(work / "bfloat16", bfloat16_subject).passed
        exact, approximate = (audit.read_packet(work / name)["measurement"] for name in ("plain", "bfloat16"))
    dispatched_subject.offload_folder.cleanup()
    on_disk = sum(all(p.is_meta for p in block.parameters()) for block in dispatched_subject.blocks)
    return ScaleAudit(
        max_memory=max_memory, blocks=len(plain_subject.blocks), blocks_on_disk=on_disk,
        dispatched_identical=dispatched == plain, dispatched_verified=dispatched_verified,
        scales={dtype: audit.tolerance_scale(dtype) for dtype in audit.DTYPES},
        metric_float32=exact["baseline"]["clean"]["value"], metric_bfloat16=approximate["baseline"]["clean"]["value"],
        metric_tolerance_bfloat16=approximate["baseline"]["clean"]["tolerance"]["absolute"]
        + approximate["baseline"]["clean"]["tolerance"]["relative"] * abs(exact["baseline"]["clean"]["value"]),
        within=audit.within_declared(approximate, exact), bfloat16_verified=bfloat16_verified,
    )  # fmt: skip
