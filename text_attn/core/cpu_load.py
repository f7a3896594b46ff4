"""The default torch thread count of the short commands (``caption``, ``translate``): one per core that is free when
the command starts, not one per core.

Why: torch's CPU threads meet at a barrier after every operation. When another program keeps one of the cores busy,
the thread that shares its core is descheduled for a time slice while the others wait at the barrier, and the
decoder's thousands of small operations each pay that. On 2 cores beside one busy process (``python
benchmarks/busy_machine.py``, docs/speed.md "On a busy machine"), 2 threads took 1.42x the time of 1 thread for
``caption`` of a folder and 1.34x for ``translate`` (start-up included); alone, 2 threads are 1.10-1.14x faster. So
the commands read the cores' load while they start (torch's import and the model's load, ~1 s, between two readings of
``/proc/stat``: no time added) and leave the busy cores out.

The load is what other programs use: this process's own CPU time in the interval (its import) is subtracted. An
explicit choice wins: ``--threads``, or ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` in the environment (what torch reads).
Where ``/proc/stat`` cannot be read (not Linux), torch's choice stands.
"""

from __future__ import annotations

import math
import os
import time

STAT = "/proc/stat"
SELF_STAT = "/proc/self/stat"
MIN_SECONDS = 0.1  # a shorter interval holds too few clock ticks (100 a second) to tell a busy core from an idle one
EXPLICIT = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")

_start: tuple[float, dict[int, tuple[int, int]], int] | None = None


def read_cpus(text: str) -> dict[int, tuple[int, int]]:
    """``/proc/stat``'s text -> {cpu id: (busy ticks, all ticks)}. Idle is idle + iowait; steal (the hypervisor ran
    someone else) counts as busy; guest time is already inside user time, so it is not added again."""
    cpus = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu":
            continue
        ticks = [int(f) for f in fields[:8]] + [0] * max(0, 8 - len(fields))
        user, nice, system, idle, iowait, irq, softirq, steal = ticks
        busy = user + nice + system + irq + softirq + steal
        cpus[int(name[3:])] = (busy, busy + idle + iowait)
    return cpus


def read_own(text: str) -> int:
    """``/proc/self/stat``'s text -> this process's CPU ticks (utime + stime, all its threads). The fields are counted
    after the command name's closing parenthesis (the name may hold spaces)."""
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of the line, counted from 1 with pid and name


def others_busy(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], own_ticks: int,
                cpus: set[int]) -> float:  # fmt: skip
    """How many cores other programs kept busy between two readings, on ``cpus`` (this process's): their busy ticks
    less this process's own, over the ticks of one core in the interval. 0 when the interval holds no ticks."""
    ids = [c for c in cpus if c in before and c in after]
    if not ids:
        return 0.0
    busy = sum(after[c][0] - before[c][0] for c in ids)
    total = sum(after[c][1] - before[c][1] for c in ids)
    if total <= 0:
        return 0.0
    per_core = total / len(ids)
    return max(0.0, (busy - own_ticks) / per_core)


def threads_for(current: int, cores: int, busy: float) -> int:
    """torch's thread count ``current`` less the cores other programs keep busy: ``cores`` - ``busy`` rounded half
    up (a core half taken already stalls a thread that shares it), at least 1, at most ``current``."""
    free = cores - math.floor(busy + 0.5)
    return max(1, min(current, free))


def _snapshot() -> tuple[float, dict[int, tuple[int, int]], int] | None:
    try:
        with open(STAT) as f:
            cpus = read_cpus(f.read())
        with open(SELF_STAT) as f:
            own = read_own(f.read())
    except (OSError, ValueError, IndexError):
        return None
    return time.monotonic(), cpus, own


def start() -> None:
    """Take the first reading (call it first thing in a command: each call starts the interval again)."""
    global _start
    _start = _snapshot()


def cpu_ids() -> set[int]:
    """The CPUs this process may run on (its affinity; every CPU where that cannot be read)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return set(range(os.cpu_count() or 1))


def free_threads(current: int) -> int:
    """The thread count to use instead of torch's ``current``: ``current`` less the cores other programs kept busy
    since :func:`start` (reading again now; the interval is stretched to :data:`MIN_SECONDS` if shorter). ``current``
    as it is where the user chose (``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``) or the load cannot be read."""
    global _start
    if any(os.environ.get(name) for name in EXPLICIT):
        return current
    first = _start if _start is not None else _snapshot()
    _start = None  # used once: the next command in this process (a notebook, a test) reads its own interval
    found = _busy_since(first) if first is not None else None
    return current if found is None else threads_for(current, found[1], found[0])


def _busy_since(first: tuple[float, dict[int, tuple[int, int]], int]) -> tuple[float, int] | None:
    """(the cores other programs kept busy since the reading ``first``, the cores this process may use), reading
    again now (the interval stretched to :data:`MIN_SECONDS` if shorter); None where it cannot be read."""
    waited = time.monotonic() - first[0]
    if waited < MIN_SECONDS:
        time.sleep(MIN_SECONDS - waited)
    now = _snapshot()
    if now is None:
        return None
    cpus = cpu_ids()
    return others_busy(first[1], now[1], now[2] - first[2], cpus), len(cpus)


def fewer_threads_note(current: int, option: str) -> str | None:
    """A training command's note, at its fit's start, where other programs kept cores busy since :func:`start` (its
    first line: Lightning's import and the run's set-up, ~10 s, lie between the readings) and torch's ``current``
    threads would share them: the training steps' thousands of small operations each wait at the barrier for the
    thread a busy core holds back (an audit's fit beside other work on 2 cores: 7-10x slower than at one thread). A
    note, not a choice: a
    fit's threads are ``option`` (model.cpu_threads), which the user gives. None where no reading was started (a fit
    called from Python), the user chose threads in the environment, or no core is taken away."""
    global _start
    first, _start = _start, None
    if first is None or any(os.environ.get(name) for name in EXPLICIT):
        return None
    found = _busy_since(first)
    if found is None:
        return None
    busy, cores = found
    threads = threads_for(current, cores, busy)
    if threads >= current:
        return None
    return f"other programs keep {math.floor(busy + 0.5)} of {cores} cores busy: {option} {threads} may train faster"


def use_free_threads() -> int:
    """Set torch's threads to :func:`free_threads` of its own count; returns the count now in use."""
    import torch

    threads = free_threads(torch.get_num_threads())
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    return threads


def more_threads_note(given: int) -> str | None:
    """The note for ``--threads N`` beyond the cores this process may run on (None within them): the extra threads
    take turns on the same cores, each waiting at every parallel region for the others, so more is slower."""
    cores = len(cpu_ids())
    if given <= cores:
        return None
    return (
        f"--threads {given} is more than the {cores} cores this process may use: the threads beyond them take turns "
        f"on the same cores and slow each other down (--threads {cores} or fewer is faster)"
    )
