"""Measuring helpers shared by the benchmark scripts (run them as `python benchmarks/NAME.py`)."""

from __future__ import annotations

import resource
import sys
import time


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB."""
    # ru_maxrss is KiB on Linux and bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def timed(function) -> float:
    """Wall seconds of one call."""
    start = time.perf_counter()
    function()
    return time.perf_counter() - start
