"""One source of truth for pins and runners: every derived file matches what the package writes."""

from __future__ import annotations

import ast
import collections
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from residlab.build import bundle
from residlab.build import pins
from residlab.build import runners
from residlab.build import sync
from residlab.pythia.lock import default_lock_path

ROOT = Path(__file__).resolve().parents[3]


def test_derived_files_are_in_sync_with_the_package():
    assert sync.stale_files(ROOT) == []
    assert sync.pin_drift(ROOT) == []


def test_sync_check_fails_and_names_a_drifted_file(tmp_path):
    for name in ("_quarto.yml", "requirements.txt"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    for path, text in sync.derived_files(ROOT).items():
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    assert sync.stale_files(tmp_path) == []
    variables = tmp_path / "_variables.yml"
    variables.write_text(variables.read_text().replace("2.13.0", "2.12.0"))
    completed = subprocess.run(
        [sys.executable, "-m", "residlab", "sync", "--check", "--root", str(tmp_path)], capture_output=True, text=True
    )
    assert completed.returncode == 1
    assert "_variables.yml differs" in completed.stderr


def test_requirements_drift_is_reported_by_library():
    lock = pins.load_lock_data()
    text = (ROOT / "requirements.txt").read_text().replace("transformers==", "transformers==0.0.0+")
    assert pins.requirements_drift(lock, text) == [
        f"requirements.txt pins transformers==0.0.0+{lock['libraries']['transformers']} "
        f"but the lock records {lock['libraries']['transformers']}"
    ]


def test_lock_pins_reach_variables_and_learner_requirements():
    lock = pins.load_lock_data()
    variables = (ROOT / "_variables.yml").read_text()
    learners = pins.requirement_pins((ROOT / "assets" / "labs" / "residual-requirements.txt").read_text())
    for name in pins.RUNTIME_LIBRARIES:
        assert learners[name] == lock["libraries"][name]
        assert f'{name.replace("_", "-")}: "{lock["libraries"][name]}"' in variables
    assert lock["revision"] in variables
    assert f'{lock["total_bytes"]:,}' in variables
    # The runners that need PyTorch alone: the lock's torch, and NumPy at the project's own pin, nothing else.
    torch_only = pins.requirement_pins((ROOT / "assets" / "labs" / "torch-requirements.txt").read_text())
    project = pins.requirement_pins((ROOT / "requirements.txt").read_text())
    assert torch_only == {"torch": lock["libraries"]["torch"], "numpy": project["numpy"]}


DOC_FUTURE = '"""{name}."""\n\nfrom __future__ import annotations\n\n'
MAIN = '\n\nif __name__ == "__main__":\n    print(main())\n'


def fake_tree(root: Path, modules: dict[str, str]) -> Path:
    """A package directory of small modules: each text follows the docstring and the __future__ import."""
    for path, body in modules.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(DOC_FUTURE.format(name=path) + body)
    return root


def fake_runner(modules: tuple[str, ...], read_first: str | None = None, **kwargs) -> runners.Runner:
    section = runners.ReadFirst(read_first or modules[-1])
    return runners.Runner("x.py", modules, "a demo", "the demo", (section,), **kwargs)


def run_text(tmp_path: Path, text: str) -> str:
    script = tmp_path / "runner_copy.py"
    script.write_text(text)
    return subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, check=True).stdout


def markers(text: str) -> list[str]:
    return [line.split()[2] for line in text.splitlines() if line.startswith("# ---- residlab/")]


def test_runner_builder_drops_residlab_imports_of_any_length_and_embeds_the_lock(tmp_path):
    package = fake_tree(tmp_path / "pkg", {
        "first.py": 'import json\n\n\ndef embedded():\n    return globals().get("EMBEDDED_LOCK_JSON")\n',
        "second.py": 'from residlab.first import (\n    embedded,\n    json,\n)  # both\n\n\n'
                     'def main():\n    return json.loads(embedded())["revision"]\n' + MAIN,
    })
    (package / "locks").mkdir()
    (package / "locks" / "pin.json").write_text(default_lock_path().read_text())
    lock = runners.DataSection("EMBEDDED_LOCK_JSON", "locks/pin.json", "the pinned lock")
    text = runners.build_runner(fake_runner(("first.py", "second.py"), "first.py", data=(lock,)), package)
    assert "residlab.first" not in text and "    embedded,\n" not in text and "# both" not in text
    assert text.count("from __future__ import annotations") == 1
    assert run_text(tmp_path, text).strip() == json.loads(default_lock_path().read_text())["revision"]


