"""``residlab site``: the site's command, and the Quarto render it wraps.

Quarto is the one thing that executes pages. This package never re-implements it; it checks around it:

- ``residlab site check``: static checks of the sources Quarto does not make (``site_check``). Seconds, no kernel.
- ``residlab site render [--output-dir DIR] [PAGE ...]``: runs ``quarto render`` with this environment's
  Python as the Jupyter kernel, echoes its output, and fails on a non-zero exit *or* any warning line
  (Quarto's, pandoc's or a kernel's). With pages, only those are rendered (always executed). What several pages
  share is computed once per render, by whichever Quarto render runs (``residlab/course/shared.py``, kept in
  ``residlab/render/``'s cache).
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

from residlab.build.checkout import clean_copy  # noqa: F401 (the tests' and benchmarks' clean copy)
from residlab.build.site_check import check_site, load_config, site_pages, site_url_problem
from residlab.build.site_verify import verify_build
from residlab.build.sync import default_site_root

# ---------------------------------------------------------------- Quarto's render

# A warning from any layer of a render: Quarto ("WARN", "WARNING:"), pandoc ("[WARNING]"), a kernel's logger
# ("[IPKernelApp] WARNING") or Python's warnings module ("UserWarning: ...").
WARNING_LINE = re.compile(r"\bWARN(?:ING)?\b|\[WARNING\]|\b[A-Z]\w*Warning\b|\bWarning:")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
QUARTO_MISSING = (
    "Quarto is not on PATH (or in $QUARTO). Install Quarto 1.10.18 (the version the site is built and tested "
    "with) from https://quarto.org/docs/get-started/ (or your package manager), then run the command again."
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


def render_environment() -> dict[str, str]:
    """Quarto's Jupyter engine runs this interpreter's kernel, so pages import the residlab installed here."""
    environment = dict(os.environ)
    environment["QUARTO_PYTHON"] = sys.executable
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environment.get("PATH", "")])
    return environment


def warning_lines(output: str) -> list[str]:
    return [line.strip() for line in ANSI_ESCAPE.sub("", output).splitlines() if WARNING_LINE.search(line)]


def render(root: Path, output_dir: Path | None = None, pages: list[Path] = (), echo=sys.stdout.write,
           timeout: float = 3600, execute: bool = True) -> str:
    """Run ``quarto render`` in ``root`` (``--no-execute`` unless ``execute``); return its combined output.
    Raises RenderError on a failed render or on any warning line, naming the lines. Several ``pages`` render one
    after another: ``quarto render`` takes one input and hands any further path to pandoc as another input file
    (the second page's text would end up in the first page's output)."""
    if len(pages) > 1:
        return "".join(render(root, output_dir, [page], echo, timeout, execute) for page in pages)
    command = [quarto_command(), "render", *[str(page) for page in pages], *([] if execute else ["--no-execute"])]
    if output_dir is not None:
        command += ["--output-dir", str(output_dir)]
    lines = []
    process = subprocess.Popen(command, cwd=root, env=render_environment(), stdout=subprocess.PIPE,
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
    output = "".join(lines)
    if process.returncode != 0:
        raise RenderError(f"quarto render exited with code {process.returncode}")
    warnings = warning_lines(output)
    if warnings:
        raise RenderError("quarto render printed warnings:\n" + "\n".join(f"  {line}" for line in warnings))
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="residlab site", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["check", "render", "verify", "list", "url"])
    parser.add_argument("paths", nargs="*", type=Path,
                        help="render: pages to render (default: the whole site); verify: the built site folder")
    parser.add_argument("--root", type=Path, default=default_site_root(), help="the site's root folder")
    parser.add_argument("--output-dir", type=Path, help="render: write the site here instead of _site/")
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
        render(root, args.output_dir and args.output_dir.resolve(), [path.resolve() for path in args.paths])
    except RenderError as error:
        print(f"residlab site render: {error}", file=sys.stderr)
        return error.exit_status
    return 0
