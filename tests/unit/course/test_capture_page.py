"""The capture Lab 05 Part 4 shows, checked before it is shown: the committed one is one consistent run, a damaged
or mismatched one is refused naming the file, and every table, sentence and figure handles null and zero."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from residlab.course.models import capture_page

ROOT = Path(__file__).resolve().parents[3]
CACHED_CAPTURE = ROOT / "assets" / "captures" / "synthetic-specimen-seed0"


@pytest.fixture
def capture_copy(tmp_path) -> Path:
    target = tmp_path / "capture"
    shutil.copytree(CACHED_CAPTURE, target)
    return target


def _rewrite_with_matching_manifest(directory: Path, name: str, value: dict) -> None:
    """Change one result file and record its new hash in the manifest, as a careful forger would."""
    data = (json.dumps(value, indent=2) + "\n").encode()
    (directory / name).write_bytes(data)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest["results"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def test_the_committed_capture_is_one_consistent_run():
    shown = capture_page.read_capture(CACHED_CAPTURE)
    recomputed = capture_page.recomputed_observation(
        json.loads((CACHED_CAPTURE / "captures.json").read_text()), shown.observations["selected_position"]
    )
    assert [row["norm"] for row in recomputed["boundaries"]] == pytest.approx(capture_page.boundary_norms(shown), rel=1e-6)


def _truncate(directory: Path) -> None:
    path = directory / "captures.json"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _empty(directory: Path) -> None:
    (directory / "captures.json").write_bytes(b"")


def _other_run(directory: Path) -> None:
    captures = json.loads((directory / "captures.json").read_text())
    captures["tensors"][1]["values"][0][0][0] += 0.5
    (directory / "captures.json").write_text(json.dumps(captures, separators=(",", ":")) + "\n")


def _missing(directory: Path) -> None:
    (directory / "captures.json").unlink()


def _linked(directory: Path) -> None:
    (directory / "captures.json").rename(directory.parent / "elsewhere.json")
    (directory / "captures.json").symlink_to(directory.parent / "elsewhere.json")


def _observations_edited(directory: Path) -> None:
    observations = json.loads((directory / "observations.json").read_text())
    observations["positions"][observations["selected_position"]]["boundaries"][3]["norm"] *= 1.01
    _rewrite_with_matching_manifest(directory, "observations.json", observations)


def _tensors_edited(directory: Path) -> None:
    captures = json.loads((directory / "captures.json").read_text())
    last = next(entry for entry in captures["tensors"] if entry["name"] == "final_norm.out")
    last["values"][0][-1] = [value * 2 for value in last["values"][0][-1]]
    _rewrite_with_matching_manifest(directory, "captures.json", captures)


def _manifest_unparseable(directory: Path) -> None:
    (directory / "manifest.json").write_text("{ not json")


def _manifest_without_results(directory: Path) -> None:
    manifest = json.loads((directory / "manifest.json").read_text())
    del manifest["results"]
    (directory / "manifest.json").write_text(json.dumps(manifest))


def _tokens_differ(directory: Path) -> None:
    captures = json.loads((directory / "captures.json").read_text())
    captures["token_ids"][0] += 1
    _rewrite_with_matching_manifest(directory, "captures.json", captures)


CAPTURE_FAULTS = {
    "truncated captures.json": (_truncate, r"captures\.json: .*manifest\.json records"),
    "empty captures.json": (_empty, r"captures\.json: 0 bytes .*not the file of this run"),
    "captures.json of another run": (_other_run, r"captures\.json: .*not the file of this run"),
    "captures.json missing": (_missing, r"captures\.json: missing"),
    "captures.json a symbolic link": (_linked, r"captures\.json: .*is a symbolic link"),
    "observations disagree with the tensors": (_observations_edited, r"observations\.json: disagrees with the tensors in captures\.json:\n  positions\[7\]\.boundaries\[3\]\.norm"),
    "tensors disagree with the observations": (_tensors_edited, r"(?s)observations\.json: disagrees .*final_normalisation\.normalised_norm"),
    "manifest not JSON": (_manifest_unparseable, r"manifest\.json: not valid JSON"),
    "manifest records no results": (_manifest_without_results, r"manifest\.json: records no results"),
    "token ids differ": (_tokens_differ, r"captures\.json: token ids .* differ from observations\.json"),
}


@pytest.mark.parametrize("fault", sorted(CAPTURE_FAULTS))
def test_a_capture_that_is_not_one_consistent_run_is_refused_naming_the_file(fault, capture_copy):
    damage, message = CAPTURE_FAULTS[fault]
    capture_page.read_capture(capture_copy)  # sound before the damage
    damage(capture_copy)
    with pytest.raises(capture_page.CaptureError, match=message):
        capture_page.read_capture(capture_copy)


def test_the_page_refuses_a_damaged_cached_capture_rather_than_showing_it(capture_copy, tmp_path):
    from residlab.course.models import capture_source
    from residlab.pythia.cache import CACHE_ENV

    (tmp_path / "captures").mkdir()
    captures = capture_copy.rename(tmp_path / "captures" / capture_page.CACHED_CAPTURE.name)
    _truncate(captures)
    with pytest.raises(capture_page.CaptureError, match=r"captures\.json: .*not the file of this run"):
        capture_source.page_capture(captures.parent, environ={CACHE_ENV: str(tmp_path / "no-cache")})


# ---- null and zero values ------------------------------------------------------------------------------------


def _degenerate_capture() -> capture_page.PageCapture:
    """The committed capture with the values an observation legitimately writes as null or zero: a zero state
    (so undefined cosines and relative changes), zero updates and zero check results."""
    shown = capture_page.read_capture(CACHED_CAPTURE)
    observations = copy.deepcopy(shown.observations)
    observation = observations["positions"][observations["selected_position"]]
    for row in observation["boundaries"]:
        row["norm"] = 0.0
    for row in observation["block_updates"]:
        row.update(
            difference_norm=0.0, relative_difference=None, cosine_consecutive=None, cosine_update_with_incoming=None,
            attn_write_norm=0.0, mlp_write_norm=0.0, cosine_attn_mlp_writes=None,
        )  # fmt: skip
    observation["final_normalisation"].update(raw_norm=0.0, difference_norm=0.0, cosine=None)
    observations["checks"]["model_hidden_states"]["entries_0_to_L_minus_1_vs_raw_boundaries_max_abs"] = None
    observations["checks"]["repeat"]["max_abs_difference"] = 0.0
    manifest = copy.deepcopy(shown.manifest)
    manifest["files"][1]["sha256"] = None  # a file the lock had no hash for
    return capture_page.PageCapture(
        manifest=manifest, observations=observations, directory=shown.directory, fresh=False, captures=shown.captures
    )


def test_every_formatting_function_handles_null_and_zero():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = _degenerate_capture()
    from residlab.course.lab05 import capture_reading

    trend, seen = capture_reading.norm_trend(shown), capture_reading.alignment(shown)
    assert trend["factor"] is None and trend["direction"] == "neither" and trend["blocks_up"] == 0
    assert seen["largest_abs_cosine"] is None and seen["mean_cosine"] is None and seen["gap"] is None
    assert seen["favoured"] is None and "favour neither" in capture_reading.verdict_sentence(shown)
    assert "is defined" in capture_reading.verdict_sentence(shown)
    assert "undefined" in capture_reading.relative_sentence(shown) and "neither rises nor falls" in capture_reading.trend_sentence(shown)
    assert capture_page.number(None) == "null (undefined)" and capture_page.number(0.0) == "0.000" and capture_page.number(0, 3, "g") == "0"
    assert "null (undefined)" in capture_page.observations_table(shown)
    assert "null (undefined)" in capture_page.alignment_table(shown)
    assert "null (undefined)" in capture_page.checks_table(shown)
    assert "no sha256" in capture_page.provenance_table(shown)
    assert capture_page.tokens_table(shown).count("\n") == len(shown.observations["tokens"]) + 1
    for draw in (capture_page.plot_boundary_norms, capture_page.plot_consecutive_cosines, capture_page.plot_write_norms):
        figure = draw(shown)
        low, high = figure.axes[0].get_ylim()
        assert low < high
        plt.close(figure)


def test_page_figures_have_labelled_axes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from residlab.course.models import capture_page

    shown = capture_page.read_capture(CACHED_CAPTURE)
    for draw in (capture_page.plot_boundary_norms, capture_page.plot_consecutive_cosines, capture_page.plot_write_norms):
        figure = draw(shown)
        axes = figure.axes[0]
        assert axes.get_xlabel() and axes.get_ylabel()
        plt.close(figure)
    writes = capture_page.plot_write_norms(shown)
    assert [text.get_text() for text in writes.axes[0].get_legend().get_texts()][:2] == ["attention write", "MLP write"]
    plt.close(writes)


def _table_rows(table: str) -> list[list[str]]:
    """The cells of a pipe table's body rows."""
    lines = table.strip().splitlines()[2:]
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in lines]


