"""Every command a learner-facing page shows runs, as written, in the environment the page builds.

The pages (home, lesson, labs, glossary) are read from the built HTML in page order; each page's shell blocks run
in a fresh folder that holds only the files the page links under ``assets/labs/``, fetched over HTTP from the
built site served on 127.0.0.1, or, for a page that names an earlier page's folder, in that folder after that page's
commands ran (``page_commands``: what a line may be, how the platforms' variants are compared). Nothing stands in
for a learner's environment: ``python3`` is a bare Python (an empty virtual environment), and each page's
``python3 -m venv`` and ``pip install`` lines run as written, pip confined to the wheelhouse ``make test`` fills from
the learners' requirement files (RESIDLAB_WHEELHOUSE), so a page that installs too little fails as a learner's run
would. The Hub is the fake hub on 127.0.0.1 serving the synthetic specimen under its own lock, which stands in for
the lock the observation runner carries (its ``EMBEDDED_LOCK_JSON`` data section, replaced in the fetched copy).
Every command must exit 0; one the test cannot run fails it, and so does a file a command reads that no earlier
command wrote (the command fails).

``make test`` runs it on the session's render (``built_site``); RESIDLAB_BUILT_SITE=path/to/_site runs it on a
site already built (``make page`` renders pages into _site/ one at a time), checking the pages found there.
The small pages below check the reader and the runner themselves, with tiny wheels of their own: a broken command
fails, and so does a page that installs too little, cheaply.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from fakeindex import build_wheel
from page_commands import CommandFailed, Folder, Learner, normalise, read_page, run_page, variant_problems
from test_lab07 import rendered_report, rendered_value

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = os.environ.get("RESIDLAB_WHEELHOUSE")
BUILT_SITE = os.environ.get("RESIDLAB_BUILT_SITE")
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
LEARNER_PAGES = ("index.html", "lessons/*.html", "labs/*.html", "glossary/*.html")  # in the order a learner goes
OBSERVATION_RUNNER = "assets/labs/inspect_residual_stream.py"
REQUIREMENTS = "assets/labs/residual-requirements.txt"
LAB07 = "labs/07-patching-methods.html"
LAB07_RUN = re.compile(r"\bpatching_methods\.py\b.*--output (\S+)")


def learner_pages(site: Path) -> list[str]:
    pages = []
    for pattern in LEARNER_PAGES:
        pages += sorted(path.relative_to(site).as_posix() for path in site.glob(pattern))
    return pages


def torch_pin(requirements: str) -> str:
    return next(line.split("==", 1)[1].split()[0] for line in requirements.splitlines() if line.startswith("torch=="))


def with_lock(runner: bytes, lock: dict) -> bytes:
    """The observation runner with another lock in its data section, as the fake hub's specimen needs."""
    text = runner.decode("utf-8")
    section = re.compile(r'^EMBEDDED_LOCK_JSON = r"""\n.*?\n"""$', re.S | re.M)
    assert len(section.findall(text)) == 1, "the observation runner has no EMBEDDED_LOCK_JSON data section"
    body = json.dumps(lock, indent=1, sort_keys=True)
    return section.sub(lambda _: f'EMBEDDED_LOCK_JSON = r"""\n{body}\n"""', text).encode("utf-8")


@pytest.fixture(scope="module")
def site(request) -> Path:
    if BUILT_SITE:
        return Path(BUILT_SITE).resolve()
    return request.getfixturevalue("built_site").site


@pytest.fixture(scope="module")
def project(request) -> Path:
    """The project the site was rendered from: its render cache holds what the pages computed."""
    if BUILT_SITE:
        return Path(BUILT_SITE).resolve().parent
    return request.getfixturevalue("built_site").project


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    if not WHEELHOUSE:
        message = "RESIDLAB_WHEELHOUSE is unset: `make test` fills the learners' wheelhouse and sets it"
        if IN_CI:
            pytest.fail(f"{message}; in CI these tests must run, never skip")
        pytest.skip(message)
    return Path(WHEELHOUSE).resolve()


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """What a learner's ``python3`` is before any page ran: a Python with nothing installed."""
    folder = tmp_path_factory.mktemp("bare") / "python3"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    return str(folder / "bin" / "python")


