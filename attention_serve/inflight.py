"""The HTTP process's side of a worker's fault: every request waiting for a model worker is known, so one that a dead
worker held is answered 503 (with Retry-After) as soon as the supervisor (workers.py) sees the death, one whose
answer does not come within ``--timeout`` is answered 504, and either's place is freed. The other model's requests
are not touched.

How a request is matched to its worker: LitServe's handler puts the request's uid into the server's response buffer,
and the worker loop that takes the request sends back its worker index (LitServe's START message, which sets the
buffer entry's ``worker_id``). The buffer here is a :class:`TrackedBuffer`, which notes the uid in the request's own
context, so the request knows its uid (and, through it, its worker) without LitServe's code changing.
"""

from __future__ import annotations

import asyncio
import contextlib
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from attention_serve.limits import ClientError
from attention_serve.workers import WHAT, WorkerBoard

RETRY_AFTER = "5"  # seconds: about what a worker takes to start and load its model (docs/serve.md)
_UIDS: ContextVar[list[str] | None] = ContextVar("attention_serve_uids", default=None)


class ClientGone(Exception):
    """The request's client closed its connection before the answer began: nothing is sent (abandoned.py)."""


async def _disconnected(receive) -> None:
    """Returns once the client has gone (ASGI's ``http.disconnect``); its body has been read, so uvicorn's receive
    waits until then. Anything else it returns is waited past (a second look no sooner than 0.1 s)."""
    while (await receive())["type"] != "http.disconnect":
        await asyncio.sleep(0.1)


class TrackedBuffer(dict):
    """LitServe's response buffer (uid -> the waiting request's event and answer) that notes each uid added in the
    context of a request this module sent on (see the module doc)."""

    def __setitem__(self, key: str, value: Any) -> None:
        uids = _UIDS.get()
        if uids is not None:
            uids.append(key)
        super().__setitem__(key, value)


@dataclass(eq=False)
class InFlight:
    """One request waiting for its answer from a worker of ``route``."""

    route: str
    uids: list[str] = field(default_factory=list)  # LitServe's uid for it, once its handler submitted it
    task: asyncio.Task | None = None  # LitServe's handler, run as a task so it can be given up
    started: bool = False  # the answer has begun to go out: it is no longer replaced
    lost: str | None = None  # "died" or "timeout": answered here instead


class Waiting:
    """The requests in flight in this HTTP process and the watch on the workers (one asyncio task, started with the
    first request). ``attach`` gives it the server's board and buffer (before LitServe forks the HTTP process, so
    before any request: the Front's arguments are made before the server, hence the two steps)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.board: WorkerBoard | None = None
        self.buffer: TrackedBuffer | None = None
        self.inflight: set[InFlight] = set()
        self._watch: asyncio.Task | None = None

    def attach(self, server) -> None:
        self.board = server.board
        self.buffer = server.response_buffer = TrackedBuffer()

    def refusal(self, route: str) -> ClientError | None:
        """503 when no worker of ``route``'s model can answer now (it stopped and its replacement is loading)."""
        if route in self.board.down():
            return ClientError(503, f"the {WHAT[route]} model's worker is starting (it stopped); retry in a few "
                               "seconds", {"Retry-After": RETRY_AFTER})  # fmt: skip
        return None

    async def answer(self, route: str, call, send, receive=None) -> None:
        """Run ``call(send)`` (LitServe's handler for the request) and wait for it; ClientError 503 when the worker
        holding the request died, 504 after ``timeout`` seconds (the handler is then cancelled, its uid dropped).
        ``receive``: the request's ASGI receive, its body read: a disconnect before the answer begins is
        :class:`ClientGone` (the handler cancelled, its uid dropped and noted for the workers to pass over)."""
        if self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(self._watch_workers())
        entry = InFlight(route)

        async def tracked(message) -> None:
            if message["type"] == "http.response.start":
                entry.started = True
            await send(message)

        token = _UIDS.set(entry.uids)  # the handler's task copies this context: its uid lands in entry.uids
        try:
            entry.task = asyncio.ensure_future(call(tracked))
        finally:
            _UIDS.reset(token)
        listen = asyncio.ensure_future(_disconnected(receive)) if receive is not None else None
        self.inflight.add(entry)
        try:
            deadline = asyncio.get_running_loop().time() + self.timeout
            watched = {entry.task} | ({listen} if listen else set())
            while True:
                left = max(0.0, deadline - asyncio.get_running_loop().time())
                done, _ = await asyncio.wait(watched, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                if entry.task in done:
                    break
                if listen in done:
                    watched.discard(listen)
                    if not entry.started and not entry.lost:
                        entry.lost = "gone"
                        entry.task.cancel()
                        break
                elif not done and entry.started:  # its answer is going out: let it finish
                    await entry.task
                    break
                elif not done:
                    entry.lost = "timeout"
                    entry.task.cancel()
                    break
            if entry.lost:
                with contextlib.suppress(asyncio.CancelledError):
                    await entry.task
                for uid in entry.uids:  # LitServe's handler was cancelled before it removed its entry
                    self.buffer.pop(uid, None)
                    # answered here (503, 504) or gone: a worker that has not taken it passes it over (one answered
                    # 503 because its worker died was computed by the replacement, and again when the client retried)
                    self.board.abandoned.add(uid)
                if entry.lost == "gone":
                    raise ClientGone()
                if entry.lost == "timeout":
                    raise ClientError(504, f"no answer from the {WHAT[route]} model within {self.timeout:g} s "
                                      "(--timeout)")  # fmt: skip
                raise ClientError(503, f"the {WHAT[route]} model's worker stopped; retry",
                                  {"Retry-After": RETRY_AFTER})  # fmt: skip
            entry.task.result()
        except asyncio.CancelledError:  # this request's own task was cancelled (the server stops): so is the handler
            entry.task.cancel()
            raise
        finally:
            if listen is not None:
                listen.cancel()
            self.inflight.discard(entry)

    async def _watch_workers(self) -> None:
        board = self.board
        seen = list(board.generation)
        while True:
            await asyncio.sleep(0.05)
            for slot in board.slots:
                if board.generation[slot.index] != seen[slot.index]:
                    seen[slot.index] = board.generation[slot.index]
                    self._lose(slot)

    def _lose(self, slot) -> None:
        """Answer the requests the dead worker ``slot`` held: those it took, and those not yet taken by any worker
        when no other worker of the model can take them."""
        others = any(self.board.ready[s.index] for s in self.board.slots if s.route == slot.route and s != slot)
        for entry in list(self.inflight):
            if entry.route != slot.route or entry.started or entry.lost or entry.task is None:
                continue
            taken = [self.buffer[u].worker_id for u in entry.uids if u in self.buffer]
            worker = taken[0] if taken else None
            if worker == slot.index or (worker is None and not others):
                entry.lost = "died"
                entry.task.cancel()
