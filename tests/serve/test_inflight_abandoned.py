"""A request the HTTP process answers itself (504 after --timeout, 503 when its worker died) or whose client went
away is noted for the workers to pass over (inflight.Waiting.answer, abandoned.py): one answered 503 "worker stopped;
retry" was computed by the replacement worker all the same, and again when the client retried."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from attention_serve.inflight import ClientGone, Waiting
from attention_serve.limits import ClientError
from attention_serve.workers import Slot, WorkerBoard


def _waiting(timeout: float = 5.0) -> Waiting:
    waiting = Waiting(timeout)
    board = WorkerBoard([Slot(0, "/translate", 0)])
    board.ready[0] = 1
    waiting.attach(SimpleNamespace(board=board, response_buffer=None))
    return waiting


def _handler(waiting: Waiting, uid: str):
    """LitServe's handler as seen from here: the request's uid put in the response buffer, then a wait for ever."""

    async def call(send) -> None:
        waiting.buffer[uid] = SimpleNamespace(worker_id=None)
        await asyncio.sleep(3600)

    return call


def _answered(waiting: Waiting, uid: str, receive=None, during=None):
    async def run():
        task = asyncio.ensure_future(waiting.answer("/translate", _handler(waiting, uid), _send, receive))
        await asyncio.sleep(0.1)
        if during is not None:
            during()
        return await task

    return asyncio.run(run())


async def _send(message) -> None:
    pass


def test_a_request_timed_out_is_noted_for_the_workers():
    waiting, uid = _waiting(timeout=0.2), str(uuid.uuid4())
    with pytest.raises(ClientError) as err:
        _answered(waiting, uid)
    assert err.value.status == 504 and waiting.board.abandoned.has(uid) and uid not in waiting.buffer


def test_a_request_whose_worker_died_is_noted_for_the_replacement():
    waiting, uid = _waiting(), str(uuid.uuid4())

    def died() -> None:
        waiting.board.generation[0] += 1  # the supervisor saw the death

    with pytest.raises(ClientError) as err:
        _answered(waiting, uid, during=died)
    assert err.value.status == 503 and "worker stopped" in err.value.message
    assert waiting.board.abandoned.has(uid)


def test_a_request_whose_client_went_away_is_noted_and_an_answered_one_is_not():
    waiting, uid = _waiting(), str(uuid.uuid4())

    async def gone():
        await asyncio.sleep(0.2)
        return {"type": "http.disconnect"}

    with pytest.raises(ClientGone):
        _answered(waiting, uid, receive=gone)
    assert waiting.board.abandoned.has(uid)
    answered, other = _waiting(), str(uuid.uuid4())

    async def call(send) -> None:
        answered.buffer[other] = SimpleNamespace(worker_id=None)
        await send({"type": "http.response.start", "status": 200, "headers": []})

    asyncio.run(answered.answer("/translate", call, _send))
    assert not answered.board.abandoned.has(other)
