"""The HTTP process's front (attention_serve/front.py) on its own, without a server: which paths reach the routes, the
Host header, the JSON a request may hold, and what a learned position table cannot hold (refused before a worker is
asked). tests/serve/test_api.py runs the same against a real server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from attention_serve import front
from attention_serve.front import PATHS, Front, _json, more_values
from attention_serve.limits import LOOPBACK_NAMES, ClientError, Limits, host_allowed, host_name

KEY = "s3cret-key-123"


def _call(path: str, host: bytes = b"localhost:8000", key: str | None = None) -> tuple[int, dict, list[str]]:
    """One GET through a Front whose app records what reaches it: (status, JSON answer, paths the app saw)."""
    reached: list[str] = []

    async def app(scope, receive, send):
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    limits = Limits(api_key=KEY, allowed_hosts=LOOPBACK_NAMES)
    headers = [(b"host", host)] + ([(b"x-api-key", key.encode())] if key else [])
    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": headers}
    waiting = SimpleNamespace(board=SimpleNamespace(state=lambda pids: {}))  # /info's worker states: none here
    asyncio.run(Front(app, None, None, limits, b"page", waiting)(scope, receive, send))
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return status, json.loads(body), reached


def test_starlette_routes_a_path_with_a_final_newline_and_the_front_never_lets_it_reach_a_route():
    """The cause, as Starlette has it: a route's regex ends in "$", which also matches before a final newline, so
    "/info\\n" (sent as /info%0A) is /info's route. The front compared paths exactly, so such a request skipped the
    key and every limit. Only the exact paths reach the routes now; every other is a 404 in the front."""
    from starlette.routing import Match, Route

    route = Route("/info", lambda request: None)
    scope = {"type": "http", "method": "GET", "path": "/info\n", "root_path": ""}
    assert route.matches(scope)[0] == Match.FULL  # what made the bypass
    for path in ("/info\n", "/info\r\n", "/info\x00", "/info/", "//info", "/info ", "/caption\n", "/translate\n",
                 "/health\n", "/\n", "/openapi.json\n"):  # fmt: skip
        status, answer, reached = _call(path, key=KEY)
        assert status == 404 and answer == {"error": "Not Found", "status": 404} and not reached, path
    status, answer, reached = _call("/info")
    assert status == 401 and "API key" in answer["error"] and not reached  # the key is asked for
    assert _call("/info", key=KEY)[2] == ["/info"]  # with it, on to the route
    assert {"/", "/caption", "/translate", "/info", "/health", "/openapi.json"} == PATHS


def test_the_host_header_must_name_this_machine_when_bound_to_loopback():
    """DNS rebinding: a web page whose name an attacker points at 127.0.0.1 sends its own name as Host."""
    assert host_name("LocalHost:8000") == "localhost" and host_name("[::1]:8000") == "[::1]"
    assert host_name("127.0.0.1") == "127.0.0.1" and host_name("localhost.") == "localhost"
    assert host_name("example.com:") == "example.com" and host_name("[::1]") == "[::1]"
    assert host_allowed([(b"host", b"localhost:1")], LOOPBACK_NAMES)
    assert not host_allowed([(b"host", b"attacker.example")], LOOPBACK_NAMES)
    assert not host_allowed([(b"host", b"localhost"), (b"host", b"attacker.example")], LOOPBACK_NAMES)  # both asked
    assert host_allowed([], LOOPBACK_NAMES)  # HTTP/1.0 without one: no browser sends that
    assert host_allowed([(b"host", b"attacker.example")], None)  # bound to every address, no names given
    status, answer, reached = _call("/health", host=b"attacker.example:8000")
    assert status == 400 and "not a name this server answers to" in answer["error"] and not reached
    status, answer, reached = _call("/info", host=b"127.0.0.1:8000", key=KEY)
    assert status == 200 and reached == ["/info"]


def test_allowed_host_adds_names_and_the_binding_chooses_the_default():
    from attention_serve.cli import _allowed_hosts

    assert _allowed_hosts("127.0.0.1", []) == LOOPBACK_NAMES
    assert _allowed_hosts("127.0.0.1", ["My.Host:8000"]) == LOOPBACK_NAMES | {"my.host"}
    assert _allowed_hosts("0.0.0.0", []) is None and _allowed_hosts("::", []) is None  # reached by any name
    assert _allowed_hosts("0.0.0.0", ["serve.example"]) == LOOPBACK_NAMES | {"serve.example"}
    assert _allowed_hosts("127.0.0.1", ["*"]) is None


class _Key(str):
    """A JSON key that counts the comparisons and hashes made of it."""

    work = 0

    def __eq__(self, other):
        _Key.work += 1
        return str.__eq__(self, other)

    def __hash__(self):
        _Key.work += 1
        return str.__hash__(self)


def test_a_key_given_twice_is_found_with_work_linear_in_the_keys():
    """The check counted each key's copies in the list: n x n comparisons (40,000 keys held the event loop 27 s)."""
    n = 2000
    _Key.work = 0
    assert front._once([(_Key(f"k{i}"), i) for i in range(n)]) == {f"k{i}": i for i in range(n)}
    assert _Key.work <= 3 * n  # a hash a key (and a comparison where two hashes meet), not n comparisons
    _Key.work = 0
    with pytest.raises(ClientError, match='the key "k5" is given twice'):
        front._once([(_Key(f"k{i}"), i) for i in range(n)] + [(_Key("k5"), 0)])
    assert _Key.work <= 6 * n


