"""Build the downloadable runners in ``assets/labs/`` from the package's own modules.

A runner is the download form of the same code: one file holding the sources of the modules it needs, with the
package's internal imports removed and its data (the pinned lock) written in. Nothing in a runner is edited by
hand; ``residlab sync`` writes them and ``residlab sync --check`` (run by the tests) fails when one has drifted.

A runner is declared in ``RUNNERS``, the one place that says what each runner holds: its file name, its modules
in the order a learner reads them (the entry module last), its purpose, what a learner is asked to check first
(``ReadFirst``: a module and top-level names in it) and its data sections. ``residlab/build/bundle.py`` reads the
modules and checks the list against their code; its docstring gives the conventions a listed module follows
(ordinary ``from residlab.a.b import X, Y`` statements, which the runner drops).

The generated file opens with the shebang, one generated-file note (the source modules, and the command that
writes it), the entry module's docstring (purpose and usage) and a table of contents: the "read this first"
pointers and every section with the line where its ``# ---- `` marker starts, all computed. Then each module
follows under its marker, its docstring kept, its residlab imports and ``__future__`` import removed.

Data sections: a ``DataSection`` names a JSON file in the package and the module-level name that holds its text
in the runner, written as ``NAME = r\"\"\"...\"\"\"`` just before the entry module's ``__main__`` block, after all
code. The package itself never defines that name, so code reads it through a small accessor that returns the
runner's text, or None in the package::

    def embedded_lock_json() -> str | None:
        return globals().get("EMBEDDED_LOCK_JSON")

A data section whose name no listed module mentions as a string, or that a module also defines, is refused.
"""

from __future__ import annotations

import ast
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

from residlab.build.bundle import (
    FUTURE_IMPORT, PACKAGE_NAME, TORCH_CHECK, Module, bound_names, defined_names, read_bundle,
)

PACKAGE_DIR = Path(__file__).resolve().parents[1]
SYNC_COMMAND = "residlab sync"
MARKER_PREFIX = "# ---- "
MARKER_WIDTH = 100


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
    filename: str
    modules: tuple[str, ...]  # relative to the package directory, in reading order; the last is the entry
    purpose: str
    check: str  # what a learner is asked to check first
    read_first: tuple[ReadFirst, ...]
    data: tuple[DataSection, ...] = ()

    @property
    def entry(self) -> str:
        return self.modules[-1]


PINNED_LOCK = DataSection("EMBEDDED_LOCK_JSON", "locks/pythia-14m.lock.json", "the pinned lock")

