"""residlab.course.lab05.explorer_data: the explorer shows every position as the capture's
observations.json holds it, each checked against captures.json when the capture is read; an observations.json of an
old layout (the selected position only, or the boundaries under other names) is refused with the command that
refreshes it; no model is built."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from residlab.course.lab05 import explorer_data
from residlab.course.models.capture_page import CaptureError, read_capture, recomputed_observation

CAPTURE = Path(__file__).resolve().parents[3] / "assets" / "captures" / "synthetic-specimen-seed0"


@pytest.fixture(scope="module")
def data():
    return explorer_data.explorer_data(read_capture(CAPTURE))


@pytest.fixture
def copied(tmp_path) -> Path:
    target = tmp_path / "capture"
    shutil.copytree(CAPTURE, target)
    return target


def reseal(directory: Path, name: str, change) -> None:
    """Change one result file and record its new size and digest in the manifest, as a run of its own would."""
    value = json.loads((directory / name).read_text(encoding="utf-8"))
    change(value)
    data = (json.dumps(value, indent=2) + "\n").encode()
    (directory / name).write_bytes(data)
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    manifest["results"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def test_every_position_is_observations_json_own(data):
    observations = json.loads((CAPTURE / "observations.json").read_text(encoding="utf-8"))
    assert [token["piece"] for token in data["tokens"]] == [token["piece"] for token in observations["tokens"]]
    assert data["positions"] == observations["positions"]
    assert [p["position"] for p in data["positions"]] == list(range(len(observations["tokens"])))
    assert data["selected_position"] == observations["selected_position"]
    assert data["synthetic"] is True and data["fresh"] is False
    for observation in data["positions"]:
        assert len(observation["boundaries"]) == 7 and len(observation["block_updates"]) == 6
        assert all(len(row["logit_lens_top"]) == 5 for row in observation["boundaries"])


def test_every_position_agrees_with_captures_json(data):
    captures = json.loads((CAPTURE / "captures.json").read_text(encoding="utf-8"))
    for position, observation in enumerate(data["positions"]):
        expected = recomputed_observation(captures, position)
        assert [row["norm"] for row in observation["boundaries"]] == pytest.approx(
            [row["norm"] for row in expected["boundaries"]], rel=1e-5)  # fmt: skip
        assert [row["attn_write_norm"] for row in observation["block_updates"]] == pytest.approx(
            [row["attn_write_norm"] for row in expected["block_updates"]], rel=1e-5)  # fmt: skip
    assert data["positions"][0]["boundaries"][0]["norm"] != data["positions"][3]["boundaries"][0]["norm"]


def test_the_explorer_builds_no_model():
    code = ("import sys\nfrom residlab.course.lab05 import explorer_data\nfrom residlab.course.models import capture_source\n"
            "explorer_data.page_explorer(capture_source.page_capture(), 'x.js')\n"
            "print(sorted({'torch', 'transformers'} & set(sys.modules)))")  # fmt: skip
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"


def test_an_other_position_that_disagrees_with_captures_json_is_refused(copied):
    reseal(copied, "observations.json", lambda o: o["positions"][2]["boundaries"][1].update(
        norm=o["positions"][2]["boundaries"][1]["norm"] * 1.01))  # fmt: skip
    with pytest.raises(CaptureError, match=r"disagrees with the tensors in captures\.json:\n  positions\[2\]\.boundaries\[1\]\.norm"):
        read_capture(copied)


def test_positions_missing_or_out_of_order_are_refused(copied):
    reseal(copied, "observations.json", lambda o: o["positions"].reverse())
    with pytest.raises(CaptureError, match=r"observations\.json: not one observation per position, in order"):
        read_capture(copied)


def _selected_position_only(observations):  # schema 1 (no schema field): the selected position alone
    observations["observation"] = observations["positions"][observations["selected_position"]]
    del observations["positions"], observations["schema"]


def _earlier_name(name: str) -> str:  # a boundary under a name other than today's (schema 2 had its own)
    return name.replace(".resid_pre", ".boundary_in").replace(".resid_post", ".boundary_out")


def _boundaries_named_otherwise(observations):  # schema 2: the same numbers, the boundaries named otherwise
    observations["schema"] = 2
    for observation in observations["positions"]:
        for row in observation["boundaries"]:
            row["name"] = _earlier_name(row["name"])


def _tensors_named_otherwise(captures):
    for tensor in captures["tensors"]:
        tensor["name"] = _earlier_name(tensor["name"])


@pytest.mark.parametrize(("schema", "old_layout"), [(1, _selected_position_only), (2, _boundaries_named_otherwise)])
def test_a_capture_of_an_old_layout_is_refused_with_the_command_that_refreshes_it(copied, schema, old_layout):
    if schema == 2:  # its tensors under those names too: the schema is refused before any tensor is looked up
        reseal(copied, "captures.json", _tensors_named_otherwise)
    reseal(copied, "observations.json", old_layout)
    with pytest.raises(CaptureError) as refused:
        read_capture(copied)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(
        f"{copied / 'observations.json'}: schema {schema}, not 3 (every position observed, block boundaries named "
        "resid_pre and resid_post)")
    assert message.endswith("refresh it by running `residlab pythia observe --specimen --output "
                            "assets/captures/synthetic-specimen-seed0` again into an empty folder")  # fmt: skip


def test_a_capture_directory_that_is_not_one_run_never_reaches_the_explorer(copied):
    path = copied / "captures.json"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CaptureError, match=r"captures\.json: 1,000 bytes with sha256 .* not the file of this run"):
        read_capture(copied)
    path.unlink()
    with pytest.raises(CaptureError, match=r"captures\.json"):
        read_capture(copied)


def test_the_html_block_carries_the_data_and_no_piece_can_close_its_script(data):
    hostile = {**data, "tokens": [{"position": 0, "id": 1, "piece": "</script><b>"}]}
    block = explorer_data.explorer_html(hostile, "../assets/explorers/capture-explorer.js")
    assert block.startswith("```{=html}\n") and block.endswith("```\n")
    assert block.count("</script>") == 1  # the data element's, nothing from the piece
    payload = block.split('id="capture-explorer-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(payload)["tokens"][0]["piece"] == "</script><b>"
    # the script is named for the site's loader, which fetches it when the block nears the screen
    assert 'data-residlab-scripts="../assets/explorers/capture-explorer.js"' in block and "<script src" not in block
