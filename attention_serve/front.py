"""The HTTP process's half of the server: an ASGI middleware in front of LitServe's routes.

LitServe's batched loop answers a whole batch with the error of one bad item, so nothing that can be refused may reach
the model workers: every request is read, limited and checked here, and photos are decoded and prepared here (in a
thread, so the event loop keeps serving), as ``caption``'s loader workers do beside the model. What goes on to LitServe
is a small JSON body the workers cannot fail on: a photo's (S, S, 3) uint8 square (a quarter of the float tensor), its
size, crop box and photo statistics, and the checked options.

Answered here: ``GET /`` (the page, page.py), every refusal (a JSON ``{"error": ..., "status": ...}``, one log line),
the API key (``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` on /caption, /translate and /info), the queue
limit (503 with Retry-After when more than ``max_queue`` requests are in flight in this process), ``GET /health``
(200, or 503 while a model's worker is being replaced) and the workers' faults (inflight.py: 503 for the requests a
dead worker held and for new ones until its replacement is ready, 504 after ``--timeout``); /info gains ``workers``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import io
import json
import re
import sys
import warnings
from typing import Any
from urllib.parse import parse_qsl

from attention_serve.inflight import RETRY_AFTER, ClientGone, Waiting
from attention_serve.limits import (
    CAPTION_OPTIONS,
    TRANSLATE_OPTIONS,
    ClientError,
    Limits,
    check_beam,
    check_caption_work,
    check_work,
    cut,
    host_allowed,
    parse_options,
    search_notes,
    sentences_of,
    shown,
    source_lengths,
)
from attention_serve.models import Served
from attention_serve.openapi import versions
from attention_serve.workers import WHAT
from text_attn.core.safe_files import inert
from text_attn.translation.paragraphs import breaks_off, goes_on

SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]
IMAGE_TYPES = ("image/", "application/octet-stream")
# The paths this server answers: LitServe's routes, the page and FastAPI's description. Starlette matches a route by a
# regex ending in "$", which also matches before a final newline: "/info\n" (sent as /info%0A) reached /info's route
# and the workers while the checks here, comparing paths exactly, saw another path (no key, no limits). So only these
# exact paths go on to the routes; any other is a 404 here, never routed.
PATHS = frozenset({"/", "/caption", "/translate", "/info", "/health", "/openapi.json"})
JSON_THREAD = 1 << 16  # a JSON body larger than this (bytes) is parsed in a thread: the event loop keeps serving


def log(line: str) -> None:
    """One line on the server's stderr (control characters shown, never sent)."""
    print(f"attention-serve: {inert(line)}", file=sys.stderr, flush=True)


def request_line(method: str, path: str) -> str:
    """``METHOD PATH`` for a log line, each cut as a client's value is (a path may be kilobytes long)."""
    return f"{cut(method, 16)} {cut(path, 100)}"


async def send_json(send, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *SECURITY_HEADERS,
        *extra]})  # fmt: skip
    await send({"type": "http.response.body", "body": data})


DRAIN = 64 << 20  # an oversized body is read and dropped up to this much, so its client reads the 413 (not a reset)


CLOSE = {"Connection": "close"}  # uvicorn closes the connection after an answer with it
WHOLE_BODY = 10  # x --read-timeout: the longest a body may take to arrive, however steadily (5 min by default)