def learner_env(hub_env: dict) -> dict:
    # The environments' modules are compiled once, on first import, as a learner's are (hub_env forbids it, and
    # every runner would then compile torch again).
    return {key: value for key, value in hub_env.items() if key != "PYTHONDONTWRITEBYTECODE"}


@pytest.mark.slow  # every page's environments built, and every command run: the trainings among them
def test_every_command_of_every_learner_page_runs_as_written(site, project, served, bare_python, wheelhouse, hub_env,
                                                             specimen_lock_data, tmp_path):  # fmt: skip
    base = served(site)

    def fetch(path: str) -> bytes:
        with urllib.request.urlopen(f"{base}/{path}", timeout=60) as response:
            data = response.read()
        return with_lock(data, specimen_lock_data) if path == OBSERVATION_RUNNER else data

    learner = Learner(bare_python, torch_pin(fetch(REQUIREMENTS).decode("utf-8")), learner_env(hub_env), wheelhouse)
    folders: dict[str, Folder] = {}
    pages = []
    for path in learner_pages(site):
        page = read_page((site / path).read_text(encoding="utf-8"), path)
        if not page.blocks:
            continue
        if page.folder_of is not None:
            assert page.folder_of in folders, f"{path} works in {page.folder_of}'s folder, which no earlier page made"
            folder = folders[page.folder_of]
        else:
            folder = Folder(tmp_path / path.replace("/", "-").removesuffix(".html"))
            folder.path.mkdir()
        folders[path] = folder
        pages.append(page)
    ran, failures = run_chains(pages, folders, fetch, learner)
    if failures:  # the first in page order, outside any handler: the page and the command, without a traceback
        pytest.fail(failures[0], pytrace=False)
    # The pages that teach a command line show one (a page that lost its blocks would pass unseen otherwise).
    for expected in ("lessons/04-residual-stream.html", "labs/04-read-transformer-paper.html",
                     "labs/05-trace-residual-stream.html", "labs/06-audit-a-decoder.html",
                     "labs/07-patching-methods.html"):  # fmt: skip
        if (site / expected).exists() or not BUILT_SITE:
            assert ran.get(expected), f"{expected} shows no command"
    # The learner's Lab 07 run writes the report the page shows: the one the render computed, every value equal.
    (report_name,) = [match[1] for line in ran.get(LAB07, []) if (match := LAB07_RUN.search(line))] or [None]
    if report_name is not None:
        written = json.loads((folders[LAB07].path / report_name).read_text(encoding="utf-8"))
        assert written == rendered_report(project), f"{LAB07}: the runner's {report_name} is not the report the page shows"
    checked = observed_alike_fetched_and_offline(ran, folders, specimen_lock_data["revision"])
    assert checked or "labs/05-trace-residual-stream.html" not in ran, "Lab 05 runs the observation runner twice"
    if not BUILT_SITE:
        runners_did_what_the_package_does(ran, folders, site, project, tmp_path / "package")


OBSERVATION_RUN = re.compile(r"\binspect_residual_stream\.py\b(?P<offline>.*--offline)?.*--output (?P<output>\S+)")


