"""The libraries a run uses: ``library_versions``, the Python version and the installed version of each named
library, as the records of a capture or an audit state the environment they were made in; and
``import_transformers_quietly``, the one way the package imports transformers (a runner that bundles this module
drags nothing else with it). Standard library only."""

from __future__ import annotations

import platform
import warnings


def import_transformers_quietly():
    """Import transformers without tqdm's "IProgress not found" warning, which it writes to stderr inside a
    Jupyter kernel that lacks ipywidgets (as when a page executes); progress bars are never shown here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import transformers
    return transformers


def library_versions(names) -> dict:
    """The Python version and the installed version of each named distribution (None where it is missing)."""
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions
