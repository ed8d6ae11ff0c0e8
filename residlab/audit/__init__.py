"""The Residual Contribution Audit as a tool: audit declared residual writes of a causal decoder and write a
verifiable packet of four linked records; re-run a packet and check it.

    python3 audit_residual_writes.py --specimen gpt2 --clean-ids 5,17,3,40 --corrupt-ids 9,17,3,40 \\
        --target-id 12 --rival-id 30 --output packet-01
    python3 audit_residual_writes.py verify packet-01
    python3 audit_residual_writes.py --model pythia-artifacts --clean " The cat sat" --corrupt " The dog sat" \\
        --target " on" --rival " down" --site attn:5:-1 --site mlp:5:-1 --output packet-02

For each declared write w (a block's attention or MLP write at one position), with the metric M = logit(target)
- logit(rival) read at the last position: its norm; the direct projection d.w onto d = u_target - u_rival (the
unembedding rows); the exact direct effect M(N(r_final)) - M(N(r_final - w)) through the final normaliser N;
its direct logit attribution term with N's scale frozen (``attribution``; with the frozen scale and the two bias
terms, recorded once per packet, every write's term sums to M); survival (cosine with the final state, and the share of w that w and every later write keep along w); the
total effect M(clean) - M(clean with w zeroed at its position); and the clean-into-corrupt patch recovery
(M(corrupt, clean w) - M(corrupt)) / (M(clean) - M(corrupt)). Every effect has one sign: what the write adds to M,
M(with it) - M(without it), so for a write in the last block at the readout position the direct and total effects
are one number.

The packet (model.json, input.json, intervention.json, measurement.json) is written by the one output rule
(``residlab.capture.outdir``): into a new name or an empty real directory, all four records or none, and the
output path is checked before any model is built or loaded. Each record names the other three by the SHA-256 of
their canonical JSON (keys sorted, no spaces, ASCII) taken without their own ``links`` entry, plus one digest per
top-level field, so a changed record is named down to the field. Every run hashes all parameter tensors before
and after it, and every intervened run is compared site by site with the run it came from.

Verification trusts nothing it reads: every record is checked against its schema before any value is used, and
every field is re-derived and compared (exactly, or within a tolerance derived from the computation and itself
re-derived), or declared informational (the library versions) and only reported. Labels are re-derived from the
tokenizer, every digest is recomputed, and a model other than the packet's is refused in one line.

In detail (``schema``, ``verify``): the packet directory must hold exactly ``model.json``, ``input.json``,
``intervention.json`` and ``measurement.json``, each a regular file (a link, a FIFO, a directory or anything extra
is refused, saying what it is), read once under the same read rule as the artifacts. Each record is parsed strictly
(a key written twice, ``NaN``, ``Infinity``, a number that overflows such as ``1e999``, an integer of more than 20
digits, nesting deeper than 10 levels are refused) and checked against its schema before any value is used: every
field's type, finite numbers within range, bounded strings and lists, none missing, none unknown; a refusal is one
line naming the record, the field and what was expected. Every field is then re-derived and compared: from the
re-run (exactly, or within the tolerance the packet declares, itself re-derived), from the tokenizer (a prompt's or
token's ``text`` must tokenize to the recorded ids; without a tokenizer a packet holds no text), or from the records
(every link's SHA-256 and per-field digests, each replacement's SHA-256 from its values). The library versions are
declared informational: reported, never trusted. The total effect's tolerance is the sum of its two metrics'
tolerances, and the patch recovery's is a ratio's error: (t(M_patched) + |1 - R| t(M_corrupt) + |R| t(M_clean)) /
(|gap| - t(M_clean) - t(M_corrupt)); ``measurement.json`` states every quantity's formula and tolerance (field
``quantities``). A packet verified against another model is refused in one line naming the model it was made with
and how to verify it; ``--seed`` is refused without ``--specimen``, and beyond 0 to 2**64 - 1.
``tests/unit/audit/test_audit_forgery.py`` (Hypothesis, derandomized) changes every field of every record of each
block type's packet, re-linked or not, and requires a refusal naming the record and field or an acceptance within
the declared tolerance, never a traceback.

The model runs with eager attention, in ``torch.inference_mode``, loaded offline from a local directory
(config.json and safetensors, a built-in transformers class, no remote code) or built as a random-weight specimen
from a small configuration. Specimen numbers are NOT those of any trained model. By default it runs in float32 on
the CPU; ``loading`` places it elsewhere (``--device cpu|cuda|cuda:N|mps``, refused in one line where absent), in
a declared approximation (``--dtype bfloat16|float16``), or spread by accelerate over accelerators, the CPU and a
temporary disk folder (``--device-map auto --max-memory DEVICE=SIZE,...``, e.g. ``cpu=2GB`` or
``0=20GiB,cpu=64GiB``; accelerate imported only then). A dispatched run's numbers are the undispatched run's, byte
for byte: accelerate's hooks move weights, the audit's recording hooks sit on the same modules and are removed as
always, and every parameter is hashed where it lives, an offloaded one read alone from the offload store, so no
hash gathers the model. The records of a run in another dtype are measured in float32; the packet (schema 5)
records ``execution.dtype`` and ``execution.tolerance_scale`` (float32 1, float16 512, bfloat16 4096: the
dtype's unit roundoff over float32's, divided by 16), every tolerance is float32's times that scale, and
``verify`` re-runs in the packet's dtype on whatever device or device map it is given, saying so in its first
line. The packet records no device: its numbers verify on any.

The audit stands on the capture floor (``residlab.capture``): the block tables say where each site is, the site
names and the resolver come from ``capture.sites``, every run records through ``capture.recording.record_sites``
(the declared write replaced by a ``capture.patching`` edit), and the identity tolerances are ``capture.blocks``'.
Its modules, each importing only those above it and the capture floor:

- ``subject``: what is audited (``Subject``, ``AuditError``, ``DTYPES``, ``tolerance_scale``) and what is read
               from disk without loading a model (the model files' digests, ``read_json_object``).
- ``loading``: the one home of loading: a specimen's name and seed, or a model directory, and a ``Placement``
               (``--device``, ``--dtype``, ``--device-map``/``--max-memory``) turned into a placed, loaded
               ``Subject`` in one call (``place_specimen``, ``place_directory``; ``build_specimen`` and
               ``load_model_directory`` for a dtype and device alone), with every dtype and device decision,
               accelerate's dispatch (``device_map_for``, ``cpu_budget``, ``ACCELERATE_PIN``) and the checks of
               what loaded.
- ``runs``:    hashing, ``DeclaredSite``, ``AuditInput`` and its parsing, ``execute`` (one recorded forward),
               ``compare_to_source``, ``run_audit``; ``ParameterWatch`` (two hashes per audit, version counters
               between them).
- ``measures``: every measure of one write, written once (``measure_write``: the direct effect, the removal and
               patch effects, survival), the metric (``logit_difference``, ``metric_direction``) and
               ``patch_recovery``; the lesson reads the same functions.
- ``schema``:  each record's schema (``RECORD_SCHEMAS``, ``check_record``), the strict parse (``parse_record``: no
               duplicate key, no NaN or overflowing number, bounded integers and nesting), ``INFORMATIONAL``.
- ``packet``:  the four records, their links, ``build_packet``, ``write_packet``, ``audit_to_directory``,
               ``summary_lines``.
- ``verify``:  ``read_packet`` (exactly four regular files, each read once under ``capture.files``' read rule and
               checked against its schema), ``check_links``, ``check_labels``, ``check_replacements``,
               ``compare_values``, ``verify_packet``, ``subject_from_packet``.
- ``attribution``: direct logit attribution with the final normaliser's scale frozen (``direct_logit_attribution``,
               ``write_term``, ``bias_terms``): per-write terms and the two named bias terms, summing to the metric;
               a packet measure since schema 3 (``dla_term`` per write at the readout, ``attribution``), which the
               lesson and Lab 06 show beside the removal effects. Schema 4 names the block boundaries resid_pre and
               resid_post; schema 5 records the total effect (``total_effect``, M(clean) - M(w zeroed)) where
               schema 4 recorded its negative (``ablation_effect``), and the dtype and its tolerance scale; a packet
               of an older schema is refused in one line.
- ``cli``:     the command line (``residlab audit``, and the downloadable runner ``audit_residual_writes.py``,
               which ``residlab sync`` bundles from these modules and the capture floor's).
"""

