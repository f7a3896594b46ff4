"""The header deadline (attention_serve/header_deadline.py) against uvicorn itself, in this process, with a tiny ASGI
app: partial headers are a 408 after the timeout, a connection that sent nothing is closed quietly, a kept-alive
connection gets the deadline again after each answer, and a request whose headers are complete is never cut, however
long its answer takes (pipelined requests too)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest
import uvicorn

from attention_serve.header_deadline import answer_408, protocol

TIMEOUT = 0.4  # seconds; h11 (uvicorn's other parser, where httptools is missing) under -m long


async def app(scope, receive, send) -> None:  # answers after ?sleep=S seconds
    if scope["type"] != "http":
        return
    if scope["path"] == "/refuse":  # answered before its body is read, as the front refuses a missing API key
        await send({"type": "http.response.start", "status": 401, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"no"})
        return
    sleep = float(scope["query_string"].decode().partition("=")[2] or 0)
    await asyncio.sleep(sleep)
    body = json.dumps({"path": scope["path"]}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module", params=["httptools", pytest.param("h11", marks=pytest.mark.long)])
def port(request):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    # keep-alive longer than the deadline: the deadline is the one seen
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=free,
        log_level="critical",
        lifespan="off",
        http=protocol(TIMEOUT, request.param),
        timeout_keep_alive=30,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield free
    server.should_exit = True
    thread.join(10)


def _read_all(s: socket.socket) -> bytes:
    s.settimeout(10)
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def test_partial_headers_are_a_408_in_json_after_the_timeout(port, capsys):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n")
        start = time.monotonic()
        reply = _read_all(s)
        took = time.monotonic() - start
    assert reply == answer_408(TIMEOUT) and TIMEOUT - 0.1 < took < TIMEOUT + 3
    head, _, body = reply.partition(b"\r\n\r\n")
    assert json.loads(body) == {"error": "the request's headers did not arrive within 0.4 s", "status": 408}
    assert b"connection: close" in head and b"x-content-type-options: nosniff" in head
    said = "408 from 127.0.0.1: the request's headers did not arrive within 0.4 s (--read-timeout)"
    assert said in capsys.readouterr().err


def test_a_connection_that_sends_nothing_is_closed_quietly(port, capsys):
    with socket.create_connection(("127.0.0.1", port)) as s:
        start = time.monotonic()
        assert _read_all(s) == b""
        assert TIMEOUT - 0.1 < time.monotonic() - start < TIMEOUT + 3
    assert "408" not in capsys.readouterr().err


def test_a_slow_answer_is_never_cut_and_a_kept_alive_connection_gets_the_deadline_again(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(10)
        s.sendall(b"GET /slow?sleep=1.0 HTTP/1.1\r\nHost: x\r\n\r\n")  # 1 s: over the deadline
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200") and b'{"path": "/slow"}' in first
        time.sleep(TIMEOUT / 2)
        s.sendall(b"GET /b HTTP/1.1\r\n")  # the next request's headers, cut off
        start = time.monotonic()
        assert _read_all(s) == answer_408(TIMEOUT)
        assert time.monotonic() - start < TIMEOUT + 3


def test_pipelined_requests_are_all_answered_past_the_deadline(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(
            b"GET /one?sleep=0.5 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /two?sleep=0.5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        reply = _read_all(s)
    assert reply.count(b"HTTP/1.1 200") == 2 and b"/one" in reply and b"/two" in reply, reply


def test_a_refused_requests_body_still_arriving_is_not_taken_for_the_next_headers(port, capsys):
    """Answered before its body was read (a 401 for a missing key, a 503 busy), an upload slower than the deadline was
    cut off with a 408 for "headers" that were its own body; the client's write failed and it never read the 401."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\n")
        for _ in range(6):  # 3000 bytes over 6 x 0.15 s = 0.9 s: longer than the deadline, never idle as long
            time.sleep(0.15)
            s.sendall(b"x" * 500)
        s.settimeout(10)
        reply = s.recv(65536)
        assert reply.startswith(b"HTTP/1.1 401") and b"408" not in reply
    with socket.create_connection(("127.0.0.1", port)) as s:  # its body stopped coming: closed, no 408
        s.sendall(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 3000\r\n\r\nxx")
        reply = _read_all(s)
        assert reply.startswith(b"HTTP/1.1 401") and b"408" not in reply
    assert "408" not in capsys.readouterr().err


@pytest.mark.long  # ten deadlines of trickling: ~5 s
def test_a_refused_requests_body_trickled_on_is_cut_off_within_ten_deadlines(port):
    """A byte every 0.7 deadlines after the answer re-armed the deadline for ever: the socket held (review)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        start, closed = time.monotonic(), False
        while time.monotonic() - start < 30 * TIMEOUT:
            time.sleep(0.7 * TIMEOUT)
            try:
                s.sendall(b"x")
            except OSError:  # reset or broken pipe: closed by the server
                closed = True
                break
        if not closed:  # the server's close seen on a read
            s.settimeout(1)
            try:
                closed = s.recv(65536).startswith(b"HTTP/1.1 401") and s.recv(65536) == b""
            except TimeoutError:  # still open
                closed = False
            except OSError:  # reset
                closed = True
        assert closed and time.monotonic() - start < 15 * TIMEOUT
