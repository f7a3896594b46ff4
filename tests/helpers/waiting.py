"""Waiting for a condition a server meets moments later (longer on a loaded machine), instead of sleeping and hoping."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(get: Callable[[], T], done: Callable[[T], bool], timeout: float, every: float = 0.1) -> T:
    """Call ``get`` every ``every`` s until ``done`` holds for what it returns or ``timeout`` s have passed; returns the
    last value, for the test's own assertion to judge."""
    deadline = time.monotonic() + timeout
    while not done(value := get()) and time.monotonic() < deadline:
        time.sleep(every)
    return value