async def read_body(receive, limit: int, declared: int | None, why: str, timeout: float, expect: bool) -> bytes:
    """The request body, at most ``limit`` bytes kept (ClientError 413 when it is more; ``why``: the limit's name,
    for the message). Memory stays bounded: what is over the limit is read and dropped (up to DRAIN), not kept; a
    client that asked first (``Expect: 100-continue``) is refused before it sends anything. A body that stops
    arriving for ``timeout`` seconds is a 408, and so is one still arriving after WHOLE_BODY x ``timeout``: a stalled
    or trickled upload does not hold its place. (``timeout`` bounded the whole body: a 3.8 MB photo sent at 100 KB/s,
    a slow phone's upload, got 408 after 30 s.) A client that goes away mid-body is :class:`ClientGone` (it was a
    logged 400 that nobody received)."""
    too_big = declared is not None and declared > limit
    if too_big and expect:  # the connection closed after the 413: a client that sends its body anyway would have
        # it read as its next request (a 408 of "headers")
        raise ClientError(413, f"the body is {_too_big(declared, limit)} ({why})", CLOSE)
    chunks, size, more = [], 0, True
    clock = asyncio.get_running_loop().time
    whole = clock() + WHOLE_BODY * timeout
    while more and size <= (DRAIN if too_big else limit):
        try:
            message = await asyncio.wait_for(receive(), max(0.0, min(timeout, whole - clock())))
        except asyncio.TimeoutError:
            if too_big:  # refused already by its size: say so (a 408 read as "retry", and the retry failed alike)
                break
            if clock() >= whole:
                raise ClientError(408, f"the body took more than {WHOLE_BODY * timeout:g} s to arrive "
                                  f"({WHOLE_BODY} x --read-timeout)") from None  # fmt: skip
            raise ClientError(408, f"the body stopped arriving: nothing for {timeout:g} s") from None
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        more = bool(message.get("more_body"))
        too_big = too_big or size > limit
        if not too_big:
            chunks.append(chunk)
    if too_big:  # the rest of a body not drained (over DRAIN, or stalled) is no next request: closed after the 413
        told = _too_big(declared, limit) if declared is not None else f"over {_size(limit)}; at most {_size(limit)}"
        raise ClientError(413, f"the body is {told} ({why})", CLOSE)
    return b"".join(chunks)


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 // 10 else f"{n / 1024:.1f} KiB"  # as --max-upload-mb counts


def _too_big(size: int, limit: int) -> str:
    """ "SIZE; at most LIMIT" for a refusal, in bytes where the rounded sizes would read alike ("0.7 MiB; at most
    0.7 MiB")."""
    told, most = _size(size), _size(limit)
    return f"{size:,} bytes; at most {limit:,}" if told == most else f"{told}; at most {most}"


def _replay(body: bytes):
    sent = False

    async def receive():
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # as a server would: nothing more until the client goes
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def prepare_photo(data: bytes, served: Served, limits: Limits) -> dict[str, Any]:
    """An upload's bytes -> the workers' payload: the (S, S, 3) uint8 square, the image's size and crop box, its
    photo statistics. ClientError: 415 not an image, 413 more pixels than the guard allows, 422 damaged."""
    from PIL import Image

    preprocess = served.extra["preprocess"]
    # Pillow's own guard follows --max-pixels while the upload is opened (it refuses at twice its limit): at its
    # default (179 MP) a --max-pixels of 500 refused a 400 MP photo while saying "more than 500"
    pillows, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, limits.max_pixels
    try:
        return _prepared(data, served, limits, preprocess)
    finally:
        Image.MAX_IMAGE_PIXELS = pillows


def _prepared(data: bytes, served: Served, limits: Limits, preprocess: Any) -> dict[str, Any]:
    from PIL import Image, UnidentifiedImageError

    from captioning.photos.photo_check import photo_stats
    from captioning.photos.preprocess import HEAD, ImageReadError, headed_format, load_photo, photo_formats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the guard below is the server's own
        # Pillow's own words on a file it reads cut off ("Truncated File Read"): the refusal below says it, one line
        warnings.filterwarnings("ignore", category=UserWarning, module=r"PIL\.")
        try:
            formats = photo_formats(data[:HEAD], "upload")
            with Image.open(io.BytesIO(data), formats=formats) as probe:
                width, height, kind = *probe.size, probe.format
                turned = kind not in TURNED_BY_BROWSERS and _orientation(probe) not in (None, 1)
        except ImageReadError as err:  # a HEIC photo without pi-heif
            raise ClientError(415, f"the image: {str(err).removeprefix('upload: ')}") from None
        except UnidentifiedImageError:
            # an AVIF / HEIC header its opener cannot read, or a format's own signature that its opener could not
            # read on from (an ICO cut off): damaged, as other formats cut off are, not "not an image"
            named = headed_format(formats) or _signed(data, formats)
            if named:
                why = f"{'an' if named[0] in 'AEIOU' else 'a'} {named} photo that cannot be read (cut off?)"
                raise ClientError(422, f"the image is damaged: {why}") from None
            raise ClientError(415, "the upload is not an image in a photo format (JPEG, PNG, WebP, ...)") from None
        except Image.DecompressionBombError:  # its sides are in its header: said, as below the bomb's bound
            most, sides = limits.max_pixels / 1e6, _header_size(data)
            has = (f"{sides[0]} x {sides[1]} pixels, {sides[0] * sides[1] / 1e6:.3g} megapixels" if sides else
                   f"more than {2 * most:.1f} megapixels")  # fmt: skip
            raise ClientError(413, f"the image has {has}; at most {most:g} (a guard against decompression "
                              "bombs)") from None  # fmt: skip
        except Exception as err:  # noqa: BLE001 - a header Pillow cannot parse
            raise ClientError(422, f"the image is damaged ({type(err).__name__})") from None
        if width * height > limits.max_pixels:
            # its sides too: rounded alone, 0.12 megapixels over a limit of 0.1 read "has 0.1; at most 0.1"
            raise ClientError(413, f"the image has {width} x {height} pixels, {width * height / 1e6:.3g} megapixels; "
                              f"at most {limits.max_pixels / 1e6:g} (a guard against decompression bombs)")  # fmt: skip
        try:
            image, size = load_photo(data, preprocess.decode_side)
        except ImageReadError as err:
            status = {"not_image": 415, "too_large": 413}.get(err.kind, 422)
            why = str(err).removeprefix("upload: ")
            message = f"the image is damaged: {why}" if status == 422 else f"the image: {why}"
            raise ClientError(status, message) from None
    pixels = preprocess.pixels(image)  # (S, S, 3) uint8
    sent = {
        "pixels": base64.b64encode(pixels.tobytes()).decode("ascii"),
        "shape": list(pixels.shape),
        "size": list(size),
        "crop_box": list(preprocess.crop_box(*size)),
        "stats": list(photo_stats(image)),
    }
    if kind not in BROWSER_FORMATS or turned:  # the page could not draw the photo (upright) under the attention: a
        sent["preview"] = preview(image)  # JPEG of it to draw
    return sent


