"""The downloads a page's shown code imports, standing in while the page is built.

A cell a page shows for learners to copy imports a runner the way a learner does, ``import read_transformer_paper
as paper_lab``, with the file saved beside their code (the registry, ``pages.ShownCode``, names the cell's runner,
its alias and the names it uses). The build runs the same line: ``stand_in`` registers, under the runner's module
name, a module holding the runner's namespace made of the package's own objects: every name of every module the
runner bundles, a later module's over an earlier one's, as in the runner's one file. So the page computes with the
package, as every page does, and its later cells may go on using the alias, while its shown code reads as it runs
from the download. ``residlab site check`` holds the shown cell to the names the registry lists, and
``tests/runners/test_shown_code.py`` imports every listed name from the download itself.
"""

from __future__ import annotations

import importlib
import sys
import types

from residlab.course.pages import FAMILIES, PageFamily, Runner, ShownCode, runners


def runner_named(filename: str) -> Runner:
    """The runner a family declares under ``filename``."""
    for runner in runners():
        if runner.filename == filename:
            return runner
    raise LookupError(f"{filename} is the runner of no page family of residlab/course/pages.py")


def shown_code() -> tuple[tuple[PageFamily, ShownCode], ...]:
    """Every shown cell that runs from a download, with its family."""
    return tuple((family, shown) for family in FAMILIES for shown in family.shown_code)


def stand_in(filename: str) -> types.ModuleType:
    """Register (and return) the stand-in for the runner ``filename`` (one the registry declares)."""
    runner = runner_named(filename)
    module = types.ModuleType(filename.removesuffix(".py"), f"The package's objects that {filename} bundles.")
    for path in runner.modules:
        bundled = importlib.import_module("residlab." + path.removesuffix(".py").replace("/", "."))
        module.__dict__.update({name: value for name, value in vars(bundled).items() if not name.startswith("__")})
    sys.modules[module.__name__] = module
    return module