def observed_alike_fetched_and_offline(ran: dict, folders: dict, revision: str) -> list[str]:
    """Every page that runs the observation runner once fetching and once offline (Lab 05 Part 4) observes the same
    in both runs, on the fake hub's synthetic specimen, which its manifest says it is, at the lock's ``revision``;
    the offline run writes its three files, observes the last position unless told otherwise and names where it
    wrote. Returns the pages checked."""
    checked = []
    for path, lines in ran.items():
        runs = {bool(match["offline"]): (line, match["output"]) for line in lines if (match := OBSERVATION_RUN.search(line))}
        if len(runs) < 2:
            continue
        folder = folders[path]
        fetched, offline = folder.path / runs[False][1], folder.path / runs[True][1]
        for name in ("observations.json", "captures.json"):
            assert json.loads((fetched / name).read_text()) == json.loads((offline / name).read_text()), f"{path}: {name}"
        assert sorted(file.name for file in offline.iterdir()) == ["captures.json", "manifest.json", "observations.json"], path
        manifest = json.loads((offline / "manifest.json").read_text())
        assert manifest["synthetic"] is True and revision in json.dumps(manifest), path
        observations = json.loads((offline / "observations.json").read_text())
        if "--position" not in runs[True][0]:
            assert observations["selected_position"] == len(observations["tokens"]) - 1, path
        assert runs[True][1] in folder.printed[runs[True][0]], f"{path}: the offline run does not say where it wrote"
        checked.append(path)
    return checked


def run_chains(pages: list, folders: dict, fetch, learner: Learner) -> tuple[dict, list]:
    """Run ``pages`` (in page order) folder by folder: each folder's pages in order, the folders side by side
    (nothing one folder's commands write is read in another). Returns the lines run per page, in page order, and
    where a folder's pages stopped, "page: failure", in page order."""
    from concurrent.futures import ThreadPoolExecutor

    chains: dict[Path, list] = {}
    for page in pages:
        chains.setdefault(folders[page.path].path, []).append(page)
    order = {page.path: index for index, page in enumerate(pages)}
    ran, failures = {}, []

    def run(chain: list) -> None:
        for page in chain:
            try:
                ran[page.path] = run_page(page, folders[page.path], fetch, learner)
            except CommandFailed as failed:
                failures.append((order[page.path], f"{page.path}: {failed}"))
                return

    with ThreadPoolExecutor(max_workers=len(chains) or 1) as pool:
        list(pool.map(run, chains.values()))
    return dict(sorted(ran.items(), key=lambda item: order[item[0]])), [said for _, said in sorted(failures)]


PACKET_RECORDS = ("input.json", "intervention.json", "measurement.json")  # model.json names the environment's versions


def same_packet(learner: Path, package, where: str) -> None:
    """``package``: a packet folder or a packet as ``audit`` returns it. Each record but its links (digests of the
    others, model.json's among them, which names the libraries of the environment it ran in; the page's own
    ``verify`` checks the learner's links)."""
    for name in PACKET_RECORDS:
        expected = (json.loads((package / name).read_text(encoding="utf-8")) if isinstance(package, Path)
                    else json.loads(json.dumps(package[name.removesuffix(".json")])))  # fmt: skip
        written = json.loads((learner / name).read_text(encoding="utf-8"))
        assert {**written, "links": None} == {**expected, "links": None}, f"{where}: {name}"


# The package's command behind each runner whose every run on a page is run again here (the others are compared
# with the package alone, tests/runners/): module, and where a run names the folder it writes.
PACKAGE_COMMANDS = {
    "audit_residual_writes.py": ("residlab.audit.cli", "--output"),
    "residual_stream_lab.py": ("residlab.course.models.lesson_lab", "packet"),
}
LAB04 = "labs/04-read-transformer-paper.html"
PAPER_RUNNER = "read_transformer_paper.py"
STDOUT_BLOCK = re.compile(r'<div class="cell-output cell-output-stdout">\s*<pre[^>]*>(?P<text>.*?)</pre>', re.S)


def printed_what_the_page_shows(printed: str, arguments: list[str], page_html: str, where: str) -> None:
    """Lab 04's runner prints what its page shows (the package computed it during the render): every section it
    prints is one of the page's printed blocks, but the gradient profile's where the run skips it."""
    import html

    from residlab.course.lab04 import paper_lab

    shown = [html.unescape(re.sub(r"<[^>]+>", "", match["text"])).strip("\n") for match in STDOUT_BLOCK.finditer(page_html)]
    sections = printed.rstrip("\n").split("\n\n")
    assert len(sections) == len(paper_lab.REPORT_SECTIONS), where
    skipped = "--skip-profile" in arguments
    for section in sections[:-1] if skipped else sections:
        assert section in shown, f"{where}: not on the page: {section.splitlines()[0]}"
    if skipped:
        assert sections[-1] == "Gradient profile skipped (--skip-profile)", where
    else:
        assert "Lesson 2.1's gradient profile" in printed, where
    assert "every line should match" in page_html  # the page tells the reader how to check; it never runs the runner


