"""The ring of abandoned request ids and the worker queue that passes over them (attention_serve/abandoned.py)."""

from __future__ import annotations

import queue
import time
import uuid

import pytest

from attention_serve.abandoned import RING, Abandoned, SkippingQueue


def _request(uid: str, payload: str = "x") -> tuple:
    return (0, uid, time.monotonic(), payload)  # LitServe's (response_queue_id, uid, timestamp, payload)


def test_ids_noted_are_known_until_the_ring_wraps_past_them():
    ids = [str(uuid.uuid4()) for _ in range(RING + 3)]
    ring = Abandoned()
    assert not ring.has(ids[0])  # nothing noted: no copy made
    for uid in ids[:5]:
        ring.add(uid)
    assert all(ring.has(uid) for uid in ids[:5]) and not ring.has(ids[5])
    for uid in ids[5:]:
        ring.add(uid)
    assert [ring.has(uid) for uid in ids[:3]] == [False] * 3  # overwritten by the last three
    assert all(ring.has(uid) for uid in ids[3:])


def test_an_id_that_is_no_uuid_is_never_noted_nor_dropped():
    ring = Abandoned()
    ring.add("not-a-uuid")
    assert ring.count.value == 0 and not ring.has("not-a-uuid")


def test_the_queue_passes_over_noted_requests_and_lets_everything_else_through():
    ring, inner = Abandoned(), queue.Queue()
    keep, drop = str(uuid.uuid4()), str(uuid.uuid4())
    ring.add(drop)
    for item in (_request(drop), _request(keep), "STOP", _request(drop)):
        inner.put(item)
    q = SkippingQueue(inner, ring)
    assert q.get(timeout=1)[1] == keep
    assert q.get_nowait() == "STOP"  # the stop's sentinel (and anything not a request) passes
    with pytest.raises(queue.Empty):
        q.get_nowait()  # the last one was noted
    inner.put(_request(drop))
    start = time.monotonic()
    with pytest.raises(queue.Empty):
        q.get(timeout=0.2)  # a noted request does not restart the wait: the timeout holds
    assert time.monotonic() - start < 1
    assert q.qsize() == 0  # other calls reach the queue itself