from __future__ import annotations

from residlab.capture.blocks import IDENTITY_ABSOLUTE, IDENTITY_RELATIVE
from residlab.capture.sites import BLOCK_SITES
from residlab.audit.subject import (
    DTYPES,
    MAX_SEED,
    MODEL_FILES,
    AuditError,
    Subject,
    model_directory_files,
    read_json_object,
    tolerance_scale,
)
from residlab.audit.loading import (
    ACCELERATE_PIN,
    Placement,
    build_specimen,
    check_device,
    cpu_budget,
    load_model_directory,
    parse_max_memory,
    place_directory,
    place_specimen,
)
from residlab.audit.runs import (
    COMPONENTS,
    HASH_THREADS,
    MAX_THREADS,
    AuditInput,
    DeclaredSite,
    Run,
    canonical_json,
    check_input,
    compare_to_source,
    execute,
    parameter_digests,
    parse_ids,
    parse_site,
    ParameterWatch,
    run_audit,
    run_audit_measured,
    sha256_json,
    single_token,
    tensor_sha256,
    tokenize_prompt,
)
from residlab.audit.schema import INFORMATIONAL, RECORD_SCHEMAS, RECORDS, SCHEMA, check_record, parse_record
from residlab.audit.packet import (
    LIBRARIES,
    QUANTITIES,
    TOLERANCES,
    audit_to_directory,
    block_identity_excesses,
    build_packet,
    input_record,
    intervention_record,
    invariant_problems,
    linked_records,
    measurement_record,
    model_record,
    packet_files,
    record_body,
    recovery_tolerance,
    summary_lines,
    total_effect_tolerance,
    write_packet,
)
from residlab.audit.verify import (
    CHECK_LABELS,
    MAX_RECORD_BYTES,
    Verification,
    check_labels,
    check_links,
    check_number,
    check_replacements,
    check_subject,
    compare_values,
    read_packet,
    subject_from_packet,
    verify_packet,
    within_declared,
)