def runners_did_what_the_package_does(ran: dict, folders: dict, site: Path, project: Path, scratch: Path) -> None:
    """The runners are the package's download form: what the learner's runs wrote and printed is what the package
    computes. The induction model's runs are compared with what the render computed from the same seed (its
    ``induction_training``: the weights bit for bit, the description, Lab 06's audit packet); Lab 04's runs with
    what its page printed when the package ran during the render; every run of a runner in ``PACKAGE_COMMANDS`` (but
    its ``verify``, whose packet the page's own run checks) is run again here by the package's command, in the same
    folder with the same arguments, and must print the same lines and write the same packet records."""
    import importlib

    from residlab.course.lab06.induction_cli import report_lines

    trained = rendered_value(project, "induction_training")
    described = "".join(f"{line}\n" for line in report_lines(trained.report))
    checked = []
    for path, lines in ran.items():
        folder = folders[path]
        for line in lines:
            runner, *arguments = shlex.split(re.sub(r"\s+#.*$", "", line))[1:] or [""]
            printed, where = folder.printed[line], f"{path}: {line}"
            if runner == "induction_model.py" and arguments[0] == "train":
                model = folder.path / arguments[arguments.index("--output") + 1]
                for name, data in trained.model_files.items():
                    assert (model / name).read_bytes() == data, f"{where}: {name} is not the render's"
                assert printed.split("\n", 1)[1] == described, where  # the first line has the wall time
            elif runner == "induction_model.py" and arguments[0] == "describe":
                assert printed == described, where
            elif runner == "induction_model.py" and arguments[0] == "audit":
                same_packet(folder.path / arguments[arguments.index("--output") + 1], trained.audit.packet, where)
            elif runner == PAPER_RUNNER:
                printed_what_the_page_shows(printed, arguments, (site / LAB04).read_text(encoding="utf-8"), where)
            elif runner in PACKAGE_COMMANDS and arguments[:1] != ["verify"]:
                module, output_flag = PACKAGE_COMMANDS[runner]
                output = arguments.index(output_flag) + 1 if output_flag in arguments else None
                package = scratch / f"{len(checked)}-{arguments[output]}" if output else None
                argv = [*arguments[:output], str(package), *arguments[output + 1:]] if output else arguments
                with contextlib.chdir(folder.path), contextlib.redirect_stdout(io.StringIO()) as said:
                    assert importlib.import_module(module).main(argv) == 0, where
                expected = said.getvalue().replace(str(package), arguments[output]) if output else said.getvalue()
                assert printed == expected, where
                if output:
                    same_packet(folder.path / arguments[output], package, where)
            else:
                continue
            checked.append(runner if runner != "induction_model.py" else f"{runner} {arguments[0]}")
    wanted = {"induction_model.py train", "induction_model.py describe", "induction_model.py audit", PAPER_RUNNER,
              *PACKAGE_COMMANDS}
    assert wanted <= set(checked), sorted(wanted - set(checked))


def test_the_platforms_commands_differ_only_where_the_platform_demands(site):
    problems, tabsets = [], 0
    for path in learner_pages(site):
        page = read_page((site / path).read_text(encoding="utf-8"), path)
        problems += variant_problems(page)
        tabsets += len({block.tabset for block in page.blocks if block.tabset is not None})
    assert not problems
    assert tabsets, "no page shows platform tabs"


# ---- the reader and the runner on small pages of their own -----------------------------------------------------

