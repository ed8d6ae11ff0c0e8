"""A reader's own files opened in the page, checked in the browser and never uploaded: Lab 05's "open your capture"
(``manifest.json``, ``observations.json``, ``captures.json`` as the observation runner writes them) and Lab 06's
"open your packet" (the four records the audit runner writes).

This module writes each opener's HTML block: the element its script fills and, as JSON, every number and name the
script checks against, taken from the code that owns it (the capture page's size bounds and agreement tolerances,
the site names, the audit's record bound, records and schema). The scripts (``assets/explorers/open-capture.js``,
``open-packet.js``, on ``python-json.js``) do the arithmetic the page states: the capture's norms, differences and
cosines as ``capture_page.recomputed_observation`` computes them (float64, ``math.fsum``), and the packet's links as
``audit.packet.linked_records`` computes them (SHA-256 of ``audit.runs.canonical_json``).
"""

from __future__ import annotations

import html
import json

from residlab.audit.measures import shown
from residlab.audit.packet import RECORDS, SCHEMA
from residlab.audit.verify import MAX_RECORD_BYTES
from residlab.capture.sites import EMBEDDING_SITE, FINAL_NORM_SITE, site_name
from residlab.pythia.observe import OBSERVATIONS_LAYOUT, OBSERVATIONS_SCHEMA
from residlab.course.models import capture_page
from residlab.course.ui.tables import markdown_table

SCRIPTS = ("python-json.js",)
AUDIT_RUNNER = "audit_residual_writes.py"
# The measurement table's columns, in the order the audit's terminal summary prints them (audit.summary_lines).
# Result fields not named here (a later schema's additions) follow in sorted order under their own names.
MEASUREMENT_COLUMNS = {
    "norm": "norm",
    "direct_projection": "d.w",
    "direct_effect_exact": "direct (what w adds)",
    "dla_term": "DLA",
    "total_effect": "total (what zeroing w removes)",
    "patch_recovery": "recovery",
    "survival_cosine": "cos",
    "retained_fraction": "retained",
}
MEASUREMENT_DECIMALS = 3


def _block(element_id: str, config: dict, script_dir: str, scripts: tuple[str, ...], fallback: str) -> str:
    # "<" escaped, so nothing in the configuration can end the script element early.
    payload = json.dumps(config, ensure_ascii=True, allow_nan=False).replace("<", "\\u003c")
    # in the order they run (assets/site/explorers.html fetches them when the block nears the screen)
    sources = " ".join(script_dir + name for name in SCRIPTS + scripts)
    return (
        "```{=html}\n"
        f'<script type="application/json" id="{element_id}-config">{payload}</script>\n'
        f'<div class="residlab-explorer rl-opener" id="{element_id}" data-config="{element_id}-config"'
        f' data-residlab-scripts="{html.escape(sources)}"><p>{html.escape(fallback)}</p></div>\n'
        "```\n"
    )


def capture_opener_config() -> dict:
    """What the capture opener checks: each file's size bound, the layout of ``observations.json``, the agreement
    tolerance between it and the tensors, and the names of the captured sites."""
    return {
        "files": dict(capture_page.RESULT_MAX_BYTES),
        "observations_schema": OBSERVATIONS_SCHEMA,
        "observations_layout": OBSERVATIONS_LAYOUT,  # what a refusal of another schema says this one is
        "agreement": {"absolute": capture_page.AGREEMENT_ABSOLUTE, "relative": capture_page.AGREEMENT_RELATIVE},
        "embedding_site": EMBEDDING_SITE,
        "final_norm_site": FINAL_NORM_SITE,
        # a block's site name with "{block}" and "{site}" left to fill (site_name formats both as text)
        "site_pattern": site_name("{block}", "{site}"),  # type: ignore[arg-type]
    }


def capture_opener(script_dir: str) -> str:
    """For a page cell with ``output: asis``, after the capture explorer: the "open your own run" block."""
    # open-capture.js redraws the capture explorer with the reader's run (capture-explorer.js's build)
    return _block("open-capture", capture_opener_config(), script_dir, ("capture-explorer.js", "open-capture.js"),
                  "Opening your own run needs JavaScript.")  # fmt: skip


def packet_opener_config() -> dict:
    """What the packet opener checks: each record's size bound, the record names and the schema."""
    return {
        "max_bytes": MAX_RECORD_BYTES,
        "records": list(RECORDS),
        "schema": SCHEMA,
        "columns": MEASUREMENT_COLUMNS,
        "decimals": MEASUREMENT_DECIMALS,
        "runner": AUDIT_RUNNER,
    }


def packet_opener(script_dir: str, python: str) -> str:
    """For a page cell with ``output: asis``: the "open your packet" block. ``python`` is the interpreter the page's
    own commands name (``LEARNER_PYTHON`` at the front door), so the re-run command the opener shows runs as theirs."""
    config = {**packet_opener_config(), "python": python}
    return _block("open-packet", config, script_dir, ("open-packet.js",),
                  "Opening your own packet needs JavaScript.")  # fmt: skip


def measurement_columns(results: list[dict]) -> list[str]:
    """The result fields the table shows: every field holding a measured ``value``, the known ones first."""
    measured = {key for row in results for key, entry in row.items() if isinstance(entry, dict) and "value" in entry}
    return [key for key in MEASUREMENT_COLUMNS if key in measured] + sorted(measured - set(MEASUREMENT_COLUMNS))


def measurement_cell(entry) -> str:
    value = entry.get("value") if isinstance(entry, dict) else None
    return "n/a" if value is None else f"{shown(value, MEASUREMENT_DECIMALS):.{MEASUREMENT_DECIMALS}f}"


def measurement_table(packet: dict) -> str:
    """The packet's measurement as a table, one row per declared write: what the page shows for its own packet and
    the packet opener shows for a reader's."""
    results = packet["measurement"]["results"]
    columns = measurement_columns(results)
    rows = [[f"`{row['site']}`", row["position"]] + [measurement_cell(row.get(key)) for key in columns] for row in results]
    return markdown_table(["write", "position"] + [MEASUREMENT_COLUMNS.get(key, key) for key in columns], rows)
