"""The registry of page families: the one place that names each page, its room, its runners (with the modules each
bundles), its explorer scripts, its other downloads and its place in the sidebar and on the learning path.

What reads it, so that no page or runner name is typed twice:

- ``residlab sync`` writes ``_pages.yml`` from it (``metadata_yaml``): the navbar, the sidebar and the resources
  Quarto copies into the site (the runners, the explorers' scripts, the other downloads); ``_quarto.yml``
  includes that file through Quarto's own ``metadata-files``, and ``residlab sync --check`` fails when it has
  drifted;
- ``residlab sync`` builds the runners ``RUNNERS`` lists (``residlab/build/runners.py`` reads them from here);
- the home page's learning path and downloads table are ``learning_path()`` and ``downloads_table()``, and the
  README's table of pages is ``readme_table()``: ``residlab sync`` writes each between its markers in that file;
- a page's shown cells that run from a download (``ShownCode``): ``residlab/course/downloads.py`` while the page is
  built, ``residlab site check`` and ``tests/runners/test_shown_code.py``;
- the tests read their lists of pages, runners and downloads from here.

A family is one ``PageFamily``: adding one is adding an entry to ``FAMILIES`` (and its room, page, runner and
tests: ``docs/adding-a-page.qmd``). Standard library only: the runners' builder and the home page read it without
torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNER_DIR = "assets/labs"
EXPLORER_DIR = "assets/explorers"
RUNNER_REQUIREMENTS = f"{RUNNER_DIR}/residual-requirements.txt"  # what a learner installs (``residlab sync``)
TORCH_REQUIREMENTS = f"{RUNNER_DIR}/torch-requirements.txt"  # for runners that need torch alone: torch, NumPy
# The interpreter of the environment Lab 05 Part 4 builds, as the pages write it (macOS and Linux): every command a
# page or an opener shows for a runner that needs more than the standard library names it, never a bare python.
LEARNER_PYTHON = ".venv-residual/bin/python"
METADATA_FILE = "_pages.yml"  # written by ``residlab sync``, included by ``_quarto.yml``'s metadata-files


@dataclass(frozen=True)
class DataSection:
    name: str  # the module-level name the runner binds to the text
    source: str  # a JSON file, relative to the package directory
    what: str  # what it is, for the table of contents


@dataclass(frozen=True)
class ReadFirst:
    section: str  # one of the runner's modules, relative to the package directory
    names: tuple[str, ...] = ()  # top-level names defined in it, each listed with its line


@dataclass(frozen=True)
class Runner:
    """One download generated from the package (``residlab/build/runners.py`` explains the bundle)."""

    filename: str
    modules: tuple[str, ...]  # relative to the package directory, in reading order; the last is the entry
    purpose: str  # the runner's generated note
    check: str  # what a learner is asked to check first
    read_first: tuple[ReadFirst, ...]
    data: tuple[DataSection, ...] = ()
    summary: str = ""  # the home page's "what it does"
    needs: str = "Python 3.10+ only"  # the home page's "needs" (Markdown)

    @property
    def entry(self) -> str:
        return self.modules[-1]

    @property
    def path(self) -> str:
        return f"{RUNNER_DIR}/{self.filename}"


@dataclass(frozen=True)
class ShownCode:
    """A shown cell that runs from a family's download: ``import <module> as <alias>``, then only ``names`` through
    it (``residlab/course/downloads.py`` says how it builds, ``residlab site check`` and tests/runners check it)."""

    runner: str  # the filename of one of the family's runners
    alias: str  # the name the shown cell binds the download to, as the page's prose calls it
    names: tuple[str, ...]

    @property
    def module(self) -> str:
        return self.runner.removesuffix(".py")


@dataclass(frozen=True)
class PageFamily:
    """A page and what belongs to it. ``page`` is its source relative to the site root; its title is the page's
    own (front matter), never typed here."""

    page: str
    label: str | None = None  # its number in the course ("Lab 05"), written before its title
    summary: str = ""  # what it holds: the README's table of pages
    path: tuple[str, str] | None = None  # its step on the home page's learning path: (verb, what the step does)
    room: str | None = None  # residlab/course/<room>/ (None: the page computes nothing of its own)
    section: str | None = None  # the sidebar section it sits in (None: the top level)
    sidebar_text: str | None = None  # the sidebar's text when it is not the page's title
    navbar_text: str | None = None  # a top-level page's entry in the navbar (a section's is its name)
    contents: tuple[str, ...] = ()  # the family's other pages (the glossary's entries), in sidebar order
    runners: tuple[Runner, ...] = ()
    explorers: tuple[str, ...] = ()  # scripts in assets/explorers/ its pages' blocks name (data-residlab-scripts)
    downloads: tuple[str, ...] = ()  # other files the site serves for it (patterns Quarto copies)
    path_step: int | None = None  # the number of its step on the learning path (``path`` says what it is)
    shown_code: tuple[ShownCode, ...] = ()  # the cells it shows that a learner runs from its downloads
    pages: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pages", (self.page, *self.contents))

    @property
    def title(self) -> str:
        return page_title(self.page)

    @property
    def name(self) -> str:
        """How the README and the learning path name it: its label and title, or its navbar text, or its title."""
        return f"{self.label}: {self.title}" if self.label else (self.navbar_text or self.title)


def page_title(page: str, root: Path = ROOT) -> str:
    """The ``title:`` of a page's front matter."""
    text = (root / page).read_text(encoding="utf-8")
    front = text.split("---", 2)[1] if text.startswith("---") else ""
    match = re.search(r"^title:\s*(.+?)\s*$", front, flags=re.M)
    if not match:
        raise ValueError(f"{page}: no title in its front matter")
    return match[1].strip("\"'")