TOY_RUNNER = """import pathlib, sys
if sys.argv[1] == "write":
    pathlib.Path(sys.argv[2]).write_text("made")
elif sys.argv[1] == "needs":  # what the page's requirement file must have installed
    import tinydep, torch
else:
    sys.exit(0 if pathlib.Path(sys.argv[2]).read_text() == "made" else 1)
"""
REQUIREMENTS_SERVED = "torch==2.0.0\ntinydep==1.0\n"


@pytest.fixture(scope="module")
def tiny_wheelhouse(tmp_path_factory) -> Path:
    """A wheelhouse of the small pages' pins: a torch 2.0.0 and a tinydep 1.0 of a few bytes each."""
    folder = tmp_path_factory.mktemp("tiny-wheelhouse")
    build_wheel(folder, "torch", "2.0.0", {"torch/__init__.py": "VERSION = '2.0.0'\n"})
    build_wheel(folder, "tinydep", "1.0", {"tinydep.py": "VERSION = '1.0'\n"})
    return folder


def code(language: str, lines: list[str]) -> str:
    spans = "".join(f'<span id="cb1-{n}"><a href="#cb1-{n}" aria-hidden="true" tabindex="-1"></a>{line}</span>\n'
                    for n, line in enumerate(lines, 1))  # fmt: skip
    return (f'<div class="sourceCode" id="cb1"><pre class="sourceCode {language} code-with-copy">'
            f'<code class="sourceCode {language}">{spans}</code></pre></div>')


def tabset(variants: dict[str, list[str]]) -> str:
    links = "".join(f'<li class="nav-item"><a class="nav-link" data-bs-toggle="tab" data-bs-target="#tabset-1-{n}" '
                    f'href="">{name}</a></li>' for n, name in enumerate(variants, 1))  # fmt: skip
    panes = "".join(f'<div id="tabset-1-{n}" class="tab-pane"><p>Note.</p>'
                    f'{code("bat" if name == "Windows" else "bash", lines)}</div>'
                    for n, (name, lines) in enumerate(variants.items(), 1))  # fmt: skip
    return f'<div class="panel-tabset"><ul class="nav nav-tabs">{links}</ul><div class="tab-content">{panes}</div></div>'


def small_page(*blocks: str) -> str:
    return ('<html><body><nav><a href="../assets/labs/not-this.py">x</a></nav><main><p>Save the '
            '<a href="../assets/labs/toy.py">runner</a> and the <a href="../assets/labs/reqs.txt">pins</a>.</p>'
            + "".join(blocks) + "</main></body></html>")  # fmt: skip


GOOD = {
    "Linux": ["python3 -m venv .venv-x", ".venv-x/bin/python -m pip install torch==2.0.0 --index-url "
              "https://download.pytorch.org/whl/cpu", ".venv-x/bin/python -m pip install -r reqs.txt",
              ".venv-x/bin/python toy.py write made.txt", ".venv-x/bin/python toy.py read made.txt",
              ".venv-x/bin/python toy.py needs"],
    "macOS": ["python3 -m venv .venv-x", ".venv-x/bin/python -m pip install -r reqs.txt",
              ".venv-x/bin/python toy.py write made.txt", ".venv-x/bin/python toy.py read made.txt",
              ".venv-x/bin/python toy.py needs"],
    "Windows": ["py -m venv .venv-x", ".venv-x\\Scripts\\python.exe -m pip install torch==2.0.0 --index-url "
                "https://download.pytorch.org/whl/cpu", ".venv-x\\Scripts\\python.exe -m pip install -r reqs.txt",
                ".venv-x\\Scripts\\python.exe toy.py write made.txt", ".venv-x\\Scripts\\python.exe toy.py read made.txt",
                ".venv-x\\Scripts\\python.exe toy.py needs"],
}  # fmt: skip


