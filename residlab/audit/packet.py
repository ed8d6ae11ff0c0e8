"""The packet: the four records of one audit (model, input, intervention, measurement), linked to one another by
the SHA-256 of their canonical JSON and one digest per top-level field; built from the runs, checked against the
packet's own invariants (the block identity, frozen parameters, interventions confined to their site), written
by the one output rule (``capture.outdir``), and summarised for the terminal. A run in a dtype other than float32
declares its approximation: every tolerance is float32's constants times ``placement.tolerance_scale`` of the
dtype, recorded with the dtype in the model record (``execution.dtype``, ``execution.tolerance_scale``).
"""

from __future__ import annotations

import json
from pathlib import Path

from residlab.capture.blocks import IDENTITY_ABSOLUTE, IDENTITY_RELATIVE, canonical_path
from residlab.capture.outdir import check_output_directory, write_directory
from residlab.capture.versions import library_versions
from residlab.capture.sites import BLOCK_SITES, module_path, site_name, site_table
from residlab.audit.subject import AuditError, Subject, _import_torch, tolerance_scale
from residlab.audit.runs import (
    COMPONENTS, AuditInput, DeclaredSite, Run, parameter_digests, run_audit_measured, sha256_json, tensor_sha256,
)
from residlab.audit.schema import RECORDS, SCHEMA
from residlab.audit.measures import logit_difference, measure_write, metric_direction, normaliser_epsilon, shown
from residlab.audit.attribution import FINAL_NORM_BIAS, OUTPUT_BIAS, bias_terms, frozen_scale, write_term

LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors")
# Reproduction tolerance of each directly computed quantity: |re-run - recorded| <= absolute + relative *
# |recorded|. Re-runs in one environment agree exactly; the margin admits another thread count or library build
# (float32 rounding). The total effect and the patch recovery are computed from metrics: their tolerances are
# derived from the metric's, value by value (``total_effect_tolerance``, ``recovery_tolerance``). These are
# float32's; a packet measured in another dtype declares them times its tolerance scale (``tolerances``).
TOLERANCES = {
    "metric": {"absolute": 1e-5, "relative": 1e-5},
    "norm": {"absolute": 1e-5, "relative": 1e-5},
    "direct_projection": {"absolute": 1e-5, "relative": 1e-5},
    "direct_effect_exact": {"absolute": 1e-5, "relative": 1e-5},
    "dla_term": {"absolute": 1e-5, "relative": 1e-5},
    "dla_scale": {"absolute": 1e-6, "relative": 1e-5},
    "survival_cosine": {"absolute": 1e-5, "relative": 0.0},
    "retained_fraction": {"absolute": 1e-5, "relative": 1e-5},
    "replacement": {"absolute": 1e-5, "relative": 1e-5},
    "block_identity": {"absolute": 1e-4, "relative": 0.0},
}
_CONSTANT = "absolute + relative x |recorded|, the constants in this field's tolerance"


def tolerances(scale: int = 1) -> dict:
    """Each directly computed quantity's tolerance constants in a packet of tolerance scale ``scale``."""
    return {name: {key: value * scale for key, value in tolerance.items()} for name, tolerance in TOLERANCES.items()}


def _metric_rule(scale: int = 1) -> str:
    metric = tolerances(scale)["metric"]
    return (f"t(M) = {metric['absolute']:g} + {metric['relative']:g} x |M|: float32 rounding of two logits"
            + ("" if scale == 1 else f", times {scale} for the run's dtype (the packet's execution.tolerance_scale)"))


