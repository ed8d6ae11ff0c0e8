"""Stop a runner that needs torch with one line, before its first ``import torch``, when this Python lacks torch.

The Lesson 2.1 and Lab 04 runners (``residual_stream_lab.py``, ``read_transformer_paper.py``) import torch at the
top of several modules, so a learner who runs one with a Python that has no torch would get a
``ModuleNotFoundError`` traceback. Their lists in ``residlab/build/runners.py`` start with this module, so its
check runs on import before any module that imports torch; the builder refuses a runner whose modules import torch
at top level without it (``tests/runners/test_first_contact.py`` checks the runners). Nothing in the package
imports it: there, torch is a dependency.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def torch_missing_message(program: str, python: str) -> str:
    # The environment its page builds, never an unpinned install: the pages pin torch with what it needs.
    return (
        f"{program}: torch is not installed for this Python ({python}): run it with the Python of the virtual "
        "environment its page sets up, which holds the pinned requirements (.venv-lesson/bin/python for Lesson 2.1's "
        "and Lab 04's runners, .venv-residual/bin/python for the later labs'; on Windows Scripts\\python.exe in "
        "place of bin/python)"
    )


def require_torch() -> None:
    """Exit with status 1 and one line on stderr if ``import torch`` would fail for want of torch."""
    if importlib.util.find_spec("torch") is None:
        sys.exit(torch_missing_message(Path(sys.argv[0]).name or "this program", sys.executable))


require_torch()