def test_the_figures_name_each_boundary_as_the_observations_table_does():
    """Labels and index conventions come from the same names the table prints: every 'H_i = site' the norm
    figure's axis states is a row of the observations table, its ticks are the table's states in order, and each
    bar of the cosine and write figures lies between two consecutive rows of that table (block i: H_i to H_i+1)."""
    import re

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = capture_page.read_capture(CACHED_CAPTURE)
    rows = [row for row in _table_rows(capture_page.observations_table(shown)) if row[0].startswith("$")]
    table = {row[0]: row[1].strip("`") for row in rows}  # "$H_{1}$" -> "blocks.0.resid_post"
    states = [row[0] for row in rows]
    assert table[states[0]] == "blocks.0.resid_pre" and table[states[1]] == "blocks.0.resid_post"

    norms = capture_page.plot_boundary_norms(shown)
    axes = norms.axes[0]
    stated = re.findall(r"(\$H_\{\d+\}\$) = (\S+?)(?:,|\))", axes.get_xlabel())
    assert len(stated) >= 3 and all(table[label] == name for label, name in stated), (axes.get_xlabel(), table)
    assert [tick.get_text() for tick in axes.get_xticklabels()] == states
    plt.close(norms)

    cosines = capture_page.plot_consecutive_cosines(shown)
    bars = [tick.get_text() for tick in cosines.axes[0].get_xticklabels()]
    assert bars == [f"{before}→{after}" for before, after in zip(states, states[1:])]
    plt.close(cosines)

    writes = capture_page.plot_write_norms(shown)
    ticks = [tick.get_text().split("\n") for tick in writes.axes[0].get_xticklabels()]
    alignment = [row[0] for row in _table_rows(capture_page.alignment_table(shown))]  # "block 0", ...
    assert [block for block, _ in ticks] == alignment
    assert [between for _, between in ticks] == bars
    for block, between in ticks:  # block i's update lies between blocks.i.resid_pre and blocks.i.resid_post
        index = int(block.removeprefix("block "))
        before, after = between.split("→")
        assert (table[before], table[after]) == (f"blocks.{index}.resid_pre" if index == 0 else
                                                 f"blocks.{index - 1}.resid_post", f"blocks.{index}.resid_post")
    plt.close(writes)
