"""Processes started as SLURM's srun starts the processes of one run on one machine: each numbered SLURM_PROCID /
SLURM_LOCALID in a job of SLURM_NTASKS tasks, with no RANK nor LOCAL_RANK set (Lightning's SLURMEnvironment reads
these; no SLURM needed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from helpers.server import free_port

LAUNCHERS = ("RANK", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE")  # another launcher's numbering: not srun's


def srun_processes(cmd: list[str], cwd: Path, env: dict | None = None, tasks: int = 2,
                   timeout: float = 300) -> list[tuple[int, str, str]]:  # fmt: skip
    """Run ``cmd`` as ``tasks`` srun processes; per process (exit code, stdout, stderr). Where one fails the others
    wait for it at their first collective call: after ``timeout`` seconds they are killed."""
    base = {k: v for k, v in (os.environ if env is None else env).items() if k not in LAUNCHERS}
    base.update(SLURM_NTASKS=str(tasks), SLURM_NTASKS_PER_NODE=str(tasks), SLURM_NODEID="0", SLURM_JOB_NAME="job",
                SLURM_NODELIST="127.0.0.1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))  # fmt: skip
    numbered = [{**base, "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i)} for i in range(tasks)]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    procs = [subprocess.Popen(cmd, cwd=cwd, env=own, **pipes) for own in numbered]
    try:
        done = [proc.communicate(timeout=timeout) for proc in procs]
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        done = [proc.communicate() for proc in procs]
    return [(proc.returncode, out, err) for proc, (out, err) in zip(procs, done, strict=True)]
