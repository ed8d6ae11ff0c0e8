"""Run a built page's shell blocks as a learner would: read them from the HTML, fetch what the page links, run each
command in the page's folder (``test_page_commands.py`` runs every learner-facing page of the built site; its
unit tests run these functions on small pages of their own).

- ``read_page(html, path)``: the page's shell blocks (``pre.sourceCode`` in bash, sh, shell, console, bat,
  powershell or cmd) in page order, each with its tab when it sits in a platform tabset (tabs Linux, macOS and
  Windows); the downloads it links (files under ``assets/labs/``); and the earlier page whose folder it continues
  in, named by a link to that page's ``#...-folder`` anchor ("work in the folder of Lab 05 Part 4").
- ``variant_problems(page)``: where a tabset's macOS or Windows block differs from its Linux block in more than
  the platform demands. Both are normalised first (``.venv\\Scripts\\python.exe`` is ``.venv/bin/python``,
  ``py -3.12`` is ``python3.12``, ``py`` is ``python3``), and the torch install lines, which differ by platform
  (PyTorch's CPU index on Linux and Windows), are set aside.
- ``run_page(page, folder, fetch, learner)``: the Linux block of each tabset and every other block, line by line,
  for real. What a line may be: a virtual environment made (``python3 -m venv [--without-pip] .venv-residual``,
  made with the learner's bare Python), a pip line (one that installs a requirement file the site served into this folder, or
  the pinned torch; run as written, with pip allowed no index, only the wheelhouse: ``wheelhouse_pip_env``), or a
  Python runner run with the Python the line names (``python3``, the bare Python; ``.venv-x/bin/python``, that
  environment's). Anything else is a command the test cannot run, and fails like a command that exits non-zero.
  A page that installs too little fails where its runner first needs what is missing, as a learner's run would.
"""

from __future__ import annotations

import html.parser
import os
import posixpath
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

SHELL_LANGUAGES = {"bash", "sh", "shell", "console", "bat", "powershell", "cmd"}
PLATFORMS = ("Linux", "macOS", "Windows")
DOWNLOADS = "assets/labs/"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
COMMAND_TIMEOUT = 900  # seconds: the slowest command (a lesson's training with its gradient profile) takes a few minutes
REFUSING_PROXY = "http://127.0.0.1:9"  # the discard port: a pip that tried a host would be refused at once


@dataclass(frozen=True)
class Block:
    lines: tuple[str, ...]
    tabset: int | None = None  # which platform tabset of the page it sits in
    platform: str | None = None  # its tab there


@dataclass
class Page:
    path: str  # site-relative, e.g. labs/06-audit-a-decoder.html
    blocks: list[Block] = field(default_factory=list)
    downloads: list[str] = field(default_factory=list)  # site-relative paths, in link order, no repeats
    folder_of: str | None = None  # the page whose folder this one works in


class _Reader(html.parser.HTMLParser):
    def __init__(self, path: str):
        super().__init__(convert_charrefs=True)
        self.page = Page(path)
        self.in_main = 0
        self.stack: list[tuple[str, dict]] = []  # open elements inside <main>: (tag, what it opened)
        self.tab_labels: dict[str, str] = {}  # tab pane id -> its tab's label
        self.tabset_count = 0
        self.tabsets: list[int] = []  # the platform tabsets open, innermost last
        self.pane: str | None = None
        self.code: list[str] | None = None
        self.label: list[str] | None = None
        self.label_target: str | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if tag == "main":
            self.in_main += 1
        if not self.in_main or tag in ("br", "img", "input", "meta", "link", "hr", "wbr", "source"):
            return
        opened = {}
        if tag == "div" and "panel-tabset" in classes:
            self.tabset_count += 1
            self.tabsets.append(self.tabset_count)
            opened["tabset"] = True
        if tag == "div" and "tab-pane" in classes:
            opened["pane"] = self.pane
            self.pane = attributes.get("id")
        if tag == "a":
            target = attributes.get("data-bs-target")
            if target and target.startswith("#"):
                self.label, self.label_target = [], target[1:]
                opened["label"] = True
            self._link(attributes.get("href") or "")
        if tag == "pre" and "sourceCode" in classes and SHELL_LANGUAGES & set(classes):
            self.code = []
            opened["code"] = True
        self.stack.append((tag, opened))

    def handle_endtag(self, tag):
        if tag == "main":
            self.in_main -= 1
            return
        if not self.in_main or tag not in (open_tag for open_tag, _ in self.stack):
            return  # an end tag with nothing open to close: HTML's implied ends need no bookkeeping here
        while self.stack:
            open_tag, opened = self.stack.pop()
            self._close(opened)
            if open_tag == tag:
                break

    def _close(self, opened: dict) -> None:
        if "pane" in opened:
            self.pane = opened["pane"]
        if opened.get("tabset"):
            self.tabsets.pop()
        if opened.get("label") and self.label is not None:
            self.tab_labels[self.label_target] = "".join(self.label).strip()
            self.label = None
        if opened.get("code") and self.code is not None:
            lines = tuple(line.rstrip() for line in "".join(self.code).splitlines() if line.strip())
            platform = self.tab_labels.get(self.pane) if self.pane else None
            in_platform_tabs = bool(self.tabsets) and platform in PLATFORMS
            self.page.blocks.append(Block(lines, self.tabsets[-1] if in_platform_tabs else None,
                                          platform if in_platform_tabs else None))  # fmt: skip
            self.code = None

    def handle_data(self, data):
        if self.code is not None:
            self.code.append(data)
        if self.label is not None:
            self.label.append(data)

    def _link(self, href: str) -> None:
        if not href or re.match(r"^[a-z]+:", href) or href.startswith("#"):
            return
        address, _, fragment = href.partition("#")
        if not address:
            return
        target = posixpath.normpath(posixpath.join(posixpath.dirname(self.page.path), address))
        if target.startswith(DOWNLOADS) and target not in self.page.downloads:
            self.page.downloads.append(target)
        if fragment.endswith("-folder") and target.endswith(".html") and target != self.page.path:
            self.page.folder_of = target


