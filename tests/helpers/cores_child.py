"""A model worker's side of attention_serve/cores.py in a process of its own (tests/serve/test_cores.py)."""

from __future__ import annotations


def busy_until_told(share, slot: int, started, release) -> None:
    """Be worker ``slot`` computing a batch until ``release`` is set (``started`` says it has begun)."""
    share.slot = slot  # not join(): no torch in this process, only the shared arrays
    with share.working():
        started.set()
        release.wait(30)