__all__ = [
    "ACCELERATE_PIN", "DTYPES", "Placement", "check_device", "cpu_budget", "parse_max_memory", "place_directory",
    "place_specimen", "tolerance_scale", "within_declared",
    "AuditError", "AuditInput", "BLOCK_SITES", "CHECK_LABELS", "COMPONENTS", "DeclaredSite", "HASH_THREADS", "IDENTITY_ABSOLUTE",
    "IDENTITY_RELATIVE", "INFORMATIONAL", "LIBRARIES", "MAX_RECORD_BYTES", "MAX_SEED", "MAX_THREADS", "MODEL_FILES",
    "QUANTITIES", "RECORDS", "RECORD_SCHEMAS", "Run", "SCHEMA", "Subject", "TOLERANCES", "Verification", "ParameterWatch",
    "audit_to_directory", "block_identity_excesses", "build_packet", "build_specimen",
    "canonical_json", "check_input", "check_labels", "check_links", "check_number", "check_record", "check_replacements",
    "check_subject", "compare_to_source", "compare_values", "execute", "input_record", "intervention_record",
    "invariant_problems", "linked_records", "load_model_directory", "measurement_record", "model_directory_files",
    "model_record", "packet_files", "parameter_digests", "parse_ids", "parse_record", "parse_site",
    "read_json_object", "read_packet", "record_body", "recovery_tolerance", "run_audit", "run_audit_measured", "sha256_json",
    "single_token", "subject_from_packet", "summary_lines", "tensor_sha256", "tokenize_prompt", "total_effect_tolerance",
    "verify_packet", "write_packet",
]  # fmt: skip
