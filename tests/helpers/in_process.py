"""Requests answered in process, as attention-serve answers them: the HTTP process's checks (front.Front._payload) make
the payload, and the worker's own API answers it, over tiny random models (no server, no sockets)."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_word_model_file

from attention_serve.apis import CaptionAPI, TranslateAPI
from attention_serve.front import Front
from attention_serve.limits import Limits
from attention_serve.models import load_caption, load_text

PHOTO = (Path(__file__).parent.parent / "fixtures" / "images" / "coffee.png").read_bytes()


def served_apis(folder: Path) -> tuple:
    """(the Front's checks, the translate worker, the caption worker) over tiny random models written in ``folder``."""
    text, caption = tiny_word_model_file(folder / "text.pt"), tiny_model_file(folder / "caption.pt")
    front = Front(None, load_caption(caption), load_text(text), Limits(), b"", None)
    translate = TranslateAPI(text, "text.pt", 1, 4, 0.01, idle_wait=False)  # 1 thread, batches of 4
    apis = translate, CaptionAPI(caption, "caption.pt", 1, 4, 0.01, idle_wait=False)
    for api in apis:
        api.load("cpu")
    return front, *apis


def ask(served, path: str, options: dict, query: str = "") -> dict:
    """One request to ``path`` as the server handles it: checked and made a payload by the HTTP process, sent to the
    worker as JSON, answered by it. /translate's ``options`` in its JSON body (with "ein mann" unless they hold
    "sentences"); /caption's with the photo as JSON."""
    front, translate, caption = served
    if path == "/translate":
        text = {} if "sentences" in options else {"text": "ein mann"}  # the sentences given, else one
        api, body = translate, json.dumps({**text, **options}).encode()
    else:
        api, body = caption, json.dumps({"image": base64.b64encode(PHOTO).decode(), **options}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "method": "POST", "path": path, "query_string": query.encode(), "headers": headers}

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    payload = json.loads(json.dumps(asyncio.run(front._payload(scope, receive, path))))  # as the worker receives it
    return api.encode_response(api.predict(api.decode_request(payload)))
