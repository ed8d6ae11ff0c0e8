"""``single_thread``: the course's torch experiments run on one CPU thread, so their numbers are the same on any
machine with the same torch build (Lesson 2.1's copy model and gradient profile, Lab 04's checks)."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run the enclosed torch work on one CPU thread (the configured experiment), then restore the setting."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
