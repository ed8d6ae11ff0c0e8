"""A package index on 127.0.0.1 for the pins tests: wheels built here, filed in a PEP 503 simple index, served by
http.server in a thread.

- ``build_wheel(folder, name, version, modules)``: a tiny pure-Python wheel holding the given modules.
- ``wheel_of_installed(folder, name)``: an installed distribution packed back into a wheel, so a throwaway
  environment can install pytest (``installed_with_requirements("pytest")`` names what it needs) from this index.
- ``PackageIndex(folder)``: ``add(wheel)`` files a wheel under its project's page; ``start()`` serves the folder and
  returns the index URL (``.../simple/``); ``requests`` logs every path asked for; ``stop()``.
- ``isolated_pip_env(folder, index_url)``: environment variables under which pip reads no configuration file, keeps
  its cache in ``folder`` and asks no index but this one; any other host goes to a proxy that refuses.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

REFUSING_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens, every connection is refused


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _write_wheel(path: Path, files: dict[str, bytes], dist_info: str) -> Path:
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
              for name, data in files.items()]  # fmt: skip
    record.append(f"{dist_info}/RECORD,,")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return path


def build_wheel(folder: Path, name: str, version: str, modules: dict[str, str]) -> Path:
    """A wheel of ``name`` ``version`` whose files are ``modules`` (path inside site-packages -> source)."""
    stem = f"{name.replace('-', '_')}-{version}"
    dist_info = f"{stem}.dist-info"
    files = {path: source.encode() for path, source in modules.items()}
    files[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: residlab-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    return _write_wheel(folder / f"{stem}-py3-none-any.whl", files, dist_info)


def wheel_of_installed(folder: Path, name: str) -> Path:
    """The installed distribution ``name`` as a wheel: its files under site-packages, its own METADATA and WHEEL."""
    distribution = metadata.distribution(name)
    files, dist_info = {}, None
    for entry in distribution.files or ():
        path = str(entry)
        if path.startswith("..") or "__pycache__" in path or path.endswith(".pyc"):
            continue  # console scripts (pip writes them again from entry_points.txt) and compiled files
        if ".dist-info/" in path:
            dist_info = path.split("/", 1)[0]
            if path.rsplit("/", 1)[1] in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                continue  # what the installer wrote, not the wheel
        files[path] = Path(distribution.locate_file(entry)).read_bytes()
    tag = re.search(r"^Tag: (\S+)$", files[f"{dist_info}/WHEEL"].decode(), re.M).group(1)
    stem = dist_info.removesuffix(".dist-info")
    return _write_wheel(folder / f"{stem}-{tag}.whl", files, dist_info)


def installed_with_requirements(name: str) -> list[str]:
    """``name`` and every distribution it requires here, as installed (markers evaluated, extras ignored)."""
    found, pending = [], [name]
    while pending:
        current = normalised(pending.pop())
        if current in found:
            continue
        found.append(current)
        for line in metadata.requires(current) or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return found


class PackageIndex:
    def __init__(self, folder: Path):
        self.folder = folder
        (folder / "files").mkdir(parents=True, exist_ok=True)
        self.projects: dict[str, list[str]] = {}
        self.requests: list[str] = []
        self.server = None

    def add(self, wheel: Path) -> None:
        target = self.folder / "files" / wheel.name
        if wheel != target:
            target.write_bytes(wheel.read_bytes())
        project = normalised(wheel.name.split("-", 1)[0])
        self.projects.setdefault(project, []).append(wheel.name)
        self._write_pages()

    def _write_pages(self) -> None:
        simple = self.folder / "simple"
        for project, wheels in self.projects.items():
            links = "".join(
                f'<a href="../../files/{html.escape(name)}#sha256={hashlib.sha256((self.folder / "files" / name).read_bytes()).hexdigest()}">'
                f"{html.escape(name)}</a><br>\n" for name in wheels)  # fmt: skip
            (simple / project).mkdir(parents=True, exist_ok=True)
            (simple / project / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
        projects = "".join(f'<a href="{name}/">{name}</a><br>\n' for name in sorted(self.projects))
        (simple / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{projects}</body></html>\n")

    def start(self) -> str:
        index = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(index.folder), **kwargs)

            def do_GET(self):
                index.requests.append(self.path)
                super().do_GET()

            def log_message(self, *args):  # quiet: the requests are in index.requests
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple/"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def isolated_pip_env(folder: Path, index_url: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if not key.upper().startswith(("PIP_", "HTTP", "ALL_PROXY"))}
    environment.update({
        "PIP_CONFIG_FILE": os.devnull,  # no pip.conf of this machine: its indexes, find-links or constraints
        "PIP_INDEX_URL": index_url,
        "PIP_CACHE_DIR": str(folder / "pip-cache"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",  # pip would ask PyPI for its own newest release
        "PIP_NO_INPUT": "1",
        "HTTP_PROXY": REFUSING_PROXY, "HTTPS_PROXY": REFUSING_PROXY, "http_proxy": REFUSING_PROXY,
        "https_proxy": REFUSING_PROXY, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    })  # fmt: skip
    return environment
