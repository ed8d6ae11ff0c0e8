"""The observation run end to end on the synthetic specimen: no network, the three result files and what
they hold, refusals that leave everything untouched, the CLI, the bundled runner, and the committed capture."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from residlab.capture.blocks import IDENTITY_ABSOLUTE  # noqa: E402
from residlab.capture.outdir import OutputDirectoryError  # noqa: E402
from residlab.pythia import observe  # noqa: E402
from residlab.pythia.artifacts import verify_artifacts  # noqa: E402
from residlab.pythia.load import load_offline  # noqa: E402
from residlab.pythia.lock import load_lock  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
CACHED_CAPTURE = ROOT / "assets" / "captures" / "synthetic-specimen-seed0"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class NetworkGuard:
    """Refuses and records every connection or name lookup that is not loopback or a local socket."""

    def __init__(self, monkeypatch):
        self.attempts: list = []
        real_connect, real_connect_ex, real_getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo
        guard = self

        def allowed(sock, address) -> bool:
            return sock.family == getattr(socket, "AF_UNIX", None) or (isinstance(address, tuple) and address[0] in LOOPBACK)

        def connect(sock, address):
            if not allowed(sock, address):
                guard.attempts.append(("connect", address))
                raise OSError(f"test network guard: connection to {address} refused")
            return real_connect(sock, address)

        def connect_ex(sock, address):
            if not allowed(sock, address):
                guard.attempts.append(("connect_ex", address))
                raise OSError(f"test network guard: connection to {address} refused")
            return real_connect_ex(sock, address)

        def getaddrinfo(host, *args, **kwargs):
            if host not in LOOPBACK and host is not None:
                guard.attempts.append(("getaddrinfo", host))
                raise socket.gaierror(f"test network guard: lookup of {host} refused")
            return real_getaddrinfo(host, *args, **kwargs)

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture(scope="module")
def verified(specimen_dir, specimen_lock_path):
    return verify_artifacts(specimen_dir, load_lock(specimen_lock_path))


@pytest.fixture(scope="module")
def observed(verified, tmp_path_factory):
    """One observation run under the network guard: (result, output directory, network attempts)."""
    monkeypatch = pytest.MonkeyPatch()
    try:
        guard = NetworkGuard(monkeypatch)
        output = tmp_path_factory.mktemp("observe") / "run-01"
        result = observe.observe_to_directory(verified, output, command=["test", "run-01"])
    finally:
        monkeypatch.undo()
    return result, output, guard.attempts


def read(directory: Path, name: str) -> dict:
    return json.loads((directory / name).read_text(encoding="utf-8"))


def test_the_guard_does_refuse_a_remote_connection(monkeypatch):
    guard = NetworkGuard(monkeypatch)
    with pytest.raises(OSError, match="network guard"):
        socket.create_connection(("203.0.113.9", 443), timeout=1)  # TEST-NET-3: never routed anyway
    assert guard.attempts


def test_the_observation_run_makes_no_network_request(observed):
    _, output, attempts = observed
    assert attempts == []
    assert sorted(path.name for path in output.iterdir()) == sorted(observe.RESULT_FILES)


def test_manifest_records_versions_provenance_and_the_block_return_kind(observed, specimen_lock_data):
    import transformers

    _, output, _ = observed
    manifest = read(output, "manifest.json")
    assert set(manifest["versions"]) == {"python", "torch", "transformers", "tokenizers", "safetensors", "huggingface_hub"}
    assert manifest["versions"]["transformers"] == transformers.__version__
    assert manifest["repository"] == specimen_lock_data["repository"]
    assert manifest["revision"] == specimen_lock_data["revision"]
    assert manifest["synthetic"] is True
    assert {entry["name"]: entry["sha256"] for entry in manifest["files"]} == {
        entry["name"]: entry["sha256"] for entry in specimen_lock_data["files"]
    }
    assert manifest["command"] == ["test", "run-01"]
    expected_kind = "tuple" if int(transformers.__version__.split(".")[0]) < 5 else "tensor"
    assert manifest["block_return_kind"] == expected_kind
    assert (manifest["dtype"], manifest["device"], manifest["attn_implementation"]) == ("float32", "cpu", "eager")
    assert manifest["site_map"]["per_block"]["attn_write"]["module"] == "post_attention_dropout"
    assert manifest["created"].startswith("20")
    assert "/" not in manifest["lock"]  # no directory of this machine in the record


def test_observations_show_tokens_first_then_checks_and_every_position(observed):
    _, output, _ = observed
    observations = read(output, "observations.json")
    keys = list(observations)
    assert observations["schema"] == observe.OBSERVATIONS_SCHEMA == 3 and "observation" not in keys
    assert keys.index("tokens") < keys.index("selected_position") < keys.index("checks") < keys.index("positions")
    tokens = observations["tokens"]
    assert "".join(token["piece"] for token in tokens) == observe.FIXED_TEXT
    assert observations["selected_position"] == len(tokens) - 1
    checks = observations["checks"]
    assert checks["identity"]["all_within_tolerance"] and checks["shapes_ok"]
    assert checks["hook_removal"]["handles_left_after_exit"] == 0
    assert checks["hook_removal"]["sites_recorded_by_a_later_forward"] == 0
    assert [observation["position"] for observation in observations["positions"]] == list(range(len(tokens)))
    for observation in observations["positions"]:
        boundaries = observation["boundaries"]
        assert [row["label"] for row in boundaries] == [f"H_{i}" for i in range(7)]
        for row in boundaries:
            probabilities = [entry["probability"] for entry in row["logit_lens_top"]]
            assert len(probabilities) == observe.TOP_K
            assert probabilities == sorted(probabilities, reverse=True)


def test_captures_json_holds_the_full_states_and_writes(observed):
    result, output, _ = observed
    captures = read(output, "captures.json")
    tensors = {entry["name"]: torch.tensor(entry["values"]) for entry in captures["tensors"]}
    n = len(captures["token_ids"])
    assert len(tensors) == 1 + 3 * 6 + 1
    for entry in captures["tensors"]:
        assert entry["shape"] == [1, n, 128] and list(tensors[entry["name"]].shape) == entry["shape"]
    # The stored values are exact float32: the identity holds on them as on the live capture.
    state = tensors["blocks.0.resid_pre"]
    worst = 0.0
    for block in range(6):
        out = tensors[f"blocks.{block}.resid_post"]
        worst = max(worst, float((out - (state + tensors[f"blocks.{block}.attn_write"] + tensors[f"blocks.{block}.mlp_write"])).abs().max()))
        state = out
    assert worst <= IDENTITY_ABSOLUTE
    for position, observation in enumerate(result["observations"]["positions"]):
        last = tensors["blocks.5.resid_post"][0, position]
        assert float(last.norm()) == pytest.approx(observation["boundaries"][-1]["norm"], rel=1e-6)
    assert (output / "captures.json").stat().st_size < 400_000


def test_a_non_empty_output_directory_is_refused_untouched_before_loading(verified, tmp_path, monkeypatch):
    def must_not_load(*args, **kwargs):
        raise AssertionError("the model was loaded before the output directory was checked")

    monkeypatch.setattr(observe, "load_offline", must_not_load)
    output = tmp_path / "run-01"
    output.mkdir()
    (output / "notes.txt").write_text("mine\n")
    with pytest.raises(OutputDirectoryError, match="not empty"):
        observe.observe_to_directory(verified, output, command=["test"])
    assert [path.name for path in output.iterdir()] == ["notes.txt"]
    assert (output / "notes.txt").read_text() == "mine\n"
    a_file = tmp_path / "run-02"
    a_file.write_text("x")
    with pytest.raises(OutputDirectoryError, match="not a directory"):
        observe.observe_to_directory(verified, a_file, command=["test"])
    assert a_file.read_text() == "x"


def test_a_failure_while_writing_leaves_no_directory_behind(verified, tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("disk full (simulated)")

    monkeypatch.setattr(observe, "capture_tensors_json", fail)
    output = tmp_path / "run-03"
    with pytest.raises(RuntimeError, match="disk full"):
        observe.observe_to_directory(verified, output, command=["test"])
    assert not output.exists()
    assert list(tmp_path.iterdir()) == []  # the staging directory went too


def test_an_existing_empty_output_directory_is_used(verified, tmp_path):
    output = tmp_path / "empty"
    output.mkdir()
    observe.observe_to_directory(verified, output, command=["test"], position=0)
    assert read(output, "observations.json")["selected_position"] == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["empty"]


def test_position_is_chosen_among_the_recorded_tokens(verified):
    model, tokenizer = load_offline(verified)
    chosen = observe.observe(model, tokenizer, position=2)["observations"]
    assert chosen["selected_token"]["piece"] == " red"
    assert chosen["selected_position"] == 2 and len(chosen["positions"]) == len(chosen["tokens"])
    assert observe.observe(model, tokenizer, position=-1)["observations"]["selected_position"] == len(chosen["tokens"]) - 1
    with pytest.raises(observe.ObservationError, match=r"outside the 8 tokens \(0\.\.7\)"):
        observe.observe(model, tokenizer, position=8)


def test_cli_observe_writes_results_and_refuses_a_used_directory(specimen_dir, specimen_lock_path, tmp_path, capsys):
    from residlab.cli import main

    output = tmp_path / "cli-run"
    arguments = ["pythia", "observe", "--artifacts", str(specimen_dir), "--lock", str(specimen_lock_path)]
    assert main([*arguments, "--output", str(output), "--position", "3"]) == 0
    printed = capsys.readouterr().out
    assert "NOT Pythia-14M's numbers" in printed and "selected position 3 ' boat'" in printed
    assert read(output, "manifest.json")["command"][:3] == ["residlab", "pythia", "observe"]
    before = {path.name: path.stat().st_mtime_ns for path in output.iterdir()}
    assert main([*arguments, "--output", str(output)]) == 1
    assert "not empty" in capsys.readouterr().err
    assert {path.name: path.stat().st_mtime_ns for path in output.iterdir()} == before


def test_the_bundled_runner_alone_writes_the_same_observations(observed, specimen_dir, specimen_lock_path, tmp_path):
    from residlab.build.runners import RUNNERS, build_runner

    _, package_output, _ = observed
    runner = next(r for r in RUNNERS if r.filename == "inspect_residual_stream.py")
    text = build_runner(runner)
    assert not re.search(r"^\s*(from|import) residlab", text, flags=re.MULTILINE)  # it must run alone
    script = tmp_path / runner.filename
    script.write_text(text, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "HF_ENDPOINT")}
    env["HF_HUB_OFFLINE"] = "1"
    completed = subprocess.run(
        [sys.executable, str(script), "--offline", "--artifacts", str(specimen_dir), "--lock", str(specimen_lock_path), "--output", "run-02"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    runner_output = tmp_path / "run-02"
    assert read(runner_output, "observations.json") == read(package_output, "observations.json")
    assert read(runner_output, "captures.json") == read(package_output, "captures.json")
    assert read(runner_output, "manifest.json")["command"][0].endswith("inspect_residual_stream.py")


def test_the_committed_capture_is_complete_small_and_marked_synthetic():
    manifest = read(CACHED_CAPTURE, "manifest.json")
    observations = read(CACHED_CAPTURE, "observations.json")
    assert sorted(path.name for path in CACHED_CAPTURE.iterdir()) == sorted(observe.RESULT_FILES)
    assert manifest["synthetic"] is True and "synthetic" in manifest["repository"]
    assert manifest["command"][:4] == ["residlab", "pythia", "observe", "--specimen"]
    assert observations["text"] == observe.FIXED_TEXT
    assert observations["checks"]["identity"]["all_within_tolerance"]
    assert sum(path.stat().st_size for path in CACHED_CAPTURE.iterdir()) < 400_000
    text = "".join(path.read_text(encoding="utf-8") for path in CACHED_CAPTURE.iterdir())
    assert "/work/" not in text and "/tmp/" not in text and "/home/" not in text


def test_cli_observe_specimen_is_how_the_cached_capture_is_made(tmp_path, capsys, monkeypatch):
    from residlab.cli import main
    from residlab.pythia import specimen

    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("keep\n")
    written = []
    monkeypatch.setattr(specimen, "write_specimen", lambda *a, **k: written.append(a) or pytest.fail("wrote the specimen"))
    assert main(["pythia", "observe", "--specimen", "--output", str(used)]) == 1
    assert "not empty" in capsys.readouterr().err and written == []
    assert [path.name for path in used.iterdir()] == ["keep.txt"]
    monkeypatch.undo()
    output = tmp_path / "fresh"
    assert main(["pythia", "observe", "--specimen", "--output", str(output)]) == 0
    assert "NOT Pythia-14M's numbers" in capsys.readouterr().out
    made, cached = read(output, "observations.json"), read(CACHED_CAPTURE, "observations.json")
    # Same seed, same code: the committed capture is reproducible (bit for bit on the same library versions).
    assert made["tokens"] == cached["tokens"]
    for position in range(len(made["tokens"])):
        assert [row["norm"] for row in made["positions"][position]["boundaries"]] == pytest.approx(
            [row["norm"] for row in cached["positions"][position]["boundaries"]], rel=1e-5
        )