RUNNERS = (
    Runner(
        "trace_residual_toy.py",
        ("course/lab05_toy/exact_vectors.py", "course/lab05_toy/toy.py"),
        "Lab 05 Parts 1-3: the toy residual trace (standard library only)",
        "the exact arithmetic and the update rules",
        (
            ReadFirst("course/lab05_toy/exact_vectors.py", ("Vector",)),
            ReadFirst("course/lab05_toy/toy.py", ("first_update", "second_update", "readout")),
        ),
    ),
    Runner(
        "residual_stream_lab.py",
        (
            TORCH_CHECK, "capture/recording.py", "audit/measures.py", "audit/attribution.py", "course/threads.py",
            "course/lesson/copy_model.py", "course/lesson/gradient_profile.py", "course/lesson/lesson_lab.py",
        ),
        "Lesson 2.1: the copy-model audit and the pre-LN/post-LN gradient profile (needs only torch)",
        "the audit of the copy model",
        (
            ReadFirst("course/lesson/copy_model.py", ("PreNormBlock",)),
            ReadFirst("course/lesson/lesson_lab.py", ("run_traced", "audit_model")),
        ),
    ),
    Runner(
        "inspect_residual_stream.py",
        (
            # The capture first, in the order it runs: the block table, the site names, the recording, the
            # observation; then the download and verification of the pinned files it reads; the command line last.
            "capture/blocks.py", "capture/sites.py", "capture/recording.py", "capture/versions.py",
            "pythia/observe.py", "capture/outdir.py", "capture/files.py", "pythia/lock.py", "pythia/hub.py",
            "pythia/artifacts.py", "pythia/load.py", "pythia/runner.py",
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
    ),
    Runner(
        "read_transformer_paper.py",
        (
            TORCH_CHECK, "course/threads.py", "course/lesson/gradient_profile.py",
            "course/lab04_paper/positional_encoding.py", "capture/recording.py", "course/lab04_paper/traced_block.py",
            "course/lab04_paper/paper_lab.py",
        ),
        "Lab 04: the sinusoidal encoding, the post-LN block traced and checked, Lesson 2.1's gradient routes "
        "(needs only torch)",
        "the traced block",
        (ReadFirst("course/lab04_paper/traced_block.py", ("capture_block", "check_post_ln", "check_pre_ln")),),
    ),
    Runner(
        "audit_residual_writes.py",
        (
            "capture/blocks.py", "capture/outdir.py", "audit/subject.py", "audit/placement.py", "capture/recording.py",
            "capture/sites.py",
            "audit/runs.py", "capture/versions.py", "audit/schema.py", "audit/measures.py", "audit/attribution.py",
            "audit/packet.py",
            "capture/files.py", "audit/verify.py", "audit/cli.py",
        ),
        "Lab 06: the Residual Contribution Audit of a local causal LM or a specimen, as a verifiable packet",
        "the measures: the records and the measurement",
        (
            ReadFirst("audit/measures.py", ("measure_write",)),
            ReadFirst("audit/packet.py", ("model_record", "input_record", "intervention_record", "measurement_record")),
        ),
    ),
)


def _marker(title: str) -> str:
    return MARKER_PREFIX + title + " " + "-" * max(3, MARKER_WIDTH - len(MARKER_PREFIX) - len(title) - 1) + "\n"


def module_marker(path: str) -> str:
    return _marker(f"{PACKAGE_NAME}/{path}")


def data_marker(data: DataSection) -> str:
    return _marker(f"data: {data.name}, {data.what} ({PACKAGE_NAME}/{data.source})")


def _kept_lines(module: Module, start: int = 0, stop: int | None = None) -> str:
    """The module's lines ``start..stop-1`` (0-based) less the ``__future__`` import and the residlab imports."""
    lines = module.source.splitlines(keepends=True)
    future = module.tree.body[1]
    drop = {number - 1 for number in module.dropped_lines} | set(range(future.lineno - 1, future.end_lineno))
    if future.end_lineno < len(lines) and not lines[future.end_lineno].strip():
        drop.add(future.end_lineno)  # and the blank line after it
    return "".join(lines[index] for index in range(start, len(lines) if stop is None else stop) if index not in drop)


@dataclass(frozen=True)
class Section:
    key: str  # a module path, or the name of a data section
    label: str  # its line in the table of contents
    text: str  # its marker line, then its text


def _section(key: str, label: str, marker: str, text: str) -> Section:
    return Section(key, label, marker + "\n" + text.strip("\n") + "\n")


def _data_text(data: DataSection, package_dir: Path, bundle: tuple[Module, ...]) -> str:
    mentioned = any(isinstance(node, ast.Constant) and node.value == data.name
                    for module in bundle for node in ast.walk(module.tree))
    if not mentioned:
        raise ValueError(f"data section {data.name}: no module of the runner reads it (as globals().get({data.name!r}))")
    for module in bundle:
        if data.name in defined_names(module):
            raise ValueError(f"{module.path} defines {data.name}, which the data section {data.name} defines")
    text = json.dumps(json.loads((package_dir / data.source).read_text(encoding="utf-8")), indent=1, sort_keys=True)
    if '"""' in text or text.endswith("\\"):
        raise ValueError(f"data section {data.name}: {data.source} cannot be written as a raw triple-quoted string")
    return f'{data.name} = r"""\n{text}\n"""\n'


def _sections(runner: Runner, bundle: tuple[Module, ...], package_dir: Path) -> list[Section]:
    """One section per module (the entry's code without its docstring and ``__main__`` block), then the
    data sections."""
    entry = bundle[-1]
    sections = [
        _section(module.path, f"{PACKAGE_NAME}/{module.path}", module_marker(module.path), _kept_lines(module))
        for module in bundle[:-1]
    ]
    code = _kept_lines(entry, entry.tree.body[0].end_lineno, entry.main_block.lineno - 1)
    sections.append(_section(entry.path, f"{PACKAGE_NAME}/{entry.path} (the entry)", module_marker(entry.path), code))
    names = [data.name for data in runner.data]
    for data in runner.data:
        if names.count(data.name) > 1:
            raise ValueError(f"{runner.filename}: two data sections are named {data.name}")
        text = _data_text(data, package_dir, bundle)
        sections.append(_section(data.name, f"data: {data.name}, {data.what}", data_marker(data), text))
    return sections


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _locate(text: str, runner: Runner, sections: list[Section]) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """Line numbers in ``text``: each section's marker, and each read-first name's definition in its section."""
    starts = {section.key: _line_of(text, text.index("\n" + section.text) + 1) for section in sections}
    tree = ast.parse(text)
    named = {}
    for pointer in runner.read_first:
        first = starts[pointer.section]
        last = min([line for line in starts.values() if line > first], default=text.count("\n") + 2)
        for name in pointer.names:
            lines = [node.lineno for node in tree.body if first < node.lineno < last and name in bound_names([node])]
            if not lines:
                raise ValueError(f"{runner.filename}: {pointer.section} defines no top-level {name} to read first")
            named[(pointer.section, name)] = lines[0]
    return starts, named


class _Zeros(dict):
    def __missing__(self, key):
        return 0


def _contents(runner: Runner, sections: list[Section], starts: dict, named: dict) -> str:
    lines = [f"Read this first: {runner.check}."]
    for pointer in runner.read_first:
        lines.append(f"  line {starts[pointer.section]:>4}  {PACKAGE_NAME}/{pointer.section}")
        lines += [f"  line {named[(pointer.section, name)]:>4}    {name}" for name in pointer.names]
    lines += ["", "Contents (the line where each section's marker starts):"]
    lines += [f"  line {starts[section.key]:>4}  {section.label}" for section in sections]
    lines.append("  then the entry's __main__ block: what runs when the file runs as a script")
    return "".join(f"# {line}".rstrip() + "\n" for line in lines)


def build_runner(runner: Runner, package_dir: Path = PACKAGE_DIR) -> str:
    """Return the text of one runner, exactly as it is published."""
    bundle = read_bundle(runner.filename, runner.modules, package_dir)
    entry = bundle[-1]
    if not runner.read_first:
        raise ValueError(f"{runner.filename}: say what a learner reads first (read_first)")
    paths = [module.path for module in bundle]
    for pointer in runner.read_first:
        if pointer.section not in paths:
            raise ValueError(f"{runner.filename}: its read-first section {pointer.section} is not one of its "
                             f"modules ({', '.join(paths)})")
    sections = _sections(runner, bundle, package_dir)
    sources = [f"{PACKAGE_NAME}/{path}" for path in paths] + [f"{PACKAGE_NAME}/{data.source}" for data in runner.data]
    note = textwrap.wrap(
        f"{runner.filename}: {runner.purpose}. Generated by `{SYNC_COMMAND}` from the package's {', '.join(sources)}; "
        "edit those, not this file.", width=110, break_on_hyphens=False, break_long_words=False,
    )
    docstring = "".join(entry.source.splitlines(keepends=True)[: entry.tree.body[0].end_lineno])
    main_block = _kept_lines(entry, entry.main_block.lineno - 1)

    def assemble(contents: str) -> str:
        return (
            "#!/usr/bin/env python3\n" + "".join(f"# {line}\n" for line in note) + docstring + "\n" + contents
            + "\n" + FUTURE_IMPORT + "\n\n\n" + "\n\n".join(section.text for section in sections) + "\n\n"
            + main_block
        )

    draft = assemble(_contents(runner, sections, _Zeros(), _Zeros()))
    text = assemble(_contents(runner, sections, *_locate(draft, runner, sections)))
    compile(text, runner.filename, "exec")  # a bundling mistake (an emptied block) fails here, not at a learner's
    return text


def runner_outputs(assets_dir: Path) -> dict[Path, str]:
    """Every runner file and the text it must hold."""
    return {assets_dir / runner.filename: build_runner(runner) for runner in RUNNERS}