# Lab 05 Part 3's skeleton (download, package file): what the editor starts from, written by ``residlab sync``.
TOY_SKELETON = ("my_toy.py", "course/lab05/toy_skeleton.py")
PINNED_LOCK = DataSection("EMBEDDED_LOCK_JSON", "locks/pythia-14m.lock.json", "the pinned lock")
TORCH_CHECK = "course/models/needs_torch.py"  # stops a runner that needs torch, in one line, when torch is missing
REQUIREMENTS_LINK = f"[{RUNNER_REQUIREMENTS.rsplit('/', 1)[1]}]({RUNNER_REQUIREMENTS})"
PYTORCH = f"PyTorch and NumPy ([{TORCH_REQUIREMENTS.rsplit('/', 1)[1]}]({TORCH_REQUIREMENTS}))"

FAMILIES = (
    PageFamily("index.qmd", sidebar_text="Overview", summary="the course's front page: who it is for, the path, "
               "the downloads"),
    PageFamily(
        "lessons/04-residual-stream.qmd", label="Lesson 2.1", room="lesson", section="Lessons", path_step=1,
        summary="the essay, the trained copy-model audit and Figure 5, all computed live",
        path=("Read", "The river picture, the three causal views of one state, what moving LayerNorm changes, the "
              "logit lens, and the Residual Contribution Audit. Its lab's numbers come from a small copy model "
              "trained while the page is built; its gradient figure comes from stacks of untrained blocks, "
              "initialised from fixed seeds in the same build."),
        runners=(
            Runner(
                "residual_stream_lab.py",
                (
                    TORCH_CHECK, "capture/recording.py", "capture/patching.py", "capture/vectors.py", "audit/measures.py",
                    "audit/attribution.py", "course/models/threads.py", "course/models/copy_model.py",
                    "course/models/gradient_profile.py", "capture/blocks.py", "capture/sites.py",
                    "capture/versions.py", "capture/outdir.py", "capture/files.py", "audit/subject.py",
                    "audit/runs.py", "audit/schema.py", "audit/loading.py", "audit/packet.py", "audit/verify.py",
                    "course/models/lesson_lab.py",
                ),
                "Lesson 2.1: the copy-model audit, its packet written and verified, and the pre-LN/post-LN gradient "
                "profile (needs torch and NumPy: torch-requirements.txt)",
                "the audit of the copy model",
                (
                    ReadFirst("course/models/copy_model.py", ("PreNormBlock",)),
                    ReadFirst("course/models/lesson_lab.py", ("run_traced", "audit_model")),
                ),
                summary="Lesson 2.1: trains the copy model, audits it, profiles pre-LN vs post-LN gradients; writes and "
                "verifies the audit's packet",
                needs=PYTORCH,
            ),
        ),
        # The TransformerLens and nnsight snippets the pages' peer boxes show and link (residlab/course/ui/peers.py).
        downloads=("assets/peers/*.py", TORCH_REQUIREMENTS),
    ),
    PageFamily(
        "labs/04-read-transformer-paper.qmd", label="Lab 04", room="lab04", section="Labs", path_step=2,
        summary="a guided reading of Vaswani et al. (2017) section 3, the positional encoding checked and the "
        "post-LN block traced by code",
        path=("Do", "Read section 3 of *Attention Is All You Need* with code beside it: check its positional "
              "encoding, trace its post-normalised block in PyTorch, and test whether its boundaries form a "
              "running sum."),
        runners=(
            Runner(
                "read_transformer_paper.py",
                (
                    TORCH_CHECK, "course/models/threads.py", "course/models/gradient_profile.py",
                    "course/lab04/positional_encoding.py", "capture/recording.py", "course/lab04/traced_block.py",
                    "course/lab04/paper_lab.py",
                ),
                "Lab 04: the sinusoidal encoding, the post-LN block traced and checked, Lesson 2.1's gradient "
                "routes (needs torch and NumPy: torch-requirements.txt)",
                "the traced block",
                (ReadFirst("course/lab04/traced_block.py", ("capture_block", "check_post_ln", "check_pre_ln")),),
                summary="Lab 04: the positional-encoding check, the post-LN block traced with hooks, the gradient "
                "routes",
                needs=PYTORCH,
            ),
        ),
        shown_code=(ShownCode("read_transformer_paper.py", "paper_lab", ("build_encoder_layers", "capture_block",
                                                                          "trace_input")),),  # Part 5
    ),
    PageFamily(
        "labs/05-trace-residual-stream.qmd", label="Lab 05", room="lab05", section="Labs", path_step=3,
        summary="the toy hand trace (Parts 1-3), the Pythia-14M observation (Part 4), checkpoints and solutions, two "
        "explorers (the toy with your own input; every position of the capture)",
        path=("Then do", "Trace a three-coordinate toy stream by hand, compare three interventions, then (optionally) "
              "record real residual boundaries in the six-block Pythia-14M model."),
        runners=(
            Runner(
                "trace_residual_toy.py",
                ("course/lab05/exact_vectors.py", "course/lab05/notation.py", "course/lab05/toy.py"),
                "Lab 05 Parts 1-3: the toy residual trace (standard library only)",
                "the exact arithmetic and the update rules",
                (
                    ReadFirst("course/lab05/exact_vectors.py", ("Vector",)),
                    ReadFirst("course/lab05/toy.py", ("first_update", "second_update", "readout")),
                ),
                summary="Lab 05 Parts 1-3: the toy trace as a JSON report",
            ),
            Runner(
                "check_toy.py",
                (
                    "course/lab05/exact_vectors.py", "course/lab05/notation.py", "course/lab05/toy.py",
                    "course/lab05/code_check.py",
                ),
                "Lab 05 Part 3: checks a learner's toy (my_toy.py) on held-out inputs (standard library only)",
                "the checks, one per function, and the named mistakes",
                (
                    ReadFirst("course/lab05/code_check.py", ("held_out_inputs", "check_module")),
                    ReadFirst("course/lab05/toy.py", ("sequential_trace", "parallel_trace")),
                ),
                summary=f"Lab 05 Part 3: checks your toy (start from [{TOY_SKELETON[0]}]({RUNNER_DIR}/{TOY_SKELETON[0]})) "
                "on inputs the page never shows, naming each mistake",
            ),
            Runner(
                "inspect_residual_stream.py",
                (
                    # The capture first, in the order it runs: the block table, the site names, the recording, the
                    # observation; then the download and verification of the pinned files it reads; the command
                    # line last.
                    "capture/blocks.py", "capture/sites.py", "capture/recording.py", "capture/versions.py",
                    "capture/vectors.py", "pythia/observe.py", "capture/outdir.py", "capture/files.py",
                    "pythia/lock.py", "pythia/hub.py", "pythia/artifacts.py", "pythia/load.py", "pythia/runner.py",
                ),
                "Lab 05 Part 4: pinned Pythia-14M download, verification and residual capture",
                "the capture: the site table, record_sites and the checks",
                (
                    ReadFirst("capture/blocks.py", ("BLOCK_TYPES",)),
                    ReadFirst("capture/sites.py", ("site_name", "resolve_sites")),
                    ReadFirst("capture/recording.py", ("record_sites",)),
                    ReadFirst("pythia/observe.py", ("capture_residuals", "run_checks")),
                ),
                data=(PINNED_LOCK,),
                summary="Lab 05 Part 4: pinned, verified Pythia-14M download and residual capture",
                needs=REQUIREMENTS_LINK,
            ),
        ),
        shown_code=(ShownCode("trace_residual_toy.py", "toy", ("Vector", "sequential_trace", "readout")),),  # solutions
        explorers=("toy-trace.js", "answer-checker.js", "python-editor.js", "python-worker.js", "capture-explorer.js",
                   "open-capture.js", "python-json.js", "onnx-explorer.js", "onnx-worker.js"),
        downloads=(f"{RUNNER_DIR}/{TOY_SKELETON[0]}", RUNNER_REQUIREMENTS, "assets/captures/*/*.json"),
    ),
    PageFamily(
        "labs/06-audit-a-decoder.qmd", label="Lab 06", room="lab06", section="Labs", path_step=4,
        summary="the Residual Contribution Audit of the trained induction model and of a random-weight specimen as "
        "verified packets, and how to run it on Pythia-14M",
        path=("Then do", "Find where each block type writes into the stream, run the Residual Contribution Audit of "
              "the site's trained induction model and of a random-weight specimen as packets you verify by "
              "re-running them, then (optionally) audit Pythia-14M with the files Lab 05 downloaded."),
        runners=(
            Runner(
                "audit_residual_writes.py",
                (
                    "capture/blocks.py", "capture/outdir.py", "audit/subject.py", "capture/recording.py",
                    "capture/patching.py", "capture/sites.py", "audit/runs.py", "capture/versions.py",
                    "audit/schema.py", "capture/vectors.py", "audit/measures.py", "audit/attribution.py",
                    "audit/loading.py", "audit/packet.py", "capture/files.py", "audit/verify.py", "audit/cli.py",
                ),
                "Lab 06: the Residual Contribution Audit of a local causal LM or a specimen, as a verifiable packet",
                "the measures: the records and the measurement",
                (
                    ReadFirst("audit/measures.py", ("measure_write",)),
                    ReadFirst("audit/packet.py", ("model_record", "input_record", "intervention_record",
                                                  "measurement_record")),  # fmt: skip
                ),
                summary="Lab 06: the Residual Contribution Audit of a local model directory or a random-weight "
                "specimen, written as a verifiable packet, and `verify PACKET` to re-check one",
                needs=REQUIREMENTS_LINK,
            ),
            Runner(
                "induction_model.py",
                (
                    TORCH_CHECK, "course/models/threads.py", "capture/versions.py", "capture/vectors.py",
                    "course/models/induction/recipe.py",
                    "capture/blocks.py", "capture/sites.py", "capture/recording.py", "capture/patching.py",
                    "audit/measures.py", "course/models/induction/measures.py",
                    "course/models/induction/induction_lab.py", "capture/outdir.py", "capture/files.py",
                    "audit/subject.py", "audit/runs.py", "audit/schema.py", "audit/attribution.py",
                    "audit/loading.py", "audit/packet.py", "audit/verify.py", "course/lab06/induction_audit.py",
                    "course/ui/chance.py", "course/models/induction/sentences.py", "course/lab06/induction_cli.py",
                ),
                "Lab 06 Part 2: the two-block induction model trained, described, audited on the lab's input and "
                "verified",
                "the recipe and the audit's input: the training, then the declared writes",
                (
                    ReadFirst("course/models/induction/recipe.py", ("MODEL_CONFIG", "train_induction_model")),
                    ReadFirst("course/lab06/induction_audit.py", ("declared_sites",)),
                ),
                summary="Lab 06 Part 2: trains the two-block induction model, describes it, audits it on the lab's "
                "input as a packet, and verifies that packet",
                needs=REQUIREMENTS_LINK,
            ),
        ),
        explorers=("open-packet.js", "python-json.js"),
        downloads=(RUNNER_REQUIREMENTS,),
    ),
    PageFamily(
        "labs/07-patching-methods.qmd", label="Lab 07", room="lab07", section="Labs", path_step=5,
        summary="activation patching both ways, path patching and attribution patching on the site's induction "
        "model, trained on a task whose textbook mechanism is known, over held-out prompt pairs, each read against a null of the same model; an "
        "explorer of every cell",
        path=("Then do", "Run four patching methods on a two-block induction model trained on a task whose textbook mechanism is known, and "
              "check which of them find the heads of that mechanism where a design can test it, and where "
              "attribution patching's first-order estimate fails."),
        runners=(
            Runner(
                "patching_methods.py",
                (
                    TORCH_CHECK, "capture/blocks.py", "capture/sites.py", "capture/recording.py",
                    "capture/patching.py", "capture/versions.py", "capture/vectors.py", "audit/measures.py",
                    "course/models/threads.py", "course/models/induction/recipe.py", "course/models/induction/measures.py",
                    *(f"course/lab07/{name}.py" for name in ("verdicts", "designs", "predictions", "patching", "cells",
                                                              "attribution", "distribution", "naming", "lab")),
                ),
                "Lab 07: activation, path and attribution patching on the induction model, over held-out prompt pairs "
                "and their null pairs",
                "the designs and the patched runs",
                (
                    ReadFirst("course/lab07/designs.py", ("make_design",)),
                    ReadFirst("course/lab07/patching.py", ("activation_grids", "path_patching")),
                    ReadFirst("course/lab07/attribution.py", ("attribution_grids", "error_split")),
                    ReadFirst("course/lab07/distribution.py", ("null_design", "measure_distribution")),
                ),
                summary="Lab 07: trains (or loads) the induction model, runs every patching method and writes the "
                "page's report as JSON",
                needs=REQUIREMENTS_LINK,
            ),
        ),
        explorers=("patching-explorer.js",),
        downloads=(RUNNER_REQUIREMENTS,),
    ),
    PageFamily(
        "glossary/index.qmd", room="glossary", section="Glossary", path_step=6,
        summary='"Residual stream" and the entries it links',
        path=("Look terms up in the", "Whenever a word is doing more work than you expected: each entry is defined "
              "once, precisely, with an executed example where one helps."),
        contents=(
            "glossary/residual-stream.qmd", "glossary/tokenizer.qmd", "glossary/attention.qmd", "glossary/mlp.qmd",
            "glossary/normalisation.qmd", "glossary/activation-cache.qmd", "glossary/logit-lens.qmd",
            "glossary/activation-patching.qmd", "glossary/notation.qmd",
        ),
    ),
    PageFamily("instructors.qmd", navbar_text="Instructors", summary="how pins are updated"),
    PageFamily("docs/contributing.qmd", summary="how pages execute and freeze, accessibility, the downloads, the "
               "commands, publishing"),
    PageFamily("docs/adding-a-page.qmd", summary="the steps, the files and the tests of a new page family, in "
               "order"),
)


