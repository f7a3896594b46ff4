"""attention-serve starts and stops as a service manager needs, against real servers with a tiny translator whose
worker takes SERVE_SLOW seconds a batch (tests/helpers/faulty_serve.py), so requests are in flight when the signal
comes: SIGTERM or SIGINT sent to the whole process group (systemd's stop, Ctrl-C) or SIGINT to the main process alone
(Docker's STOPSIGNAL) answers the requests in flight and exits 0 with nothing left running; requests still running
when --grace is over get a JSON 503; a worker that cannot load its model ends the start in one line and exit 1
instead of a server that never opens its port; the "serving" line comes once the port is open. No traceback."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.server import Server, free_port, group_pids
from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_word_model_file
from helpers.waiting import until

# -m long (out of the default run; CI runs it): each test starts and stops a real server (~7-10 s each)
pytestmark = pytest.mark.long

SCRIPT = str(Path(__file__).parent.parent / "helpers" / "faulty_serve.py")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    return {"caption": tiny_model_file(folder / "caption.pt"), "text": tiny_word_model_file(folder / "text.pt")}


@pytest.fixture
def serve(models, tmp_path):
    """Start a server with the tiny translator (``serve(*args, slow=S)``); whatever a test leaves running, a failed
    one too, is killed after it."""
    started: list[Server] = []

    def start(*args: str, slow: float = 1.5) -> Server:
        args = [SCRIPT, "--caption-model", "none", "--text-model", str(models["text"]), *args]
        started.append(Server(args, tmp_path / "server.log", env={"SERVE_SLOW": str(slow)}, command=sys.executable))
        return started[-1]

    yield start
    for server in started:
        server.stop(signal.SIGKILL, group=True)
        _end_group(server.proc.pid)


def _end_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def _asking(server: Server, clients: int) -> tuple[list, list[threading.Thread]]:
    """``clients`` translations posted at once on threads; their (status, headers, body) land in the list."""
    answers: list = []

    def ask() -> None:
        try:
            answers.append(server.post_json("/translate", {"sentences": ["ein mann", "ein hund"]}, timeout=60))
        except OSError as err:  # no answer at all: what a stop must never do to a request it took
            answers.append((0, {}, repr(err)))

    threads = [threading.Thread(target=ask) for _ in range(clients)]
    for t in threads:
        t.start()
    return answers, threads


def _left(group: int) -> list[str]:
    """The processes of the server's group still running (zombies not counted)."""

    def running(pid: str) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    return [pid for pid in group_pids(group) if running(pid)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_whole_group_answers_the_requests_in_flight(serve, sig):
    """SIGTERM to the group (systemd's default, ``kill -- -PGID``) killed the workers and LitServe's manager: every
    request in flight got a plain-text 500 after --grace and the supervisor thread a traceback. Now it is answered as
    Ctrl-C's SIGINT to the group is."""
    server = serve()
    answers, threads = _asking(server, 4)
    time.sleep(0.7)  # taken by the worker, which sleeps 1.5 s before it translates
    start = time.monotonic()
    code = server.stop(sig, group=True)
    took = time.monotonic() - start
    for t in threads:
        t.join(60)
    log = server.log.read_text()
    assert code == 0 and took < 8, (code, took, log[-2000:])
    assert [a[0] for a in answers] == [200] * 4, answers
    assert "Traceback" not in log and log.rstrip().endswith("attention-serve: stopped"), log
    left = until(lambda: _left(server.proc.pid), lambda left: not left, 15)
    assert not left, left


def test_a_sigkilled_main_process_leaves_nothing_running_and_the_port_free(serve):
    """kill -9 (or the out-of-memory killer) on the main process left the template, LitServe's manager and HTTP
    process, the resource tracker and the workers running, answering on the port with nothing supervising them; a
    restart failed "Address already in use". Each now ends with its parent (worker_start.end_with_parent)."""
    server = serve()
    answers, threads = _asking(server, 2)  # requests in flight too: the worker holds them
    time.sleep(0.3)
    assert len(_left(server.proc.pid)) >= 5  # main, template, manager, HTTP process, resource tracker, worker
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(10)  # reaped: its children are the orphans
    left = until(lambda: _left(server.proc.pid), lambda left: not left, 8)
    assert not left, [Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in left]
    with socket.socket() as sock:  # the port is free for a restart (which sets SO_REUSEADDR, as uvicorn does)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", server.port))
        sock.listen()
    for t in threads:
        t.join(60)


def test_sigint_to_the_main_process_alone_stops_it_as_sigterm_does(serve):
    """``kill -INT PID`` (Docker's STOPSIGNAL SIGINT) did not reach the HTTP process: the server took new work for
    --grace + 2 s, then ended (an idle one too: 12.4 s). Also here: the "serving" line comes once the port is open (it
    came ~4 s before)."""
    server = serve()
    log = server.log
    answers, threads = _asking(server, 2)
    time.sleep(0.7)
    start = time.monotonic()
    server.proc.send_signal(signal.SIGINT)
    refused = until(lambda: _connects(server.port), lambda up: not up, 3, every=0.05)
    code = server.proc.wait(30)
    took = time.monotonic() - start
    server.stop()
    for t in threads:
        t.join(60)
    assert code == 0 and took < 6, (code, took, log.read_text()[-2000:])
    assert refused is False  # no new work once the stop began
    assert [a[0] for a in answers] == [200, 200], answers
    assert "Traceback" not in log.read_text() and log.read_text().rstrip().endswith("attention-serve: stopped")
    assert "serving the translator" in log.read_text() and not server.announced_early


def test_a_connection_while_the_stop_answers_the_requests_in_flight_is_refused_at_once(serve):
    """The main process and LitServe's manager held the port's socket after the HTTP process closed its copy: the
    kernel took connections nobody accepted, and each (/health too) hung until the exit, then was reset."""
    server = serve(slow=4)
    answers, threads = _asking(server, 1)
    time.sleep(0.7)  # taken by the worker: the stop waits ~3 s for it
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    start = time.monotonic()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
    assert time.monotonic() - start < 0.5
    assert server.proc.poll() is None  # still answering the request in flight
    assert server.proc.wait(30) == 0
    for t in threads:
        t.join(60)
    assert [a[0] for a in answers] == [200], answers
    assert "Traceback" not in server.log.read_text()


def test_requests_still_running_when_the_grace_is_over_get_a_json_503(serve):
    """uvicorn cancels them: they got a plain-text 500 "Internal Server Error" and a traceback each in the log."""
    server = serve("--grace", "1", slow=6)
    answers, threads = _asking(server, 2)
    time.sleep(0.7)
    code = server.stop()
    for t in threads:
        t.join(60)
    log = server.log.read_text()
    assert code == 0, log[-2000:]
    for status, head, body in answers:
        assert status == 503 and head["retry-after"] == "5", (status, body)
        assert body["status"] == 503 and "not answered within its --grace" in body["error"], body
    assert log.count("503 POST /translate: the server is stopping") == 2, log
    assert "Traceback" not in log and "Cancel" not in log and "ERROR" not in log, log


def test_max_batch_size_1_and_a_request_timed_out_in_the_queue_log_only_the_servers_lines(serve):
    """--max-batch-size 1 printed LitServe's UserWarning (the size "was not set") with its source path, and a request
    found too old in the queue a second ERROR line in LitServe's own format beside the server's 504."""
    server = serve("--max-batch-size", "1", "--timeout", "1", slow=2)
    answers, threads = _asking(server, 2)  # the first holds the worker 2 s; the second waits in its queue
    for t in threads:
        t.join(60)
    assert [a[0] for a in answers] == [504, 504], answers
    time.sleep(2.5)  # the worker takes the second once the first is done, and finds it too old
    assert server.stop() == 0
    lines = server.log.read_text().splitlines()
    # any line naming 504 but the server's address, whose random port may hold the digits (localhost:50439)
    assert [line for line in lines if "504" in re.sub(r"://[^/ ]+", "", line)] == [
        "attention-serve: 504 POST /translate: no answer from the translation model within 1 s (--timeout)"
    ] * 2
    assert all(line.startswith("attention-serve: ") for line in lines), lines


def test_a_worker_that_cannot_load_its_model_ends_the_start_in_one_line(models, tmp_path):
    """As --accelerator cuda did on a machine without a usable GPU: the worker said why and ended, and the server
    waited for it for ever, its port never open. Now the start ends with exit 1; the other model's worker (loaded
    or not) is ended with it."""
    log = tmp_path / "server.log"
    env = dict(os.environ, SERVE_FAIL_LOAD="translate")
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, SCRIPT, "--caption-model", str(models["caption"]), "--text-model",
                                 str(models["text"]), "--port", str(free_port())], stderr=err,
                                stdout=subprocess.DEVNULL, env=env, start_new_session=True)  # fmt: skip
    try:
        code = proc.wait(90)
    finally:
        if proc.poll() is None:
            _end_group(proc.pid)
            proc.wait()
    lines = log.read_text().strip().splitlines()
    assert code == 1 and lines == [
        "attention-serve: a translate worker cannot load its model: a test's model that cannot load on cpu",
        "attention-serve: stopped (exit 1): the translation model's worker ended before its model was loaded (exit "
        "code 1)",
    ], lines
    left = until(lambda: _left(proc.pid), lambda left: not left, 15)
    assert not left, left


def _connects(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True