# Each quantity's formula and tolerance, written into measurement.json (field quantities).
QUANTITIES = {
    "metric": ("M = logit(target) - logit(rival) at the readout position (baseline.clean, baseline.corrupt)",
               _metric_rule()),
    "norm": ("|w|: the Euclidean norm of the write w at its position", _CONSTANT),
    "direct_projection": ("d . w with d = u_target - u_rival, rows of the output embedding", _CONSTANT),
    "direct_effect_exact": ("M(N(r_final)) - M(N(r_final - w)) through the final normaliser N, what w adds to M with "
                            "nothing downstream recomputed, for a write at the readout position; null elsewhere",
                            _CONSTANT),
    "dla_term": ("direct logit attribution, the final normaliser's scale s frozen at r_final: (d * g) . P(w) / s, "
                 "g its gain, P the centring (LayerNorm) or the identity (RMSNorm), for a write at the readout "
                 "position; null elsewhere. Over every write (the embedding counted as one) the terms and the two "
                 "bias terms (attribution) sum to M", _CONSTANT),
    "dla_scale": ("s = sqrt(var(r_final) + eps) (LayerNorm) or sqrt(mean(r_final^2) + eps) (RMSNorm), at the "
                  "readout position", _CONSTANT),
    "survival_cosine": ("cos(w, r_final) at w's position; null when either is zero", _CONSTANT),
    "retained_fraction": ("(w + every later write at w's position) . w / |w|^2; null when w is zero", _CONSTANT),
    "total_effect": ("T = M(clean run) - M(clean run, w zeroed at its position): what zeroing w removes, everything "
                     "after w recomputed; positive when w pushes M up, as the direct effect and the DLA term",
                     "t(M_clean - T) + t(M_clean): the two metrics' tolerances added (relative 0)"),
    "patch_recovery": ("R = (M(corrupt run, w replaced by the clean run's w) - M(corrupt)) / g, the gap g = "
                       "M(clean) - M(corrupt): the share of the gap the clean w restores (denoising); null when g = 0",
                       "(t(M_patched) + |1 - R| t(M_corrupt) + |R| t(M_clean)) / (|g| - t(M_clean) - t(M_corrupt)) "
                       "with M_patched = M_corrupt + R g: a ratio's error when each metric is off by at most its "
                       "tolerance (relative 0); null, and R not compared, when |g| is within t(M_clean) + t(M_corrupt)"),
    "replacement": ("the vector written in place of w: zeros (zero ablation, the total effect) or the clean run's w "
                    "(patch); sha256 of its float32 bytes", _CONSTANT + ", entry by entry; the sha256 is recomputed from the values"),
    "block_identity": ("max over blocks of |resid_post - (resid_pre + attn_write + mlp_write)| less float32 "
                       "rounding at the block's scale", _CONSTANT),
}  # fmt: skip


def quantities(scale: int = 1) -> dict:
    """``QUANTITIES`` as a packet of tolerance scale ``scale`` states them (only the metric's rule names numbers)."""
    return QUANTITIES | {"metric": (QUANTITIES["metric"][0], _metric_rule(scale))}


def metric_tolerance(metric: float, scale: int = 1) -> float:
    tolerance = TOLERANCES["metric"]
    return scale * (tolerance["absolute"] + tolerance["relative"] * abs(metric))


def total_effect_tolerance(clean: float, effect: float, scale: int = 1) -> dict:
    """The total effect T = M_clean - M_ablated is off by at most t(M_ablated) + t(M_clean), M_ablated = M_clean - T."""
    return {"absolute": metric_tolerance(clean - effect, scale) + metric_tolerance(clean, scale), "relative": 0.0}


def recovery_tolerance(clean: float, corrupt: float, recovery: float | None, scale: int = 1) -> dict:
    """R = (M_patched - M_corrupt) / g, g = M_clean - M_corrupt. With each metric off by e_i, |e_i| <= t(M_i):
    R' - R = (e_patched - (1 - R) e_corrupt - R e_clean) / (g + e_clean - e_corrupt), whose size is at most the
    value below; unbounded (None) when the gap is within the metrics' tolerances."""
    gap = clean - corrupt
    room = abs(gap) - metric_tolerance(clean, scale) - metric_tolerance(corrupt, scale)
    if recovery is None or room <= 0:
        return {"absolute": None, "relative": 0.0}
    patched = corrupt + recovery * gap
    spread = (metric_tolerance(patched, scale) + abs(1 - recovery) * metric_tolerance(corrupt, scale)
              + abs(recovery) * metric_tolerance(clean, scale))
    return {"absolute": spread / room, "relative": 0.0}