def runners() -> tuple[Runner, ...]:
    """Every runner, in the order of the families."""
    return tuple(runner for family in FAMILIES for runner in family.runners)


def pages() -> tuple[str, ...]:
    """Every page the sidebar lists, in its order."""
    return tuple(page for family in FAMILIES for page in family.pages)


def family_of(page: str) -> PageFamily:
    """The family a page belongs to."""
    for family in FAMILIES:
        if page in family.pages:
            return family
    raise LookupError(f"{page} is in no page family of residlab/course/pages.py")


def resources() -> tuple[str, ...]:
    """What Quarto copies into the site for the families, each once, in order: runners, scripts, downloads."""
    found: list[str] = []
    for family in FAMILIES:
        found += [runner.path for runner in family.runners]
        found += [f"{EXPLORER_DIR}/{script}" for script in family.explorers]
        found += list(family.downloads)
    return tuple(dict.fromkeys(found))


def served_downloads() -> tuple[str, ...]:
    """The files a reader downloads from the runners' folder: every runner and the requirements they name."""
    return tuple(path for path in resources() if path.startswith(f"{RUNNER_DIR}/"))


def download_href(filename: str, page: str) -> str:
    """The link from ``page`` (a source path, e.g. labs/05-trace-residual-stream.qmd) to a file of the runners'
    folder the site serves; a file no family serves is refused."""
    path = f"{RUNNER_DIR}/{filename}"
    if path not in served_downloads():
        raise LookupError(f"{path} is served by no page family of residlab/course/pages.py")
    return "../" * page.count("/") + path


