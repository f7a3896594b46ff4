"""How much memory this process may use: the smaller of the memory cgroup's room (a container's limit, cgroup v2
``memory.max``, v1 ``memory.limit_in_bytes``, less what the cgroup's other processes and files use) and the machine's
``MemAvailable``. Linux only (None elsewhere, or where nothing can be read): a command sizes its default
batch by it, so a container of 768 MB is not ended by the OOM killer at a batch a larger machine takes."""

from __future__ import annotations

import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
UNLIMITED = 2**60  # v1 writes "no limit" as 2^63 rounded down to a page; v2 writes "max"


def _number(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except (OSError, ValueError):
        return None
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value < UNLIMITED else None


def _cgroup_room(root: Path = CGROUP, own: Path = Path("/proc/self/cgroup")) -> int | None:
    """The room left under this process's memory cgroup limit, in bytes; None where there is no limit."""
    try:
        lines = own.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        rel = path.lstrip("/")
        if number == "0" and controllers == "":  # v2: one hierarchy
            limit, used = root / rel / "memory.max", root / rel / "memory.current"
        elif "memory" in controllers.split(","):  # v1: the memory controller's own hierarchy
            limit, used = (
                root / "memory" / rel / "memory.limit_in_bytes",
                root / "memory" / rel / "memory.usage_in_bytes",
            )
        else:
            continue
        cap = _number(limit)
        if cap is not None:  # this process's own memory is not taken from its room: a command's estimate counts it
            return max(0, cap - max(0, (_number(used) or 0) - own_resident()))
    return None


def own_resident(statm: Path = Path("/proc/self/statm")) -> int:
    """This process's resident memory in bytes (0 where it cannot be read)."""
    try:
        return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _available(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_room() -> int | None:
    """Bytes this process may still use (the module doc); None where it cannot be told."""
    known = [room for room in (_cgroup_room(), _available()) if room is not None]
    return min(known) if known else None
