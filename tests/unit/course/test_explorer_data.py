"""residlab.course.lab05_observation.explorer_data: every position of a capture, observed by observe_position from captures.json, the
selected one equal to observations.json; files that disagree or are not a capture stop it with a message
naming the file."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from residlab.course.lab05_observation import explorer_data  # noqa: E402
from residlab.course.lab05_observation.capture_page import CaptureError, read_capture  # noqa: E402

CAPTURE = Path(__file__).resolve().parents[3] / "assets" / "captures" / "synthetic-specimen-seed0"


@pytest.fixture(scope="module")
def lens():
    return explorer_data.lens_model(read_capture(CAPTURE))


@pytest.fixture(scope="module")
def data(lens):
    return explorer_data.explorer_data(read_capture(CAPTURE), *lens)


@pytest.fixture
def copied(tmp_path) -> Path:
    target = tmp_path / "capture"
    shutil.copytree(CAPTURE, target)
    return target


def test_every_position_is_observed_and_the_selected_one_is_observations_json(data):
    observations = json.loads((CAPTURE / "observations.json").read_text(encoding="utf-8"))
    assert [token["piece"] for token in data["tokens"]] == [token["piece"] for token in observations["tokens"]]
    assert len(data["positions"]) == len(observations["tokens"])
    assert [p["position"] for p in data["positions"]] == list(range(len(observations["tokens"])))
    assert data["positions"][observations["selected_position"]] == observations["observation"]
    assert data["synthetic"] is True and data["fresh"] is False
    for observation in data["positions"]:
        assert len(observation["boundaries"]) == 7 and len(observation["block_updates"]) == 6
        assert all(len(row["logit_lens_top"]) == 5 for row in observation["boundaries"])


def test_other_positions_are_read_from_captures_json(data):
    captures = json.loads((CAPTURE / "captures.json").read_text(encoding="utf-8"))
    tensors = {entry["name"]: torch.tensor(entry["values"]) for entry in captures["tensors"]}
    for position in (0, 3):
        observation = data["positions"][position]
        expected_h0 = float(tensors["blocks.0.resid_in"][0, position].norm())
        expected_attn = float(tensors["blocks.2.attn_write"][0, position].norm())
        assert observation["boundaries"][0]["norm"] == pytest.approx(expected_h0, rel=1e-6)
        assert observation["block_updates"][2]["attn_write_norm"] == pytest.approx(expected_attn, rel=1e-6)
    assert data["positions"][0]["boundaries"][0]["norm"] != data["positions"][3]["boundaries"][0]["norm"]


def test_a_capture_directory_that_is_not_one_run_never_reaches_the_explorer(copied):
    # The explorer reads the tensors read_capture verified (hashes recorded in the manifest); any other
    # captures.json is refused there, naming the file, before a position is observed.
    path = copied / "captures.json"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CaptureError, match=r"captures\.json: 1,000 bytes with sha256 .* not the file of this run"):
        read_capture(copied)
    path.unlink()
    with pytest.raises(CaptureError, match=r"captures\.json"):
        read_capture(copied)


def _with_captures(capture, change):
    """The capture read from disk, with its (already verified) captures.json changed in memory."""
    captures = json.loads(json.dumps(capture.captures))
    change(captures)
    return dataclasses.replace(capture, captures=captures)


def test_tensors_of_another_run_are_refused_by_name(lens):
    capture = _with_captures(read_capture(CAPTURE), lambda captures: captures["token_ids"].__setitem__(0, captures["token_ids"][0] + 1))
    with pytest.raises(explorer_data.ExplorerDataError, match=r"captures\.json: its token ids are not those"):
        explorer_data.explorer_data(capture, *lens)


def test_a_changed_state_that_disagrees_with_observations_json_stops_it(lens):
    selected = read_capture(CAPTURE).observations["selected_position"]

    def change(captures):
        final = next(entry for entry in captures["tensors"] if entry["name"] == "blocks.5.resid_out")
        final["values"][0][selected][0] += 1.0

    with pytest.raises(explorer_data.ExplorerDataError, match=r"does not reproduce observations\.json at position"):
        explorer_data.explorer_data(_with_captures(read_capture(CAPTURE), change), *lens)


def test_a_missing_tensor_is_named(lens):
    def change(captures):
        captures["tensors"] = [entry for entry in captures["tensors"] if entry["name"] != "blocks.3.mlp_write"]

    with pytest.raises(explorer_data.ExplorerDataError, match=r"no tensor blocks\.3\.mlp_write"):
        explorer_data.explorer_data(_with_captures(read_capture(CAPTURE), change), *lens)


def test_a_real_capture_needs_its_verified_files(copied):
    manifest = json.loads((copied / "manifest.json").read_text(encoding="utf-8"))
    manifest["synthetic"] = False
    (copied / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(explorer_data.ExplorerDataError, match="RESIDLAB_PYTHIA_ARTIFACTS"):
        explorer_data.lens_model(read_capture(copied), environ={})


def test_the_html_block_carries_the_data_and_no_piece_can_close_its_script(data):
    hostile = {**data, "tokens": [{"position": 0, "id": 1, "piece": "</script><b>"}]}
    block = explorer_data.explorer_html(hostile, "../assets/explorers/capture-explorer.js")
    assert block.startswith("```{=html}\n") and block.endswith("```\n")
    assert block.count("</script>") == 2  # the data element's and the script's own, nothing from the piece
    payload = block.split('id="capture-explorer-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(payload)["tokens"][0]["piece"] == "</script><b>"
    assert '<script src="../assets/explorers/capture-explorer.js"></script>' in block
