"""What Lab 05 Part 4 shows of a capture: the capture read and checked as one run, its figures and tables, and
its provenance, all computed from the result files. Which capture a page shows is ``capture_source``'s choice;
the sentences that interpret it are ``capture_reading``'s.

Package only (matplotlib); the runner never imports it. It reads ``manifest.json`` and ``observations.json``
as ``observe_to_directory`` wrote them, so a learner's own run directory can be shown the same way.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from residlab.capture.sites import EMBEDDING_SITE, site_name
from residlab.pythia.observe import observations_schema_problem
from residlab.course.ui.figure_widths import both_widths
from residlab.course.ui.tables import markdown_table, math_label
from residlab.pythia.cache import ARTIFACTS_ENV  # noqa: F401  (verified files named for a build; tests read it here)

CAPTURES = Path(__file__).resolve().parents[3] / "assets" / "captures"  # the committed captures
CACHED_CAPTURE = CAPTURES / "synthetic-specimen-seed0"


# Bounds for reading a capture: the manifest and observations are kilobytes, captures.json a few hundred.
RESULT_MAX_BYTES = {"manifest.json": 1 << 20, "observations.json": 16 << 20, "captures.json": 256 << 20}
# Observations are float32 arithmetic; captures.json holds the same float32 values, recomputed here in float64.
AGREEMENT_RELATIVE = 1e-4
AGREEMENT_ABSOLUTE = 1e-5


class CaptureError(RuntimeError):
    """A capture directory is not one complete, self-consistent run; the message names the file."""


@dataclass(frozen=True)
class PageCapture:
    manifest: dict
    observations: dict
    directory: Path | None  # None for a capture made during the render: read whole, its folder then removed
    fresh: bool  # True: captured during this render from verified files; False: a committed capture
    captures: dict  # captures.json as read, hashed against the manifest and checked above: the tensors shown
    # Set by capture_source.page_capture: "fresh", "committed" (of the lock's files) or "specimen" (the synthetic
    # one); the lock the build used, as a page names it; whether the publisher chose a committed capture on
    # purpose; and, for a fresh capture, the verified files it was made from.
    kind: str = ""
    lock_label: str = ""
    on_purpose: bool = False
    artifacts: object = None

    @property
    def synthetic(self) -> bool:
        return bool(self.manifest["synthetic"])

    @property
    def positions(self) -> list[dict]:  # every position's observation, in order
        return self.observations["positions"]

    @property
    def observation(self) -> dict:  # the selected position's: the one the page's tables and prose describe
        return self.positions[self.observations["selected_position"]]

    @property
    def checks(self) -> dict:
        return self.observations["checks"]


def _read_bytes(directory: Path, name: str) -> bytes:
    from residlab.pythia.lock import UnsafeFileError, read_file_bytes

    path = directory / name
    try:
        return read_file_bytes(path, RESULT_MAX_BYTES[name]).data
    except FileNotFoundError:
        raise CaptureError(f"{path}: missing; a capture directory holds {', '.join(RESULT_MAX_BYTES)}") from None
    except UnsafeFileError as error:
        raise CaptureError(f"{path}: {error}") from None


def _parse_json(path: Path, data: bytes) -> dict:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise CaptureError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise CaptureError(f"{path}: not a JSON object")
    return value


def _norm(vector: list) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def _cosine(a: list, b: list) -> float | None:
    norm_a, norm_b = _norm(a), _norm(b)
    return None if norm_a == 0 or norm_b == 0 else math.fsum(x * y for x, y in zip(a, b)) / (norm_a * norm_b)


def _minus(a: list, b: list) -> list:
    return [x - y for x, y in zip(a, b)]


def recomputed_observation(captures: dict, position: int) -> dict:
    """The selected position's numbers the page shows, recomputed in float64 from captures.json's tensors:
    norms, consecutive differences and cosines, write norms, and the final normalisation (the logit-lens
    readouts need the model and are not recomputed)."""
    tensors = {entry["name"]: entry["values"][0] for entry in captures["tensors"]}  # (positions, width)
    blocks = sum(1 for name in tensors if name.endswith(".resid_post"))
    states = [tensors[EMBEDDING_SITE][position]] + [tensors[site_name(i, "resid_post")][position] for i in range(blocks)]
    updates = []
    for block in range(blocks):
        before, after = states[block], states[block + 1]
        attn, mlp = tensors[site_name(block, "attn_write")][position], tensors[site_name(block, "mlp_write")][position]
        change = _minus(after, before)
        updates.append(
            {
                "difference_norm": _norm(change),
                "relative_difference": _norm(change) / _norm(before) if _norm(before) > 0 else None,
                "cosine_consecutive": _cosine(before, after),
                "cosine_update_with_incoming": _cosine(change, before),
                "attn_write_norm": _norm(attn),
                "mlp_write_norm": _norm(mlp),
                "cosine_attn_mlp_writes": _cosine(attn, mlp),
            }
        )
    normalised = tensors["final_norm.out"][position]
    return {
        "boundaries": [{"norm": _norm(state)} for state in states],
        "block_updates": updates,
        "final_normalisation": {
            "raw_norm": _norm(states[-1]),
            "normalised_norm": _norm(normalised),
            "difference_norm": _norm(_minus(normalised, states[-1])),
            "cosine": _cosine(states[-1], normalised),
        },
    }


def _disagreements(shown, recomputed, where: str) -> list[str]:
    """Where the observations (``shown``) differ from the recomputation, field by field."""
    if isinstance(recomputed, dict):
        return [line for key in recomputed for line in _disagreements(shown[key], recomputed[key], f"{where}.{key}")]
    if isinstance(recomputed, list):
        if len(shown) != len(recomputed):
            return [f"{where}: {len(shown)} entries, the captured tensors give {len(recomputed)}"]
        return [line for i, pair in enumerate(zip(shown, recomputed)) for line in _disagreements(*pair, f"{where}[{i}]")]
    if recomputed is None or shown is None:
        return [] if recomputed is None and shown is None else [f"{where}: {shown!r}, the captured tensors give {recomputed!r}"]
    if abs(shown - recomputed) > AGREEMENT_ABSOLUTE + AGREEMENT_RELATIVE * abs(recomputed):
        return [f"{where}: {shown!r}, the captured tensors give {recomputed!r}"]
    return []


def read_capture(directory: Path, fresh: bool = False) -> PageCapture:
    """Read a capture directory and refuse it unless its three files are one run: each parses, the manifest records
    the size and sha256 of the other two, observations.json is of the current layout, and every number of every
    position that the page shows agrees with the one recomputed from the captured tensors."""
    directory = Path(directory)
    manifest = _parse_json(directory / "manifest.json", _read_bytes(directory, "manifest.json"))
    recorded = manifest.get("results")
    if not isinstance(recorded, dict):
        raise CaptureError(f"{directory / 'manifest.json'}: records no results (sizes and sha256 of the other two files)")
    parsed = {}
    for name in ("observations.json", "captures.json"):
        data = _read_bytes(directory, name)
        entry = recorded.get(name) if isinstance(recorded.get(name), dict) else {}
        actual = hashlib.sha256(data).hexdigest()
        if entry.get("sha256") != actual or entry.get("size") != len(data):
            raise CaptureError(
                f"{directory / name}: {len(data):,} bytes with sha256 {actual}, but manifest.json records "
                f"{entry.get('size')!r} bytes with sha256 {entry.get('sha256')!r}: not the file of this run"
            )
        parsed[name] = _parse_json(directory / name, data)
    observations, captures = parsed["observations.json"], parsed["captures.json"]
    if other_layout := observations_schema_problem(observations, manifest):
        raise CaptureError(f"{directory / 'observations.json'}: {other_layout}")
    try:
        ids = [token["id"] for token in observations["tokens"]]
        if captures["token_ids"] != ids:
            raise CaptureError(f"{directory / 'captures.json'}: token ids {captures['token_ids']} differ from observations.json's {ids}")
        positions = observations["positions"]
        if [row["position"] for row in positions] != list(range(len(ids))) or observations["selected_position"] not in range(len(ids)):
            raise CaptureError(f"{directory / 'observations.json'}: not one observation per position, in order")
        problems = [problem for position in range(len(ids)) for problem in _disagreements(
            positions[position], recomputed_observation(captures, position), f"positions[{position}]")]  # fmt: skip
    except CaptureError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise CaptureError(
            f"{directory / 'captures.json'} or observations.json: not the structure observe writes "
            f"({type(error).__name__}: {error})"
        ) from None
    if problems:
        raise CaptureError(
            f"{directory / 'observations.json'}: disagrees with the tensors in captures.json:\n  " + "\n  ".join(problems[:10])
        )
    return PageCapture(manifest=manifest, observations=observations, directory=directory, fresh=fresh, captures=captures)


# ---- numbers the page states ------------------------------------------------------------------------------


def boundary_norms(capture: PageCapture) -> list[float]:
    return [row["norm"] for row in capture.observation["boundaries"]]


def consecutive_cosines(capture: PageCapture) -> list[float | None]:
    return [row["cosine_consecutive"] for row in capture.observation["block_updates"]]


# ---- figures ----------------------------------------------------------------------------------------------


WIDE_SIZE, NARROW_SIZE = (6.4, 3.4), (3.7, 3.0)  # inches: a wide column's and a phone's (figure_widths)


def _labels(capture: PageCapture) -> list[str]:
    return [math_label(row["label"]) for row in capture.observation["boundaries"]]


def boundary_key(capture: PageCapture) -> str:
    """What the figures' H_i stand for, from the observation's own rows (each boundary's label and site name, as
    the observations table prints them): H_0 = blocks.0.resid_pre, H_1 = blocks.0.resid_post, ..., the last."""
    return ", ".join(boundary_key_parts(capture))


def boundary_key_parts(capture: PageCapture) -> list[str]:
    """``boundary_key``'s parts ('H_0 = blocks.0.resid_pre', ..., '…', the last); a phone's drawing writes one a
    line."""
    rows = capture.observation["boundaries"]
    shown = rows if len(rows) <= 3 else rows[:2] + rows[-1:]
    pairs = [f"{math_label(row['label'])} = {row['name']}" for row in shown]
    return pairs[:2] + (["…"] if len(rows) > 3 else []) + pairs[2:]


def update_labels(capture: PageCapture) -> list[str]:
    """Each block update as 'H_i→H_j', from the boundaries its row names (its ``from`` and ``to`` sites)."""
    label = {row["name"]: math_label(row["label"]) for row in capture.observation["boundaries"]}
    return [f"{label[row['from']]}→{label[row['to']]}" for row in capture.observation["block_updates"]]


def plot_boundary_norms(capture: PageCapture):
    """Norm of each raw state H_0..H_L at the selected position (the final LayerNorm output left out)."""
    import matplotlib.pyplot as plt

    norms = boundary_norms(capture)

    def draw(narrow: bool):
        figure, axes = plt.subplots(figsize=(3.7, 3.9) if narrow else WIDE_SIZE, layout="constrained")
        axes.plot(range(len(norms)), norms, marker="o")
        axes.set_xticks(range(len(norms)), _labels(capture))
        # The key names the boundaries as the observations table does (H_0 = blocks.0.resid_pre, ...); a phone's
        # drawing writes it one boundary a line, as wide as its column allows.
        axes.set_xlabel("raw boundary state\n(" + ",\n".join(boundary_key_parts(capture)) + ")" if narrow
                        else f"raw boundary state ({boundary_key(capture)})")
        axes.set_ylabel("raw state's L2 norm\n(selected position)")
        axes.set_ylim(bottom=0)
        axes.grid(alpha=0.3)
        return figure

    return both_widths(draw)


def plot_consecutive_cosines(capture: PageCapture):
    """cos(H_{i-1}, H_i) per block; an undefined cosine (a zero norm) is drawn as a gap and labelled."""
    import matplotlib.pyplot as plt

    cosines = consecutive_cosines(capture)
    values = [value if value is not None else 0.0 for value in cosines]

    def draw(narrow: bool):
        # On a phone the bars stand in a column, each labelled H_i→H_i+1 on its left.
        names = update_labels(capture)
        figure, axes = plt.subplots(figsize=NARROW_SIZE if narrow else WIDE_SIZE, layout="constrained")
        bars = (axes.barh if narrow else axes.bar)(names, values, color="tab:green")
        for bar, value in zip(bars, cosines):
            if value is None:
                bar.set_alpha(0.0)
                at = (0.02, bar.get_y() + bar.get_height() / 2) if narrow else (bar.get_x() + bar.get_width() / 2, 0.02)
                axes.annotate("undefined", at, ha="left" if narrow else "center", va="center" if narrow else "baseline")
        limits = (min(0.0, min(values)) - 0.05, 1.05)
        (axes.set_xlim if narrow else axes.set_ylim)(*limits)
        if narrow:
            axes.invert_yaxis()  # the first block on top
        (axes.set_ylabel if narrow else axes.set_xlabel)("block" if narrow else "block (consecutive raw boundaries)")
        (axes.set_xlabel if narrow else axes.set_ylabel)("cosine of consecutive\nraw states")
        axes.grid(axis="x" if narrow else "y", alpha=0.3)
        return figure

    return both_widths(draw)


def plot_write_norms(capture: PageCapture):
    """Per block: norm of the attention write, of the MLP write, and of their sum (the block's update)."""
    import matplotlib.pyplot as plt

    updates = capture.observation["block_updates"]
    blocks = [row["block"] for row in updates]
    width = 0.27
    tallest = max((max(row["attn_write_norm"], row["mlp_write_norm"], row["difference_norm"]) for row in updates), default=0.0)

    def draw(narrow: bool):
        # On a phone the groups of bars stand in a column, each labelled "block: H_i→H_i+1" on its left, the
        # first block on top (as the cosines' phone drawing): six labels side by side would run together.
        figure, axes = plt.subplots(figsize=(3.7, 4.6) if narrow else WIDE_SIZE, layout="constrained")
        bar = axes.barh if narrow else axes.bar
        bar([b - width for b in blocks], [row["attn_write_norm"] for row in updates], width, label="attention write")
        bar(blocks, [row["mlp_write_norm"] for row in updates], width, label="MLP write")
        bar([b + width for b in blocks], [row["difference_norm"] for row in updates], width, label="update (its boundaries' difference)")
        updates_between = update_labels(capture)
        if narrow:
            axes.set_yticks(blocks, [f"{b}: {update}" for b, update in zip(blocks, updates_between)])
            axes.invert_yaxis()
            axes.set_ylabel("block: the boundaries\nits update lies between")
            axes.set_xlabel("L2 norm (selected position)")
            axes.grid(axis="x", alpha=0.3)
            axes.set_xlim(0, tallest * 1.05 if tallest > 0 else 1.0)
            figure.legend(loc="outside lower center")  # below the bars: a phone's plot has no room beside them
            return figure
        axes.set_xticks(blocks, [f"block {b}\n{update}" for b, update in zip(blocks, updates_between)])
        axes.set_xlabel("block, and the boundaries its update lies between")
        axes.set_ylabel("L2 norm\n(selected position)")
        axes.grid(axis="y", alpha=0.3)
        axes.set_ylim(0, tallest * 1.3 if tallest > 0 else 1.0)  # headroom for the legend above the bars
        axes.legend(loc="upper center", ncol=3, fontsize=9)
        return figure

    return both_widths(draw)


# ---- tables -----------------------------------------------------------------------------------------------


def _cell(value) -> str:
    return str(value).replace("|", "\\|")


def _table(header: list[str], rows: list[list]) -> str:
    """The course's one pipe table, every cell's '|' escaped (a decoded token piece may hold one)."""
    return markdown_table(header, [[_cell(value) for value in row] for row in rows]).rstrip("\n")


def provenance_table(capture: PageCapture) -> str:
    manifest = capture.manifest
    versions = manifest["versions"]
    rows = [
        ["specimen", f"`{manifest['repository']}`" + (" (SYNTHETIC: random weights)" if manifest["synthetic"] else "")],
        ["revision", f"`{manifest['revision']}`"],
        ["capture", "fresh, during this render" if capture.fresh else f"committed, created {manifest['created']}"],
        ["lock", capture.lock_label or manifest["lock"]],
        ["command", f"`{' '.join(manifest['command'])}`"],
        ["Python", versions["python"]],
    ]
    rows += [[name, version or "not installed"] for name, version in versions.items() if name != "python"]
    rows += [
        ["model class, attention", f"{manifest['model_class']}, {manifest['attn_implementation']}, {manifest['dtype']} on {manifest['device']}"],
        ["block returns", f"a {manifest['block_return_kind']} ({manifest['residual_kind']} residual)"],
        ["output embedding module", f"`{manifest['output_embeddings']}`"],
    ]
    rows += [[f"`{entry['name']}`", _file_provenance(entry)] for entry in manifest["files"]]
    return _table(["what", "recorded"], rows)


def _file_provenance(entry: dict) -> str:
    digest = f"sha256 `{entry['sha256'][:16]}…`" if entry.get("sha256") else "no sha256"
    use = {True: "loaded from the bytes hashed", False: "checked, not read by the observation"}.get(entry.get("loaded"), "")
    return f"{entry['size']:,} bytes, {digest}" + (f"; {use}" if use else "")


def tokens_table(capture: PageCapture) -> str:
    selected = capture.observations["selected_position"]
    rows = [
        [token["position"], token["id"], _code(token["piece"]), "yes" if token["position"] == selected else ""]
        for token in capture.observations["tokens"]
    ]
    return _table(["position", "token id", "decoded piece", "selected"], rows)


def _code(text: str) -> str:
    """Inline code for a token piece shown as its Python repr (pieces may hold spaces, backticks, pipes)."""
    shown = repr(text)
    return f"`` {shown} ``" if "`" in shown else f"`{shown}`"


def number(value, digits: int = 3, style: str = "f") -> str:
    """A number as the page prints it: ``digits`` decimals (style "f") or significant digits ("g"); JSON null
    (an undefined cosine or ratio) is written as such, never formatted as a number."""
    return "null (undefined)" if value is None else f"{value:.{digits}{style}}"


def observations_table(capture: PageCapture) -> str:
    boundaries = capture.observation["boundaries"]
    updates = {row["block"] + 1: row for row in capture.observation["block_updates"]}
    rows = []
    for row in boundaries:
        update = updates.get(row["index"])
        top = row["logit_lens_top"][0]
        rows.append(
            [
                math_label(row["label"]),
                f"`{row['name']}`",
                number(row["norm"]),
                number(update["difference_norm"]) if update else "",
                number(update["cosine_consecutive"]) if update else "",
                f"{_code(top['piece'])} ({number(top['probability'], 3, 'g')})",
            ]
        )
    final = capture.observation["final_normalisation"]
    rows.append(
        [
            "final LN",
            f"`{final['to']}`",
            number(final["normalised_norm"]),
            number(final["difference_norm"]) + " (normalisation)",
            number(final["cosine"]),
            "same readout as the last row",
        ]
    )
    header = ["state", "site", "norm", "‖change from previous‖", "cosine with previous", "logit-lens top-1 (p)"]
    return _table(header, rows)


def checks_table(capture: PageCapture) -> str:
    checks = capture.checks
    hidden = checks["model_hidden_states"]
    hooks = checks["hook_removal"]
    identity = checks["identity"]
    rows = [
        ["every captured shape", f"{len(checks['shapes'])} sites, expected {tuple(checks['expected_shape'])}", "yes" if checks["shapes_ok"] else "NO"],
        ["parallel identity, max abs error", f"{number(identity['max_abs_error'], 3, 'g')} (tolerance {number(identity['blocks'][-1]['tolerance'], 3, 'g')})", "yes" if identity["all_within_tolerance"] else "NO"],
        ["same identity in transformers' own addition order", number(identity["max_abs_error_in_source_order"], 3, "g"), ""],
        ["unchanged input repeated, max abs difference", number(checks["repeat"]["max_abs_difference"], 3, "g"), ""],
        ["`hidden_states` 0..L−1 vs raw $H_0$..$H_{L-1}$", number(hidden["entries_0_to_L_minus_1_vs_raw_boundaries_max_abs"], 3, "g"), ""],
        ["`hidden_states[-1]` vs final LayerNorm output", number(hidden["last_entry_vs_final_norm_output_max_abs"], 3, "g"), ""],
        ["`hidden_states[-1]` vs raw $H_L$", number(hidden["last_entry_vs_raw_last_block_output_max_abs"], 3, "g"), "differs, as it must"],
        ["capture handles left after exit", f"{hooks['handles_left_after_exit']} of {hooks['handles_registered']}", ""],
        ["sites recorded by a later forward", f"{hooks['sites_recorded_by_a_later_forward']}", ""],
    ]
    return _table(["check", "measured", "within"], rows)


def alignment_table(capture: PageCapture) -> str:
    """Per block: the update's size relative to the incoming state and its cosine with that state."""
    rows = [
        [
            f"block {row['block']}",
            number(row["difference_norm"]),
            number(row["relative_difference"], 2),
            number(row["cosine_update_with_incoming"]),
            number(row["cosine_attn_mlp_writes"]),
        ]
        for row in capture.observation["block_updates"]
    ]
    header = ["block", "‖update‖", "‖update‖ / ‖incoming state‖", "cos(update, incoming state)", "cos(attention write, MLP write)"]
    return _table(header, rows)