def _measured(value, quantity: str | dict, scale: int = 1) -> dict:
    """A value and its tolerance: a quantity's constants (times the packet's tolerance scale), or a tolerance
    derived for this value."""
    return {"value": value, "tolerance": dict(tolerances(scale)[quantity] if isinstance(quantity, str) else quantity)}


def _vector_values(vector) -> list[float]:
    return [float(f"{v:.9g}") for v in vector.tolist()]  # 9 significant digits round-trip float32


def _final_norm_epsilon(subject: Subject) -> float:
    try:
        return normaliser_epsilon(subject.final_norm)
    except ValueError as error:  # one line, as every refusal
        raise AuditError(str(error)) from None


def _module_path(model, target) -> str:
    """Where ``target`` is in ``model``, under the names packets record."""
    return canonical_path(module_path(model, target))


def model_record(subject: Subject, threads: int, parameters: dict | None = None) -> dict:
    """``parameters``: the ``parameter_digests`` the audit measured after its last run (hashed here otherwise)."""
    kind = subject.block_type
    blocks = subject.blocks
    return {
        "source": subject.source,
        "block_type": kind.name,
        "model_class": type(subject.model).__name__,
        "block_class": type(blocks[0]).__name__,
        "blocks": len(blocks),
        "width": int(subject.head.weight.shape[1]),
        "vocab_size": subject.vocab_size,
        "residual_kind": kind.sites.residual_kind,
        "mlp": kind.mlp,
        "site_table": {
            "layers": kind.layers,
            "per_block": site_table(kind),
            "mlp_reads": kind.sites.mlp_reads,
            "identity": kind.sites.identity,
        },
        "normaliser": {
            "type": kind.normaliser,
            "final_module": kind.final_norm,
            "final_class": type(subject.final_norm).__name__,
            "epsilon": _final_norm_epsilon(subject),
            "placement": kind.placement,
        },
        "output_embedding": _module_path(subject.model, subject.head),
        "parameters": parameters or parameter_digests(subject.model),
        # No device: the numbers verify on any device, and under any placement.
        "execution": {"dtype": subject.dtype, "tolerance_scale": tolerance_scale(subject.dtype), "threads": threads,
                      "attention": "eager", "gradients": "off (torch.inference_mode)", "mode": "eval"},  # fmt: skip
        "libraries": library_versions(LIBRARIES),
    }


def input_record(audit_input: AuditInput, sites: list[DeclaredSite]) -> dict:
    clean, corrupt = list(audit_input.clean_ids), list(audit_input.corrupt_ids)
    return {
        "clean": {"ids": clean, "text": audit_input.clean_text},
        "corrupt": {"ids": corrupt, "text": audit_input.corrupt_text},
        "length": len(clean),
        "attention_mask": [1] * len(clean),
        "differing_positions": [p for p, (a, b) in enumerate(zip(clean, corrupt)) if a != b],
        "target": {"id": audit_input.target, "text": audit_input.target_text},
        "rival": {"id": audit_input.rival, "text": audit_input.rival_text},
        "readout_position": len(clean) - 1,
        "written_positions": sorted({site.position for site in sites}),
    }


def _run_entry(run: Run, scale: int) -> dict:
    entry = {"id": run.run_id, "input": run.input_name}
    if run.site is None:
        return entry | {"intervention": None}
    replacement = {"kind": run.replacement_kind, "values": _vector_values(run.replacement),
                   "sha256": tensor_sha256(run.replacement), "tolerance": tolerances(scale)["replacement"]}  # fmt: skip
    if run.replacement_kind == "clean write":
        replacement["from_run"] = "clean"
    return entry | {
        "intervention": {"site": run.site.name, "position": run.site.position, "source_run": run.source_run,
                         "replacement": replacement}  # fmt: skip
    }


