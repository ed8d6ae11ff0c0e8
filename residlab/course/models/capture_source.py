"""Which capture a page shows, and the words that say what it is.

Preference, for the lock the build uses (``residlab.pythia.cache.active_lock``: ``RESIDLAB_PYTHIA_LOCK``, else the
pinned one):

1. **fresh**: verified files, named by ``RESIDLAB_PYTHIA_ARTIFACTS`` or found in the lock's cache folder
   (``make pythia``), captured during this render. Files that are named or cached but do not verify stop the
   render with a message naming the file: a build never quietly shows something else.
2. **committed**: the committed capture of the lock's files, ``assets/captures/<repository name>-<revision>``
   (``make pythia-capture``), refused unless its manifest records the lock's repository, revision and hashes.
3. **specimen**: the synthetic specimen's committed capture, random weights: one untrained draw, shown as a labelled baseline.

``RESIDLAB_PYTHIA_CAPTURE=committed`` skips the first on purpose (the publish workflow's input for publishing
without fetching), and the pages say so.
"""

from __future__ import annotations

import dataclasses
import re
import os
import tempfile
from pathlib import Path

from residlab.course.models.capture_page import (
    CACHED_CAPTURE,
    CAPTURES,
    CaptureError,
    PageCapture,
    read_capture,
)

CHOICE_ENV = "RESIDLAB_PYTHIA_CAPTURE"
CHOICES = ("fresh", "committed")  # fresh: the preference above; committed: never capture during the render
PINNED_REPOSITORY = "EleutherAI/pythia-14m"  # the model the pages are about; only its own files are called so


def _committed_matches(capture: PageCapture, lock) -> str | None:
    """Why a committed capture is not of the lock's files, or None when it is."""
    manifest = capture.manifest
    if (manifest.get("repository"), manifest.get("revision")) != (lock.repository, lock.revision):
        return f"records {manifest.get('repository')} at {manifest.get('revision')}, the lock {lock.repository} at {lock.revision}"
    recorded = {entry.get("name"): entry.get("sha256") for entry in manifest.get("files", [])}
    differing = [entry.name for entry in lock.files if entry.sha256 and recorded.get(entry.name) != entry.sha256]
    return f"its {', '.join(differing)} differ from the lock's sha256" if differing else None


def page_capture(captures: Path = CAPTURES, environ: dict | None = None) -> PageCapture:
    """The capture a page shows (see the module's manual), labelled with its kind and the lock."""
    from residlab.pythia.cache import active_lock, capture_folder_name, lock_label, verified_files
    from residlab.pythia.observe import observe_to_directory

    environ = os.environ if environ is None else environ
    choice = environ.get(CHOICE_ENV) or "fresh"
    if choice not in CHOICES:
        raise CaptureError(f"{CHOICE_ENV}={choice!r}: expected one of {', '.join(CHOICES)}")
    lock = active_lock(environ)
    label = dict(lock_label=lock_label(lock), on_purpose=choice == "committed")
    verified = verified_files(lock, environ) if choice == "fresh" else None
    if verified is not None:
        # the page keeps the numbers, read whole and checked, not the files: no render leaves a folder behind
        with tempfile.TemporaryDirectory(prefix="residlab-page-capture-") as folder:
            output = Path(folder) / "capture"
            observe_to_directory(verified, output, command=["residlab site render (a capture during this render)"])
            capture = read_capture(output, fresh=True)
        return dataclasses.replace(capture, directory=None, kind="fresh", artifacts=verified, **label)
    committed = Path(captures) / capture_folder_name(lock)
    if committed.is_dir():
        capture = read_capture(committed)
        problem = _committed_matches(capture, lock)
        if problem:
            raise CaptureError(f"{committed / 'manifest.json'}: not the capture of the lock's files ({problem})")
        return dataclasses.replace(capture, kind="committed", **label)
    specimen = Path(captures) / CACHED_CAPTURE.name
    return dataclasses.replace(read_capture(specimen), kind="specimen", **label)


def is_pinned_model(capture: PageCapture) -> bool:
    """True only for the real Pythia-14M's own files: never for the synthetic specimen or a test's stand-in."""
    return capture.manifest["repository"] == PINNED_REPOSITORY and not capture.synthetic


def model_name(capture: PageCapture) -> str:
    """How the prose names the model whose numbers these are."""
    return "Pythia-14M" if is_pinned_model(capture) else f"`{capture.manifest['repository']}`"