def _signed(data: bytes, formats: tuple[str, ...]) -> str | None:
    """The first of ``formats`` whose signature ``data`` begins with (Pillow's own test of a file's first 16 bytes),
    else None."""
    from PIL import Image

    Image.init()
    for name in formats:
        accept = Image.OPEN.get(name, (None, None))[1]
        if accept is not None and accept(data[:16]) is True:
            return name
    return None


# What browsers draw in an <img> (an iPhone's HEIC, TIFF and PPM only Safari, or none): other uploads get a preview
BROWSER_FORMATS = frozenset({"JPEG", "MPO", "PNG", "GIF", "WEBP", "BMP", "ICO", "AVIF"})


# Those whose EXIF Orientation Chromium applies in an <img> (a phone's JPEG, a PNG); a turned WebP it drew sideways,
# squashed into the upright photo's frame, the heat over the wrong part of it: such a photo gets a preview too
TURNED_BY_BROWSERS = frozenset({"JPEG", "MPO", "PNG"})


def _orientation(image: Any) -> int | None:
    """An opened image's EXIF Orientation (1: as stored), None where it has none or its EXIF cannot be read."""
    try:
        return image.getexif().get(0x0112)
    except Exception:  # noqa: BLE001 - a damaged EXIF block: the photo is read without its turn, as load_photo does
        return None


def preview(image: Any) -> str:
    """A JPEG of ``image`` (RGB, upright) as large as the page's canvas draws it (MAX_SIDE a side at most), base64:
    what the page draws for a photo in a format the browser cannot show."""
    from attention_serve.page import MAX_SIDE

    small = image.copy()
    small.thumbnail((MAX_SIDE, MAX_SIDE))
    buffer = io.BytesIO()
    small.save(buffer, "JPEG", quality=85)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