def sidebar() -> list:
    """The sidebar's contents, as Quarto reads them: consecutive families of one section grouped under it."""
    contents: list = []
    for family in FAMILIES:
        if family.section is None:
            contents.append({"href": family.page, "text": family.sidebar_text} if family.sidebar_text else family.page)
        elif family.contents:
            contents.append({"section": family.section, "href": family.page, "contents": list(family.contents)})
        elif contents and isinstance(contents[-1], dict) and contents[-1].get("section") == family.section:
            contents[-1]["contents"].append(family.page)
        else:
            contents.append({"section": family.section, "contents": [family.page]})
    return contents


def navbar() -> list[dict]:
    """The navbar's left entries: each section once, linking its first page on the learning path (or its first
    page), then each top-level page that names a navbar text, in the registry's order."""
    entries: dict[str, str] = {}
    for family in sorted(FAMILIES, key=lambda family: (family.path_step is None, family.path_step or 0)):
        if family.section and family.section not in entries:
            entries[family.section] = family.page
    left = []
    for family in FAMILIES:
        text = family.section or family.navbar_text
        if text and text in entries:
            left.append({"text": text, "href": entries.pop(text)})
        elif family.navbar_text:
            left.append({"text": family.navbar_text, "href": family.page})
    return left


def _yaml(value, indent: int = 0) -> list[str]:
    """A small YAML writer for the plain lists, mappings and strings the metadata holds (standard library only)."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)):
                lines += [f"{pad}{key}:", *_yaml(item, indent + 2)]
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
    else:
        for item in value:
            if isinstance(item, (dict, list)):
                nested = _yaml(item, indent + 2)
                lines += [f"{pad}- {nested[0].lstrip()}", *nested[1:]]
            else:
                lines.append(f"{pad}- {_scalar(item)}")
    return lines


def _scalar(value) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def metadata_yaml() -> str:
    """The text of ``_pages.yml``: the sidebar and the families' resources, for Quarto's ``metadata-files``."""
    header = (
        f"# {METADATA_FILE}: generated by `residlab sync` from residlab/course/pages.py, the registry of page\n"
        "# families (`residlab sync --check` fails when it differs); edit the registry, not this file.\n"
        "# _quarto.yml includes it (metadata-files): the navbar, the sidebar, and the files Quarto copies into the\n"
        "# site.\n"
    )
    metadata = {
        "project": {"resources": list(resources())},
        "website": {"navbar": {"left": navbar()}, "sidebar": {"style": "docked", "contents": sidebar()}},
    }
    return header + "\n".join(_yaml(metadata)) + "\n"


def downloads_table() -> str:
    """The home page's downloads table (Markdown): every runner, what it does, what it needs."""
    rows = ["| file | what it does | needs |", "| --- | --- | --- |"]
    rows += [f"| [{runner.filename}]({runner.path}) | {runner.summary} | {runner.needs} |" for runner in runners()]
    return "\n".join(rows) + "\n"


def learning_path() -> str:
    """The home page's learning path (Markdown): one numbered step per family on it, in ``path_step`` order."""
    on_path = sorted((family for family in FAMILIES if family.path_step), key=lambda family: family.path_step)
    return "".join(f"{number}. **{family.path[0]} [{family.name}]({family.page}).** {family.path[1]}\n"
                   for number, family in enumerate(on_path, 1))


def readme_table() -> str:
    """The README's table of pages (Markdown), every family but the front page, in the registry's order."""
    rows = ["| page | source | what it holds |", "| --- | --- | --- |"]
    for family in FAMILIES[1:]:
        source = family.page.rsplit("/", 1)[0] + "/" if family.contents else family.page
        name = f'{family.label} "{family.title}"' if family.label else family.navbar_text or family.title
        rows.append(f"| {name} | `{source}` | {family.summary} |")
    return "\n".join(rows) + "\n"
