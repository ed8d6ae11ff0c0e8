"""``library_versions``: the Python version and the installed version of each named library, as the records of
a capture or an audit state the environment they were made in."""

from __future__ import annotations

import platform


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