def source_sentence(capture: PageCapture) -> str:
    """One paragraph saying which capture this is, of which repository, revision and lock, and why."""
    manifest = capture.manifest
    of = f"`{manifest['repository']}` at revision `{manifest['revision']}` (lock {capture.lock_label})"
    if capture.kind == "fresh":
        return f"The numbers below were **captured during this render** from verified files of {of}."
    purpose = (
        " This build used a committed capture **on purpose**: its publisher chose not to fetch the model's files."
        if capture.on_purpose else ""
    )
    if capture.kind == "committed":
        return (f"The numbers below are the **committed capture** of {of}, made on {manifest['created']} from "
                f"verified files; no verified files were used during this render.{purpose}")  # fmt: skip
    return (
        f"The numbers below are the **synthetic specimen's committed capture** (`{manifest['repository']}`, random "
        f"weights): the build had no verified files and no committed capture of the lock it used, {capture.lock_label}."
        f"{purpose or ' Run the observation runner on your own machine to measure the real model.'}"
    )


def model_callout(capture: PageCapture, where: str = "below") -> str:
    """A callout naming whose numbers these are; the synthetic specimen is called what it is, one untrained draw."""
    if capture.synthetic:
        return (
            '::: {.callout-warning title="Untrained baseline: one random-weight draw, not Pythia-14M"}\n'
            f"Every number {where} comes from `{capture.manifest['repository']}`: Pythia-14M's architecture with "
            "**random weights**, the GPT-NeoX-20B tokenizer file (the tokenizer Pythia uses, not a file read from the "
            "Pythia-14M repository), files stored the way the real checkpoint stores them. The checks "
            "are real (it runs exactly the code your run uses), but every norm, cosine and readout describes an "
            "untrained network: a baseline, labelled as one. Set beside your trained-model run it says one thing "
            "only, which patterns could arise without training (those both runs show; one draw cannot say more); it is "
            "no evidence of what "
            "a trained model learned, and no noise floor to measure a trained run's numbers against.\n:::\n"
        )
    return (
        f'::: {{.callout-note title="{model_name(capture).strip("`")}, revision {capture.manifest["revision"][:12]}"}}\n'
        f"Every number {where} was measured on {model_name(capture)} at revision `{capture.manifest['revision']}`, "
        f"from files verified against {capture.lock_label}.\n:::\n"
    )


def pin_origin(entry, lock) -> str:
    """How one file's pinned size and hash were obtained, in a learner's words, read from the lock's own record:
    at the pinned revision, at another revision (named), or a size derived with no hash."""
    if entry.sha256 is None:
        return "size derived (the total minus the other files); no hash recorded: checked against the Hub's metadata when fetched"
    revisions = [found for found in re.findall(r"\b[0-9a-f]{40}\b", entry.source) if found != lock.revision]
    if revisions:
        return f"recorded by other projects at revision `{revisions[0][:12]}`, not yet re-read at the pinned one"
    return "recorded by other projects at the pinned revision"


def pins_table(lock) -> str:
    """The lock's files: size, sha256 and how each pin was obtained."""
    from residlab.course.ui.tables import markdown_table

    return markdown_table(
        ["file", "bytes", "sha256 recorded in the lock", "how the pin was obtained"],
        [[f"`{entry.name}`", f"{entry.size:,}", f"`{entry.sha256}`" if entry.sha256 else "none", pin_origin(entry, lock)]
         for entry in lock.files],
    )  # fmt: skip


def pin_origin_counts(lock) -> tuple[int, int, int]:
    """(hashes recorded at the pinned revision, hashes recorded at another revision, sizes derived with no hash)."""
    origins = [pin_origin(entry, lock) for entry in lock.files]
    return (sum(origin.endswith("at the pinned revision") for origin in origins),
            sum("not yet re-read" in origin for origin in origins),
            sum(origin.startswith("size derived") for origin in origins))  # fmt: skip


def pins_summary(lock) -> str:
    """The pins' provenance in one sentence, counted from the lock (the home page's, after the revision)."""
    at_pinned, elsewhere, derived = pin_origin_counts(lock)
    if elsewhere == derived == 0:
        return f"Each of its {len(lock.files)} files is pinned by a hash recorded at that revision."
    return (f"Of its {len(lock.files)} files, {at_pinned} is pinned by a hash recorded at that revision, {elsewhere} "
            f"by hashes recorded at another revision of the repository and {derived} by a size alone; a learner's "
            "first run checks them against the bytes it downloads.")  # fmt: skip


def pins_sentence(lock) -> str:
    """What the pins rest on, counted from the lock: said to learners as it is."""
    at_pinned, elsewhere, derived = pin_origin_counts(lock)
    return (f"These pins were gathered without reading the Hugging Face Hub at the pinned revision, from public "
            f"records of other projects that queried it: of the {len(lock.files)} files, {at_pinned} has its hash "
            f"recorded at the pinned revision, {elsewhere} at another revision of the same repository (likely the "
            f"same bytes, not checked), and {derived} has only a size, derived by subtraction from the total. Your "
            f"first run is the real check: it compares every size and recorded hash with the bytes it downloads, "
            f"checks a file without a hash against the Hub's own metadata for the pinned revision, and stops at the "
            f"first that differs.")  # fmt: skip