def read_page(text: str, path: str) -> Page:
    reader = _Reader(path)
    reader.feed(text)
    reader.close()
    return reader.page


# ---- the platforms' variants -----------------------------------------------------------------------------------


def normalise(line: str) -> str:
    """A Windows or macOS line in the Linux form, comments and surplus spaces dropped."""
    line = re.sub(r"\s+#.*$", "", line).strip()
    line = re.sub(r"(\S+)\\Scripts\\python\.exe\b", lambda m: m.group(1).replace("\\", "/") + "/bin/python", line)
    line = re.sub(r"^py -(\d+\.\d+) ", r"python\1 ", line)
    line = re.sub(r"^py ", "python3 ", line)
    return " ".join(line.split())


def is_torch_install(line: str) -> bool:
    words = line.split()
    return "pip" in words and "install" in words and any(word.startswith("torch==") for word in words)


def variant_problems(page: Page) -> list[str]:
    problems = []
    tabsets: dict[int, dict[str, Block]] = {}
    for block in page.blocks:
        if block.tabset is not None:
            tabsets.setdefault(block.tabset, {})[block.platform] = block
    for number, variants in tabsets.items():
        if "Linux" not in variants:
            problems.append(f"{page.path}: platform tabset {number} has no Linux block")
            continue
        reference = [normalise(line) for line in variants["Linux"].lines if not is_torch_install(line)]
        for platform, block in variants.items():
            lines = [normalise(line) for line in block.lines if not is_torch_install(line)]
            if lines != reference:
                problems.append(f"{page.path}: tabset {number}'s {platform} block differs from its Linux block beyond "
                                f"the platform: {lines} against {reference}")  # fmt: skip
    return problems


# ---- running the commands --------------------------------------------------------------------------------------


class CommandFailed(AssertionError):
    """A command of a page that the test cannot run, or that did not exit 0; the message names both."""


@dataclass
class Folder:
    path: Path
    served: set[str] = field(default_factory=set)  # files the site served into it
    environments: set[str] = field(default_factory=set)  # virtual environments made in it
    printed: dict[str, str] = field(default_factory=dict)  # each line run in it -> what it printed (stdout)


@dataclass(frozen=True)
class Learner:
    python: str  # what ``python3`` means: a bare Python, nothing installed; it makes the pages' environments
    torch_pin: str  # the torch version the site's requirement files pin
    env: dict  # the environment commands run in (the fake hub's HF_ENDPOINT)
    wheelhouse: Path  # the only place the pages' pip lines install from

    @property
    def pip_env(self) -> dict:
        return wheelhouse_pip_env(self.env, self.wheelhouse)