def intervention_record(runs: list[Run], sites: list[DeclaredSite], scale: int = 1) -> dict:
    return {
        "declared_sites": [
            {"name": s.name, "component": s.component, "block": s.block, "position": s.position} for s in sites
        ],
        "recorded_sites": list(runs[0].sites),  # every site each run recorded, in forward order
        "runs": [_run_entry(run, scale) for run in runs],
        "held_fixed": [
            "every parameter tensor (model record digest, checked before and after every run)",
            "the input ids and attention mask of the run the intervention is applied to",
            "every other position of the declared site",
            "every site upstream of the declared site (checked bit-identical to the source run)",
        ],
        "recomputed": "every site downstream of the declared site, by the model's own forward",
    }


def _metric(logits, audit_input: AuditInput) -> float:
    return logit_difference(logits, audit_input.target, audit_input.rival)


def _attribution(subject, audit_input, clean) -> dict:
    """What every write's DLA term shares at the readout position: the frozen scale and the two bias terms."""
    torch = _import_torch()
    subject_scale = tolerance_scale(subject.dtype)
    final_state = clean.sites[site_name(len(subject.blocks) - 1, "resid_post")][len(audit_input.clean_ids) - 1]
    with torch.inference_mode():
        scale = float(frozen_scale(subject.final_norm, final_state))
        biases = bias_terms(subject.final_norm, subject.head, audit_input.target, audit_input.rival)
    return {
        "rule": "M = sum over every write w at the readout position (the embedding counted as one) of dla_term(w) "
        "+ final_normaliser_bias + output_bias, the scale s frozen: additive attribution, not a removal effect",
        "scale": _measured(scale, "dla_scale", subject_scale),
        "final_normaliser_bias": _measured(biases[FINAL_NORM_BIAS], "dla_term", subject_scale),
        "output_bias": _measured(biases[OUTPUT_BIAS], "dla_term", subject_scale),
    }


def _write_result(subject, audit_input, site, runs_by_id, direction, final_metric: dict) -> dict:
    """``final_metric``: the metric of the final state's readout, by position, filled on first use (every write at
    one position shares it)."""
    torch = _import_torch()
    clean = runs_by_id["clean"]
    last_block = len(subject.blocks) - 1
    w = clean.sites[site.name][site.position]
    final_state = clean.sites[site_name(last_block, "resid_post")][site.position]
    later = [site_name(site.block, "mlp_write")] if site.component == "attn" else []
    later += [site_name(b, write) for b in range(site.block + 1, last_block + 1) for write in COMPONENTS.values()]
    metrics = {"clean": _metric(clean.logits, audit_input), "corrupt": _metric(runs_by_id["corrupt"].logits, audit_input),
               "ablated": _metric(runs_by_id[f"ablate {site.label}"].logits, audit_input),
               "patched": _metric(runs_by_id[f"patch {site.label}"].logits, audit_input)}  # fmt: skip
    readout_metric = None
    if site.position == len(audit_input.clean_ids) - 1:  # elsewhere the write has no direct path to the readout
        def readout_metric(state) -> float:
            return _metric(subject.readout(state), audit_input)

    dla_term = None
    with torch.inference_mode():
        if readout_metric is not None:
            dla_term = write_term(subject.final_norm, subject.head, w, final_state, audit_input.target, audit_input.rival)
        if readout_metric is not None and site.position not in final_metric:
            final_metric[site.position] = readout_metric(final_state)
        measures = measure_write(w, final_state, [clean.sites[name][site.position] for name in later], direction,
                                 readout_metric=readout_metric, final_metric=final_metric.get(site.position),
                                 **metrics)  # fmt: skip
    scale = tolerance_scale(subject.dtype)
    return {
        "site": site.name,
        "position": site.position,
        **{name: _measured(getattr(measures, name), name, scale) for name in
           ("norm", "direct_projection", "direct_effect_exact")},
        "dla_term": _measured(dla_term, "dla_term", scale),
        **{name: _measured(getattr(measures, name), name, scale) for name in ("survival_cosine", "retained_fraction")},
        "total_effect": _measured(measures.total_effect,
                                  total_effect_tolerance(metrics["clean"], measures.total_effect, scale)),
        "patch_recovery": _measured(measures.patch_recovery,
                                    recovery_tolerance(metrics["clean"], metrics["corrupt"], measures.patch_recovery, scale)),
    }  # fmt: skip