class Front:
    """The ASGI middleware (see the module doc). ``caption`` / ``text``: the served models (None: not served)."""

    def __init__(self, app, caption: Served | None, text: Served | None, limits: Limits, page: bytes,
                 waiting: Waiting) -> None:  # fmt: skip
        self.app, self.caption, self.text, self.limits, self.page = app, caption, text, limits, page
        self.waiting = waiting  # the requests in flight to the workers, and the workers' state (inflight.py)
        self.reading = 0  # requests whose body is arriving or being checked (at most 4 x max_queue)
        self.queued = 0  # checked requests waiting for their answer from a model worker (at most max_queue)
        self.preparing = asyncio.Semaphore(2)  # photos decoded at once: a few large ones must not take all memory

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, method = scope["path"], scope["method"]
        send = _with_headers(send)  # every answer: nosniff, no-store
        try:
            if not host_allowed(scope["headers"], self.limits.allowed_hosts):
                raise ClientError(400, f"the Host header {shown(_host(scope['headers']))} is not a name this "
                                  "server answers to (a guard against DNS rebinding; --allowed-host NAME adds "
                                  "one)")  # fmt: skip
            if path not in PATHS:  # what Starlette would route elsewhere or nowhere (PATHS): refused, never routed
                raise ClientError(404, "Not Found")
        except ClientError as err:
            return await self._refuse(send, method, path, err)
        if path == "/" and method in ("GET", "HEAD"):
            return await self._page(send)
        api = path in ("/caption", "/translate")
        if path == "/health" and method in ("GET", "HEAD"):
            return await self._health(send)
        try:
            if (api or path == "/info") and self.limits.api_key and not self._authorized(scope):
                raise ClientError(401, "this server needs its API key: send 'Authorization: Bearer KEY' or "
                                  "'X-API-Key: KEY'", {"WWW-Authenticate": "Bearer"})  # fmt: skip
            if path == "/info" and method in ("GET", "HEAD"):  # HEAD as /health answers it (LitServe's route: 405)
                # the app answers a GET; uvicorn, which reads the request's own method, sends no body for a HEAD
                inner = {**scope, "method": "GET"}
                return await self.app(inner, receive, _with_workers(send, self.waiting, self.limits))
            if not api or method != "POST":
                return await self.app(scope, receive, _allow_head(send) if path in ANSWERS_HEAD else send)
            if self.reading >= 4 * self.limits.max_queue:
                raise ClientError(
                    503, f"busy: {self.reading} uploads arriving; retry in a second", {"Retry-After": "1"}
                )
        except ClientError as err:
            return await self._refuse(send, method, path, err)
        answer = _Begun(send)
        try:
            await self._answer(scope, receive, answer, method, path)
        except asyncio.CancelledError:
            # the stop's --grace is over and uvicorn cancels what is left: a JSON 503 where the answer has not begun,
            # not uvicorn's plain-text 500 and a traceback (the cancellation ends here: the task ends with the answer)
            if not answer.begun:
                err = ClientError(503, "the server is stopping and this request was not answered within its --grace; "
                                  "retry", {"Retry-After": RETRY_AFTER})  # fmt: skip
                await self._refuse(answer, method, path, err)

    async def _answer(self, scope, receive, send, method: str, path: str) -> None:
        """A POST to /caption or /translate: read and checked, then queued for its model worker and answered."""
        self.reading += 1
        try:
            body = await self._payload(scope, receive, path)
        except ClientError as err:
            return await self._refuse(send, method, path, err)
        except ClientGone:  # mid-body: nobody to answer
            return log(f"499 {request_line(method, path)}: the client closed the connection before sending the "
                       "whole body")  # fmt: skip
        finally:
            self.reading -= 1
        if self.queued >= self.limits.max_queue:
            err = ClientError(503, f"busy: {self.queued} requests waiting for the models (--max-queue counts both "
                              "models' together); retry in a second", {"Retry-After": "1"})  # fmt: skip
            return await self._refuse(send, method, path, err)
        down = self.waiting.refusal(path)  # its worker stopped and the new one is loading
        if down is not None:
            return await self._refuse(send, method, path, down)
        self.queued += 1  # counted until answered: the workers' queue is what the limit protects
        try:
            data = json.dumps(body).encode()
            headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-type", b"content-length")]
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
            inner = {**scope, "headers": headers}
            await self.waiting.answer(path, lambda answer: self.app(inner, _replay(data), answer), send, receive)
        except ClientError as err:  # its worker stopped (503) or its answer did not come in time (504)
            await self._refuse(send, method, path, err)
        except ClientGone:  # nothing to send: its place is free, and a worker that has not taken it passes it over
            log(f"499 {request_line(method, path)}: the client closed the connection before its answer; dropped")
        finally:
            self.queued -= 1

    def _authorized(self, scope) -> bool:
        """Whether the request carries the key; ClientError(400) for a key header sent twice with different values
        (which one counts is a guess: the last one did, so a proxy's header was overridden by the client's)."""
        for name, said in ((b"x-api-key", "X-API-Key"), (b"authorization", "Authorization")):
            if len({v for k, v in scope["headers"] if k == name}) > 1:
                raise ClientError(400, f"the {said} header is sent more than once, with different values: send it once")
        headers = dict(scope["headers"])
        given = headers.get(b"x-api-key", b"")
        bearer = headers.get(b"authorization", b"")
        if bearer.lower().startswith(b"bearer "):
            given = given or bearer[7:].strip()
        return hmac.compare_digest(given, self.limits.api_key.encode("utf-8"))  # the header's own bytes

    async def _refuse(self, send, method: str, path: str, err: ClientError) -> None:
        log(f"{err.status} {request_line(method, path)}: {err.message}")
        await send_json(send, err.status, {"error": err.message, "status": err.status}, err.headers)

    async def _health(self, send) -> None:
        """200 when every served model can answer; else 503 naming the one whose worker is restarting (a load
        balancer takes the server out, then puts it back). Both with each model's state and restart count."""
        state = self.waiting.board.state(pids=False)
        down = [name for name, s in state.items() if not s["ready"]]
        if not down:
            return await send_json(send, 200, {"status": "ok", "models": state})
        what = " and ".join(f"the {WHAT['/' + name]} model's worker" for name in down)
        verb = "are" if len(down) > 1 else "is"  # "the caption model's worker and the translation ... is starting"
        await send_json(send, 503, {"error": f"{what} {verb} starting; retry in a few seconds", "status": 503,
                                    "models": state}, {"Retry-After": RETRY_AFTER})  # fmt: skip

    async def _page(self, send) -> None:
        from attention_serve.page import CSP

        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(self.page)).encode()),
            (b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY"), *SECURITY_HEADERS]})  # fmt: skip
        await send({"type": "http.response.body", "body": self.page})

    async def _payload(self, scope, receive, path: str) -> dict[str, Any]:
        """The request's body checked and turned into what the workers take (ClientError for anything wrong)."""
        served = self.caption if path == "/caption" else self.text
        if served is None:
            raise ClientError(404, f"this server does not serve {path[1:]} (started with --"
                              f"{'caption' if path == '/caption' else 'text'}-model none)")  # fmt: skip
        headers = dict(scope["headers"])
        ctype = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
        declared = headers.get(b"content-length")
        if path == "/caption":
            limit, why = self.limits.max_upload_bytes, "--max-upload-mb"
        else:  # every sentence at its longest, each character as JSON's widest escape (12 bytes), and room around
            limit, why = self.limits.max_chars * 12 * self.limits.max_sentences + 4096, "--max-chars x --max-sentences"
        expect = headers.get(b"expect", b"").lower() == b"100-continue"
        body = await read_body(receive, limit, int(declared) if declared and declared.isdigit() else None, why,
                               self.limits.read_timeout, expect)  # fmt: skip
        # blank values kept: "?beam_size=" is then refused as any wrong value is (dropped, "?given=" captioned instead
        # of reading the caption meant)
        try:  # %-escapes that are not UTF-8 refused, as the same bytes in a JSON body are (replaced, "caf\ufffd dog")
            query_pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True,
                                    errors="strict")  # fmt: skip
        except UnicodeDecodeError:
            raise ClientError(422, "the query string is not UTF-8 (a %-escape of another encoding)") from None
        query = dict(query_pairs)
        if len(query) < len(query_pairs):
            raise ClientError(422, "an option is given twice in the query string")
        if not body:
            raise ClientError(422, "empty body: " + ("send a photo" if path == "/caption" else "send JSON text"))
        if path == "/translate":
            if ctype != "application/json":
                raise ClientError(415, f"send JSON (Content-Type: application/json), not "
                                  f"{shown(ctype) if ctype else 'no type'}")  # fmt: skip
            sentences, given = sentences_of(await _parsed(body, self.limits.json_values), self.limits)
            asked = _merged(query, given)
            options = parse_options(asked, TRANSLATE_OPTIONS, served.defaults, self.limits.max_chars)
            if options.get("evidence") and served.extra.get("ensemble"):
                raise ClientError(422, "evidence=1 measures what drives one model's words; this server translates "
                                  "with an ensemble (--text-ensemble)")  # fmt: skip
            if options.get("paragraphs"):  # wrapped text: its lines joined here, so the worker and the cost agree
                sentences = [served.extra["read_paragraph"](s) for s in sentences]
            keep_case = bool(options.get("keep_case"))
            whole = "given" in options or options.get("split") == 0
            tokens = source_lengths(served.extra, sentences, keep_case, whole)  # as the worker reads them
            # the given text as the worker reads it: its tokens are the steps (text_attn Translator.read_tokens)
            read = len(served.extra["target_tokens"](options["given"])) if "given" in options else None
            check_work(tokens, options, self.limits, int(TRANSLATE_OPTIONS["max_len"].high), read,
                       served.extra.get("positions"))  # fmt: skip
            check_beam(options, served.extra["vocab"])  # the model's own bound, past the server's
            notes = search_notes(asked, options) + ([] if options.get("paragraphs") else wrapped_notes(sentences))
            return {"sentences": sentences, "options": options, "notes": notes}
        image, given = await self._upload(ctype, body, scope)
        asked = _merged(query, given)
        options = parse_options(asked, CAPTION_OPTIONS, served.defaults, self.limits.max_chars)
        words = len(served.extra["words"](options["given"])) if "given" in options else None  # as the worker reads it
        check_caption_work(options, self.limits, served.extra["regions"], int(CAPTION_OPTIONS["max_len"].high), words)
        check_beam(options, served.extra["vocab"])  # the model's own bound, past the server's
        async with self.preparing:
            photo = await asyncio.to_thread(prepare_photo, image, served, self.limits)
        return {**photo, "options": options, "notes": search_notes(asked, options)}

    async def _upload(self, ctype: str, body: bytes, scope) -> tuple[bytes, dict[str, Any]]:
        """(the image's bytes, the options given in the body) of a multipart form, raw bytes or JSON."""
        if ctype.startswith(IMAGE_TYPES):
            return body, {}
        if ctype == "application/json":
            data = await _parsed(body, self.limits.json_values)
            if not isinstance(data, dict) or not isinstance(data.get("image"), str):
                raise ClientError(422, 'send {"image": "<base64 of the file>", ...options} as JSON')
            text = data.pop("image")
            image = _base64_image(text) if len(text) <= JSON_THREAD else await asyncio.to_thread(_base64_image, text)
            if not image:
                raise ClientError(422, '"image" is empty')
            return image, data
        if ctype == "multipart/form-data":
            from starlette.datastructures import UploadFile
            from starlette.requests import Request

            raw = dict(scope.get("headers", [])).get(b"content-type", b"").decode("latin-1")
            boundary = next((v.strip().strip('"') for k, _, v in (x.strip().partition("=") for x in raw.split(";"))
                             if k.lower() == "boundary"), "")  # fmt: skip
            if boundary and f"--{boundary}--".encode("latin-1") not in body:  # parsed, it read as a form without it
                raise ClientError(422, "a multipart body cut off before its end (no closing boundary)")
            try:
                form = await Request(scope, _replay(body)).form(max_files=2, max_fields=16)
            except Exception as err:  # noqa: BLE001 - python-multipart's errors for a malformed body
                why = getattr(err, "detail", None) or type(err).__name__
                raise ClientError(422, f"a malformed multipart body ({shown(why, 80)})") from None
            twice = [k for k in form if len(form.getlist(k)) > 1]
            if twice:
                raise ClientError(422, f"the form field {shown(twice[0])} is given twice")
            fields = dict(form)
            upload = fields.pop("image", None)
            if not isinstance(upload, UploadFile):
                others = [k for k, v in form.items() if isinstance(v, UploadFile)]
                hint = f" (a file came as {others[0]!r})" if others else ""
                raise ClientError(422, f"no file in the form field 'image'{hint}")
            data = await upload.read()
            if not data:
                raise ClientError(422, "the uploaded file is empty")
            extra = [k for k, v in fields.items() if isinstance(v, UploadFile)]
            if extra:
                raise ClientError(422, f"one photo a request: an extra file in field {extra[0]!r}")
            return data, fields
        raise ClientError(415, f"send a photo as multipart/form-data (field 'image'), as raw bytes (Content-Type: "
                          f"image/...) or as JSON; got {shown(ctype) if ctype else 'no Content-Type'}")  # fmt: skip


