"""How many DataLoader workers a small /dev/shm can take (issue: a training run with loader workers hung for ever).

A worker hands each batch over through shared memory: torch moves its tensors into /dev/shm as the worker's queue
thread pickles it. Where that fails (a Docker container's default 64 MB /dev/shm: "unable to allocate shared memory
... No space left on device") the thread prints a traceback and drops the batch, and the loader waits for ever for it,
deaf to SIGTERM. So before a loader with workers is made, the free space of /dev/shm is compared with the batches its
workers keep ready; where it cannot hold them the loader runs in the main process (slower, said once), never a hang.
``caption`` hands its photos over in its own way (captioning.photos.photo_stream).
"""

from __future__ import annotations

import shutil
import sys

from text_attn.core.ranks import first_on_machine

SHM = "/dev/shm"
# Batches in shared memory at once per worker: torch's prefetch_factor (2) ready in the queue, plus the one being made.
BATCHES_PER_WORKER = 3
MB = 1 << 20

_said: set[str] = set()  # the note once a process, whatever the number of loaders (train, val, test)


def shm_free(path: str = SHM) -> int | None:
    """Free bytes of the shared-memory folder; None where there is none (macOS, Windows: torch shares otherwise)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def loader_workers(
    num_workers: int, batch_bytes: int, who: str, option: str = "--data.num_workers", processes: int = 1
) -> int:
    """``num_workers``, or 0 with a note on stderr (``who: note: ...``) where /dev/shm cannot hold the batches of
    ``batch_bytes`` (an estimate of one batch's tensors) that many workers keep ready, in each of ``processes``
    processes of this machine loading at once (DDP: one a device; they share its /dev/shm: each finding room for its
    own workers' batches, eight together could fill it and hang)."""
    if num_workers <= 0 or batch_bytes <= 0:
        return num_workers
    free = shm_free()
    need = num_workers * BATCHES_PER_WORKER * batch_bytes * max(processes, 1)
    if free is None or free >= need:
        return num_workers
    if who not in _said and first_on_machine():  # each process of the machine finds the same
        _said.add(who)
        whose = f"{num_workers} loader workers" + (f" of each of {processes} processes" if processes > 1 else "")
        print(f"{who}: note: shared memory ({SHM}) has {free / MB:.0f} MB free, less than the {need / MB:.0f} MB "
              f"{whose} hand their batches over in: loading in the main process instead "
              f"({option} 0, slower); a larger {SHM} (docker run --shm-size 1g) or fewer workers avoids it",
              file=sys.stderr)  # fmt: skip
    return 0