def block_identity_excesses(subject: Subject, run: Run) -> list[float]:
    """Per block: |resid_post - (resid_pre + attn_write + mlp_write)| at its largest, less the float32 allowance
    for the block's scale (IDENTITY_RELATIVE x its largest entry); at most IDENTITY_ABSOLUTE when the site
    table matches the block. Both allowances are float32's, times the tolerance scale of the run's dtype."""
    excesses, identity_relative = [], IDENTITY_RELATIVE * tolerance_scale(subject.dtype)
    for b in range(len(subject.blocks)):
        parts = [run.sites[site_name(b, s)] for s in BLOCK_SITES]
        error = float((parts[3] - (parts[0] + parts[1] + parts[2])).abs().max())
        excesses.append(error - identity_relative * max(float(p.abs().max()) for p in parts))
    return excesses


def invariant_problems(subject: Subject, runs: list[Run], comparisons: list[dict]) -> list[str]:
    """What breaks the packet's invariants: the block identity, frozen parameters, interventions confined."""
    problems = [f"block {b}: output differs from input + attention write + MLP write by more than float32 rounding"
                for b, excess in enumerate(block_identity_excesses(subject, runs[0]))
                if excess > IDENTITY_ABSOLUTE * tolerance_scale(subject.dtype)]
    problems += [f"run {run.run_id}: the parameters changed during the run" for run in runs
                 if run.digest_before != run.digest_after]  # fmt: skip
    for c in comparisons:
        if c["upstream_identical"] != c["upstream_sites"]:
            problems.append(f"run {c['run']}: a site upstream of the declared one differs from run {c['source_run']}")
        if not (c["declared_equals_replacement"] and c["other_positions_identical"]):
            problems.append(f"run {c['run']}: the declared site does not hold exactly its replacement")
    return problems


def measurement_record(subject, audit_input, sites, runs, comparisons) -> dict:
    runs_by_id = {run.run_id: run for run in runs}
    direction = metric_direction(subject.head.weight, audit_input.target, audit_input.rival)
    final_metric: dict[int, float] = {}
    clean, corrupt = runs_by_id["clean"], runs_by_id["corrupt"]
    scale = tolerance_scale(subject.dtype)
    return {
        "metric": "logit(target) - logit(rival) at the readout position",
        "readout": (
            f"{subject.block_type.final_norm} then {_module_path(subject.model, subject.head)}, applied to "
            f"{site_name(len(subject.blocks) - 1, 'resid_post')} at the readout position"
        ),
        "direction": "u_target - u_rival: rows of the output embedding",
        "direct_effect_rule": "M(N(r_final)) - M(N(r_final - w)) for a write at the readout position; null elsewhere, "
        "where the write reaches the readout only through later attention",
        "survival_rule": "cosine of w with the final state at w's position; retained = (w + every later write) . w / |w|^2",
        "tolerance_rule": "reproduced when |re-run - recorded| <= absolute + relative * |recorded|; an absolute of "
        "null: not determined, not compared",
        "quantities": {name: {"formula": formula, "tolerance": tolerance}
                       for name, (formula, tolerance) in quantities(scale).items()},
        "baseline": {
            "clean": _measured(_metric(clean.logits, audit_input), "metric", scale),
            "corrupt": _measured(_metric(corrupt.logits, audit_input), "metric", scale),
        },
        "attribution": _attribution(subject, audit_input, clean),
        "results": [_write_result(subject, audit_input, site, runs_by_id, direction, final_metric) for site in sites],
        "checks": {
            "parameter_digest_per_run": [
                {"run": run.run_id, "before": run.digest_before, "after": run.digest_after} for run in runs
            ],
            "intervened_runs": comparisons,
            "block_identity": {
                "what": "max over blocks of |resid_post - (resid_pre + attn_write + mlp_write)| in the clean run, "
                f"less {IDENTITY_RELATIVE * scale:g} x the block's largest entry; at most {IDENTITY_ABSOLUTE * scale:g}",
                "excess": _measured(max(block_identity_excesses(subject, clean)), "block_identity", scale),
            },
        },
    }