# a data: URL's head as browsers and tools write a photo's (FileReader.readAsDataURL): an image type, parameters, base64
DATA_URL = re.compile(r"data:image/[a-z0-9.+-]+(;[a-z0-9.+-]+=[^;,]*)*;base64", re.IGNORECASE)


SPACE, ASCII_SPACE = re.compile(r"\s+"), b" \t\n\r\v\f\x1c\x1d\x1e\x1f"


def _base64_image(text: str) -> bytes:
    """A JSON upload's "image": base64 as tools write it (base64url's letters and a missing padding too), also
    wrapped in lines (Python's ``base64.encodebytes``, the ``base64`` command: newlines inside the string) or as a
    ``data:image/...;base64,`` URL (a browser's FileReader); whitespace is dropped and the URL's head with it.
    ClientError(422) for anything else."""
    if text[:5].lower() == "data:":
        head, comma, text = text.partition(",")
        if not comma or not DATA_URL.fullmatch(head.strip()):
            raise ClientError(422, '"image" is a data: URL, but not of an image in base64 (data:image/...;base64,'
                              f"...): {shown(head)}")  # fmt: skip
    try:
        # the whitespace str.split() drops, without its list of pieces (millions for "A A A ...": hundreds of MB)
        bare = text.encode("ascii").translate(None, ASCII_SPACE) if text.isascii() else SPACE.sub("", text)
        if isinstance(bare, bytes):  # base64url's letters (-_) and base64 sent without its "=" padding: read too
            bare = bare.translate(URL_SAFE)
            bare += b"" if b"=" in bare else b"=" * (-len(bare) % 4)
        return base64.b64decode(bare, validate=True)
    except (binascii.Error, ValueError):
        raise ClientError(422, '"image" is not valid base64') from None


