"""``residlab site``: the site's command, and the Quarto render it wraps.

Quarto is the one thing that executes pages. This package never re-implements it; it checks around it:

- ``residlab site check``: static checks of the sources Quarto does not make (``site_check``). Seconds, no kernel.
- ``residlab site render [--output-dir DIR] [PAGE ...]``: runs ``quarto render`` with this environment's
  Python as the Jupyter kernel, echoes its output, and fails on a non-zero exit *or* any warning line
  (Quarto's, pandoc's or a kernel's). With pages, only those are rendered (always executed). A whole-site render
  in which every page executes runs the prefetch of the shared values beside Quarto (``residlab/course/render/shared.py``).
- ``residlab site url [--expect URL]``: the address the site is published at (``website: site-url``, the
  publisher's to set); with ``--expect``, fails unless it is that address (the deploy workflow passes Pages').
- ``residlab site verify DIR``: checks what a render built (``site_verify``).
- ``residlab site list``: the pages Quarto renders.

Exit statuses: 0 done; 1 a problem found, a failed render or a warning; 2 a usage error (argparse); 3 Quarto not
found (``QuartoMissing``), so a caller can tell an absent tool from a broken page.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from residlab.build.freeze_guard import RENDER_CACHE_DIR, guard, nothing_frozen
from residlab.build.site_check import check_site, load_config, site_pages, site_url_problem
from residlab.build.site_verify import verify_build
from residlab.build.sync import default_site_root
from residlab.course.render.render_cache import RENDER_CACHE_ENVIRONMENT

# ---------------------------------------------------------------- Quarto's render

# A warning from any layer of a render: Quarto ("WARN", "WARNING:"), pandoc ("[WARNING]"), a kernel's logger
# ("[IPKernelApp] WARNING") or Python's warnings module ("UserWarning: ...").
WARNING_LINE = re.compile(r"\bWARN(?:ING)?\b|\[WARNING\]|\b[A-Z]\w*Warning\b|\bWarning:")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
QUARTO_MISSING = (
    "Quarto is not on PATH (or in $QUARTO). Install Quarto 1.10 or newer from https://quarto.org/docs/get-started/ "
    "(or your package manager), then run the command again."
)


class RenderError(RuntimeError):
    exit_status = 1


class QuartoMissing(RenderError):
    exit_status = 3


def quarto_command() -> str:
    command = os.environ.get("QUARTO") or shutil.which("quarto")
    if not command:
        raise QuartoMissing(QUARTO_MISSING)
    return command


def render_environment(root: Path) -> dict[str, str]:
    """Quarto's Jupyter engine runs this interpreter's kernel, so pages import the residlab installed here; what
    several pages compute is shared through the project's render cache (``residlab/course/render/render_cache.py``)."""
    environment = dict(os.environ)
    environment["QUARTO_PYTHON"] = sys.executable
    environment[RENDER_CACHE_ENVIRONMENT] = str(Path(root).resolve() / RENDER_CACHE_DIR)
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environment.get("PATH", "")])
    return environment


def warning_lines(output: str) -> list[str]:
    return [line.strip() for line in ANSI_ESCAPE.sub("", output).splitlines() if WARNING_LINE.search(line)]


PREFETCH_COMMAND = (sys.executable, "-m", "residlab.course.render.shared")
PREFETCH_LOG = "prefetch.log"
PREFETCH_STOP_SECONDS = 10
PREFETCH_LOG_TAIL = 4000  # bytes of its output a failure shows


