"""One source of truth for pins and runners: every derived file matches what the package writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from residlab.build import pins
from residlab.build import runners
from residlab.build import sync

ROOT = Path(__file__).resolve().parent.parent


def test_derived_files_are_in_sync_with_the_package():
    assert sync.stale_files(ROOT) == []


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


def test_runner_builder_drops_bundled_imports_and_embeds_the_lock(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "first.py").write_text(
        '"""First."""\n\nfrom __future__ import annotations\n\nimport json\n'
        'EMBEDDED_LOCK_JSON = None  # the runner builder writes the pinned lock here\n'
    )
    (package / "second.py").write_text(
        '"""Second."""\n\nfrom __future__ import annotations\n\nfrom residlab.first import json  # bundled\n\n'
        'def main():\n    return json.loads(EMBEDDED_LOCK_JSON)["revision"]\n\n'
        'if __name__ == "__main__":\n    print(main())\n'
    )
    monkeypatch.setattr(runners, "PACKAGE_DIR", package)
    text = runners.build_runner(runners.Runner("demo.py", ("first.py", "second.py"), "a demo"))
    assert "# bundled" not in text
    assert text.count("from __future__ import annotations") == 1
    script = tmp_path / "demo.py"
    script.write_text(text)
    completed = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == json.loads(runners.DEFAULT_LOCK.read_text())["revision"]


def test_runner_builder_refuses_a_second_main_block(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text('"""A."""\nfrom __future__ import annotations\nif __name__ == "__main__":\n    pass\n')
    (tmp_path / "b.py").write_text('"""B."""\nfrom __future__ import annotations\n')
    monkeypatch.setattr(runners, "PACKAGE_DIR", tmp_path)
    with pytest.raises(ValueError, match="only the last module"):
        runners.build_runner(runners.Runner("x.py", ("a.py", "b.py"), "x"))


def test_runner_builder_leaves_out_a_borrowed_modules_script_block(tmp_path, monkeypatch):
    (tmp_path / "lib.py").write_text(
        '"""Lib."""\nfrom __future__ import annotations\n\ndef shared():\n    return 41\n\n'
        'def main():\n    return "lib main"\n\nif __name__ == "__main__":\n    print(main())\n'
    )
    (tmp_path / "app.py").write_text(
        '"""App: opens the runner."""\nfrom __future__ import annotations\n\n'
        'from residlab.lib import shared  # bundled\n\ndef main():\n    return shared() + 1\n\n'
        'if __name__ == "__main__":\n    print(main())\n'
    )
    monkeypatch.setattr(runners, "PACKAGE_DIR", tmp_path)
    text = runners.build_runner(runners.Runner("x.py", ("lib.py", "app.py"), "x", borrowed=("lib.py",)))
    assert text.count('if __name__ == "__main__":') == 1
    assert text.split("\n")[3] == '"""App: opens the runner."""'
    script = tmp_path / "x.py"
    script.write_text(text)
    completed = subprocess.run([sys.executable, "-I", str(script)], capture_output=True, text=True, check=True)
    assert completed.stdout == "42\n"


def test_runner_builder_refuses_a_name_defined_twice(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text('"""A."""\nfrom __future__ import annotations\nWIDTH = 16\n')
    (tmp_path / "b.py").write_text('"""B."""\nfrom __future__ import annotations\nWIDTH = 32\n')
    monkeypatch.setattr(runners, "PACKAGE_DIR", tmp_path)
    with pytest.raises(ValueError, match="b.py redefines WIDTH, which a.py defines"):
        runners.build_runner(runners.Runner("x.py", ("a.py", "b.py"), "x"))


def test_cli_lists_every_subcommand_without_importing_torch():
    completed = subprocess.run(
        [sys.executable, "-c", "import sys; from residlab.cli import main\n"
         "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\nprint('torch' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )
    for command in ("toy", "lesson", "paper", "pythia", "site", "sync"):
        assert command in completed.stdout
    assert completed.stdout.strip().endswith("False")