def linked_records(bodies: dict) -> dict:
    """Add to each record its links: the other records' SHA-256 and one digest per top-level field."""
    digests = {
        name: {"sha256": sha256_json(body), "fields": {key: sha256_json(value) for key, value in body.items()}}
        for name, body in bodies.items()
    }
    return {
        name: {"record": name, "schema": SCHEMA, **body, "links": {other: digests[other] for other in RECORDS if other != name}}
        for name, body in bodies.items()
    }


def build_packet(subject: Subject, audit_input: AuditInput, sites: list[DeclaredSite], threads: int = 1) -> dict:
    """The four linked records of one audit."""
    runs, comparisons, parameters = run_audit_measured(subject, audit_input, sites, threads)
    problems = invariant_problems(subject, runs, comparisons)
    if problems:  # the site table does not describe this model: no packet
        raise AuditError("the audit's own checks failed: " + "; ".join(problems))
    bodies = {
        "model": model_record(subject, threads, parameters),
        "input": input_record(audit_input, sites),
        "intervention": intervention_record(runs, sites, tolerance_scale(subject.dtype)),
        "measurement": measurement_record(subject, audit_input, sites, runs, comparisons),
    }
    return linked_records(bodies)


def record_body(record: dict) -> dict:
    """A record without its links and envelope: what the others' links hash."""
    return {key: value for key, value in record.items() if key not in ("links", "record", "schema")}


# ---------------------------------------------------------------------------------------------------------
# Writing a packet.


def packet_files(packet: dict) -> dict[str, bytes]:
    """The packet's files: each record as indented JSON with sorted keys and a final newline, in UTF-8."""
    return {f"{name}.json": (json.dumps(packet[name], indent=1, sort_keys=True) + "\n").encode("utf-8") for name in RECORDS}


def write_packet(packet: dict, output_dir: Path) -> Path:
    """Write the four records into ``output_dir`` by the one output rule: all four or nothing."""
    return write_directory(output_dir, packet_files(packet))


def audit_to_directory(subject, audit_input, sites, output_dir: Path, threads: int = 1) -> dict:
    check_output_directory(output_dir)  # before any work
    packet = build_packet(subject, audit_input, sites, threads)
    write_packet(packet, output_dir)
    return packet


def summary_lines(packet: dict) -> list[str]:
    model, measurement, inputs = packet["model"], packet["measurement"], packet["input"]
    lines = []
    if model["source"]["kind"] == "specimen":
        lines.append(f"WARNING: random-weight {model['source']['name']} specimen: these numbers describe no trained model")
    lines.append(
        f"{model['model_class']} ({model['block_type']}, {model['blocks']} blocks, width {model['width']}); "
        f"parameters {model['parameters']['digest'][:16]}..."
    )
    lines.append(
        f"metric logit({inputs['target']['id']}) - logit({inputs['rival']['id']}) at position "
        f"{inputs['readout_position']}: clean {shown(measurement['baseline']['clean']['value']):.3f}, "
        f"corrupt {shown(measurement['baseline']['corrupt']['value']):.3f}"
    )
    lines.append("direct, DLA and total are what the write adds to the metric (total: M(clean) - M(clean, w zeroed), "
                 "what zeroing it removes); recovery: the share of clean - corrupt the clean w restores")
    header = ("write", "norm", "d.w", "direct", "DLA", "total", "recovery", "cos", "retained")
    lines.append(f"{header[0]:<24}" + "".join(f"{h:>10}" for h in header[1:]))
    for row in measurement["results"]:
        values = [row[key]["value"] for key in ("norm", "direct_projection", "direct_effect_exact", "dla_term",
                                                 "total_effect", "patch_recovery", "survival_cosine",
                                                 "retained_fraction")]  # fmt: skip
        cells = "".join(f"{'n/a':>10}" if v is None else f"{shown(v):10.3f}" for v in values)
        lines.append(f"{row['site'] + '@' + str(row['position']):<24}{cells}")
    return lines
