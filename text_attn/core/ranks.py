"""Which process of a run this is, read off the environment the launchers set before the run's other processes start
this same command: Lightning's launcher (``LOCAL_RANK``, ``NODE_RANK``; ``caption --devices``'s does as it does),
torchrun (``RANK``, ``LOCAL_RANK``), SLURM's srun (``SLURM_PROCID``, ``SLURM_LOCALID``), Open MPI's mpirun and LSF's
jsrun (the launchers process_start.LAUNCHED names, and Lightning's cluster environments read). The first process is the
one whose every rank there is 0: a variable the shell had before (an sbatch script's ``SLURM_PROCID=0``) is 0 in every
process Lightning then starts, and their ``LOCAL_RANK`` tells them apart.

What every process reads alike, a data module's notes on its data above all, is said by the first one only: under DDP
on eight GPUs each line was said eight times. What one process meets alone (a photo of its own batch that cannot be
read) each says itself. Nothing here imports torch."""

from __future__ import annotations

import os
import sys

# Ranks over the whole run, then a machine's own; a process is the first of its machine where the second are all 0.
RUN_RANKS = ("RANK", "NODE_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "JSM_NAMESPACE_RANK")
MACHINE_RANKS = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "JSM_NAMESPACE_LOCAL_RANK")


def _all_zero(keys: tuple[str, ...]) -> bool:
    return all(os.environ.get(key, "0").strip() in ("0", "") for key in keys)


def first_process() -> bool:
    """Whether this is the first (or only) process of a run: every rank the launchers set 0 (or none set)."""
    return _all_zero(RUN_RANKS + MACHINE_RANKS)


def first_on_machine() -> bool:
    """Whether this is the first process of its machine (local rank 0): what each machine finds of its own (its
    /dev/shm) is said once a machine."""
    return _all_zero(MACHINE_RANKS)


def say(line: str) -> None:
    """``line`` on stderr by the run's first process; the others say nothing."""
    if first_process():
        print(line, file=sys.stderr)