def wheelhouse_pip_env(env: dict, wheelhouse: Path) -> dict:
    """``env`` with pip confined to ``wheelhouse``: no index (``--index-url`` on a line is then ignored), no
    configuration file of this machine (its find-links or indexes), any host refused."""
    confined = {key: value for key, value in env.items() if not key.upper().startswith(("PIP_", "HTTP", "ALL_PROXY"))}
    confined.update({
        "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse), "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
        # What is installed is the same; compiling every module of torch and transformers is not (tens of s): a
        # runner compiles what it imports, as a learner's does. PIP_COMPILE=0, not PIP_NO_COMPILE=1, which pip reads
        # inverted (a --no-* option's variable) and compiles anyway (test_page_commands checks no .pyc is written).
        "PIP_COMPILE": "0",
        "HTTP_PROXY": REFUSING_PROXY, "HTTPS_PROXY": REFUSING_PROXY, "http_proxy": REFUSING_PROXY,
        "https_proxy": REFUSING_PROXY, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    })  # fmt: skip
    return confined


def fetch_downloads(page: Page, folder: Folder, fetch) -> None:
    """Save every file the page links under assets/labs/ into the folder, by name, as a browser would."""
    for path in page.downloads:
        name = posixpath.basename(path)
        (folder.path / name).write_bytes(fetch(path))
        folder.served.add(name)


def _python_of(word: str, folder: Folder, learner: Learner) -> str | None:
    """The interpreter a line's first word runs: the bare Python for python3 or python3.12, an environment's Python
    for ``.venv-x/bin/python`` when an earlier line made that environment in the folder; None for anything else."""
    if re.fullmatch(r"python3(\.\d+)?", word):
        return learner.python
    environment = word.removesuffix("/bin/python")
    if environment != word:
        if environment not in folder.environments:
            raise CommandFailed(f"{word}: no earlier command made the environment {environment}")
        return str(folder.path / environment / "bin" / "python")
    return None


def _check_pip(words: list[str], folder: Folder, learner: Learner, line: str) -> None:
    arguments = words[words.index("install") + 1 :] if "install" in words else []
    if words[1:3] != ["-m", "pip"] or not arguments:
        raise CommandFailed(f"{line}: not a pip install the test knows")
    if arguments[0] == "-r" and len(arguments) == 2:
        if arguments[1] not in folder.served:
            raise CommandFailed(f"{line}: installs {arguments[1]}, which the site did not serve into this folder")
        return
    if arguments[0].startswith("torch==") and arguments[1:] in ([], ["--index-url", TORCH_CPU_INDEX]):
        if arguments[0] != f"torch=={learner.torch_pin}":
            raise CommandFailed(f"{line}: installs {arguments[0]}, not the pinned torch=={learner.torch_pin}")
        return
    raise CommandFailed(f"{line}: installs something other than a served requirement file or the pinned torch")


def _run(line: str, arguments: list[str], folder: Folder, env: dict) -> subprocess.CompletedProcess:
    completed = subprocess.run(arguments, cwd=folder.path, env=env, capture_output=True, text=True,
                               timeout=COMMAND_TIMEOUT)  # fmt: skip
    if completed.returncode != 0:
        raise CommandFailed(f"{line}: exit status {completed.returncode}\n{completed.stderr[-2000:]}")
    return completed


def run_line(line: str, folder: Folder, learner: Learner) -> subprocess.CompletedProcess:
    """Run one command line of a page in its folder, as written."""
    words = shlex.split(re.sub(r"\s+#.*$", "", line))
    python = _python_of(words[0], folder, learner) if words else None
    if python is None:
        what = words[0] if words else line
        raise CommandFailed(f"{line}: the test cannot run {what!r} (only Python and the site's runners)")
    if words[1:3] == ["-m", "venv"] and words[3:-1] in ([], ["--without-pip"]):
        completed = _run(line, [python, *words[1:]], folder, learner.env)
        folder.environments.add(words[-1])
        return completed
    if words[1:3] == ["-m", "pip"]:
        _check_pip(words, folder, learner, line)
        return _run(line, [python, *words[1:]], folder, learner.pip_env)
    if len(words) < 2 or not words[1].endswith(".py") or words[1] not in folder.served:
        raise CommandFailed(f"{line}: runs no runner the site served into this folder")
    return _run(line, [python, *words[1:]], folder, learner.env)


def lines_to_run(page: Page) -> list[str]:
    """Every block outside platform tabsets, and each tabset's Linux block, in page order."""
    return [line for block in page.blocks if block.platform in (None, "Linux") for line in block.lines]


def run_page(page: Page, folder: Folder, fetch, learner: Learner) -> list[str]:
    """Fetch the page's downloads into the folder, then run its lines in order; returns the lines run."""
    fetch_downloads(page, folder, fetch)
    done = []
    for line in lines_to_run(page):
        folder.printed[line] = run_line(line, folder, learner).stdout
        done.append(line)
    return done
