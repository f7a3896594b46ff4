"""How attention-serve's front reads a request body (front.read_body): a body that keeps arriving is read however
slowly (within 10 x --read-timeout), one that stops is a 408, one refused by its declared size is a 413 even when it
drains slowly, and a client gone mid-body is no logged 400 (front.ClientGone: the 499 line)."""

from __future__ import annotations

import asyncio

import pytest

from attention_serve.front import ClientGone, read_body
from attention_serve.limits import ClientError


def _arriving(chunks: list[bytes], every: float, then: str = "end"):
    """An ASGI receive giving ``chunks`` one every ``every`` s; then the body's end, a stall or a disconnect."""
    left = list(chunks)

    async def receive():
        await asyncio.sleep(every)
        if left:
            chunk = left.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(left) or then != "end"}
        if then == "gone":
            return {"type": "http.disconnect"}
        await asyncio.sleep(3600)  # stalled

    return receive


def _read(receive, limit=10_000, declared=None, timeout=0.2) -> bytes:
    return asyncio.run(read_body(receive, limit, declared, "--max-upload-mb", timeout, expect=False))


def test_a_body_arriving_slowly_but_steadily_is_read_past_the_timeout():
    # 8 chunks 0.1 s apart: 0.8 s in all, four times the 0.2 s timeout (it bounded the whole body: a 408)
    assert _read(_arriving([b"x" * 100] * 8, 0.1)) == b"x" * 800


def test_a_body_that_stops_or_trickles_past_ten_timeouts_is_a_408():
    with pytest.raises(ClientError) as err:
        _read(_arriving([b"x"] * 2, 0.01, then="stall"))
    assert err.value.status == 408 and err.value.message == "the body stopped arriving: nothing for 0.2 s"
    with pytest.raises(ClientError) as err:  # a chunk every 0.01 s: never idle near 0.15 s (a loaded machine's
        _read(_arriving([b"x"] * 1000, 0.01), timeout=0.15)  # hiccups aside), but 10 s in all: over 1.5 s
    assert err.value.status == 408 and "took more than 1.5 s to arrive (10 x --read-timeout)" in err.value.message


def test_an_upload_over_its_declared_limit_is_a_413_even_when_it_drains_slowly():
    with pytest.raises(ClientError) as err:  # it was a 408 once the drain outlasted the timeout: "retry"
        _read(_arriving([b"x" * 100] * 3, 0.05, then="stall"), limit=50, declared=30_000)
    assert err.value.status == 413 and "(--max-upload-mb)" in err.value.message
    assert err.value.headers == {"Connection": "close"}  # its rest, not drained, is no next request


def test_a_client_gone_mid_body_is_client_gone_not_a_400():
    with pytest.raises(ClientGone):
        _read(_arriving([b"x"] * 2, 0.01, then="gone"))
