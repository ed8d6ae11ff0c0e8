"""The packet's schema: what each of the four records may hold, checked before any value in it is used.

A record is parsed strictly (``parse_record``): a key written twice in one object, ``NaN`` or ``Infinity``, a
number that overflows to infinity (``1e999``), an integer of more than ``MAX_INTEGER_DIGITS`` digits, and nesting
deeper than ``MAX_DEPTH`` are kept as markers, never as values, so the check below names the field that holds
them. ``check_record`` then walks the record against ``RECORD_SCHEMAS``: every field's type, finite numbers in
their range, bounded strings and lists, no field missing and none unknown. A failure is one ``AuditError``
naming the record, the field and what was expected.

Every field is either re-derived by ``verify`` and compared (exactly, or within the tolerance the packet
declares and the verifier re-derives), or listed in ``INFORMATIONAL`` and excluded from trust.
"""

from __future__ import annotations

import json
import math
import re

from residlab.capture.blocks import SPECIMEN_CONFIGS
from residlab.audit.subject import DTYPES, MAX_SEED, AuditError
from residlab.audit.runs import COMPONENTS, MAX_THREADS

# 3: direct logit attribution (dla_term, attribution). 4: site names: the block boundaries are resid_pre and
# resid_post (TransformerLens's names, the lesson's), in the site table, the identity and the measurement's texts.
# 5: one sign for every effect, what the write adds to the metric: ablation_effect (M(w zeroed) - M(clean)) became
# total_effect (M(clean) - M(w zeroed)), its formula and tolerance in quantities with it; and the model record's
# execution holds the dtype (float32, bfloat16, float16) and its tolerance_scale, no device.
SCHEMA = "residlab-audit-packet/5"
RECORDS = ("model", "input", "intervention", "measurement")
INFORMATIONAL = {"model": ("libraries",)}  # reported beside the verdict, never compared or trusted
MAX_DEPTH = 10  # the deepest record nests 6 levels (intervention.runs[i].intervention.replacement.tolerance)
MAX_INTEGER_DIGITS = 20  # 2**64 - 1 has 20
MAX_TEXT = 10_000  # characters in any one string (a prompt included)
MAX_ITEMS = 1 << 22  # entries in any one list or object
MAX_TOKENS = 1 << 16  # prompt length
FLOAT32_MAX = 3.4028234663852886e38  # a replacement value beyond it is no float32
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_STRINGS_OR_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class Unreadable:
    """What the strict parser keeps in place of a value it will not use; the schema names the field."""

    def __init__(self, what: str):
        self.what = what


class DuplicatedKeys(dict):
    """An object in which a key was written twice (the ordinary parser silently keeps the last one)."""

    def __init__(self, pairs, duplicated: str):
        super().__init__(pairs)
        self.duplicated = duplicated


def _object_once(pairs):
    seen = set()
    for key, _ in pairs:
        if key in seen:
            return DuplicatedKeys(pairs, key)
        seen.add(key)
    return dict(pairs)


def _finite_float(text: str):
    value = float(text)
    return value if math.isfinite(value) else Unreadable(f"the number {text[:20]}, which overflows a float")


def _bounded_integer(text: str):
    digits = len(text.lstrip("-"))
    return int(text) if digits <= MAX_INTEGER_DIGITS else Unreadable(f"an integer of {digits} digits")


def nesting_depth(text: str) -> int:
    """How deep objects and lists nest, brackets inside strings not counted; stops counting past MAX_DEPTH."""
    depth = deepest = 0
    for match in _STRINGS_OR_BRACKETS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                break
        elif token in "]}":
            depth -= 1
    return deepest


