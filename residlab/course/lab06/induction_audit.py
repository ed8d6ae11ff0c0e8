"""Lab 06 Part 2: the Residual Contribution Audit of the trained induction model, as a learner would run it.

The model is saved as its directory (config.json and model.safetensors) and loaded back by the audit tool itself
(``residlab.audit.loading.place_directory``, what ``residlab audit --model DIR`` does); the input is the patching
experiment of ``measures`` (clean: a repeated sequence cut before its last token; corrupt: the same with only the
token after the earlier occurrence of the readout's token replaced; target: what induction predicts in the clean
run; rival: by the lesson's rule, the corrupt run's top token). The declared writes are both writes of both blocks
at the readout position, and block 0's attention write at the position after the earlier occurrence of the
readout's token, where the mechanism says the previous-token head writes.

``audit_induction_model`` returns plain data (the packet's four records and the verification's lines), and
``readout_write_verdict`` what the packet says about the write the mechanism predicts, so a page can choose its
sentences from the numbers.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from residlab.audit.packet import audit_to_directory
from residlab.audit.runs import AuditInput, DeclaredSite
from residlab.audit.loading import place_directory
from residlab.audit.verify import verify_packet
from residlab.course.models.induction.measures import PatchingExperiment, patching_experiment
from residlab.course.models.induction.recipe import saved_model_files

PREDICTED_WRITE = ("attn", 1)  # block 1's attention write at the readout position: the induction head's write


@dataclass(frozen=True)
class InductionAudit:
    packet: dict  # record name -> record, as written
    verification_lines: tuple[str, ...]
    verification_passed: bool
    experiment: PatchingExperiment


def declared_sites(experiment: PatchingExperiment) -> list:
    readout = len(experiment.clean) - 1
    sites = [DeclaredSite(component, block, readout) for block in (0, 1) for component in ("attn", "mlp")]
    return sites + [DeclaredSite("attn", 0, experiment.first_occurrence_next)]


def experiment_input(experiment: PatchingExperiment) -> AuditInput:
    return AuditInput(experiment.clean, experiment.corrupt, experiment.target, experiment.rival)


def audit_induction_model(model, experiment: PatchingExperiment | None = None) -> InductionAudit:
    experiment = patching_experiment(model) if experiment is None else experiment
    audit_input = experiment_input(experiment)
    with tempfile.TemporaryDirectory(prefix="residlab-lab06-induction-") as scratch:
        model_dir = Path(scratch) / "induction-model"
        model_dir.mkdir()
        for name, data in saved_model_files(model).items():
            (model_dir / name).write_bytes(data)
        subject = place_directory(model_dir)
        packet_dir = Path(scratch) / "packet-induction"
        packet = audit_to_directory(subject, audit_input, declared_sites(experiment), packet_dir)
        verification = verify_packet(packet_dir, subject)
    return InductionAudit(packet, tuple(verification.lines), bool(verification.passed), experiment)


def write_rows(packet: dict) -> list[dict]:
    """One row per declared write: site label, block, component, position and the four measures."""
    rows = []
    for result in packet["measurement"]["results"]:
        _, block, write = result["site"].split(".")  # blocks.{block}.{attn_write | mlp_write}
        rows.append({
            "site": result["site"], "block": int(block), "component": write.removesuffix("_write"),
            "position": result["position"],
            "norm": result["norm"]["value"],
            "direct_effect": (result.get("direct_effect_exact") or {}).get("value"),
            "total_effect": result["total_effect"]["value"],
            "patch_recovery": (result.get("patch_recovery") or {}).get("value"),
        })  # fmt: skip
    return rows


def readout_write_verdict(packet: dict) -> dict:
    """Whether the write the mechanism predicts (block 1's attention at the readout position) is the one with the
    largest patch recovery and the largest total effect (in size) among the declared writes."""
    rows = write_rows(packet)
    readout = packet["input"]["readout_position"]
    predicted = next(r for r in rows if (r["component"], r["block"]) == PREDICTED_WRITE and r["position"] == readout)
    by_recovery = max(rows, key=lambda r: -1e300 if r["patch_recovery"] is None else r["patch_recovery"])
    by_total = max(rows, key=lambda r: abs(r["total_effect"]))
    # What the earlier blocks' writes at the readout recover: near 0, block 1's input there is all but the same in
    # both runs, and its attention at the readout is the only route from the changed token to the readout.
    earlier = [abs(r["patch_recovery"]) for r in rows if r["block"] < PREDICTED_WRITE[1] and r["position"] == readout
               and r["patch_recovery"] is not None]  # fmt: skip
    return {
        "predicted": predicted,
        "largest_recovery": by_recovery,
        "largest_total": by_total,
        "found_by_recovery": by_recovery is predicted,
        "found_by_total": by_total is predicted,
        "earlier_at_readout": max(earlier) if earlier else None,
    }