def _header_size(data: bytes) -> tuple[int, int] | None:
    """A photo's sides as its header says them, for one Pillow refuses to open as a decompression bomb (twice the
    server's bound); None where they cannot be read so."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bound, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None  # read the header only: no pixel decoded
            try:
                with Image.open(io.BytesIO(data)) as probe:
                    return probe.size
            finally:
                Image.MAX_IMAGE_PIXELS = bound
    except Exception:  # noqa: BLE001 - a header it cannot read: the bound alone is said
        return None


URL_SAFE = bytes.maketrans(b"-_", b"+/")  # base64url's two letters, as base64 writes them


def _host(headers: list[tuple[bytes, bytes]]) -> str:
    """A request's Host headers, as sent (for a refusal's message)."""
    return ", ".join(v.decode("latin-1") for k, v in headers if k == b"host")


def _json(body: bytes, most: int) -> Any:
    """The body as JSON; ClientError 422 for anything that is not (not UTF-8, too deep, a number too long, a key
    twice), 413 for more than ``most`` values (object members and array items together): a request's JSON holds a
    few options and its sentences, and 40,000 keys (356 KB) had held the event loop for 27 s."""
    try:
        text = body.decode("utf-8-sig")  # JSON sent over a network is UTF-8 (RFC 8259); the values are counted in it
    except UnicodeDecodeError:
        raise ClientError(422, "the body is not valid JSON (not UTF-8)") from None
    if more_values(text, most):
        raise ClientError(413, f"the JSON holds more than {most:,} values (object members and array items); at most "
                          f"{most:,}")  # fmt: skip
    try:
        return json.loads(text, object_pairs_hook=_once)
    except RecursionError:  # arrays in arrays a thousand deep: no request's JSON is (it read "not valid JSON")
        raise ClientError(413, "the JSON is nested deeper than the parser goes; a request's is a few levels") from None
    except json.JSONDecodeError as err:  # where it breaks: the client can find it
        raise ClientError(422, f"the body is not valid JSON ({err.msg} at character {err.pos + 1})") from None
    except ValueError:  # valid JSON Python will not read: an integer of more digits than int() converts (4,300)
        raise ClientError(422, "the JSON holds a number of more digits than are read (4,300): no option's is") from None


async def _parsed(body: bytes, most: int) -> Any:
    """:func:`_json`, in a thread for a large body (a 20 MiB /caption upload may be JSON): the event loop serves on."""
    return _json(body, most) if len(body) <= JSON_THREAD else await asyncio.to_thread(_json, body, most)


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members as a dict; ClientError(422) naming a key given twice. Linear: counting each key's
    copies in the list (the check before) was quadratic."""
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ClientError(422, f"the key {shown(twice)} is given twice")
    return found


