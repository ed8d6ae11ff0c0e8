"""The pages the pinned Quarto renders from ``quarto_fixture/``, for the tests of the rewrites of its output
(``residlab/build/first_paint.py``): rendered once per test session, and kept in pytest's cache under the digest of
the fixture's files and the Quarto version, so a later session renders again only when either changed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent / "quarto_fixture"
READING_FILTER = Path(__file__).resolve().parents[3] / "assets" / "site" / "reading.lua"  # the site's own filter
RENDER_TIMEOUT_S = 600  # a tiny project; on a busy two-core machine about a minute


def _quarto() -> str:
    quarto = os.environ.get("QUARTO") or shutil.which("quarto")
    if not quarto:
        pytest.fail("Quarto is not on PATH (or in $QUARTO): the rewrites of its output are tested on what it renders")
    return quarto


@pytest.fixture(scope="session")
def quarto_site(request, tmp_path_factory) -> Path:
    """The ``_site`` folder Quarto rendered from the fixture project (read it; copy it before writing into it)."""
    quarto = _quarto()
    version = subprocess.run([quarto, "--version"], capture_output=True, text=True, timeout=120, check=True).stdout
    digest = hashlib.sha256(version.encode())
    for path in sorted(FIXTURE.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(FIXTURE).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update(b"reading.lua\0" + READING_FILTER.read_bytes())
    name = f"quarto-fixture-{digest.hexdigest()[:16]}"
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider: rendered for this session only
    folder = cache.mkdir(name) if cache is not None else tmp_path_factory.mktemp(name)
    site = folder / "_site"
    if not (site / "index.html").is_file():
        # rendered outside the cache: Quarto renders nothing in a project below a hidden folder (.pytest_cache)
        project = Path(shutil.copytree(FIXTURE, tmp_path_factory.mktemp("quarto-fixture") / "project"))
        shutil.copyfile(READING_FILTER, project / "reading.lua")
        completed = subprocess.run([quarto, "render"], cwd=project, capture_output=True, text=True,
                                   timeout=RENDER_TIMEOUT_S)  # fmt: skip
        assert completed.returncode == 0 and (project / "_site" / "index.html").is_file(), completed.stderr[-3000:]
        shutil.rmtree(site, ignore_errors=True)
        shutil.copytree(project / "_site", site)
    return site


@pytest.fixture
def built_copy(quarto_site, tmp_path) -> Path:
    """A copy of the rendered site to rewrite."""
    return Path(shutil.copytree(quarto_site, tmp_path / "_site"))