def parse_record(data: bytes, name: str):
    """A record's bytes as JSON, strictly; an ``AuditError`` naming the record when they are not JSON at all."""
    where = f"record {name}: {name}.json"
    try:
        text = data.decode("utf-8")
        value = json.loads(text, object_pairs_hook=_object_once, parse_float=_finite_float, parse_int=_bounded_integer,
                           parse_constant=lambda word: Unreadable(f"{word}, which is not a number"))  # fmt: skip
    except UnicodeDecodeError:
        raise AuditError(f"{where} is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise AuditError(f"{where} is not valid JSON ({error})") from None
    except RecursionError:  # nested past what the parser follows
        too_deep = True
    else:
        too_deep = nesting_depth(text) > MAX_DEPTH  # scanned once the text is known to be valid JSON: linear time
    if too_deep:
        raise AuditError(f"{where} nests objects or lists deeper than {MAX_DEPTH} levels; no record does")
    return value


# ---------------------------------------------------------------------------------------------------------
# Field types. Each ``check(value, path)`` raises ``SchemaError`` at the first field that does not fit.


class SchemaError(AuditError):
    pass


def _found(value) -> str:
    if isinstance(value, Unreadable):
        return value.what
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"{value!r}" if len(repr(value)) <= 30 else "a number"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return "an object"


def _fail(path: str, expected: str, value) -> None:
    raise SchemaError(f"{path}: expected {expected}, found {_found(value)}")


def _unicode(text: str) -> bool:
    """No lone surrogate (JSON's \\ud800 escapes make one), which no tokenizer or encoder takes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Integer:
    def __init__(self, low: int = 0, high: int = 2**31 - 1):
        self.low, self.high = low, high

    def check(self, value, path: str) -> None:
        if not (isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high):
            _fail(path, f"an integer from {self.low} to {self.high}", value)


class Number:
    """A finite number, optionally null, within [low, high]."""

    def __init__(self, low: float = -math.inf, high: float = math.inf, nullable: bool = False):
        self.low, self.high, self.nullable = low, high, nullable

    def check(self, value, path: str) -> None:
        if value is None and self.nullable:
            return
        if not (_is_number(value) and self.low <= value <= self.high):
            bounds = "" if math.isinf(self.low) and math.isinf(self.high) else f" from {self.low:g} to {self.high:g}"
            _fail(path, f"a finite number{bounds}{' or null' if self.nullable else ''}", value)


class Text:
    def __init__(self, choices=None, pattern=None, nullable: bool = False, max_length: int = MAX_TEXT):
        self.choices, self.pattern, self.nullable, self.max_length = choices, pattern, nullable, max_length

    def check(self, value, path: str) -> None:
        if value is None and self.nullable:
            return
        if self.choices is not None:
            if value not in self.choices or not isinstance(value, str):
                _fail(path, " or ".join(repr(c) for c in self.choices), value)
        elif not (isinstance(value, str) and len(value) <= self.max_length and _unicode(value)):
            _fail(path, f"a string of at most {self.max_length} characters{' or null' if self.nullable else ''}", value)
        elif self.pattern is not None and not self.pattern.match(value):
            _fail(path, "64 lowercase hex digits (a SHA-256)", value)


class Boolean:
    def check(self, value, path: str) -> None:
        if not isinstance(value, bool):
            _fail(path, "true or false", value)


class Array:
    def __init__(self, item, min_length: int = 0, max_length: int = MAX_ITEMS, nullable: bool = False):
        self.item, self.min_length, self.max_length, self.nullable = item, min_length, max_length, nullable

    def check(self, value, path: str) -> None:
        if value is None and self.nullable:
            return
        if not (isinstance(value, list) and self.min_length <= len(value) <= self.max_length):
            _fail(path, f"a list of {self.min_length} to {self.max_length} entries", value)
        for index, item in enumerate(value):
            self.item.check(item, f"{path}[{index}]")


def child_path(path: str, key: str) -> str:
    """'record model, field ' + 'parameters' -> '... field parameters'; then dotted."""
    return f"{path}{key}" if path.endswith(" ") else f"{path}.{key}"


def _check_object(value, path: str) -> None:
    if not isinstance(value, dict):
        _fail(path, "an object", value)
    if isinstance(value, DuplicatedKeys):
        raise SchemaError(f"{child_path(path, value.duplicated)}: written twice in one object; a record holds each key once")


class Fields:
    """An object with exactly these fields (``optional`` ones may be absent), or null when ``nullable``."""

    def __init__(self, fields: dict, optional: dict | None = None, nullable: bool = False):
        self.fields, self.optional, self.nullable = fields, optional or {}, nullable

    def check(self, value, path: str) -> None:
        if value is None and self.nullable:
            return
        _check_object(value, path)
        known = self.fields | self.optional
        for key in value:
            if key not in known:
                raise SchemaError(f"{child_path(path, key)}: not a field of a {SCHEMA} record")
        for key, spec in known.items():
            if key in value:
                spec.check(value[key], child_path(path, key))
            elif key in self.fields:
                raise SchemaError(f"{child_path(path, key)}: missing")


class Mapping:
    """An object of at most ``max_items`` entries with string keys and values of one type."""

    def __init__(self, value, max_items: int = 256):
        self.value, self.max_items = value, max_items

    def check(self, value, path: str) -> None:
        _check_object(value, path)
        if len(value) > self.max_items:
            _fail(path, f"an object of at most {self.max_items} entries", value)
        for key, item in value.items():
            if len(key) > 200:
                raise SchemaError(f"{path}: a key of {len(key)} characters; at most 200")
            self.value.check(item, child_path(path, key))


class Scalar:
    """A JSON string, finite number, true/false or null (a configuration value)."""

    def check(self, value, path: str) -> None:
        if not (value is None or isinstance(value, (bool, str)) or _is_number(value)):
            _fail(path, "a string, number, true/false or null", value)
        if isinstance(value, str):
            Text().check(value, path)


class Kinds:
    """An object whose ``kind`` field chooses its schema."""

    def __init__(self, kinds: dict):
        self.kinds = kinds

    def check(self, value, path: str) -> None:
        _check_object(value, path)
        Text(choices=tuple(self.kinds)).check(value.get("kind"), child_path(path, "kind"))
        self.kinds[value["kind"]].check(value, path)


# ---------------------------------------------------------------------------------------------------------
# The four records.

TEXT = Text()
HEX64 = Text(pattern=_HEX64)
POSITION = Integer(0, MAX_TOKENS - 1)
TOKEN_ID = Integer(0, 2**31 - 1)
FLOAT32 = Number(-FLOAT32_MAX, FLOAT32_MAX)
TOLERANCE = Fields({"absolute": Number(0.0, nullable=True), "relative": Number(0.0, 1.0)})  # a ratio over a small gap: large


def measured(nullable: bool = False) -> Fields:
    return Fields({"value": Number(nullable=nullable), "tolerance": TOLERANCE})


def _envelope(name: str, body: dict) -> Fields:
    digests = Fields({"sha256": HEX64, "fields": Mapping(HEX64, 64)})
    links = Fields({other: digests for other in RECORDS if other != name})
    return Fields({"record": Text(choices=(name,)), "schema": Text(choices=(SCHEMA,)), **body, "links": links})


_SOURCE = Kinds({
    "specimen": Fields({"kind": TEXT, "name": Text(choices=tuple(SPECIMEN_CONFIGS)), "seed": Integer(0, MAX_SEED),
                        "config": Mapping(Scalar()), "note": TEXT}),
    "directory": Fields({"kind": TEXT, "files": Array(Fields({"name": TEXT, "size": Integer(0, 2**53),
                                                                "sha256": HEX64}), 1, 4096)}),
    "copy_model": Fields({"kind": TEXT, "code": TEXT, "training": Mapping(Scalar())}),
})  # fmt: skip
_SITE = Fields({"kind": Text(choices=("input", "output")), "module": TEXT})
_MODEL = {
    "source": _SOURCE, "block_type": TEXT, "model_class": TEXT, "block_class": TEXT,
    "blocks": Integer(1), "width": Integer(1), "vocab_size": Integer(1), "residual_kind": TEXT, "mlp": TEXT,
    "site_table": Fields({"layers": TEXT, "per_block": Mapping(_SITE, 16), "mlp_reads": TEXT, "identity": TEXT}),
    "normaliser": Fields({"type": TEXT, "final_module": TEXT, "final_class": TEXT, "epsilon": Number(0.0, 1.0),
                          "placement": TEXT}),
    "output_embedding": TEXT,
    "parameters": Fields({"order": TEXT, "count": Integer(0, 1 << 20), "elements": Integer(0, 2**53), "digest": HEX64,
                          "tensors": Array(Fields({"name": TEXT, "shape": Array(Integer(0, 2**40), 0, 8),
                                                   "dtype": TEXT, "sha256": HEX64}), 0, 1 << 20)}),
    # Schema 5: the dtype the numbers were measured in and the tolerance scale it declares; no device.
    "execution": Fields({"dtype": Text(choices=DTYPES), "tolerance_scale": Integer(1, 1 << 20),
                         "threads": Integer(1, MAX_THREADS), "attention": TEXT, "gradients": TEXT, "mode": TEXT}),
    "libraries": Mapping(Text(nullable=True, max_length=200), 32),
}  # fmt: skip
_IDS = Array(TOKEN_ID, 1, MAX_TOKENS)
_PROMPT = Fields({"ids": _IDS, "text": Text(nullable=True)})
_TOKEN = Fields({"id": TOKEN_ID, "text": Text(nullable=True)})
_INPUT = {
    "clean": _PROMPT, "corrupt": _PROMPT, "length": Integer(1, MAX_TOKENS),
    "attention_mask": Array(Integer(0, 1), 1, MAX_TOKENS), "differing_positions": Array(POSITION, 0, MAX_TOKENS),
    "target": _TOKEN, "rival": _TOKEN, "readout_position": POSITION, "written_positions": Array(POSITION, 1, MAX_TOKENS),
}  # fmt: skip
_REPLACEMENT = Fields(
    {"kind": Text(choices=("zero", "clean write")), "values": Array(FLOAT32, 1, 1 << 20), "sha256": HEX64,
     "tolerance": TOLERANCE},
    optional={"from_run": Text(choices=("clean",))},
)  # fmt: skip
_RUN = Fields({
    "id": TEXT, "input": Text(choices=("clean", "corrupt")),
    "intervention": Fields({"site": TEXT, "position": POSITION, "source_run": Text(choices=("clean", "corrupt")),
                            "replacement": _REPLACEMENT}, nullable=True),
})  # fmt: skip
_INTERVENTION = {
    "declared_sites": Array(Fields({"name": TEXT, "component": Text(choices=tuple(COMPONENTS)),
                                    "block": Integer(0, 1 << 16), "position": POSITION}), 1, 1 << 16),
    "recorded_sites": Array(TEXT, 1, 1 << 18), "runs": Array(_RUN, 2, 1 << 17),
    "held_fixed": Array(TEXT, 0, 64), "recomputed": TEXT,
}  # fmt: skip
_WRITE = Fields({
    "site": TEXT, "position": POSITION, "norm": measured(), "direct_projection": measured(),
    "direct_effect_exact": measured(nullable=True), "dla_term": measured(nullable=True),
    "survival_cosine": measured(nullable=True),
    "retained_fraction": measured(nullable=True), "total_effect": measured(), "patch_recovery": measured(nullable=True),
})  # fmt: skip
_COMPARISON = Fields({
    "run": TEXT, "source_run": TEXT, "upstream_sites": Integer(0, 1 << 20), "upstream_identical": Integer(0, 1 << 20),
    "declared_equals_replacement": Boolean(), "other_positions_identical": Boolean(),
    "downstream_sites": Integer(0, 1 << 20), "downstream_changed": Integer(0, 1 << 20),
})  # fmt: skip
_MEASUREMENT = {
    "metric": TEXT, "readout": TEXT, "direction": TEXT, "direct_effect_rule": TEXT, "survival_rule": TEXT,
    "tolerance_rule": TEXT, "quantities": Mapping(Fields({"formula": TEXT, "tolerance": TEXT}), 32),
    "baseline": Fields({"clean": measured(), "corrupt": measured()}),
    "attribution": Fields({"rule": TEXT, "scale": measured(), "final_normaliser_bias": measured(),
                           "output_bias": measured()}),
    "results": Array(_WRITE, 1, 1 << 16),
    "checks": Fields({
        "parameter_digest_per_run": Array(Fields({"run": TEXT, "before": HEX64, "after": HEX64}), 2, 1 << 17),
        "intervened_runs": Array(_COMPARISON, 0, 1 << 17),
        "block_identity": Fields({"what": TEXT, "excess": measured()}),
    }),
}  # fmt: skip
RECORD_SCHEMAS = {
    name: _envelope(name, body)
    for name, body in zip(RECORDS, (_MODEL, _INPUT, _INTERVENTION, _MEASUREMENT))
}


def check_record(name: str, value) -> dict:
    """``value`` if it fits record ``name``'s schema, else an ``AuditError`` naming the record and the field."""
    if not isinstance(value, dict):
        raise AuditError(f"record {name}: {name}.json does not hold a JSON object")
    if isinstance(value.get("schema"), str) and value["schema"] != SCHEMA:
        raise AuditError(f"record {name}, field schema: {value['schema']!r}; this tool reads {SCHEMA} records "
                         "(write the packet again with this version)")  # fmt: skip
    RECORD_SCHEMAS[name].check(value, f"record {name}, field ")
    return value
