"""Which capture Lab 05 Part 4 shows and how it names it: fresh from verified files (named, or the lock's cache
folder), else the committed capture of the lock's files, else the synthetic specimen's, each labelled; the
publisher's "committed on purpose"; and files that are there but do not verify, refused by name."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from residlab.course.models import capture_page, capture_source
from residlab.pythia import cache
from residlab.pythia.artifacts import ArtifactError
from residlab.pythia.lock import load_lock

ROOT = Path(__file__).resolve().parents[3]
SPECIMEN_CAPTURE = ROOT / "assets" / "captures" / "synthetic-specimen-seed0"


@pytest.fixture
def captures(tmp_path) -> Path:
    """A folder of committed captures holding only the synthetic specimen's."""
    folder = tmp_path / "captures"
    shutil.copytree(SPECIMEN_CAPTURE, folder / SPECIMEN_CAPTURE.name)
    return folder


@pytest.fixture
def environ(tmp_path, specimen_lock_path) -> dict:
    return {cache.CACHE_ENV: str(tmp_path / "pythia-cache"), cache.LOCK_ENV: str(specimen_lock_path)}


def test_without_files_or_a_committed_capture_the_page_shows_the_specimen_as_the_null_baseline(captures, environ, specimen_lock_path):
    shown = capture_source.page_capture(captures, environ)
    assert (shown.kind, shown.fresh, shown.synthetic, shown.on_purpose) == ("specimen", False, True, False)
    assert shown.observations == json.loads((SPECIMEN_CAPTURE / "observations.json").read_text())
    sentence = capture_source.source_sentence(shown)
    lock = load_lock(specimen_lock_path)
    # A learner's page names no build command: it points to the learner's own run.
    assert "synthetic specimen's committed capture" in sentence and "make " not in sentence
    assert "observation runner on your own machine" in sentence
    assert shown.lock_label == f"{specimen_lock_path.name} (digest {cache.lock_digest(lock)})"
    assert shown.lock_label in sentence
    callout = capture_source.model_callout(shown)
    assert "Untrained baseline" in callout and "Pythia-14M's numbers" not in callout + sentence


def test_named_files_that_verify_are_captured_during_the_render(captures, environ, specimen_dir, specimen_lock_data,
                                                               tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temporary"))
    (tmp_path / "temporary").mkdir()
    shown = capture_source.page_capture(captures, dict(environ, **{cache.ARTIFACTS_ENV: str(specimen_dir)}))
    assert (shown.kind, shown.fresh) == ("fresh", True) and shown.artifacts.directory == specimen_dir
    assert shown.manifest["revision"] == specimen_lock_data["revision"] and shown.directory is None
    assert list((tmp_path / "temporary").glob("residlab-page-capture-*")) == []  # the capture's folder, removed once read
    assert shown.captures["token_ids"] == [token["id"] for token in shown.observations["tokens"]]
    sentence = capture_source.source_sentence(shown)
    assert "**captured during this render**" in sentence
    assert f"`{specimen_lock_data['repository']}` at revision `{specimen_lock_data['revision']}`" in sentence
    assert not capture_source.is_pinned_model(shown) and capture_source.model_name(shown) == f"`{specimen_lock_data['repository']}`"


def test_named_files_that_do_not_verify_stop_the_page(captures, tmp_path, specimen_dir):
    # The specimen's bytes are not Pythia's: against the pinned lock they must fail, not fall back.
    with pytest.raises(ArtifactError, match="does not match the lock"):
        capture_source.page_capture(captures, {cache.CACHE_ENV: str(tmp_path / "c"), cache.ARTIFACTS_ENV: str(specimen_dir)})


def test_the_cache_folder_is_used_when_it_verifies_and_refused_by_name_when_it_does_not(captures, environ, specimen_dir, specimen_lock_path):
    folder = cache.cache_folder(load_lock(specimen_lock_path), environ)
    shutil.copytree(specimen_dir, folder)
    shown = capture_source.page_capture(captures, environ)
    assert shown.kind == "fresh" and shown.artifacts.directory == folder
    (folder / "tokenizer_config.json").write_bytes(b"{}" + (folder / "tokenizer_config.json").read_bytes()[2:])
    with pytest.raises(ArtifactError, match="tokenizer_config.json: sha256"):
        capture_source.page_capture(captures, environ)


def test_the_committed_capture_of_the_locks_files_comes_before_the_specimen_and_can_be_chosen_on_purpose(
    captures, environ, specimen_dir, specimen_lock_path
):
    from residlab.pythia.refresh import refresh_capture

    lock = load_lock(specimen_lock_path)
    written = refresh_capture(lock, captures, specimen_dir)
    assert written == captures / cache.capture_folder_name(lock)
    shown = capture_source.page_capture(captures, environ)
    assert (shown.kind, shown.directory, shown.on_purpose) == ("committed", written, False)
    assert "**committed capture** of" in capture_source.source_sentence(shown)
    # The publisher's input: the committed capture even though verified files are there, and the page says so.
    shutil.copytree(specimen_dir, cache.cache_folder(lock, environ))
    chosen = capture_source.page_capture(captures, dict(environ, **{capture_source.CHOICE_ENV: "committed"}))
    assert (chosen.kind, chosen.on_purpose) == ("committed", True) and "**on purpose**" in capture_source.source_sentence(chosen)
    with pytest.raises(capture_page.CaptureError, match="RESIDLAB_PYTHIA_CAPTURE='sometimes'"):
        capture_source.page_capture(captures, dict(environ, **{capture_source.CHOICE_ENV: "sometimes"}))


def test_a_committed_capture_of_other_files_is_refused(captures, environ, specimen_lock_path):
    lock = load_lock(specimen_lock_path)
    impostor = captures / cache.capture_folder_name(lock)
    shutil.copytree(SPECIMEN_CAPTURE, impostor)
    manifest = json.loads((impostor / "manifest.json").read_text())
    manifest["revision"] = "0" * 40  # a capture of another revision, under the folder name of the lock's files
    (impostor / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(capture_page.CaptureError, match="not the capture of the lock's files"):
        capture_source.page_capture(captures, environ)


def test_the_pins_are_said_as_they_were_obtained():
    lock = load_lock()
    table, sentence = capture_source.pins_table(lock), capture_source.pins_sentence(lock)
    origins = [capture_source.pin_origin(entry, lock) for entry in lock.files]
    # read from the lock's records: the weights at the pinned revision, four files at another, one size derived
    assert sum("at the pinned revision" in origin for origin in origins) == 1
    assert sum("not yet re-read" in origin for origin in origins) == 4
    assert sum(origin.startswith("size derived") for origin in origins) == 1
    assert "1 has its hash recorded at the pinned revision, 4 at another revision" in sentence
    assert table.strip().count("\n") == len(lock.files) + 1 and "cf967c0a9a04" in table
    # The home page's one sentence says the same counts, and says nothing weaker once every hash is re-read.
    assert capture_source.pins_summary(lock).startswith(
        "Of its 6 files, 1 is pinned by a hash recorded at that revision, 4 by hashes recorded at another revision")
    reread = dataclasses.replace(lock, files=tuple(dataclasses.replace(entry, sha256="0" * 64, source=f"read at {lock.revision}")
                                                   for entry in lock.files))  # fmt: skip
    assert capture_source.pins_summary(reread) == "Each of its 6 files is pinned by a hash recorded at that revision."
