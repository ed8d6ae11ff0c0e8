"""Lab 06's worked audit: one packet for every write of the random-weight GPT-NeoX specimen at the last position,
its verification, and two tampered copies that verification must refuse.

Everything is ``residlab.audit``; this module only fixes the lab's inputs and makes the tampered copies, in a
scratch folder removed before it returns. The result is plain data (the four records, the verification reports),
so the page that shows it needs neither torch nor transformers once a render has computed it
(``residlab.course.shared.audited_decoder``).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from residlab import audit

SPECIMEN = "gpt_neox"
CLEAN_IDS = (5, 17, 3, 40, 2, 61)
CORRUPT_IDS = (9, 17, 3, 40, 2, 61)
TARGET_ID, RIVAL_ID = 12, 30
TAMPERED_SHIFT = 0.5  # added to the first write's recorded total effect


@dataclass(frozen=True)
class DecoderAudit:
    packet: dict  # record name -> record, as written
    verification: audit.Verification  # of the packet as written
    tampered_failures: tuple[str, ...]  # one measured value changed, nothing else
    relinked_failures: tuple[str, ...]  # the same change, with every link digest recomputed to match


def run_decoder_audit(seed: int = 0) -> DecoderAudit:
    subject = audit.build_specimen(SPECIMEN, seed=seed)
    sites = [audit.DeclaredSite(c, b, len(CLEAN_IDS) - 1) for b in range(len(subject.blocks)) for c in ("attn", "mlp")]
    with tempfile.TemporaryDirectory(prefix="residlab-lab06-") as scratch:
        work = Path(scratch)
        packet_dir = work / "packet-01"
        packet = audit.audit_to_directory(
            subject, audit.AuditInput(CLEAN_IDS, CORRUPT_IDS, TARGET_ID, RIVAL_ID), sites, packet_dir
        )
        verification = audit.verify_packet(packet_dir, subject)

        records = {name: json.loads((packet_dir / f"{name}.json").read_text(encoding="utf-8")) for name in audit.RECORDS}
        records["measurement"]["results"][0]["total_effect"]["value"] += TAMPERED_SHIFT
        tampered = audit.write_packet(records, work / "packet-tampered")
        relinked = audit.write_packet(
            audit.linked_records({n: audit.record_body(r) for n, r in records.items()}), work / "packet-relinked"
        )
        return DecoderAudit(
            packet=packet,
            verification=verification,
            tampered_failures=tuple(audit.verify_packet(tampered, subject).failures),
            relinked_failures=tuple(audit.verify_packet(relinked, subject).failures),
        )



def checks_sentence(lines) -> str:
    """Which numbered checks of a verification report (its ``lines``) the page's reading names, read back from the
    report itself (``audit.check_number``), so the prose follows the report's own order."""
    number = {key: audit.check_number(lines, label) for key, label in audit.CHECK_LABELS.items()}
    return (f"Check {number['parameters']} says the parameters were the same frozen tensors in every run; checks "
            f"{number['upstream']} and {number['declared']} are the lesson's second invariant")


def recovery_sentence(packet: dict) -> str:
    """The patch recoveries read against the gap they divide by: where some lie outside 0 to 1, said as what a small
    gap gives, not a share of anything."""
    baseline = packet["measurement"]["baseline"]
    clean, corrupt = baseline["clean"]["value"], baseline["corrupt"]["value"]
    recoveries = [(row["site"], row["patch_recovery"]["value"]) for row in packet["measurement"]["results"]]
    outside = [(site, value) for site, value in recoveries if value is not None and not 0 <= value <= 1]
    if not outside:
        return f"Every recovery here lies between 0 and 1, over a gap of {clean - corrupt:.3f} in logit difference."
    listed = ", ".join(f"{site} {value:.3f}" for site, value in outside)
    return (f"A recovery divides by the gap, here {clean - corrupt:.3f} in logit difference ({clean:.3f} clean, "
            f"{corrupt:.3f} corrupt), and a write can move the corrupt run by more than that: recoveries outside 0 to 1 "
            f"({listed}) are what a small gap gives, not a share of anything. Read a recovery only where the gap is "
            f"large against what single writes move.")  # fmt: skip