def test_runner_opens_with_the_note_then_the_entry_docstring(tmp_path):
    package = fake_tree(tmp_path, {
        "lib.py": "def shared():\n    return 41\n",
        "app.py": "from residlab.lib import shared\n\n\ndef main():\n    return shared() + 1\n" + MAIN,
    })
    text = runners.build_runner(fake_runner(("lib.py", "app.py")), package)
    lines = text.splitlines()
    assert lines[0] == "#!/usr/bin/env python3"
    note = list(itertools.takewhile(lambda line: line.startswith("# "), lines[1:]))
    assert "Generated by `residlab sync` from the package's residlab/lib.py, residlab/app.py; edit those, not this file." in " ".join(
        line[2:] for line in note)
    assert lines[1 + len(note)] == '"""app.py."""'
    assert text.count('if __name__ == "__main__":') == 1
    assert run_text(tmp_path, text) == "42\n"


READ_BEFORE_DOWNLOAD = {
    # "capture" uses what "download" defines only inside a function, so it may come first in the runner.
    "download.py": "SIZE = 3\n\n\ndef fetch():\n    return [1] * SIZE\n",
    "capture.py": "from residlab.download import fetch\n\n\ndef capture():\n    return sum(fetch())\n",
    "entry.py": "from residlab.capture import capture\nfrom residlab.download import SIZE\n\n\n"
                "def main():\n    return capture() * 10 + SIZE\n" + MAIN,
}


def test_runner_sections_follow_the_declared_order_not_the_imports(tmp_path):
    package = fake_tree(tmp_path, READ_BEFORE_DOWNLOAD)
    for order in (("capture.py", "download.py", "entry.py"), ("download.py", "capture.py", "entry.py")):
        text = runners.build_runner(fake_runner(order), package)
        assert markers(text) == [f"residlab/{path}" for path in order]
        assert run_text(tmp_path, text) == "33\n"


@pytest.mark.parametrize("use", [
    "LIMIT = fetch\n",  # a module-level value
    "class Capture(fetch):\n    pass\n",  # a base class
    "@fetch\ndef capture_all():\n    pass\n",  # a decorator
    "def capture_all(source=fetch):\n    pass\n",  # a default value
    "class Capture:\n    source = fetch\n",  # a class body
])
def test_runner_builder_refuses_a_module_before_what_it_uses_while_the_file_runs(tmp_path, use):
    package = fake_tree(tmp_path, {**READ_BEFORE_DOWNLOAD,
                                   "capture.py": READ_BEFORE_DOWNLOAD["capture.py"] + "\n\n" + use})
    with pytest.raises(ValueError, match=r"x.py: capture.py uses fetch \(line \d+\) while the file runs, outside any "
                                         r"function, so download.py, which defines it, must come before it"):
        runners.build_runner(fake_runner(("capture.py", "download.py", "entry.py")), package)
    assert markers(runners.build_runner(fake_runner(("download.py", "capture.py", "entry.py")), package))


def test_an_annotation_or_a_function_body_does_not_fix_the_order(tmp_path):
    use = "def capture_all(source: Fetcher = None) -> Fetcher:\n    return fetch\n\n\nWIDTH: Fetcher = 2\n"
    package = fake_tree(tmp_path, {**READ_BEFORE_DOWNLOAD, "download.py": READ_BEFORE_DOWNLOAD["download.py"]
                                   + "\n\nclass Fetcher:\n    pass\n",
                                   "capture.py": "from residlab.download import Fetcher, fetch\n\n\n" + use
                                   + "\n\ndef capture():\n    return sum(fetch())\n"})
    text = runners.build_runner(fake_runner(("capture.py", "download.py", "entry.py")), package)
    assert run_text(tmp_path, text) == "33\n"


