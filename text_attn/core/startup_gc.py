"""A command's start without the garbage collector's full passes over its imports.

Importing torch (and Lightning, where a command needs it) makes hundreds of thousands of objects that live as long as
the process, and each full pass of Python's cyclic collector walks every one of them. Counted with ``gc.callbacks``
on 2 cores: ``caption PHOTO`` and ``translate SENTENCE`` each made 3 full passes while they started, 0.33-0.35 s in
all (``import torch, pytorch_lightning``: 7 passes, ~1.4 s); held as below, none. The console scripts that load a
model (text_attn.core.fast_exit.leaving) hold the collector back while they start (:func:`hold`); once the command
has its imports and its model (:func:`release`), what is alive is frozen (``gc.freeze``: later passes skip it, and
processes forked from this one keep sharing those pages) and the collector runs as before. A command that never
released it would still collect, only at much longer intervals. In-process use (a test, a notebook) never holds it,
and there :func:`release` does nothing.
"""

from __future__ import annotations

import gc

# (new objects per young pass, young passes per middle pass, middle passes per full pass): a young pass every million
# new objects (a start makes fewer: a young pass over survivors costs ~0.05 s per 100,000), a full one after 5,000
# young passes (CPython's default: 700, 10, 10)
HELD = (1_000_000, 50, 100)
_before: tuple[int, ...] | None = None  # the thresholds to give back; None: not held


def hold() -> None:
    """From now on until :func:`release`: the collector's passes at ``HELD``'s much longer intervals."""
    global _before
    if _before is None and gc.isenabled():
        _before = gc.get_threshold()
        gc.set_threshold(*HELD)


def release() -> None:
    """The imports are done: freeze what is alive now (later passes skip it) and give the collector its thresholds
    back. Does nothing unless :func:`hold` ran first."""
    global _before
    if _before is None:
        return
    gc.freeze()
    gc.set_threshold(*_before)
    _before = None


def held() -> bool:
    return _before is not None
