"""The machine's cores lent among the model workers by demand (the default; ``--threads N`` fixes every worker at N).

With both models served on 2 cores, a fixed share gives each worker one torch thread, so a captioner busy alone
leaves half the machine idle; giving every worker every core is five times slower as soon as both are busy (two
thread pools fighting over two cores: docs/serve.md). Here each worker, while it computes a batch, takes the cores
divided among the workers that are busy now: all of them when the others are idle, its share when they are not.

The workers agree through two arrays in shared memory, made in the main process and handed to each worker with its
LitAPI (multiprocessing shares them with a process it starts): ``busy[slot]`` is 1 while that worker computes, and
``ended[slot]`` the time (``time.monotonic``, one clock for every process) its last batch ended. A worker that ended a
batch less than ``linger`` seconds ago still counts as busy, so that one waiting between its clients' requests does not
lend its core for the length of another's whole batch. The count is read again at the start of each batch and then
before module calls (a global forward pre-hook, at most every ``RECHECK`` s), so a worker that lent its core takes it
back within a few milliseconds of the other's model. An ONNX Runtime encoder pass (one call; its threads do not spin)
runs to its end at the count it started with, so with the cores lent the captioner encodes a few photos a call
(apis.ENCODER_CHUNK). Reading a request and writing an answer count as work too (``touch``): a captioner reading its
next 16 photos between two batches is not idle. Workers on a GPU keep the fixed share (apis._ModelAPI.setup).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Iterator
from contextlib import contextmanager

LINGER = 0.05  # seconds a worker counts as busy after its batch: longer than the gap between a client's requests
RECHECK = 0.002  # seconds between two readings of the arrays in one worker


def threads_for(me: int, busy: list[int], ended: list[float], now: float, cores: int, linger: float = LINGER) -> int:
    """Torch threads for worker ``me``: ``cores`` divided among it and the others busy at ``now`` (computing, or
    ended a batch less than ``linger`` s ago), at least 1."""
    others = sum(1 for i, b in enumerate(busy) if i != me and (b or now - ended[i] < linger))
    return max(1, cores // (1 + others))


class CoreShare:
    """The shared arrays for ``slots`` workers on ``cores`` cores; a worker calls ``join(slot)`` once, then runs each
    batch inside ``working()``."""

    def __init__(self, slots: int, cores: int, linger: float = LINGER) -> None:
        self.cores, self.linger = cores, linger
        self.busy = mp.RawArray("b", slots)
        self.ended = mp.RawArray("d", [-1e9] * slots)  # long ago: nobody has worked yet
        self.slot: int | None = None
        self._next = 0.0  # when apply() reads the arrays again

    def join(self, slot: int):
        """In the worker: this process is ``slot``; its thread count follows the others' from now on (apply(), at each
        batch's start and before module calls). Returns the hook's handle (``.remove()`` undoes it)."""
        import torch

        self.slot = slot
        return torch.nn.modules.module.register_module_forward_pre_hook(lambda module, args: self.apply())

    def apply(self) -> None:
        """Set this worker's torch threads to its share now; at most once every ``RECHECK`` s (this runs before every
        module call: a Transformer's beam search makes thousands)."""
        now = time.monotonic()
        if now < self._next or self.slot is None or not self.busy[self.slot]:
            return  # checked moments ago, or a module called outside a batch (loading, a warm-up)
        self._next = now + RECHECK
        want = threads_for(self.slot, list(self.busy), list(self.ended), now, self.cores, self.linger)
        import torch

        if want != torch.get_num_threads():  # asked each time: setup (or anyone) may have set it since
            torch.set_num_threads(want)

    @property
    def lending(self) -> bool:
        """In a worker that joined (on the CPU) and shares the cores with others: its count may change mid-batch."""
        return self.slot is not None and len(self.busy) > 1

    def touch(self) -> None:
        """Work of this worker's outside a batch (reading a request, writing an answer) uses the cores too: the others
        count it as busy for ``linger`` s after. (A captioner reading 16 photos between two batches took longer than
        the linger: the translator took both cores meanwhile, and both ran slower.)"""
        if self.slot is not None:
            self.ended[self.slot] = time.monotonic()

    @contextmanager
    def working(self) -> Iterator[None]:
        """One batch: busy while it runs, its end time recorded after."""
        slot = self.slot
        assert slot is not None, "join(slot) first"
        self.busy[slot] = 1
        self._next = 0.0  # a new batch reads the arrays at once
        try:
            self.apply()
            yield
        finally:
            self.ended[slot] = time.monotonic()
            self.busy[slot] = 0