def test_table_of_contents_lists_the_line_of_every_section_and_the_read_first_names(tmp_path):
    package = fake_tree(tmp_path, {
        "lib.py": "def shared():\n    return 41\n\n\nclass Check:\n    pass\n",
        "app.py": "from residlab.lib import Check, shared\n\n\ndef main():\n"
                  "    return shared() + 1 + bool(Check() and VALUES)\n"
                  "\n\ndef values():\n    return globals().get('VALUES')\n" + MAIN,
    })
    (package / "v.json").write_text('{"b": 2, "a": 1}')
    spec = runners.Runner("x.py", ("lib.py", "app.py"), "a demo", "the check", (runners.ReadFirst("lib.py", ("Check",)),),
                          data=(runners.DataSection("VALUES", "v.json", "some values"),))
    text = runners.build_runner(spec, package)
    lines = text.splitlines()
    assert "# Read this first: the check." in lines
    listed = [re.match(r"^#   line +(\d+)  (.*)$", line) for line in lines]
    listed = [(int(match.group(1)), match.group(2).strip()) for match in listed if match]
    assert [label for _, label in listed] == [
        "residlab/lib.py", "Check", "residlab/lib.py", "residlab/app.py (the entry)", "data: VALUES, some values"]
    for number, label in listed:
        line = lines[number - 1]
        if label == "Check":
            assert line.startswith("class Check")
        elif label.startswith("data: "):
            assert line.startswith("# ---- data: VALUES, some values (residlab/v.json) ")
        else:
            assert line.startswith(f"# ---- {label.split()[0]} ")
    assert run_text(tmp_path, text) == "43\n"


def test_data_sections_come_after_all_code_and_just_before_the_main_block(tmp_path):
    package = fake_tree(tmp_path, {
        "lib.py": "def read():\n    return globals().get('VALUES')\n",
        "app.py": "from residlab.lib import read\n\n\ndef main():\n    return read()\n\n\nLATE = 1\n" + MAIN,
    })
    (package / "v.json").write_text('{"b": 2, "a": 1}')
    spec = fake_runner(("lib.py", "app.py"), data=(runners.DataSection("VALUES", "v.json", "some values"),))
    text = runners.build_runner(spec, package)
    tree = ast.parse(text)
    values = next(i for i, node in enumerate(tree.body) if isinstance(node, ast.Assign) and node.targets[0].id == "VALUES")
    assert values == len(tree.body) - 2  # every definition before it, only the __main__ block after
    assert bundle.is_main_block(tree.body[-1])
    assert json.loads(run_text(tmp_path, text)) == {"a": 1, "b": 2}


@pytest.mark.parametrize("modules, listed, message", [
    ({"a.py": "from residlab.b import B\n", "b.py": "B = 1\n"}, ("a.py",),
     r"a.py, line 5: imports from b.py, which x.py does not list: add it to the runner's modules in RUNNERS"),
    ({"a.py": "from residlab.pkg import B\n", "pkg/__init__.py": "B = 1\n"}, ("a.py",),
     r"a.py: `from residlab.pkg import ...` imports a package"),
    ({"a.py": "from residlab import B\n"}, ("a.py",), r"a.py: `from residlab import ...` imports a package"),
    ({"a.py": "from residlab.gone import B\n"}, ("a.py",), r"a.py: .* names a module that does not exist"),
    ({"a.py": "import residlab.b\n", "b.py": "B = 1\n"}, ("b.py", "a.py"),
     r"a.py, line 5: import residlab code as `from residlab.a.b import X, Y`"),
    ({"a.py": "def f():\n    import residlab.b\n    return residlab.b.B\n", "b.py": "B = 1\n"}, ("b.py", "a.py"),
     r"a.py, line 6: import residlab code as `from residlab.a.b import X, Y`"),
    ({"a.py": "from residlab.b import B as C\n", "b.py": "B = 1\n"}, ("b.py", "a.py"), r"a.py, line 5: .* without `\*` or `as`"),
    ({"a.py": "from residlab.b import B; WIDTH = 3\n", "b.py": "B = 1\n"}, ("b.py", "a.py"),
     r"a.py, line 5: a residlab import must have its lines to itself"),
    ({"a.py": "from residlab.b import C\n", "b.py": "B = 1\n"}, ("b.py", "a.py"), r"a.py imports C from b.py, which does not"),
    ({"a.py": "from residlab.b import B\n", "b.py": 'B = 1\n\nif __name__ == "__main__":\n    print(B)\n\nC = 2\n'},
     ("b.py", "a.py"), r"b.py: its `if __name__ == \"__main__\":` block must end the module"),
    ({"a.py": "from residlab.b import B\nWIDTH = 16\n", "b.py": "B = 1\nWIDTH = 32\n"}, ("b.py", "a.py"),
     r"a.py redefines WIDTH, which b.py defines"),
    ({"a.py": "from residlab.b import B\n", "b.py": "B = 1\n", "c.py": "C = 1\n"}, ("c.py", "b.py", "a.py"),
     r"x.py: lists c.py, which none of its other modules imports"),
    ({"a.py": "from residlab.b import B\n", "b.py": "B = 1\n"}, ("b.py", "b.py", "a.py"), r"x.py: lists b.py twice"),
    ({"a.py": "from residlab.b import B\n", "b.py": "try:\n    B = 1\nexcept ImportError:\n    B = 2\n",
      "c.py": ""}, ("b.py", "a.py"), None),
])
def test_runner_builder_refuses_what_a_runner_could_not_hold(tmp_path, modules, listed, message):
    package = fake_tree(tmp_path, {path: body + ("\n\ndef main():\n    pass\n" + MAIN if path == "a.py" else "")
                                   for path, body in modules.items()})
    if message is None:  # the control: a well-formed tree builds
        assert markers(runners.build_runner(fake_runner(listed), package)) == ["residlab/b.py", "residlab/a.py"]
        return
    with pytest.raises(ValueError, match=message):
        runners.build_runner(fake_runner(listed), package)