def run_small(html: str, folder: Path, python: str, wheelhouse: Path, requirements: str = REQUIREMENTS_SERVED):
    page = read_page(html, "labs/small.html")
    folder = Folder(folder)
    folder.path.mkdir(parents=True)
    files = {"assets/labs/toy.py": TOY_RUNNER.encode(), "assets/labs/reqs.txt": requirements.encode()}
    return run_page(page, folder, lambda path: files[path], Learner(python, "2.0.0", dict(os.environ), wheelhouse))


def test_the_reader_finds_blocks_tabs_downloads_and_folder_in_page_order():
    page = read_page(small_page(code("bash", ["python3 toy.py write a"]), tabset(GOOD),
                                '<p>In <a href="05-lab.html#sec-part4-folder">that folder</a>.</p>',
                                code("python", ["print(1)"])), "labs/small.html")  # fmt: skip
    assert page.downloads == ["assets/labs/toy.py", "assets/labs/reqs.txt"]  # main's links only
    assert page.folder_of == "labs/05-lab.html"
    assert [(block.tabset, block.platform, block.lines[0]) for block in page.blocks] == [
        (None, None, "python3 toy.py write a"), (1, "Linux", GOOD["Linux"][0]), (1, "macOS", GOOD["macOS"][0]),
        (1, "Windows", GOOD["Windows"][0])]  # fmt: skip
    assert not variant_problems(page)
    assert normalise(GOOD["Windows"][4]) == GOOD["Linux"][4]


def test_a_page_whose_commands_work_builds_its_environment_and_runs(tmp_path, bare_python, tiny_wheelhouse):
    assert run_small(small_page(tabset(GOOD)), tmp_path / "f", bare_python, tiny_wheelhouse) == GOOD["Linux"]
    assert (tmp_path / "f" / "made.txt").read_text() == "made"
    installed = subprocess.run([str(tmp_path / "f" / ".venv-x" / "bin" / "python"), "-c",
                                "import tinydep, torch; print(tinydep.VERSION, torch.VERSION)"],
                               capture_output=True, text=True, check=True)  # fmt: skip
    assert installed.stdout.split() == ["1.0", "2.0.0"]  # from the wheelhouse, as the page's lines installed them
    site_packages = next((tmp_path / "f" / ".venv-x" / "lib").glob("python*/site-packages"))
    records = [site_packages / f"{stem}.dist-info" / "RECORD" for stem in ("torch-2.0.0", "tinydep-1.0")]
    assert [".pyc" in record.read_text() for record in records] == [False, False]  # pip compiled nothing at install


def test_a_page_that_installs_too_little_fails_where_the_runner_needs_it(tmp_path, bare_python, tiny_wheelhouse):
    # The requirement file the page serves forgets a dependency: the runner that imports it fails, as a learner's.
    with pytest.raises(CommandFailed, match=r"toy.py needs: exit status 1(.|\n)*No module named 'tinydep'"):
        run_small(small_page(tabset(GOOD)), tmp_path / "f", bare_python, tiny_wheelhouse, "torch==2.0.0\n")


def test_a_pin_the_wheelhouse_lacks_fails_the_install_line(tmp_path, bare_python, tiny_wheelhouse):
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    for wheel in tiny_wheelhouse.glob("torch-*.whl"):  # tinydep left out, as a deleted numpy would be
        (wheelhouse / wheel.name).write_bytes(wheel.read_bytes())
    with pytest.raises(CommandFailed, match=r"pip install -r reqs.txt: exit status 1(.|\n)*tinydep"):
        run_small(small_page(tabset(GOOD)), tmp_path / "f", bare_python, wheelhouse)


