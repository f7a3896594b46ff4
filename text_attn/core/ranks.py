"""Which process of a run this is, read off the environment the launchers set before the run's other processes start
this same command (Lightning's: ``LOCAL_RANK`` and ``NODE_RANK``; torchrun's: ``RANK``; ``caption --devices``'s, as
Lightning's). What every process reads alike, a data module's notes on its data above all, is said by the first one
only: under DDP on eight GPUs each line was said eight times. What one process meets alone (a photo of its own batch
that cannot be read) each says itself. Nothing here imports torch."""

from __future__ import annotations

import os
import sys


def first_process() -> bool:
    """Whether this is the first (or only) process of a run: rank 0 of all (``RANK`` where a launcher set it), else
    local rank 0 of node 0."""
    if "RANK" in os.environ:
        return os.environ["RANK"] == "0"
    return os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"


def first_on_machine() -> bool:
    """Whether this is the first process of its machine (local rank 0): what each machine finds of its own (its
    /dev/shm) is said once a machine."""
    return os.environ.get("LOCAL_RANK", "0") == "0"


def say(line: str) -> None:
    """``line`` on stderr by the run's first process; the others say nothing."""
    if first_process():
        print(line, file=sys.stderr)