def test_a_body_of_40000_keys_is_refused_naming_the_limit_before_it_is_parsed(monkeypatch):
    parsed = []
    monkeypatch.setattr(front.json, "loads", lambda *a, **k: parsed.append(a))
    body = ("{" + ",".join(f'"{i:x}": 0' for i in range(40_000)) + "}").encode()  # 356 KB
    with pytest.raises(ClientError) as err:
        _json(body, Limits().json_values)
    assert err.value.status == 413 and err.value.message.startswith("the JSON holds more than 1,024 values")
    assert not parsed  # refused from its commas, not parsed first
    many = json.dumps({"sentences": ["ein hund"] * 2000}).encode()  # items of a list count as members do
    with pytest.raises(ClientError, match="at most 1,024"):
        _json(many, 1024)
    assert len(parsed) == 0


def test_commas_in_text_and_a_photos_base64_are_no_values():
    """A request as clients send it: sentences with commas, a photo in base64, nested options: never refused."""
    sentences = {"sentences": ["Ein Hund, eine Katze, [ein Vogel] {und} ein Pferd: alle rennen, schnell."] * 64,
                 "given": "a dog, a cat, a bird", "beam_size": 5}  # fmt: skip
    assert _json(json.dumps(sentences).encode(), Limits().json_values) == sentences
    assert not more_values(json.dumps({"image": "QUJD" * 100_000, "beam_size": 2}), 1024)
    assert not more_values("[" * 100_000 + "]" * 100_000, 1024)  # deep, not many: the parser's own limit refuses it
    assert more_values("[" + ",".join(["1"] * 1025) + "]", 1024) and not more_values(
        "[" + ",".join(["1"] * 1024) + "]", 1024
    )
    assert more_values('["a,b",' + ",".join(['""'] * 1024) + "]", 1024)
    assert not more_values('["' + "," * 5000 + '"]', 1024)  # commas in a string are text
    assert more_values('""' * 5000 + ",", 1)  # strings without commas between them: not valid, and over at once
    assert _json(b'\xef\xbb\xbf{"text": "ein"}', 1024) == {"text": "ein"}  # a UTF-8 BOM, as before
    with pytest.raises(ClientError, match="not UTF-8"):
        _json('{"text": "ein"}'.encode("utf-16"), 1024)


def test_a_large_json_body_is_parsed_in_a_thread(monkeypatch):
    """A /caption upload may be 20 MiB of JSON: parsed in a thread (the parser holds Python's lock while it runs, so
    this bounds the pause rather than removing it; the count before it is linear: the test below)."""
    threaded = []

    async def to_thread(fn, *args):
        threaded.append(fn)
        return fn(*args)

    monkeypatch.setattr(front.asyncio, "to_thread", to_thread)
    small = json.dumps({"text": "ein"}).encode()
    large = json.dumps({"image": "QUJD" * 50_000}).encode()
    assert asyncio.run(front._parsed(small, 1024)) == {"text": "ein"} and threaded == []
    assert asyncio.run(front._parsed(large, 1024))["image"].startswith("QUJD") and threaded == [_json]


@pytest.mark.long
def test_the_value_count_is_linear_in_the_body_even_for_a_string_never_closed():
    """The count matched each string from every later quote when one was never closed: an 81 KB body held the event
    loop 20 s, and the 400 KB one here would take hours. A guard against that hang (the subprocess's timeout), not a
    timing: linear, it takes milliseconds."""
    code = textwrap.dedent("""
        from attention_serve.front import more_values
        never_closed = '["' + '\\\\"' * 200_000 + ',' * 1100  # its commas are text: not counted
        many = '[' + '"a",' * 2000 + '"a"]'
        in_strings = '["a,b"' + ',1' * 1023 + ']'  # 1,024 values, not more: the comma in the string is text
        print(more_values(never_closed, 1024), more_values(many, 1024), more_values(in_strings, 1024))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "True", "False"], done.stderr


def _post_translate(text, body: dict) -> tuple[int, dict, list[str]]:
    """One POST /translate of ``body`` through a Front serving ``text`` (models.load_text): (status, JSON answer,
    the paths a model worker was asked for: none when the front refused the request itself)."""
    asked: list[str] = []

    def refusal(path):  # its worker is up
        asked.append(path)

    async def answer(path, call, send, receive=None):  # what a worker would answer
        asked.append(path)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    data = json.dumps(body).encode()

    async def receive():
        return {"type": "http.request", "body": data, "more_body": False}

    headers = [(b"host", b"localhost:8000"), (b"content-type", b"application/json"),
               (b"content-length", str(len(data)).encode())]  # fmt: skip
    scope = {"type": "http", "method": "POST", "path": "/translate", "query_string": b"", "headers": headers}
    waiting = SimpleNamespace(refusal=refusal, answer=answer)
    asyncio.run(Front(None, None, text, Limits(allowed_hosts=LOOPBACK_NAMES), b"page", waiting)(scope, receive, send))
    return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:])), asked


def test_the_front_refuses_what_a_learned_position_table_cannot_hold_before_a_worker_is_asked(tmp_path):
    """The front hands the served model's learned positions (models.load_text's "positions") to check_work: a
    sentence past the table is a 413, a max_len past it a 422, in the Translator's words; without them the request
    went on to a worker, whose model cannot run it."""
    from helpers.tiny_translator import learned_positions_model_file

    from attention_serve.models import load_text
    from text_attn.translation.translator import Translator

    path = learned_positions_model_file(tmp_path / "m.pt")
    text, tr = load_text(path), Translator.load(path)
    assert _post_translate(text, {"text": "ma " * 8}) == (
        413, {"error": f"the sentence: {tr.length_error(8)}", "status": 413}, []
    )  # fmt: skip
    assert _post_translate(text, {"text": "ma", "max_len": 8}) == (
        422, {"error": tr.length_error(max_len=8), "status": 422}, []
    )  # fmt: skip
    assert _post_translate(text, {"text": "ma " * 7, "max_len": 7})[::2] == (200, ["/translate", "/translate"])