@pytest.mark.parametrize("broken, reason", [
    (".venv-x/bin/python toy.py read missing.txt", "exit status 1"),  # reads a file no command wrote
    (".venv-x/bin/python toy.py write", "exit status 1"),  # a runner refusing its arguments
    ("residlab audit verify made.txt", "the test cannot run 'residlab'"),  # not from the site
    (".venv-x/bin/python other.py", "runs no runner the site served"),
    (".venv-x/bin/python -m pip install residlab", "installs something other"),
    (".venv-x/bin/python -m pip install -r other.txt", "did not serve"),
    (".venv-x/bin/python -m pip install torch==1.0 --index-url https://download.pytorch.org/whl/cpu", "not the pinned"),
    (".venv-y/bin/python toy.py read made.txt", "no earlier command made the environment .venv-y"),
])  # fmt: skip
def test_breaking_one_command_fails_the_page(tmp_path, bare_python, tiny_wheelhouse, broken, reason):
    # None of these needs an install to fail: an environment without pip is made at once.
    lines = ["python3 -m venv --without-pip .venv-x", GOOD["Linux"][3], broken]
    with pytest.raises(CommandFailed, match=re.escape(reason)):
        run_small(small_page(code("bash", lines)), tmp_path / "f", bare_python, tiny_wheelhouse)


def test_folders_run_side_by_side_and_a_failure_is_named_in_page_order(tmp_path, bare_python, tiny_wheelhouse):
    files = {"assets/labs/toy.py": TOY_RUNNER.encode(), "assets/labs/reqs.txt": REQUIREMENTS_SERVED.encode()}
    pages = [read_page(small_page(code("bash", lines)), path) for path, lines in (
        ("labs/a.html", ["python3 toy.py write made.txt", "python3 toy.py read made.txt"]),
        ("labs/b.html", ["python3 toy.py read missing.txt"]), ("labs/c.html", ["python3 toy.py read nothing.txt"]))]
    folders = {page.path: Folder(tmp_path / page.path.replace("/", "-")) for page in pages}
    for folder in folders.values():
        folder.path.mkdir()
    learner = Learner(bare_python, "2.0.0", dict(os.environ), tiny_wheelhouse)
    ran, failures = run_chains(pages, folders, lambda path: files[path], learner)
    assert list(ran) == ["labs/a.html"] and (tmp_path / "labs-a.html" / "made.txt").read_text() == "made"
    assert [failure.split(":")[0] for failure in failures] == ["labs/b.html", "labs/c.html"]  # page order, both named
    assert "python3 toy.py read missing.txt: exit status 1" in failures[0]


def test_a_variant_that_differs_beyond_its_platform_is_named():
    macos = [*GOOD["macOS"][:2], ".venv-x/bin/python toy.py write other.txt", *GOOD["macOS"][3:]]
    problems = variant_problems(read_page(small_page(tabset({**GOOD, "macOS": macos})), "labs/small.html"))
    assert len(problems) == 1 and "macOS block differs" in problems[0]


def test_a_line_outside_any_tab_runs_too_with_the_bare_python(tmp_path, bare_python, tiny_wheelhouse):
    page = small_page(code("bash", ["python3 toy.py write made.txt"]), code("bash", ["python3 toy.py read made.txt"]))
    assert len(run_small(page, tmp_path / "f", bare_python, tiny_wheelhouse)) == 2
    with pytest.raises(CommandFailed, match="exit status 1"):
        run_small(small_page(code("bash", ["python3 toy.py read made.txt"])), tmp_path / "again", bare_python,
                  tiny_wheelhouse)  # fmt: skip
    with pytest.raises(CommandFailed, match="No module named 'tinydep'"):  # nothing is installed in python3
        run_small(small_page(code("bash", ["python3 toy.py needs"])), tmp_path / "bare", bare_python, tiny_wheelhouse)


def test_the_observation_runner_takes_the_specimen_lock_in_its_data_section():
    runner = (ROOT / OBSERVATION_RUNNER).read_text(encoding="utf-8")
    changed = with_lock(runner.encode(), {"repository": "residlab-tests/x"}).decode()
    start = runner.index('EMBEDDED_LOCK_JSON = r"""')
    end = runner.index('"""', start + len('EMBEDDED_LOCK_JSON = r"""'))
    assert changed == runner[:start] + 'EMBEDDED_LOCK_JSON = r"""\n{\n "repository": "residlab-tests/x"\n}\n' + runner[end:]
