"""attention-serve says what `translate` and `caption` say of a length penalty at beam size 1: it changes no output
(one hypothesis, nothing to rank), only the score. /translate and /caption took it and answered as if it had been
used; now their answer's ``notes`` hold the commands' line, in the server's option names. In process: the HTTP
process's checks (front.Front._payload) make the payload, and the worker's own API answers it (tiny random models)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest
from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_word_model_file

from attention_serve.apis import CaptionAPI, TranslateAPI
from attention_serve.front import Front
from attention_serve.limits import Limits
from attention_serve.models import load_caption, load_text
from attention_serve.openapi import CAPTION_ANSWER, TRANSLATE_ANSWER

PHOTO = (Path(__file__).parent.parent / "fixtures" / "images" / "coffee.png").read_bytes()
NOTE = "length_penalty ranks the hypotheses of a beam; beam_size 1 keeps one hypothesis: it changes no output, only the scores reported"  # noqa: E501 - the line as a client reads it


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(the Front's checks, the translate worker, the caption worker) over tiny random models."""
    folder = tmp_path_factory.mktemp("models")
    text, caption = tiny_word_model_file(folder / "text.pt"), tiny_model_file(folder / "caption.pt")
    front = Front(None, load_caption(caption), load_text(text), Limits(), b"", None)
    translate = TranslateAPI(text, "text.pt", 1, 4, 0.01, idle_wait=False)  # 1 thread, batches of 4
    apis = translate, CaptionAPI(caption, "caption.pt", 1, 4, 0.01, idle_wait=False)
    for api in apis:
        api.load("cpu")
    return front, *apis


def _answer(served, path: str, options: dict, query: str = "") -> dict:
    """One request to ``path`` as the server handles it: checked and made a payload by the HTTP process, sent to the
    worker as JSON, answered by it. /translate's ``options`` in its JSON body; /caption's with the photo as JSON."""
    front, translate, caption = served
    if path == "/translate":
        api, body = translate, json.dumps({"text": "ein mann", **options}).encode()
    else:
        api, body = caption, json.dumps({"image": base64.b64encode(PHOTO).decode(), **options}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "method": "POST", "path": path, "query_string": query.encode(), "headers": headers}

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    payload = json.loads(json.dumps(asyncio.run(front._payload(scope, receive, path))))  # as the worker receives it
    return api.encode_response(api.predict(api.decode_request(payload)))


def _written(answer: dict) -> tuple:
    """What the model wrote, the score aside."""
    if "translations" in answer:
        return tuple(t["tokens"] for t in answer["translations"])
    return tuple(answer["words"])


@pytest.mark.parametrize("path", ["/translate", "/caption"])
def test_a_length_penalty_at_beam_size_1_is_noted_in_the_answer(served, path):
    noted = _answer(served, path, {"beam_size": 1, "length_penalty": 2.0})
    assert noted["notes"] == [NOTE]
    plain = _answer(served, path, {"beam_size": 1})
    assert plain["notes"] == []
    assert _written(noted) == _written(plain)  # what the note says: the same output
    assert _answer(served, path, {"beam_size": 1}, query="length_penalty=0.5")["notes"] == [NOTE]  # either place


@pytest.mark.parametrize("path", ["/translate", "/caption"])
def test_no_note_where_the_penalty_ranks_a_beam_or_none_was_given(served, path):
    assert _answer(served, path, {"beam_size": 2, "length_penalty": 2.0})["notes"] == []
    assert _answer(served, path, {})["notes"] == []  # the model file's own penalty is no option the client gave


def test_the_beam_size_is_the_model_files_where_the_request_gives_none(served):
    """The tiny text model's recorded decoding is greedy (beam 1), the caption model's a beam of 3."""
    front = served[0]
    assert (front.text.defaults["beam_size"], front.caption.defaults["beam_size"]) == (1, 3)
    assert _answer(served, "/translate", {"length_penalty": 1.0})["notes"] == [NOTE]
    assert _answer(served, "/caption", {"length_penalty": 1.0})["notes"] == []


@pytest.mark.parametrize(("path", "described"), [("/translate", TRANSLATE_ANSWER), ("/caption", CAPTION_ANSWER)])
def test_the_answers_description_names_its_notes(served, path, described):
    answer = _answer(served, path, {"beam_size": 1, "length_penalty": 1.0})
    assert set(answer) <= set(described["properties"]) and described["properties"]["notes"]["type"] == "array"


def test_the_commands_and_the_server_say_it_in_one_wording():
    from text_attn.core.search_options import length_penalty_note

    assert length_penalty_note("length_penalty", "beam_size 1 keeps") == NOTE
    command = NOTE.replace("length_penalty", "--length-penalty").replace("beam_size", "beam")  # translate's, caption's
    assert length_penalty_note("--length-penalty", "beam 1 keeps") == command
