"""The project as a fresh clone has it: the files git knows (tracked, and untracked ones git does not ignore, as they
are in the working tree), copied into another folder. A render there starts with no ``_freeze/``, ``_site/`` or
``.quarto/``, and a trial there with no environments. What a fresh clone fetches before it renders, Pyodide
(``make pyodide``) and the code editor's packages (``make editor``), each ``npm ci`` from its lock, is carried over as
installed, so the copy renders offline.
Standard library only: ``residlab pins`` runs without the project's environment.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from residlab.build import editor_bundle, pyodide_files


class CheckoutError(RuntimeError):
    """The files to copy could not be listed (no git, or no git checkout); the message says which."""


def clean_copy(root: Path, destination: Path) -> Path:
    """Copy the files git knows in ``root`` into ``destination`` (symbolic links as links); return ``destination``."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                capture_output=True, timeout=60)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CheckoutError(f"cannot list the files of {root} with git: {error}") from None
    if listed.returncode != 0:
        raise CheckoutError(f"{root} is not a git checkout: only the files git knows are copied")
    for name in filter(None, listed.stdout.decode("utf-8", "surrogateescape").split("\0")):
        source, target = root / name, destination / name
        if source.is_symlink() or source.is_file():  # a tracked file deleted in the working tree is not copied
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    pyodide_files.carry_install(root, destination)
    editor_bundle.carry_install(root, destination)
    return destination
