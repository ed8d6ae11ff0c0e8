"""Every fault is refused with an error naming the file; nothing half-written is accepted; nothing the user
already had is overwritten or deleted (each test snapshots the directory before and after)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from residlab.pythia.artifacts import STAGING_PREFIX, ArtifactError, FetchLimits, fetch_artifacts, verify_artifacts
from residlab.pythia.lock import ALLOWED_FILES, load_lock


def quiet(_message: str) -> None:
    pass


def snapshot(directory: Path) -> dict:
    """Every entry under ``directory`` (hidden ones too): its kind and bytes, or where a link points."""
    state = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(root, name)
            relative = str(path.relative_to(directory))
            if path.is_symlink():
                state[relative] = ("link", os.readlink(path))
            elif path.is_dir():
                state[relative] = ("dir",)
            else:
                state[relative] = ("file", path.read_bytes())
    return state


def flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


# ---- verification of an existing directory (offline) ------------------------------------------------------------


def _truncate(directory: Path) -> None:
    path = directory / "model.safetensors"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip(directory: Path) -> None:
    flip_middle_byte(directory / "tokenizer.json")


def _extra(directory: Path) -> None:
    (directory / "pytorch_model.bin").write_bytes(b"weights that were never allowed")


def _missing(directory: Path) -> None:
    (directory / "special_tokens_map.json").unlink()


def _wrong_size(directory: Path) -> None:
    with open(directory / "config.json", "ab") as handle:
        handle.write(b"\n")


def _symlink_outside(directory: Path) -> None:
    # Same bytes, but held outside the directory and linked in: still refused.
    outside = directory.parent / "elsewhere-config.json"
    outside.write_bytes((directory / "config.json").read_bytes())
    (directory / "config.json").unlink()
    (directory / "config.json").symlink_to(outside)


def _subdirectory(directory: Path) -> None:
    (directory / "checkpoints").mkdir()
    (directory / "checkpoints" / "step1000.safetensors").write_bytes(b"x")


def _interrupted_fetch(directory: Path) -> None:
    (directory / f"{STAGING_PREFIX}abc").mkdir()


LOCAL_FAULTS = {
    "truncated file": (_truncate, r"model\.safetensors: 14,071,960 bytes, the lock says 28,143,920"),
    "flipped byte": (_flip, r"tokenizer\.json: sha256 [0-9a-f]{64}, the lock says [0-9a-f]{64} \(same size, different bytes\)"),
    "extra file": (_extra, r"pytorch_model\.bin: extra file"),
    "missing file": (_missing, r"special_tokens_map\.json: missing"),
    "wrong size": (_wrong_size, r"config\.json: 639 bytes, more than the 638 allowed; not read"),
    "symlink outside": (_symlink_outside, r"config\.json: is a symbolic link \(to .*elsewhere-config\.json\)"),
    "subdirectory": (_subdirectory, r"checkpoints: unexpected directory"),
    "interrupted fetch": (_interrupted_fetch, r"left by an interrupted fetch"),
}


@pytest.mark.parametrize("fault", sorted(LOCAL_FAULTS))
def test_offline_verification_refuses_each_fault_and_changes_nothing(
    fault, copy_specimen, specimen_lock_path, fake_hub_server
):
    damage, message = LOCAL_FAULTS[fault]
    directory = copy_specimen()
    lock = load_lock(specimen_lock_path)
    verify_artifacts(directory, lock)  # sound before the damage
    damage(directory)
    before = snapshot(directory)
    with pytest.raises(ArtifactError, match=message):
        verify_artifacts(directory, lock)
    assert snapshot(directory) == before
    assert fake_hub_server.requests == []  # verification never reaches a hub


@pytest.mark.parametrize("fault", sorted(set(LOCAL_FAULTS) - {"missing file"}))  # a missing file is fetched
def test_fetch_refuses_a_damaged_directory_before_any_request(
    fault, copy_specimen, specimen_lock_path, fake_hub_server
):
    damage, message = LOCAL_FAULTS[fault]
    directory = copy_specimen()
    damage(directory)
    before = snapshot(directory)
    with pytest.raises(ArtifactError, match=message) as error:
        fetch_artifacts(directory, load_lock(specimen_lock_path), endpoint=fake_hub_server.endpoint, report=quiet)
    assert "never overwrites or deletes" in str(error.value)
    assert fake_hub_server.requests == []
    assert snapshot(directory) == before


def test_fetch_fills_in_a_missing_file(copy_specimen, specimen_lock_path, fake_hub_server):
    directory = copy_specimen()
    _missing(directory)
    fetch_artifacts(directory, load_lock(specimen_lock_path), endpoint=fake_hub_server.endpoint, report=quiet)
    assert set(fake_hub_server.resolved_files()) == {"special_tokens_map.json"}


# ---- faults on the hub's side ----------------------------------------------------------------------------------

# Small bounds so every misbehaving server is given up on within seconds: a short deadline where the deadline
# is what must stop the fetch, a generous one elsewhere (so a loaded machine does not turn a refusal for size
# into a refusal for time).
FAST = FetchLimits(deadline_s=2.0, stall_s=0.4, attempts=3, backoff_s=0.0)
STALLS = FetchLimits(deadline_s=60.0, stall_s=0.4, attempts=3, backoff_s=0.0)
BOUNDED = FetchLimits(deadline_s=60.0, stall_s=5.0, attempts=3, backoff_s=0.0)
LIMITS_FOR_FAULT = {"trickle": FAST, "trickle_headers": FAST, "silent": STALLS, "stall_ignore_range": STALLS}
SIZE = {"config.json": 638, "model.safetensors": 28_143_920}  # the specimen's, as its lock records them

HUB_FAULTS = {
    # fault on the hub, the file it hits, what the error must say
    "404 wrong file": ("missing", "tokenizer_config.json", r"tokenizer_config\.json: .*the Hub has no such file"),
    "500": ("server_error", "*", r"config\.json: download .* failed .*attempt 3: HTTP 500"),
    "truncated body": (
        "truncate", "model.safetensors",
        r"model\.safetensors: .*the server announces 14,071,960 bytes \(Content-Length\), the lock says 28,143,920",
    ),
    "transfer cut midway": ("cut", "model.safetensors", r"model\.safetensors: download .* failed after 14,071,960 of 28,143,920 bytes"),
    "flipped byte": ("flip", "model.safetensors", r"downloaded model\.safetensors: sha256 [0-9a-f]{64}, the lock says"),
    "wrong size": ("resize", "config.json", r"config\.json: .*the server announces 639 bytes \(Content-Length\), the lock says 638"),
    "oversize without a length": (
        "oversize_unframed", "config.json", r"config\.json: .*more than the lock's 638 bytes; stopped reading at byte 639\b"
    ),
    "oversize chunked": (
        "oversize_chunked", "model.safetensors",
        r"model\.safetensors: .*more than the lock's 28,143,920 bytes; stopped reading at byte 28,143,921\b",
    ),
    "trickled body": ("trickle", "config.json", r"config\.json: download .* failed .*the fetch's deadline of 2 s passed"),
    "trickled headers": ("trickle_headers", "config.json", r"config\.json: download .* failed .*the fetch's deadline of 2 s passed"),
    "silent server": ("silent", "config.json", r"config\.json: .*attempt 3: no data for 0\.4 s \(stalled\)"),
    "stall, then Range ignored": (
        "stall_ignore_range", "model.safetensors",
        r"model\.safetensors: .*attempt 1: no data for 0\.4 s \(stalled\); attempt 2: the server ignored the request "
        r"to resume from byte 14,071,960",
    ),
    "redirect loop": ("redirect_loop", "config.json", r"config\.json: .*more than 5 redirects"),
}  # fmt: skip


@pytest.mark.parametrize("fault", sorted(HUB_FAULTS))
def test_a_hub_fault_is_refused_in_time_and_only_verified_complete_files_remain(
    fault, tmp_path, specimen_dir, specimen_lock_path, fake_hub_server
):
    kind, name, message = HUB_FAULTS[fault]
    directory = tmp_path / "artifacts"
    directory.mkdir()
    users_copy = directory / "special_tokens_map.json"  # the user already has this one: it must survive untouched
    users_copy.write_bytes((specimen_dir / users_copy.name).read_bytes())
    users_stat = users_copy.stat()
    lock = load_lock(specimen_lock_path)
    fake_hub_server.faults[name] = kind
    limits = LIMITS_FOR_FAULT.get(kind, BOUNDED)
    started = time.monotonic()
    with pytest.raises(ArtifactError, match=message):
        fetch_artifacts(directory, lock, endpoint=fake_hub_server.endpoint, report=quiet, limits=limits)
    if limits is FAST:
        assert time.monotonic() - started < FAST.deadline_s + 1.5  # the deadline holds, whatever the server does
    left = sorted(path.name for path in directory.iterdir())
    assert set(left) < set(ALLOWED_FILES)  # no staging folder, no partial file
    assert name not in left
    for kept in left:  # whatever was moved in is complete and matches the lock
        assert (directory / kept).read_bytes() == (specimen_dir / kept).read_bytes()
    assert sum((directory / kept).stat().st_size for kept in left) <= lock.total_bytes
    assert (users_copy.stat().st_ino, users_copy.stat().st_mtime_ns) == (users_stat.st_ino, users_stat.st_mtime_ns)
    assert "special_tokens_map.json" not in fake_hub_server.resolved_files()
    # Once the hub is sound again, the same directory completes without re-downloading what it kept.
    fake_hub_server.faults.clear()
    fake_hub_server.requests.clear()
    fetch_artifacts(directory, lock, endpoint=fake_hub_server.endpoint, report=quiet, limits=BOUNDED)
    assert set(fake_hub_server.resolved_files()) == set(ALLOWED_FILES) - set(left)
    verify_artifacts(directory, lock)


def test_an_oversized_body_is_never_written_past_the_locked_size(
    tmp_path, specimen_lock_path, fake_hub_server, monkeypatch
):
    """Watch every write into the staging file: none takes it past the lock's size."""
    import builtins

    largest = {}
    real_open = builtins.open

    class Watched:
        def __init__(self, handle, name):
            self.handle, self.name, self.written = handle, name, 0

        def write(self, data):
            self.written += len(data)
            largest[self.name] = max(largest.get(self.name, 0), self.written)
            return self.handle.write(data)

        def __getattr__(self, attribute):
            return getattr(self.handle, attribute)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.handle.__exit__(*exc)

    def watching_open(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        return Watched(handle, Path(path).name) if "w" in mode and STAGING_PREFIX in str(path) else handle

    monkeypatch.setattr(builtins, "open", watching_open)
    fake_hub_server.faults["model.safetensors"] = "oversize_unframed"
    with pytest.raises(ArtifactError, match=r"model\.safetensors: .*stopped reading at byte 28,143,921\b"):
        fetch_artifacts(tmp_path / "a", load_lock(specimen_lock_path), endpoint=fake_hub_server.endpoint, report=quiet, limits=BOUNDED)
    # Written in many pieces, never past the lock's size: the byte beyond it was read, never written.
    assert SIZE["model.safetensors"] // 2 < largest["model.safetensors"] <= SIZE["model.safetensors"]
    assert largest["config.json"] == SIZE["config.json"]


def test_redirects_are_followed_as_the_hub_sends_files_to_its_cdn(tmp_path, specimen_lock_path, fake_hub_server):
    fake_hub_server.faults["*"] = "redirect"
    verified = fetch_artifacts(tmp_path / "a", load_lock(specimen_lock_path), endpoint=fake_hub_server.endpoint, report=quiet, limits=BOUNDED)
    assert sorted(verified.sha256) == sorted(ALLOWED_FILES)
    assert sum(1 for _, path in fake_hub_server.requests if path.startswith("/cdn/")) == len(ALLOWED_FILES)


def test_fetch_timeout_option_bounds_the_command(tmp_path, specimen_lock_path, fake_hub_server, capsys):
    from residlab.pythia import cli

    fake_hub_server.faults["config.json"] = "trickle"
    common = ["--artifacts", str(tmp_path / "a"), "--lock", str(specimen_lock_path), "--endpoint", fake_hub_server.endpoint]
    started = time.monotonic()
    assert cli.main(["fetch", *common, "--timeout", "1"]) == 1
    # the trickle would take 638 bytes x trickle_interval = 32 s; the bound leaves room for a loaded machine
    assert time.monotonic() - started < 10.0 < 638 * fake_hub_server.trickle_interval
    error = capsys.readouterr().err
    assert "config.json: download" in error and "deadline of 1 s passed" in error and "Traceback" not in error
    for bad in ("0", "-3", "soon", "inf"):
        with pytest.raises(SystemExit):
            cli.main(["fetch", *common, "--timeout", bad])
        assert "not a positive number of seconds" in capsys.readouterr().err


def test_a_revision_the_hub_lacks_is_refused(tmp_path, specimen_lock_data, fake_hub_server):
    import json

    data = dict(specimen_lock_data, revision="0" * 40)
    lock_path = tmp_path / "other-revision.lock.json"
    lock_path.write_text(json.dumps(data))
    directory = tmp_path / "artifacts"
    with pytest.raises(ArtifactError, match=r"config\.json: .*the Hub has no such revision"):
        fetch_artifacts(directory, load_lock(lock_path), endpoint=fake_hub_server.endpoint, report=quiet, limits=BOUNDED)
    assert not directory.exists()  # the folder the fetch created is not left behind empty


def closed_port() -> int:
    import socket

    with socket.socket() as probe:  # a port nobody listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


UNREACHABLE = (
    r"^could not connect to {host} \(Connection refused\): the Hub could not be reached\. Check the network "
    r"connection; behind a proxy, set HTTPS_PROXY \(or HTTP_PROXY; NO_PROXY lists hosts reached directly\), which "
    r"the download honours as pip does; or fetch on a machine that reaches the Hub, copy the six files into one "
    r"folder here and run with --offline\. {where}; the same command fetches what is missing once the Hub is "
    r"reachable\.$"
)


@pytest.fixture
def no_proxy_variables(monkeypatch):
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def test_an_unreachable_hub_is_one_message_naming_the_host_and_nothing_is_left(tmp_path, specimen_lock_path, no_proxy_variables):
    port = closed_port()
    directory = tmp_path / "new" / "artifacts"
    with pytest.raises(ArtifactError) as error:
        fetch_artifacts(directory, load_lock(specimen_lock_path), endpoint=f"http://127.0.0.1:{port}", report=quiet, limits=BOUNDED)
    where = re.escape(f"Nothing was written: the folder {directory} this fetch created was removed again")
    assert re.match(UNREACHABLE.format(host=re.escape(f"127.0.0.1:{port}"), where=where), str(error.value)), str(error.value)
    assert "config.json" not in str(error.value)  # no file is at fault
    assert list(tmp_path.iterdir()) == []  # neither folder it created is left


def test_an_unreachable_hub_leaves_an_existing_folder_as_it_was(tmp_path, specimen_lock_path, no_proxy_variables):
    directory = tmp_path / "artifacts"
    directory.mkdir()
    with pytest.raises(ArtifactError) as error:
        fetch_artifacts(directory, load_lock(specimen_lock_path), endpoint=f"http://127.0.0.1:{closed_port()}",
                        report=quiet, limits=BOUNDED)
    assert f"Nothing was written to {directory}, which can be used again as it is;" in str(error.value)
    assert directory.is_dir() and list(directory.iterdir()) == []


def test_an_unreachable_proxy_is_named_with_its_variable(tmp_path, specimen_lock_path, no_proxy_variables):
    port = closed_port()
    no_proxy_variables.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    with pytest.raises(ArtifactError) as error:  # the Hub's own name is never looked up: the proxy is asked
        fetch_artifacts(tmp_path / "artifacts", load_lock(specimen_lock_path), endpoint="http://hub.invalid",
                        report=quiet, limits=BOUNDED)
    assert str(error.value).startswith(
        f"could not connect to the proxy 127.0.0.1:{port} (HTTP_PROXY) for hub.invalid:80 (Connection refused): "
        "the Hub could not be reached."
    )


def test_a_transfer_cut_once_is_resumed_and_checked(tmp_path, specimen_dir, specimen_lock_path, fake_hub_server):
    fake_hub_server.faults["model.safetensors"] = "cut_once"
    directory = tmp_path / "artifacts"
    fetch_artifacts(directory, load_lock(specimen_lock_path), endpoint=fake_hub_server.endpoint, report=quiet, limits=BOUNDED)
    gets = [p for m, p in fake_hub_server.requests if m == "GET" and p.endswith("/model.safetensors")]
    assert len(gets) == 2  # the second asked for the rest (Range) and the result was still checked
    assert (directory / "model.safetensors").read_bytes() == (specimen_dir / "model.safetensors").read_bytes()


def test_fetch_goes_through_the_proxy_the_environment_names(tmp_path, specimen_lock_path, fake_hub_server, monkeypatch):
    # A plain-HTTP forwarding proxy on loopback: it is sent whole URLs and relays each exchange to the hub.
    import http.client
    import http.server
    import threading
    from urllib.parse import urlsplit

    relayed = []

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self._relay("GET")

        def do_HEAD(self):
            self._relay("HEAD")

        def _relay(self, method):
            relayed.append(self.path)
            target = urlsplit(self.path)
            upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
            upstream.request(method, target.path + (f"?{target.query}" if target.query else ""), headers=dict(self.headers))
            response = upstream.getresponse()
            body = response.read()
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in ("transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.end_headers()
            if method == "GET":
                self.wfile.write(body)
            upstream.close()

        def log_message(self, *args):
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.setenv("NO_PROXY", "")
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("http_proxy", raising=False)
        verified = fetch_artifacts(tmp_path / "a", load_lock(specimen_lock_path), endpoint=fake_hub_server.endpoint, report=quiet, limits=BOUNDED)
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert sorted(verified.sha256) == sorted(ALLOWED_FILES)
    assert relayed and all(path.startswith(fake_hub_server.endpoint + "/") for path in relayed)
    assert any(path.endswith("/model.safetensors") for path in relayed)
