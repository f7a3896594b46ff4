"""attention_serve/idle_loop.py (``attention-serve``'s default, ``--no-idle-wait`` turns it off): an idle worker waits
in one blocking get instead of polling LitServe's queue every millisecond; a batch is gathered as LitServe gathers it
(order, max_batch_size, the stop sentinel); and an idle server uses almost no CPU."""

from __future__ import annotations

import queue
import time
from types import SimpleNamespace

import pytest
from helpers.server import Server
from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_word_model_file
from litserve.loops.base import _SENTINEL_VALUE, _StopLoopError

from attention_serve import idle_loop
from attention_serve.cli import _parser, build_server
from attention_serve.idle_loop import IdleWaitingLoop, SkipsAbandoned


class CountingQueue(queue.Queue):
    """A request queue that counts the calls a worker makes to it (each one is a round trip to LitServe's manager)."""

    calls = 0

    def get(self, block=True, timeout=None):
        self.calls += 1
        return super().get(block, timeout)

    def get_nowait(self):
        self.calls += 1
        return super().get_nowait()


def _api(max_batch_size=2, batch_timeout=0.05):
    return SimpleNamespace(max_batch_size=max_batch_size, batch_timeout=batch_timeout, request_timeout=30, stream=False)


def _gather(q, api):
    loop = IdleWaitingLoop()
    return loop.get_batch_requests(api, q, SimpleNamespace(send=lambda *a, **k: None))


def test_an_idle_worker_asks_once_per_wait_and_a_busy_one_gathers_as_litserve_does(monkeypatch):
    monkeypatch.setattr(idle_loop, "IDLE_WAIT", 0.2)
    loop, q, send = IdleWaitingLoop(), CountingQueue(), SimpleNamespace(send=lambda *a, **k: None)
    t0 = time.monotonic()
    assert loop.get_batch_requests(_api(), q, send) == ([], [])
    assert q.calls == 1 and time.monotonic() - t0 >= 0.19  # LitServe's loop: ~1 call a millisecond
    q.put((0, "a", time.monotonic(), {}))
    assert [p[1] for p in loop.get_batch_requests(_api(), q, send)[0]] == ["a"]
    q.calls = 0
    assert loop.get_batch_requests(_api(batch_timeout=0.05), q, send) == ([], [])  # just served: LitServe's polling
    assert q.calls > 5
    monkeypatch.setattr(idle_loop, "HOT_SECONDS", 0.0)  # a while later: idle again, one get
    q.calls = 0
    assert loop.get_batch_requests(_api(), q, send) == ([], []) and q.calls == 1


def test_a_batch_is_gathered_in_order_up_to_its_size():
    q = CountingQueue()
    now = time.monotonic()
    for i in range(3):
        q.put((0, f"uid{i}", now, {"x": i}))
    payloads, timed_out = _gather(q, _api(max_batch_size=2))
    assert [p[1] for p in payloads] == ["uid0", "uid1"] and timed_out == []
    payloads, _ = _gather(q, _api(max_batch_size=2, batch_timeout=0))  # batch_timeout 0: what is there, no wait
    assert [p[1] for p in payloads] == ["uid2"]


def test_the_stop_sentinel_still_stops_the_loop():
    q = CountingQueue()
    q.put(_SENTINEL_VALUE)
    with pytest.raises(_StopLoopError):
        _gather(q, _api())


def test_a_request_older_than_its_timeout_is_answered_as_timed_out():
    q = CountingQueue()
    q.put((3, "old", time.monotonic() - 60, {}))
    assert _gather(q, _api()) == ([], [(3, "old")])


@pytest.mark.filterwarnings("ignore:The LitServer has both batch and unbatch")  # LitServe's, for batch size 1
@pytest.mark.parametrize(
    ("flags", "loop"),
    [
        ([], "IdleWaitingLoop"),
        (["--no-idle-wait"], "SkippingBatchedLoop"),
        (["--max-batch-size", "1"], "SkippingSingleLoop"),
    ],
)
def test_the_server_waits_when_idle_by_default(flags, loop, tmp_path):
    """The default server's workers run the waiting loop; --no-idle-wait gives LitServe's own (as does batch size 1,
    where LitServe's loop already waits in a blocking get), each passing over abandoned requests (abandoned.py)."""
    model = tiny_model_file(tmp_path / "c.pt")
    args = _parser().parse_args(["--caption-model", str(model), "--text-model", "none", *flags])
    server, _, _ = build_server(args)
    assert [type(api.loop).__name__ for api in server.litapi_connector] == [loop]
    assert all(isinstance(api.loop, SkipsAbandoned) for api in server.litapi_connector)


@pytest.mark.slow
def test_an_idle_server_uses_almost_no_cpu(tmp_path):
    """With LitServe's polling an idle server and its two workers used 48% of a core; by default under 5%."""
    args = ["--caption-model", str(tiny_model_file(tmp_path / "c.pt")), "--text-model",
            str(tiny_word_model_file(tmp_path / "t.pt"))]  # fmt: skip
    srv = Server(args, tmp_path / "server.log")
    try:
        time.sleep(2)  # the workers loaded and waiting
        assert len(srv.group()) >= 3  # the server, its workers (and LitServe's manager and HTTP processes)
        before = srv.cpu_seconds()
        time.sleep(10)
        used = srv.cpu_seconds() - before
        assert used < 0.5, f"{used:.2f} CPU-seconds in 10 idle seconds"
    finally:
        srv.stop()