def start_prefetch(root: Path, environment: dict[str, str]) -> subprocess.Popen:
    """``python -m residlab.course.render.shared`` in the project root, its output in the render cache's prefetch.log."""
    folder = Path(environment[RENDER_CACHE_ENVIRONMENT])
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / PREFETCH_LOG, "wb") as log:  # the child holds its own descriptor
        return subprocess.Popen(list(PREFETCH_COMMAND), cwd=root, env=environment,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip


def stop_prefetch(process: subprocess.Popen, folder: Path) -> str | None:
    """End the prefetch (what it has not computed yet, no page asked for); its failure, or None."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=PREFETCH_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return None
    if process.returncode == 0:
        return None
    with open(folder / PREFETCH_LOG, "rb") as log_file:  # its last 4000 bytes: the error is at the end
        log_file.seek(max(0, log_file.seek(0, os.SEEK_END) - PREFETCH_LOG_TAIL))
        log = log_file.read().decode("utf-8", errors="replace")
    return f"the render's prefetch (python -m residlab.course.render.shared) exited with code {process.returncode}:\n{log}"


def render(root: Path, output_dir: Path | None = None, pages: list[Path] = (), profile: str | None = None,
           echo=sys.stdout.write, timeout: float = 3600, execute: bool = True) -> str:
    """Run ``quarto render`` in ``root`` (``--no-execute`` unless ``execute``); return its combined output.
    Raises RenderError on a failed render or on any warning line, naming the lines.

    A whole-site render in which every page executes (no frozen results once the freeze guard has run) starts
    the prefetch beside Quarto (``residlab/course/render/shared.py``) and ends it when Quarto is done; a prefetch that
    failed fails the render too, after Quarto's own errors."""
    command = [quarto_command(), "render", *[str(page) for page in pages], *([] if execute else ["--no-execute"])]
    if output_dir is not None:
        command += ["--output-dir", str(output_dir)]
    if profile:
        command += ["--profile", profile]
    environment = render_environment(root)
    prefetch = None
    if execute and not pages:
        # Quarto's pre-render step, run first so that it never empties the cache under the prefetch.
        echo(f"residlab freeze guard: {guard(Path(root))}\n")
        if nothing_frozen(Path(root)):
            prefetch = start_prefetch(root, environment)
    lines = []
    try:
        process = subprocess.Popen(command, cwd=root, env=environment, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, errors="replace")  # fmt: skip
        try:
            for line in process.stdout:
                lines.append(line)
                echo(line)
            process.wait(timeout=timeout)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    finally:
        prefetch_failure = prefetch and stop_prefetch(prefetch, Path(environment[RENDER_CACHE_ENVIRONMENT]))
    output = "".join(lines)
    if process.returncode != 0:
        raise RenderError(f"quarto render exited with code {process.returncode}")
    warnings = warning_lines(output)
    if warnings:
        raise RenderError("quarto render printed warnings:\n" + "\n".join(f"  {line}" for line in warnings))
    if prefetch_failure:
        raise RenderError(prefetch_failure)
    return output


def clean_copy(root: Path, destination: Path) -> Path:
    """Copy the project as a fresh clone would have it (tracked files and untracked ones git does not
    ignore, as they are in the working tree), so a render there starts with no _freeze/, _site/ or .quarto/."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True, timeout=60,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = root / name
        if source.is_file():  # a tracked file deleted in the working tree is not copied
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="residlab site", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["check", "render", "verify", "list", "url"])
    parser.add_argument("paths", nargs="*", type=Path,
                        help="render: pages to render (default: the whole site); verify: the built site folder")
    parser.add_argument("--root", type=Path, default=default_site_root(), help="the site's root folder")
    parser.add_argument("--output-dir", type=Path, help="render: write the site here instead of _site/")
    parser.add_argument("--profile", help="render: a Quarto profile to add (for example `axe`)")
    parser.add_argument("--expect", metavar="URL", help="url: fail unless site-url is this address")
    args = parser.parse_intermixed_args(argv)  # options may come before or after the pages
    root = args.root.resolve()
    if not (root / "_quarto.yml").exists():
        parser.error(f"{root} has no _quarto.yml: pass the site's root with --root")
    if args.action == "list":
        for path in site_pages(root):
            print(path.relative_to(root))
        return 0
    if args.action == "url":
        problem = args.expect is not None and site_url_problem(root, args.expect)
        print(f"residlab site url: {problem}" if problem else load_config(root).get("website", {}).get("site-url", ""),
              file=sys.stderr if problem else sys.stdout)
        return 1 if problem else 0
    if args.action == "check":
        problems = check_site(root)
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{len(site_pages(root))} pages checked, {len(problems)} problems")
        return 1 if problems else 0
    if args.action == "verify":
        if len(args.paths) != 1 or not args.paths[0].is_dir():
            parser.error("verify takes one argument: the folder a render wrote (for example _site)")
        problems = verify_build(root, args.paths[0].resolve())
        for problem in problems:
            print(problem, file=sys.stderr)
        print(f"{args.paths[0]}: {len(problems)} problems")
        return 1 if problems else 0
    try:
        render(root, args.output_dir and args.output_dir.resolve(), [path.resolve() for path in args.paths], args.profile)
    except RenderError as error:
        print(f"residlab site render: {error}", file=sys.stderr)
        return error.exit_status
    return 0
