"""``attention-serve``'s worker loops: LitServe's, with an idle worker that waits instead of polling, and every
loop passing over the requests whose client went away (abandoned.py).

LitServe's own loop gathers a batch by asking its request queue for the next request with a 1 ms timeout, again and
again, also when no request comes. The queue lives in a multiprocessing manager, so each ask is a round trip to that
process: an idle ``attention-serve`` with its two workers used 48% of a core (measured on 2 cores: 9.6 CPU-seconds in
20 idle seconds), which slows whatever else the machine runs. Here a worker that has had no request for
:data:`HOT_SECONDS` first waits for one in a single blocking get (:data:`IDLE_WAIT` at a time), then gathers the rest
of its batch as LitServe does (up to ``max_batch_size`` within ``batch_timeout``). A worker with recent requests keeps
LitServe's own gathering.

The default (``--no-idle-wait`` gives LitServe's loop): ``benchmarks/serve_idle.py`` alternates servers with and without
it, and in 8 rounds each on 2 cores (docs/serve_idle.json) neither a lone request's latency (the one that pays for
waking the worker) nor the photos/s of 1 or 16 clients told them apart, while an idle worker's CPU fell from 21% of a
core to 1.2%.
"""

from __future__ import annotations

import os
import time
from queue import Empty
from typing import Any

from litserve.loops.simple_loops import BatchedLoop, SingleLoop

from attention_serve.abandoned import SkippingQueue

IDLE_WAIT = 1.0  # seconds a worker waits in one get before asking again (LitServe's single-request loop waits 1 s)
HOT_SECONDS = 2.0  # a worker that served a request this recently gathers as LitServe does (no wake-up to pay)


class _FirstThen:
    """A request queue with one request already taken from it put back in front (for LitServe's gathering)."""

    def __init__(self, first: Any, queue: Any) -> None:
        self._first, self._queue = [first], queue

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        return self._first.pop() if self._first else self._queue.get(block, timeout)

    def get_nowait(self) -> Any:
        return self._first.pop() if self._first else self._queue.get_nowait()


class SkipsAbandoned:
    """A loop reading its request queue through :class:`SkippingQueue` where the API was given the server's
    ``abandoned`` ids (workers.SupervisedServer)."""

    def __call__(self, lit_api, device, worker_id, request_queue, *args, **kwargs):
        abandoned = getattr(lit_api, "abandoned", None)
        if abandoned is not None:
            request_queue = SkippingQueue(request_queue, abandoned)
        return super().__call__(lit_api, device, worker_id, request_queue, *args, **kwargs)


class SkippingBatchedLoop(SkipsAbandoned, BatchedLoop):
    """LitServe's batched loop (``--no-idle-wait``)."""


class SkippingSingleLoop(SkipsAbandoned, SingleLoop):
    """LitServe's one-request loop (``--max-batch-size 1``)."""


class IdleWaitingLoop(SkipsAbandoned, BatchedLoop):
    _last_request = float("-inf")  # time.monotonic() of the last batch this worker took

    def get_batch_requests(self, lit_api, request_queue, transport) -> tuple[list, list]:
        try:
            return self._gathered(lit_api, request_queue, transport)
        except (EOFError, OSError):  # LitServe's manager, which holds the queue, is gone (killed): nothing can come;
            # the main process says so and stops the server (each worker printed a 30-line traceback)
            os._exit(1)

    def _gathered(self, lit_api, request_queue, transport) -> tuple[list, list]:
        if time.monotonic() - self._last_request >= HOT_SECONDS:  # idle: wait in one get, no polling
            try:
                first = request_queue.get(timeout=IDLE_WAIT)
            except Empty:
                return [], []
            # the stop sentinel and a request too old for its timeout are handled by LitServe's gathering, as before
            request_queue = _FirstThen(first, request_queue)
        payloads, timed_out = super().get_batch_requests(lit_api, request_queue, transport)
        if payloads or timed_out:
            self._last_request = time.monotonic()
        return payloads, timed_out