TORCH_CHECK_MODULE = "import importlib.util\n\nif importlib.util.find_spec('torch') is None:\n    raise SystemExit(1)\n"


def test_a_runner_whose_modules_import_torch_opens_with_the_torch_check_and_only_such_a_runner(tmp_path):
    package = fake_tree(tmp_path, {
        runners.TORCH_CHECK: TORCH_CHECK_MODULE,
        "model.py": "import torch\n\n\ndef width():\n    return torch.zeros(2).numel()\n",
        "plain.py": "def width():\n    return 2\n",
        "app.py": "from residlab.model import width\n\n\ndef main():\n    return width()\n" + MAIN,
        "plain_app.py": "from residlab.plain import width\n\n\ndef main():\n    return width()\n" + MAIN,
    })
    text = runners.build_runner(fake_runner((runners.TORCH_CHECK, "model.py", "app.py")), package)
    assert markers(text)[0] == f"residlab/{runners.TORCH_CHECK}"
    with pytest.raises(ValueError, match=rf"x.py: model.py imports torch at top level, so the runner's modules must "
                                         rf"start with {runners.TORCH_CHECK}"):
        runners.build_runner(fake_runner(("model.py", runners.TORCH_CHECK, "app.py")), package)
    with pytest.raises(ValueError, match=rf"x.py: lists {runners.TORCH_CHECK}, but none of its modules imports torch"):
        runners.build_runner(fake_runner((runners.TORCH_CHECK, "plain.py", "plain_app.py")), package)


@pytest.mark.parametrize("opening, message", [
    ("from __future__ import annotations\n\nB = 1\n", "b.py: a runner's module must open with a docstring"),
    ('"""B."""\n\nimport os\nfrom __future__ import annotations\nB = 1\n', "b.py: a runner's module must follow its"),
    ('"""B."""\n\nB = 1\n', "b.py: a runner's module must follow its docstring"),
])
def test_runner_builder_refuses_a_module_without_the_opening(tmp_path, opening, message):
    package = fake_tree(tmp_path, {"a.py": "from residlab.b import B\n\n\ndef main():\n    pass\n" + MAIN})
    (package / "b.py").write_text(opening)
    with pytest.raises(ValueError, match=message):
        runners.build_runner(fake_runner(("b.py", "a.py")), package)