# a JSON string (what more_values skips: the commas in a sentence are text)
JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def more_values(text: str, most: int) -> bool:
    """Whether the JSON ``text`` holds more than ``most`` values (object members and array items), told before it
    is parsed by its commas outside strings: each value but a container's first follows one, so more than ``most`` - 1
    of them is more than ``most`` values (a refusal is always true), and the values are never more than twice the
    commas and the nesting (which the parser bounds). Cheap for any text: a text with few commas at all, in strings
    too (a photo's base64), is not scanned for its strings; the count runs in C between strings; and a valid text
    has at most two strings a value (a key and its value), so after 2 x ``most`` + 2 strings it is over."""
    if text.count(",") < most:
        return False
    commas, at, n = 0, 0, 0
    while (start := text.find('"', at)) >= 0:
        commas += text.count(",", at, start)
        if commas >= most or n > 2 * most + 1:
            return True
        # matched from each string's start only, once: finditer, failing on a string never closed, tried again from
        # every later quote (quadratic: an 81 KB body held the event loop 20 s)
        found = JSON_STRING.match(text, start)
        if found is None:  # a string never closed: not JSON (the parser's 422); its commas are text
            return False
        at, n = found.end(), n + 1
    return commas + text.count(",", at) >= most


def _merged(query: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The options of the query string and of the body, refusing one given in both (which should win is a guess)."""
    both = sorted(set(query) & set(given))
    if both:
        raise ClientError(422, f"{shown(both[0])} is given in both the query string and the body")
    return {**query, **given}


def limits_info(limits: Limits) -> dict[str, Any]:
    """The request limits /info shows, named as the options that set them (never the API key)."""
    return {"max_upload_mb": round(limits.max_upload_bytes / 2**20, 3), "max_pixels": round(limits.max_pixels / 1e6, 3),
            "max_sentences": limits.max_sentences, "max_chars": limits.max_chars, "max_search": limits.max_search,
            "max_evidence": limits.max_evidence, "max_queue": limits.max_queue,
            "read_timeout": limits.read_timeout}  # fmt: skip


VERSIONS = versions()  # on import (the main process, before LitServe forks the HTTP process): torch is imported


ANSWERS_HEAD = frozenset({"/", "/health", "/info"})  # HEAD answered here, not by the app's routes (GET alone)


def _allow_head(send):
    """``send`` with a 405's ``Allow`` listing HEAD too, where this front answers it: the app's routes say ``GET``
    alone (``POST /health`` read "Allow: GET", and ``HEAD /health`` answered 200)."""

    async def wrapped(message) -> None:
        if message["type"] == "http.response.start" and message.get("status") == 405:
            headers = [(k, b"GET, HEAD" if k.lower() == b"allow" and v.strip() == b"GET" else v)
                       for k, v in message.get("headers", [])]  # fmt: skip
            message = {**message, "headers": headers}
        await send(message)

    return wrapped


def _with_workers(send, waiting: Waiting, limits: Limits):
    """``send`` for LitServe's /info answer (JSON), with each model's worker state added as ``"workers"``, the
    request limits as ``"limits"`` (LitServe's ``server`` block holds its own settings: its max_payload_size is not
    ours) and the versions of this package, torch and LitServe as ``"versions"``."""
    start: dict[str, Any] = {}
    chunks: list[bytes] = []

    async def wrapped(message) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return
        body = b"".join(chunks)
        if start.get("status") == 200:
            shown = {**json.loads(body), "workers": waiting.board.state(pids=True), "limits": limits_info(limits),
                     "versions": VERSIONS}  # fmt: skip
            body = json.dumps(shown).encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return wrapped


class _Begun:
    """``send``, noting whether the answer has begun (once it has, nothing can replace it)."""

    def __init__(self, send) -> None:
        self.send, self.begun = send, False

    async def __call__(self, message) -> None:
        if message["type"] == "http.response.start":
            self.begun = True
        await self.send(message)


def _with_headers(send):
    """``send`` that adds the security headers to every response start it passes on."""

    async def wrapped(message) -> None:
        if message["type"] == "http.response.start":
            names = {k.lower() for k, _ in message.get("headers", [])}
            extra = [(k, v) for k, v in SECURITY_HEADERS if k not in names]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return wrapped


def wrapped_notes(sentences: list[str]) -> list[str]:
    """The answer's notes on texts that break a sentence off, the next text going on with its rest (lines of wrapped
    text sent a line a text, as the page sends them unless "wrapped text" is checked), and on texts whose own lines
    do so (a wrapped paragraph sent whole, its line breaks each ending a sentence): [] where none does."""
    notes = []
    broken = [i for i in range(1, len(sentences)) if goes_on(sentences[i - 1], sentences[i])]
    if broken:
        s = "s" if len(broken) > 1 else ""
        notes.append(f"text{s} {', '.join(map(str, broken))} break{'' if s else 's'} off mid-sentence, the next going "
                     f"on with {'their' if s else 'its'} rest (text wrapped over lines?): each was translated as a "
                     "sentence of its own; paragraphs=1 (the page's \"wrapped text\"), a paragraph a text, joins "
                     "them")  # fmt: skip
    # a text of several lines: a line break ends a sentence (text_attn.translation.sentences) unless paragraphs=1
    inside = [i for i, text in enumerate(sentences, 1) if breaks_off(text)]
    if inside:
        s = "s" if len(inside) > 1 else ""
        notes.append(f"text{s} {', '.join(map(str, inside))}: a line breaks off mid-sentence, the next going on with "
                     "its rest (text wrapped over lines?): a line break ends a sentence; paragraphs=1 joins the "
                     "lines")  # fmt: skip
    return notes
