"""Execute one of the pages' snippets (``assets/peers/``) exactly as the page shows it."""

from __future__ import annotations

import torch

from residlab.course import peers


def run_snippet(file_name: str, **given) -> dict:
    """Execute the snippet exactly as the page shows it, with ``given`` (and torch) as its globals."""
    namespace = {"torch": torch, **given}
    exec(compile(peers.snippet(file_name) + "\n", str(peers.SNIPPETS / file_name), "exec"), namespace)
    return namespace