def test_runner_builder_refuses_an_entry_without_a_main_block_and_an_unread_data_section(tmp_path):
    package = fake_tree(tmp_path, {"a.py": "def main():\n    pass\n", "b.py": "def main():\n    pass\n" + MAIN})
    with pytest.raises(ValueError, match="a.py: an entry module must end with an `if __name__"):
        runners.build_runner(fake_runner(("a.py",)), package)
    (package / "v.json").write_text("{}")
    with pytest.raises(ValueError, match="data section VALUES: no module of the runner reads it"):
        runners.build_runner(fake_runner(("b.py",), data=(runners.DataSection("VALUES", "v.json", "v"),)), package)
    with pytest.raises(ValueError, match="b.py defines no top-level helper to read first"):
        runners.build_runner(runners.Runner("x.py", ("b.py",), "p", "c", (runners.ReadFirst("b.py", ("helper",)),)), package)
    with pytest.raises(ValueError, match="its read-first section a.py is not one of its modules"):
        runners.build_runner(runners.Runner("x.py", ("b.py",), "p", "c", (runners.ReadFirst("a.py"),)), package)


def test_runner_builder_keeps_a_lazy_import_out_of_the_runner(tmp_path):
    package = fake_tree(tmp_path, {
        "lib.py": "def shared():\n    return 41\n",
        "app.py": "def main():\n    from residlab.lib import (\n        shared,\n    )\n\n    return shared() + 1\n" + MAIN,
    })
    text = runners.build_runner(fake_runner(("lib.py", "app.py")), package)
    assert "residlab.lib" not in text and "        shared,\n" not in text and run_text(tmp_path, text) == "42\n"


def buildable_runners() -> list[runners.Runner]:
    """The real runners that build from the modules in this tree (a runner that cannot says why, by ValueError)."""
    built = []
    for runner in runners.RUNNERS:
        try:
            runners.build_runner(runner)
        except ValueError:
            continue
        built.append(runner)
    return built


def test_every_real_runner_builds_or_refuses_clearly():
    for runner in runners.RUNNERS:
        try:
            runners.build_runner(runner)
        except ValueError as error:
            assert any(module in str(error) for module in ("/", ".py")), error
    assert buildable_runners(), "not one runner builds"


@pytest.mark.parametrize("runner", buildable_runners(), ids=lambda runner: runner.filename)
def test_each_real_runner_lists_its_sections_defines_no_name_twice_and_ends_with_its_data(runner):
    text = runners.build_runner(runner)
    lines = text.splitlines()
    assert text.startswith("#!/usr/bin/env python3\n# " + runner.filename + ": ")
    assert not re.search(r"(from|import) residlab\b", text)  # not even in a comment: the runner stands alone
    listed = [re.match(r"^#   line +(\d+)  (residlab/\S+|data: (\w+))", line) for line in lines[:80]]
    listed = [match for match in listed if match]
    for section in runner.modules:
        assert any(match.group(2) == f"residlab/{section}" for match in listed), section
    for match in listed:
        marker = lines[int(match.group(1)) - 1]
        if match.group(3):
            assert marker.startswith(f"# ---- data: {match.group(3)}, ")
        else:
            assert marker.startswith(f"# ---- {match.group(2)} ")
    assert f"# Read this first: {runner.check}." in lines
    tree = ast.parse(text)
    counts = collections.Counter(name for node in tree.body for name in bundle.bound_names([node]))
    assert [name for name, count in counts.items() if count > 1] == []
    data = [i for i, node in enumerate(tree.body) if isinstance(node, ast.Assign)
            and node.targets[0].id in {section.name for section in runner.data}]
    assert data == list(range(len(tree.body) - 1 - len(runner.data), len(tree.body) - 1))
    assert bundle.is_main_block(tree.body[-1])


def test_cli_lists_every_subcommand_without_importing_torch():
    completed = subprocess.run(
        [sys.executable, "-c", "import sys; from residlab.cli import main\n"
         "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\nprint('torch' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )
    for command in ("toy", "lesson", "paper", "pythia", "site", "sync", "pins"):
        assert command in completed.stdout
    assert completed.stdout.strip().endswith("False")


def test_another_runners_entry_is_bundled_without_its_main_block(tmp_path):
    # b.py is a runner's entry of its own; bundled into a.py's runner, its __main__ block is left out.
    package = fake_tree(tmp_path, {"b.py": 'B = 1\n\nif __name__ == "__main__":\n    print("b runs")\n',
                                   "a.py": "from residlab.b import B\n\n\ndef main():\n    pass\n" + MAIN})
    text = runners.build_runner(fake_runner(("b.py", "a.py")), package)
    assert text.count('if __name__ == "__main__":') == 1 and "b runs" not in text
    assert markers(text) == ["residlab/b.py", "residlab/a.py"]
