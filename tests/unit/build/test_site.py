"""Build tooling around Quarto: the static checks (``site_check``), warning detection and the render wrapper
(``site``), and the freeze guard. What a real render builds (``site_verify``) is tested in tests/site/."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from residlab.build import freeze_guard, site, site_check

ROOT = Path(__file__).resolve().parents[3]


def test_site_has_no_static_problems():
    assert site_check.check_site(ROOT) == []


def test_every_page_is_in_the_navigation():
    listed = {(ROOT / entry).resolve() for entry in site_check.navigation_entries(site_check.load_config(ROOT))}
    pages = site_check.site_pages(ROOT)
    assert len(pages) >= 12
    assert {page.resolve() for page in pages} <= listed


def _write_site(tmp_path: Path, page_text: str, variables: str = "a:\n  b: 1\n") -> Path:
    (tmp_path / "_quarto.yml").write_text(
        "project:\n  type: website\n  render: ['*.qmd']\nwebsite:\n  sidebar:\n    contents:\n      - p.qmd\n"
    )
    (tmp_path / "_variables.yml").write_text(variables)
    (tmp_path / "p.qmd").write_text(textwrap.dedent(page_text))
    return tmp_path


def test_static_check_names_each_kind_of_problem(tmp_path):
    root = _write_site(
        tmp_path,
        """\
        ---
        title: t
        bibliography: refs.bib
        ---
        See @fig-missing, @sec-twice, [gone](gone.qmd), ![img](gone.png), {{< var a.zzz >}} and [@nobody].

        ## One {#sec-twice}

        ## Two {#sec-twice}

        ```{python}
        #| label: fig-noalt
        pass
        ```
        """,
    )
    (root / "refs.bib").write_text("@article{somebody2020,\n  title={T},\n}\n")
    problems = "\n".join(site_check.check_site(root))
    assert "@fig-missing has 0 labels" in problems
    assert "@sec-twice has 2 labels" in problems
    assert "link target gone.qmd does not exist" in problems
    assert "link target gone.png does not exist" in problems
    assert "{{< var a.zzz >}} is not in _variables.yml" in problems
    assert "citation @nobody is not in the page's bibliography" in problems
    assert "figure cell fig-noalt has no fig-alt text" in problems
    assert "p.qmd: has Python cells but does not name their kernel (jupyter: python3)" in problems


def test_pages_are_the_render_targets_less_partials(tmp_path):
    root = _write_site(tmp_path, "---\ntitle: t\n---\n")
    (root / "_part.qmd").write_text("partial\n")
    (root / "README.md").write_text("not a page\n")
    assert site_check.site_pages(root) == [root / "p.qmd"]
    (root / "stray.qmd").write_text("---\ntitle: s\n---\n")
    assert "stray.qmd is not in the navbar or sidebar" in site_check.check_site(root)


def test_static_check_passes_a_clean_page_and_follows_includes(tmp_path):
    root = _write_site(
        tmp_path,
        """\
        ---
        title: t
        jupyter: python3
        ---
        {{< var a.b >}} and [self](p.qmd#top) and [out](https://example.org/x) `[not a link](nowhere.qmd)`

        {{< include _part.qmd >}}
        """,
    )
    (root / "_part.qmd").write_text("See @fig-z.\n\n```{python}\n#| label: fig-z\n#| fig-alt: a plot\npass\n```\n")
    assert site_check.check_site(root) == []
    assert [cell.label for cell in site_check.read_page(root / "p.qmd").cells] == ["fig-z"]


def _fake_quarto(tmp_path: Path, output: str, exit_code: int = 0) -> Path:
    """A stand-in for the quarto executable: prints what it is given and exits; render() treats it as Quarto."""
    script = tmp_path / "quarto"
    script.write_text(f"#!/bin/sh\necho \"args: $*\"\nprintf '%b' '{output}'\nexit {exit_code}\n")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("line", [
    "\x1b[33mWARN: Unable to resolve link target: x.qmd\x1b[39m",
    "WARNING (/src/resources/filters/crossref.lua) Unable to resolve crossref @fig-x",
    "[WARNING] Could not convert TeX math \\notamacro",
    "[IPKernelApp] WARNING | Kernel is running over TCP without encryption.",
    "/x/site-packages/matplotlib/__init__.py:5: UserWarning: Glyph missing",
    "Warning: something",
])
def test_warning_lines_catch_every_layer(line):
    assert site.warning_lines(f"[ 1/13] glossary/mlp.qmd\n{line}\nOutput created: x.html\n") != []


def test_progress_lines_are_not_warnings():
    clean = "[ 1/13] glossary/activation-cache.qmd\n  Cell 1/3: 'fig-warnings-note'...Done\nOutput created: _site/index.html\n"
    assert site.warning_lines(clean) == []


def test_render_fails_on_a_warning_line_or_an_exit_code_and_passes_this_python(tmp_path, monkeypatch):
    monkeypatch.setenv("QUARTO", str(_fake_quarto(tmp_path, "[ 1/1] p.qmd\\nWARN: Unable to resolve link\\n")))
    with pytest.raises(site.RenderError, match="printed warnings:\n  WARN: Unable to resolve link"):
        site.render(tmp_path, tmp_path / "out", echo=lambda line: None)
    monkeypatch.setenv("QUARTO", str(_fake_quarto(tmp_path, "ERROR: boom\\n", exit_code=1)))
    with pytest.raises(site.RenderError, match="exited with code 1"):
        site.render(tmp_path, echo=lambda line: None)
    monkeypatch.setenv("QUARTO", str(_fake_quarto(tmp_path, "Output created: x\\n")))
    output = site.render(tmp_path, tmp_path / "out", [tmp_path / "p.qmd"], echo=lambda line: None)
    assert f"args: render {tmp_path / 'p.qmd'} --output-dir {tmp_path / 'out'}\n" in output
    environment = site.render_environment()
    assert environment["QUARTO_PYTHON"] == sys.executable


def test_several_pages_render_one_quarto_render_each(tmp_path, monkeypatch):
    # quarto render takes one input: a second path would reach pandoc as more input for the first page.
    monkeypatch.setenv("QUARTO", str(_fake_quarto(tmp_path, "Output created: x\\n")))
    pages = [tmp_path / "a.qmd", tmp_path / "b.qmd"]
    output = site.render(tmp_path, tmp_path / "out", pages, echo=lambda line: None)
    assert [line for line in output.splitlines() if line.startswith("args:")] == [
        f"args: render {page} --output-dir {tmp_path / 'out'}" for page in pages]


@pytest.mark.parametrize(("case", "wanted"), [("whole fresh render", True), ("one page", False), ("frozen", False)])
def test_the_freeze_guard_prefetches_only_for_a_whole_render_in_which_every_page_executes(tmp_path, case, wanted):
    freeze_guard.guard(tmp_path)
    if case == "frozen":
        (tmp_path / freeze_guard.FREEZE_DIR / "index").mkdir()  # one page's frozen result
    environ = {} if case == "one page" else {"QUARTO_PROJECT_RENDER_ALL": "1"}
    assert freeze_guard.prefetch_wanted(tmp_path, environ) is wanted


def test_the_prefetch_runs_apart_from_the_guard_that_starts_it(tmp_path, monkeypatch):
    from residlab.course import shared

    marker = tmp_path / "prefetch.txt"
    script = ("import os, pathlib, sys; pathlib.Path(sys.argv[-3]).write_text("
              "f\"{os.getsid(0)} {os.environ['QUARTO_PROJECT_ROOT']} {' '.join(sys.argv[-2:])}\"); print('ran')")
    monkeypatch.setattr(shared, "PREFETCH_COMMAND", ("-c", script, str(marker)))
    process = shared.start_prefetch(tmp_path, render=os.getpid())
    assert process.wait(timeout=60) == 0
    session, root, arguments = marker.read_text().split(" ", 2)
    assert int(session) == process.pid != os.getsid(0)  # its own session: the guard may exit before it
    assert root == str(tmp_path.resolve()) and arguments == f"--render {os.getpid()}"
    assert (tmp_path / ".residlab-render-cache" / shared.PREFETCH_LOG).read_text() == "ran\n"


def test_render_without_quarto_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("QUARTO", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert site.main(["render", "--root", str(ROOT)]) == 3
    assert "Install Quarto 1.10.18 (the version the site is built and tested with) from https://quarto.org" in \
        capsys.readouterr().err


@pytest.mark.parametrize("raised, status", [
    (site.QuartoMissing(site.QUARTO_MISSING), 3),
    (site.RenderError(site.QUARTO_MISSING), 1),  # the same words from another failure: the type decides
    (site.RenderError("quarto render exited with code 1"), 1),
])
def test_render_exit_status_comes_from_the_error_type(monkeypatch, capsys, raised, status):
    def fail(*arguments, **options):
        raise raised

    monkeypatch.setattr(site, "render", fail)
    assert site.main(["render", "--root", str(ROOT)]) == status
    assert capsys.readouterr().err == f"residlab site render: {raised}\n"


def _project(root: Path) -> Path:
    """A project holding one file of each kind of execution input, and a partial page."""
    for name, text in {"residlab/course/toy.py": "VALUE = 1\n", "assets/captures/run/observations.json": "{}\n",
                       "requirements.txt": "torch==2.13.0\n", "_quarto.yml": "project:\n  type: website\n",
                       "labs/_part.qmd": "included\n", "labs/page.qmd": "a page\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("change", [
    "residlab/course/toy.py", "assets/captures/run/observations.json", "requirements.txt", "_quarto.yml",
    "labs/_part.qmd", "residlab/course/new_module.py", "rename residlab/course/toy.py",
])
def test_the_execution_inputs_digest_changes_with_every_input(tmp_path, change):
    root = _project(tmp_path)
    before = freeze_guard.execution_inputs_digest(root)
    assert freeze_guard.execution_inputs_digest(root) == before  # the same files give the same digest
    if change.startswith("rename "):
        path = root / change.split()[1]
        path.rename(path.with_name("renamed.py"))  # the same bytes under another name
    else:
        with open(root / change, "a", encoding="utf-8") as file:
            file.write(" ")
    assert freeze_guard.execution_inputs_digest(root) != before


@pytest.mark.parametrize("change", ["labs/page.qmd", "residlab/course/__pycache__/toy.cpython-311.pyc", "notes.txt"])
def test_the_execution_inputs_digest_ignores_what_no_cell_reads(tmp_path, change):
    # A page's own source is Quarto's to watch (freeze: auto); bytecode and files outside the inputs are not read.
    root = _project(tmp_path)
    before = freeze_guard.execution_inputs_digest(root)
    (root / change).parent.mkdir(parents=True, exist_ok=True)
    with open(root / change, "a", encoding="utf-8") as file:
        file.write(" ")
    assert freeze_guard.execution_inputs_digest(root) == before


def test_freeze_guard_forgets_frozen_results_when_an_execution_input_changes(tmp_path):
    (tmp_path / "residlab").mkdir()
    (tmp_path / "residlab" / "toy.py").write_text("VALUE = 1\n")
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "_part.qmd").write_text("included\n")
    assert freeze_guard.guard(tmp_path) == "no frozen results: every page executes"
    frozen = tmp_path / "_freeze" / "labs" / "page" / "execute-results"
    frozen.mkdir(parents=True)
    (frozen / "html.json").write_text("{}")
    assert freeze_guard.guard(tmp_path) == "frozen results are current"
    assert (frozen / "html.json").exists()
    (tmp_path / "labs" / "_part.qmd").write_text("included, edited\n")
    assert freeze_guard.guard(tmp_path) == "execution inputs changed: every page executes"
    assert not frozen.exists()
    (frozen / "html.json").parent.mkdir(parents=True)
    (frozen / "html.json").write_text("{}")
    (tmp_path / "residlab" / "toy.py").write_text("VALUE = 2\n")
    assert freeze_guard.guard(tmp_path) == "execution inputs changed: every page executes"
    assert not frozen.exists()


def test_project_freezes_and_guards_as_the_readme_says():
    config = site_check.load_config(ROOT)
    assert config["execute"] == {"freeze": "auto", "cache": False}
    # The freeze guard first (its prefetch computes while the npm locks install), then the npm locks (a fresh clone
    # renders); both before any page executes.
    assert config["project"]["pre-render"] == ["residlab/build/freeze_guard.py", "residlab/build/npm_installs.py"]
    assert all((ROOT / step).is_file() for step in config["project"]["pre-render"])


def test_no_page_runs_a_runner_at_render_time():
    """A page links its runner for the reader to run; it never runs one while rendering (its tests do)."""
    for path in site_check.site_pages(ROOT):
        for cell in site_check.read_page(path).cells:
            assert "assets/labs/" not in cell.source and "subprocess" not in cell.source, f"{cell.file}:{cell.line}"


def _shown_cell(page: site_check.Page) -> site_check.Cell:
    return next(cell for cell in page.cells if site_check._shown(cell) and "import " in cell.source)


def test_every_shown_cell_runs_from_a_declared_download_or_is_marked_as_build_code():
    """Lab 04 Part 5's shown cell imports its download and uses the names the registry lists; planted faults (the
    package imported instead, a name the registry does not list, a glossary cell unmarked) are each named."""
    lab04 = site_check.read_page(ROOT / "labs/04-read-transformer-paper.qmd")
    assert site_check.shown_code_problems(lab04, ROOT) == []
    cell = _shown_cell(lab04)
    original = cell.source
    cell.source = original.replace("import read_transformer_paper as paper_lab", "from residlab.course import paper_lab")
    problems = site_check.shown_code_problems(lab04, ROOT)
    assert len(problems) == 2 and "must open with the import of a download" in problems[0]
    assert "no shown cell opens with import read_transformer_paper as paper_lab" in problems[1]
    cell.source = original + "\nresult = paper_lab.run_paper_lab()"
    assert site_check.shown_code_problems(lab04, ROOT) == [
        f"labs/04-read-transformer-paper.qmd:{cell.line}: paper_lab.run_paper_lab is not among the names the registry "
        "declares for read_transformer_paper.py (residlab/course/pages.py), which tests/runners/test_shown_code.py checks"]
    glossary = site_check.read_page(ROOT / "glossary/mlp.qmd")
    assert site_check.shown_code_problems(glossary, ROOT) == []
    marked = _shown_cell(glossary)
    marked.source = marked.source.replace(site_check.BUILD_CODE_MARK + "\n", "")
    assert [problem.split(": ", 1)[1][:45] for problem in site_check.shown_code_problems(glossary, ROOT)] == [
        "a shown cell must open with the import of a d"]
