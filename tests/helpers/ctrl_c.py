"""A Ctrl-C at a chosen point of a command run in the test's process: a function wrapped so that one of its calls
raises KeyboardInterrupt in its place (as Python raises it where the signal lands)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def ctrl_c_at(real: Callable[..., Any], call: int = 2, calls: list | None = None) -> Callable[..., Any]:
    """``real``, whose ``call``-th call (1-based) raises KeyboardInterrupt instead; each call is counted in ``calls``
    (a list the test may read or clear)."""
    calls = [] if calls is None else calls

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    return wrapped
