"""A request whose client goes away before its answer (its own timeout, a closed tab) frees its --max-queue place at
once, and a worker that has not taken it yet passes it over (attention_serve/abandoned.py): the requests were computed
in turn and held their places until then (80 abandoned: the next client got 503 busy)."""

from __future__ import annotations

import json
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
from helpers.server import Server
from helpers.tiny_translator import tiny_word_model_file
from helpers.waiting import until

# -m long (out of the default run; CI runs it): each test starts a real server (~7-10 s)
pytestmark = pytest.mark.long

SCRIPT = str(Path(__file__).parent.parent / "helpers" / "faulty_serve.py")


def _posted(port: int, sentence: str) -> socket.socket:
    """A translation posted on its own connection, its answer not read."""
    body = json.dumps({"sentences": [sentence]}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /translate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)  # fmt: skip
    return s


@pytest.mark.parametrize("batch", ["1", "4"])
def test_requests_abandoned_before_a_worker_took_them_are_not_computed_and_free_their_places(tmp_path, batch):
    text = tiny_word_model_file(tmp_path / "text.pt")
    computed = tmp_path / "computed.txt"
    server = Server([SCRIPT, "--caption-model", "none", "--text-model", str(text), "--max-queue", "3",
                     "--max-batch-size", batch], tmp_path / "server.log", command=sys.executable,
                    env={"SERVE_SLOW": "2", "SERVE_COMPUTED": str(computed)})  # fmt: skip
    try:
        first = _posted(server.port, "ein mann")
        until(lambda: computed.exists(), bool, 10, every=0.02)  # the worker has taken it: 2 s to compute
        gone = [_posted(server.port, f"der hund {n}") for n in range(2)]  # queued behind it
        time.sleep(0.3)
        for s in [first, *gone]:
            s.close()  # all three clients give up
        time.sleep(0.5)
        status, _, body = server.post_json("/translate", {"sentences": ["eine frau"]}, timeout=30)
        assert status == 200, body  # was 503: the three held every place of --max-queue 3
        log = server.log.read_text()
        assert log.count("499 POST /translate: the client closed the connection before its answer; dropped") == 3, log
        batches = computed.read_text().splitlines()
        assert "der hund" not in computed.read_text(), batches  # passed over: never computed
        assert len(batches) == 2 and "ein mann" in batches[0] and "eine frau" in batches[1], batches
        assert server.stop(signal.SIGTERM) == 0
        assert "Traceback" not in server.log.read_text()
    finally:
        server.stop(signal.SIGKILL, group=True)
