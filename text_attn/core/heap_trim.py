"""Give the C heap's free pages back to the system during a long search.

A Transformer's search grows each layer's self-attention cache by one position a step and reorders it by beam: two new
buffers a layer a step, each a little larger than the one just freed. glibc serves buffers under its mmap threshold
(which rises to the size of each larger block freed, up to 32 MiB) from its heap, and a freed buffer is one position too
small for the next: the heap fills with holes whose pages stay resident. A 1,290-token paragraph searched all 1,200
steps at beam 5 grew the process by 1.24-1.51 GB, its tensors 0.30 GiB (2026-12-05, benchmarks/search_memory.py).
``malloc_trim(0)`` hands the free pages back (madvise, the heap's layout unchanged): called from step :data:`TRIM_FROM`,
every :data:`TRIM_EVERY` steps, the same search grew it by 0.30-0.32 GB (1.24-1.51 untrimmed), in 0.98-1.14x the time. A
search of fewer steps (a caption, a sentence) never calls it. Elsewhere than glibc (macOS, musl) it does nothing."""

from __future__ import annotations

import ctypes
import sys

TRIM_FROM = 128  # the first step that trims: a sentence's search (Multi30k's longest: a cap of 120) never does
TRIM_EVERY = 32  # steps between trims after it

_trim = None  # the C function, looked up once; False where there is none


def _malloc_trim():
    global _trim
    if _trim is None:
        _trim = False
        if sys.platform.startswith("linux"):
            try:
                # the process's own symbols: glibc's malloc_trim where the C library is glibc (musl has none:
                # AttributeError); not ctypes.util.find_library, which runs ldconfig or a compiler to look
                _trim = ctypes.CDLL(None).malloc_trim
                _trim.argtypes, _trim.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):
                _trim = False
    return _trim


def release_free_heap() -> bool:
    """Return the heap's free pages to the system (glibc ``malloc_trim(0)``). True where that ran."""
    trim = _malloc_trim()
    if not trim:
        return False
    trim(0)
    return True


def every_few_steps(step: int) -> None:
    """A search's hook (``step`` counts from 0): :func:`release_free_heap` at step :data:`TRIM_FROM` and every
    :data:`TRIM_EVERY` steps after it. Not from the first steps: a trim costs ~10 ms, and the pages it hands back are
    faulted in again by the next steps' buffers (trimming every 32 steps from the start cost ordinary sentences'
    searches ~1.1x the time); a search that long is where the holes pile up."""
    if step >= TRIM_FROM and step % TRIM_EVERY == 0:
        release_free_heap()
