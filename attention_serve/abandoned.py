"""Requests whose client went away before their answer: not computed where no worker has taken them yet.

A client that gives up (its own timeout, a closed browser tab, a retry loop) left its request in the model's queue: a
worker still computed it, and until then it held one of the ``--max-queue`` places (an audit's 80 abandoned requests:
the next client got 503 busy, and waited behind all 80 once let in). The HTTP process now notices the disconnect
(inflight.Waiting.answer), frees the place at once and notes the request's id here; a worker that takes a noted
request from its queue drops it unanswered (nobody waits for the answer). One a worker has taken already is computed
and its answer dropped.

The ids are a ring of :data:`RING` slots in shared memory, written by the one HTTP process (LitServe's
``num_api_servers=1``) and read by the workers (created before either is started). A read that overlaps a write may
miss the id being written: that request is computed, as before.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import uuid
from queue import Empty
from typing import Any

RING = 1024  # ids remembered: far more than --max-queue (a request leaves its queue long before 1024 others give up)
WIDTH = 16  # bytes an id takes (LitServe's uids are str(uuid.uuid4()))


def _key(uid: Any) -> bytes | None:
    try:
        return uuid.UUID(str(uid)).bytes
    except ValueError:  # not a UUID (another LitServe's uids): never noted, never dropped
        return None


class Abandoned:
    def __init__(self) -> None:
        self.ids = mp.RawArray("c", RING * WIDTH)
        self.count = mp.RawValue("Q", 0)  # ids written so far; the slot of the next is count % RING
        self._seen: tuple[int, frozenset[bytes]] = (0, frozenset())  # a reader's copy, made again when count moves

    def add(self, uid: Any) -> None:
        key = _key(uid)
        if key is None:
            return
        at = (self.count.value % RING) * WIDTH
        self.ids[at : at + WIDTH] = key
        self.count.value += 1

    def known(self) -> frozenset[bytes]:
        count = self.count.value
        if count != self._seen[0]:
            raw = self.ids.raw
            self._seen = (count, frozenset(raw[i : i + WIDTH] for i in range(0, min(count, RING) * WIDTH, WIDTH)))
        return self._seen[1]

    def has(self, uid: Any) -> bool:
        if self.count.value == 0:  # nobody ever went away: no copy made
            return False
        return _key(uid) in self.known()


class SkippingQueue:
    """A worker's request queue that passes over the requests noted in ``abandoned`` (what LitServe's loops read:
    ``get`` and ``get_nowait``). A request is ``(response_queue_id, uid, timestamp, payload)``; the stop's sentinel
    and anything else pass through."""

    def __init__(self, queue: Any, abandoned: Abandoned) -> None:
        self._queue, self._abandoned = queue, abandoned

    def _dropped(self, item: Any) -> bool:
        return isinstance(item, tuple) and len(item) == 4 and self._abandoned.has(item[1])

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            item = self._queue.get(block, timeout)
            if not self._dropped(item):
                return item
            if deadline is not None:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    raise Empty

    def get_nowait(self) -> Any:
        while True:
            item = self._queue.get_nowait()
            if not self._dropped(item):
                return item

    def __getattr__(self, name: str) -> Any:  # anything else LitServe asks of its queue
        return getattr(self._queue, name)
