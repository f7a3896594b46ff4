"""``attention-serve``: the captioner and the translator behind a JSON API and a live page, on LitServe.

    attention-serve                       # the bundled models at http://127.0.0.1:8000
    attention-serve --caption-model shapes --text-model none --port 8080

Routes: ``GET /`` the page, ``POST /caption``, ``POST /translate``, ``GET /health``, ``GET /info``,
``GET /openapi.json`` (the API's OpenAPI description). docs/serve.md has the API, examples and limits. Bad options
or model files: one line, exit 2.
SIGTERM or SIGINT, to the main process or its whole group: the requests in flight are answered (within --grace
seconds; those still waiting then get 503 with Retry-After), then exit 0.
A model worker that stops (killed, crashed) is replaced; its requests in flight get 503 with Retry-After, /health
says 503 until it is back; a crash loop (more than --max-restarts stops in 60 s) stops the server with exit 1. A
worker that cannot load its model at the start ends the start with exit 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys

from text_attn.core import startup_gc
from text_attn.core.errors import ArgumentParser, fail, flush_quietly, one_line
from text_attn.core.fast_exit import leaving
from text_attn.core.version import add_version

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# --max-search and --max-evidence at --timeout 120 (their defaults scale with it): the worst request they allow took
# ~24 s and ~5 s of one core of this project's 2-core machine (docs/serve.md), well inside the timeout
SEARCH_AT_120, EVIDENCE_AT_120 = 2_500_000, 4000
MIN_MEGAPIXELS = 0.1  # --max-pixels below it (a 316 x 316 photo) is refused: 1e-9 rounded to 0 and refused every photo
HOSTS = ("127.0.0.1", "0.0.0.0", "::")  # what LitServe binds (localhost is 127.0.0.1)
# log lines of LitServe's and uvicorn's dropped (apis.LinesWithout): a page switched off, a count of cancelled requests
SWAGGER, CANCEL_COUNT = "Swagger UI", "timeout graceful shutdown exceeded"
NOT_ALIVE = "Already not alive"  # LitServe's of an HTTP process gone: the supervisor's line says which and how


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="attention-serve",
        description="Serve the captioner and the translator: a live attention page at / and a JSON API "
        "(POST /caption, POST /translate, GET /health, GET /info; OpenAPI at /openapi.json).",
    )  # no option completed from its first letters (ArgumentParser's default): --device was taken for --devices
    add_version(p)
    p.add_argument("--caption-model", metavar="PATH|shapes|none",
                   help="the caption model file (default: the bundled Flickr8k model; shapes: the bundled shapes "
                   "model; none: no /caption)")  # fmt: skip
    p.add_argument("--text-model", metavar="PATH|bahdanau|none",
                   help="the translation model file (default: the bundled German -> English Transformer; bahdanau: "
                   "the bundled GRU with Bahdanau attention; none: no /translate)")  # fmt: skip
    p.add_argument("--text-ensemble", action="append", metavar="PATH|bahdanau",
                   help="translate with --text-model and this model as one (repeat it for more), as translate "
                   "--ensemble does: the bundled Transformer with bahdanau, +0.7 sacreBLEU on Multi30k test at half "
                   "the speed; the attention and decoding are --text-model's; evidence=1 is refused (it measures "
                   "one model)")  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="address to listen on: 127.0.0.1 (default), 0.0.0.0 or ::")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    p.add_argument("--api-key", help="require this key on /caption, /translate and /info (Authorization: Bearer KEY "
                   "or X-API-Key; the page, /health and /openapi.json stay open: a load balancer's probe needs no key; "
                   "default: $ATTENTION_SERVE_API_KEY, else none). Prefer the variable: a key on the command line is "
                   "in the process list (/proc/PID/cmdline), which every local user can read")  # fmt: skip
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a name the Host header may give (repeat for more; '*': any). Bound to 127.0.0.1 the "
                   "server answers only localhost, 127.0.0.1 and [::1] (a guard against DNS rebinding: a web page "
                   "whose name is pointed at this machine); bound to 0.0.0.0 or ::, any name unless this is "
                   "given")  # fmt: skip
    p.add_argument("--max-upload-mb", type=float, default=20,
                   help="largest /caption request body, MiB (default: 20): a photo sent as JSON base64 is 4/3 its "
                   "size, as a raw or multipart body its own (/translate's: 12 bytes a character of --max-chars x "
                   "--max-sentences)")  # fmt: skip
    p.add_argument("--max-queue", type=int, default=64,
                   help="requests in flight before new ones get 503 with Retry-After (default: 64)")  # fmt: skip
    p.add_argument("--max-sentences", type=int, default=64, help="sentences in one /translate request (default: 64)")
    p.add_argument("--max-chars", type=int, default=1000, help="characters in one sentence (default: 1000)")
    p.add_argument("--max-search", type=int,
                   help="steps a /translate request's decoding may take, per sentence of S source tokens S x S + "
                   "beams x T x (S + T) + 250, T the output at its longest (max_len + 1, else 2 x (S + 1) + 10, at "
                   f"most 512; a given text's tokens + 1) (default: {SEARCH_AT_120:,} at --timeout 120, in proportion "
                   "to --timeout: the costliest request it allows took ~24 s of one core, docs/serve.md)")  # fmt: skip
    p.add_argument("--max-evidence", type=int,
                   help="model steps evidence=1 may take in one request: /translate, each source token x each "
                   "output token at its longest; /caption, each region (and none) x each word (default: "
                   f"{EVIDENCE_AT_120:,} at --timeout 120, in proportion to --timeout: ~5 s of one core at "
                   "worst)")  # fmt: skip
    p.add_argument("--max-pixels", type=float, default=89.5,
                   help="largest photo in megapixels, read from its header (default: 89.5, Pillow's decompression-"
                   "bomb threshold: caption notes a photo above it, refuses one twice as large)")  # fmt: skip
    p.add_argument("--read-timeout", type=float, default=30,
                   help="seconds a request's headers may take to arrive (from the connection's start, or the last "
                   "answer on a kept-alive one), and its body may stop arriving (it may take 10 x that in all; 408 "
                   "after; default: 30)")  # fmt: skip
    p.add_argument(
        "--max-batch-size",
        type=int,
        default=16,
        help="requests a worker runs as one batch (default: 16; docs/serve.md has the measurement)",
    )
    p.add_argument("--batch-timeout", type=float, default=0.01,
                   help="seconds a worker waits for a batch to fill (default: 0.01)")  # fmt: skip
    p.add_argument("--idle-wait", action=argparse.BooleanOptionalAction, default=None,
                   help="a worker with no request for 2 s waits for the next one instead of polling for it every "
                   "millisecond: an idle server (both bundled models) uses ~1%% of a core instead of ~40%%, at the "
                   "same throughput and latency (docs/serve.md); --no-idle-wait: LitServe's own polling (default: "
                   "--idle-wait)")  # fmt: skip
    p.add_argument("--accelerator", "--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="where the models run: auto (the default: cuda where torch sees a GPU, else cpu), cpu or "
                   "cuda; --device is its other name, as caption and translate spell it")  # fmt: skip
    p.add_argument("--devices", default="auto", help="GPUs to use: a count or auto (default: auto: every GPU)")
    p.add_argument("--workers-per-device", type=int, default=1, help="model workers per device and model (default 1)")
    p.add_argument("--threads", type=int,
                   help="torch threads of every worker (default: the cores lent by demand: a worker busy alone "
                   "takes them all, busy workers share them; docs/serve.md)")  # fmt: skip
    p.add_argument("--grace", type=float, default=10, help="seconds to finish requests in flight on stop (default 10)")
    p.add_argument("--timeout", type=float, default=120,
                   help="seconds a request may wait for its answer (504 after; default 120)")  # fmt: skip
    p.add_argument("--max-restarts", type=int, default=5,
                   help="a model worker that stops is replaced; more than this many stops of one model's workers "
                   "within 60 s stop the server, exit 1 (default: 5)")  # fmt: skip
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"),
                   help="the least severe of LitServe's and uvicorn's log lines written to stderr (default: "
                   "warning; info adds the start's steps, debug much more)")  # fmt: skip
    return p


MAX_THREADS = 1024  # torch threads a worker may be given (--threads 20000 failed to start, 100000 crashed it)


def _check(args: argparse.Namespace) -> None:
    if args.host == "localhost":
        args.host = "127.0.0.1"
    if args.host not in HOSTS:
        fail("attention-serve", f"--host {args.host}: LitServe listens on 127.0.0.1, 0.0.0.0 (every IPv4 address) or "
             ":: (every IPv6 address); choose one")  # fmt: skip
    if not 1024 <= args.port <= 65535:
        fail("attention-serve", f"--port must be from 1024 to 65535, got {args.port}")
    positive = ("max_upload_mb", "max_queue", "max_sentences", "max_chars", "max_batch_size", "workers_per_device",
                "max_pixels", "read_timeout", "timeout", "max_search", "max_evidence")  # fmt: skip
    for name in positive:
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            fail("attention-serve", f"--{name.replace('_', '-')} must be more than 0, got {getattr(args, name)}")
    for name in ("batch_timeout", "grace", "max_restarts"):
        if getattr(args, name) < 0:
            fail("attention-serve", f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    # values that pass "more than 0" and leave a server that answers nothing: every upload refused at "at most 0.0
    # KiB", every request timed out
    least_of = (("max_upload_mb", 0.001, " (1 KB)"), ("read_timeout", 0.01, " s"), ("timeout", 0.01, " s"))
    for name, least, unit in least_of:
        if least > getattr(args, name) > 0:
            fail("attention-serve", f"--{name.replace('_', '-')} must be at least {least:g}{unit}, got "
                 f"{getattr(args, name):g}")  # fmt: skip
    if args.batch_timeout > args.timeout:  # LitServe refused it in a traceback once the start was under way
        fail("attention-serve", f"--batch-timeout {args.batch_timeout:g} must be at most --timeout {args.timeout:g} "
             "(a batch would wait longer than its requests may)")  # fmt: skip
    # what one request may ask of a translation worker, sized to the time it may take (limits.check_work)
    if args.max_search is None:
        args.max_search = max(1, round(SEARCH_AT_120 * args.timeout / 120))
    if args.max_evidence is None:
        args.max_evidence = max(1, round(EVIDENCE_AT_120 * args.timeout / 120))
    if args.threads is not None and args.threads < 1:
        fail("attention-serve", f"--threads must be at least 1, got {args.threads}")
    most = max(MAX_THREADS, os.cpu_count() or 1)  # a machine of more cores may use them all
    if args.threads is not None and args.threads > most:  # 100000 crashed the worker (SIGSEGV), 20000 too
        fail("attention-serve", f"--threads must be at most {most}, got {args.threads} (this machine has "
             f"{os.cpu_count()} cores)")  # fmt: skip
    if args.devices != "auto" and not (args.devices.isdigit() and int(args.devices) > 0):
        fail("attention-serve", f"--devices takes a number of GPUs or auto, got {args.devices!r}")
    if args.devices != "auto" and args.accelerator == "cpu":  # LitServe runs one CPU device whatever it is told
        fail("attention-serve", f"--devices {args.devices} counts GPUs: with --accelerator cpu the models run on the "
             "CPU (for more workers: --workers-per-device)")  # fmt: skip
    if args.max_pixels < MIN_MEGAPIXELS:
        fail("attention-serve", f"--max-pixels must be at least {MIN_MEGAPIXELS:g} (megapixels), got "
             f"{args.max_pixels:g}")  # fmt: skip
    if args.caption_model == "none" and args.text_model == "none":
        fail("attention-serve", "--caption-model none and --text-model none: nothing to serve")
    if args.text_ensemble and args.text_model == "none":
        fail("attention-serve", "--text-ensemble translates with --text-model: give a text model, not none")
    typed_key = bool(args.api_key)
    if args.api_key == "":  # --api-key "$KEY" with KEY unset: it was an open server, unsaid
        fail("attention-serve", "--api-key is empty: give the key (or leave the option out for a server without one)")
    variable = os.environ.get("ATTENTION_SERVE_API_KEY")
    args.api_key = args.api_key or variable or None
    if args.api_key is not None and (args.api_key != args.api_key.strip() or _has_control(args.api_key)):
        # a key read from a file with its line end: no client can send it (HTTP strips a header value's spaces), so
        # every request got 401
        where = "--api-key" if typed_key else "$ATTENTION_SERVE_API_KEY"
        fail("attention-serve", f"{where}: the key has spaces at its ends or control characters (a line end read with "
             "it?), which no client can send in a header: give it without them")  # fmt: skip
    args.allowed_hosts = _allowed_hosts(args.host, args.allowed_host)
    from attention_serve.models import check_files, ensemble_files
    from text_attn.core.modelfile import ModelFileError

    try:  # before torch and LitServe are imported (build_server: ~4 s): a mistyped path is said at once
        check_files(args.caption_model, args.text_model)
        ensemble_files(args.text_ensemble)
    except ModelFileError as err:
        fail("attention-serve", str(err))
    try:  # the port, now: a port in use is one line, not a traceback from a worker process
        with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((args.host, args.port))
    except OSError as err:
        fail("attention-serve", f"cannot listen on {_address(args.host, args.port)}: {err.strerror or one_line(err)}")
    if args.accelerator == "cuda":
        _check_gpus(args.devices)
    if variable == "" and not typed_key:  # set but empty: a key was meant, and the server requires none
        print("attention-serve: note: $ATTENTION_SERVE_API_KEY is set but empty: no key is required", file=sys.stderr,
              flush=True)  # fmt: skip
    if typed_key:  # once the options are good (a refusal stays one line), where the one who typed it sees it
        print("attention-serve: note: --api-key puts the key in the process list, readable by every local user; "
              "give it as $ATTENTION_SERVE_API_KEY instead", file=sys.stderr, flush=True)  # fmt: skip


def _has_control(text: str) -> bool:
    """Whether ``text`` holds a control character (a line end, a tab): inner spaces are sent whole in a header."""
    import unicodedata

    return any(unicodedata.category(c) == "Cc" for c in text)


def _address(host: str, port: int) -> str:
    """host:port as an address is written: an IPv6 host in brackets (":::8203" read as nothing)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _allowed_hosts(host: str, names: list[str]) -> frozenset[str] | None:
    """The Host header names the server answers (limits.host_allowed; None: any): bound to 127.0.0.1, the loopback
    names and ``names`` (--allowed-host); bound to every address, ``names`` and the loopback names when any is given,
    else any; '*' among them: any."""
    from attention_serve.limits import LOOPBACK_NAMES, host_name

    given = {host_name(n) for n in names}
    if "" in given:
        fail("attention-serve", "--allowed-host needs a name (e.g. --allowed-host myhost.example)")
    if "*" in given or (host != "127.0.0.1" and not given):
        return None
    return frozenset(LOOPBACK_NAMES | given)


def _check_gpus(devices: str) -> None:
    """--accelerator cuda where torch has no GPU to use: one line now. Each worker failed to load its model instead
    (or, with --devices auto, none was started), and the server waited for them for ever."""
    import torch  # build_server imports it anyway; only --accelerator cuda pays for it before the template starts

    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not found:
        fail("attention-serve", "--accelerator cuda: torch finds no usable GPU here (no NVIDIA driver or device, or a "
             "CPU-only torch); use --accelerator cpu or auto")  # fmt: skip
    if devices != "auto" and int(devices) > found:
        fail("attention-serve", f"--devices {devices}: torch finds {found} usable GPU{'s' if found > 1 else ''} here")


def build_server(args: argparse.Namespace, template=None):
    """The LitServer for these options (models loaded and checked in this process first); its model workers start
    from ``template`` (a multiprocessing context, worker_start.py; None: LitServe's own "spawn")."""
    from attention_serve import apis, models, page
    from attention_serve.front import Front
    from attention_serve.inflight import Waiting
    from attention_serve.limits import Limits
    from attention_serve.openapi import describe
    from attention_serve.workers import SupervisedServer
    from text_attn.core.modelfile import ModelFileError

    try:
        caption, text = models.load(args.caption_model, args.text_model, args.text_ensemble)
    except ModelFileError as err:
        fail("attention-serve", str(err))
    limits = Limits(max_upload_bytes=int(args.max_upload_mb * 2**20), max_pixels=int(args.max_pixels * 1e6),
                    max_sentences=args.max_sentences, max_chars=args.max_chars, max_queue=args.max_queue,
                    read_timeout=args.read_timeout, api_key=args.api_key, max_search=args.max_search,
                    max_evidence=args.max_evidence, allowed_hosts=getattr(args, "allowed_hosts", None))  # fmt: skip
    batching = {"max_batch_size": args.max_batch_size, "batch_timeout": args.batch_timeout, "threads": args.threads,
                "idle_wait": args.idle_wait is not False}  # fmt: skip
    lit_apis = []
    if caption is not None:
        lit_apis.append(apis.CaptionAPI(caption.path, caption.name, **batching))
    if text is not None:
        lit_apis.append(apis.TranslateAPI(text.path, text.name, ensemble=text.extra["ensemble"], **batching))
    html = page.render(caption and caption.info, text and text.info, bool(args.api_key), text and text.extra["lang"])
    info = {"caption": caption and caption.info, "translate": text and text.info}
    devices = "auto" if args.devices == "auto" else int(args.devices)
    waiting = Waiting(args.timeout)
    front = {"caption": caption, "text": text, "limits": limits, "page": html, "waiting": waiting}
    server = SupervisedServer(
        lit_apis, accelerator=args.accelerator, devices=devices, workers_per_device=args.workers_per_device,
        timeout=args.timeout, model_metadata=info, middlewares=[(Front, front)], max_restarts=args.max_restarts,
        worker_context=template,
    )  # fmt: skip
    waiting.attach(server)  # before LitServe forks the HTTP process: it reads the workers' board
    server.uvicorn_graceful_timeout = args.grace
    describe(server.app, api_key=bool(args.api_key))
    json_errors(server.app)
    # the imports and the models' checks are in: the collector as usual, and what they made is frozen before LitServe
    # forks the HTTP process from this one (text_attn.core.startup_gc)
    startup_gc.release()
    return server, caption, text


def json_errors(app) -> None:
    """Every refusal in the one JSON shape with its log line, also those FastAPI makes itself (an unknown path 404,
    a wrong method 405) or LitServe raises (a worker's 500, a timed-out request's 504); no slash redirects (their
    Location would echo the client's Host header); and no /docs or /redoc: FastAPI's pages load Swagger UI and ReDoc
    from a CDN, which an offline server cannot reach (/openapi.json is the description)."""
    import logging

    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    from attention_serve.front import SECURITY_HEADERS, log, request_line

    async def answer(request, exc: HTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "the request could not be answered"
        log(f"{exc.status_code} {request_line(request.method, request.url.path)}: {message}")
        headers = {k.decode(): v.decode() for k, v in SECURITY_HEADERS} | dict(exc.headers or {})
        return JSONResponse({"error": message, "status": exc.status_code}, exc.status_code, headers=headers)

    app.add_exception_handler(HTTPException, answer)
    app.router.redirect_slashes = False
    app.router.routes = [r for r in app.router.routes
                         if getattr(r, "path", None) not in ("/docs", "/docs/oauth2-redirect", "/redoc")]  # fmt: skip
    logging.getLogger("python_multipart").setLevel(logging.ERROR)  # a malformed form is our one log line, not two
    logging.getLogger("multipart").setLevel(logging.ERROR)


def _stop_gracefully(server, grace: float) -> dict:
    """SIGTERM (a service manager's stop) and SIGINT (Ctrl-C): the requests in flight are answered, then everything
    stops; sent to this process alone or to the whole process group alike.

    LitServe's own shutdown closes its queues before it stops its HTTP processes, so a request in flight gets no
    answer (measured: curl's "empty reply" on a request sent 0.3 s before SIGTERM). So first the HTTP process is
    stopped (uvicorn then accepts nothing new and finishes what it holds, within --grace seconds, while the model
    workers still run), and only then LitServe's shutdown is started, quietly (its monitor thread reports the
    closed queues as a crash). The HTTP process is sent SIGTERM for SIGINT too: a SIGINT sent to this process alone
    (``kill -INT``, Docker's STOPSIGNAL) did not reach it, and the server took new work for --grace + 2 s. Where Ctrl-C
    reached it already, the SIGTERM changes nothing (uvicorn forces its exit only on a second SIGINT). The helper
    processes outlive a group's SIGTERM as they do its SIGINT (worker_start.py)."""
    import logging
    import multiprocessing
    import time

    stopping, main = [], os.getpid()

    def stop(signum, frame):
        if os.getpid() != main:  # an HTTP process (forked with this handler) re-raising the signal once it is done
            # uvicorn has answered what it held: leave at once. SystemExit raised here reached uvicorn's lifespan task
            # as a cancellation, which it logged as a 40-line traceback when Ctrl-C reached this process too (a race)
            flush_quietly(sys.stdout, sys.stderr)
            os._exit(0)
        if stopping:
            return
        stopping.append(signum)
        _say("attention-serve: stopping: answering the requests in flight")
        server.stop_supervising()  # no worker is replaced from now on (one being started is stopped with the rest)
        front = [p for p in multiprocessing.active_children() if p.name.startswith("LitServer-")]
        for p in front:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace + 2
        server.stop_listening(front, min(deadline, time.monotonic() + 2))
        for p in front:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        logging.getLogger("litserve").setLevel(logging.CRITICAL)
        logging.getLogger("litserve.server").setLevel(logging.CRITICAL)
        raise KeyboardInterrupt

    return {number: signal.signal(number, stop) for number in (signal.SIGTERM, signal.SIGINT)}  # the ones replaced


def _say(line: str) -> None:
    """A line on stderr, where stderr may have gone (a closed terminal): not said then, and the stop goes on."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _stop_at_start() -> tuple[list[int], dict]:
    """Until the server's own stop is set (:func:`_stop_gracefully`), SIGTERM ends the start as Ctrl-C does, with
    "stopped" and exit 0 (it ended it silently with 143 and left a /tmp/pymp-* folder): (the signals seen, the
    handlers replaced)."""
    seen: list[int] = []

    def stop(signum, frame):
        seen.append(signum)
        raise KeyboardInterrupt

    return seen, {signal.SIGTERM: signal.signal(signal.SIGTERM, stop)}


def serve_main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _check(args)
    from attention_serve.worker_start import short_socket_folder, start_worker_template

    try:
        moved = short_socket_folder()
    except ValueError as err:
        fail("attention-serve", str(err))
    if moved:
        print(f"attention-serve: note: {moved}", file=sys.stderr, flush=True)
    seen, before = _stop_at_start()
    try:
        # first, so that the template's imports run beside build_server's imports and model loads (worker_start.py)
        server, caption, text = build_server(args, start_worker_template())
    except KeyboardInterrupt:
        _restore(before)
        if not seen:  # Ctrl-C: "interrupted", exit code 130, as before
            raise
        _say("attention-serve: stopped")
        return 0

    if args.devices != "auto" and server.devices == ["cpu"]:  # --accelerator auto found no GPU
        print(f"attention-serve: note: no GPU found: --devices {args.devices} is ignored, the models run on the CPU",
              file=sys.stderr, flush=True)  # fmt: skip
    # every address (0.0.0.0, ::): the address to open here, and the machine's name for others ("http://0.0.0.0:8000/"
    # opens nothing); IPv6 in brackets
    every = args.host in ("0.0.0.0", "::")
    shown = "localhost" if args.host == "127.0.0.1" or every else f"[{args.host}]" if ":" in args.host else args.host
    # the name others reach it by: the first --allowed-host given (the machine's own name would be refused), else it
    named = next((n for n in args.allowed_host if n and n != "*"), None) or socket.gethostname()
    shown_also = f" (from other machines: http://{named}:{args.port}/)" if every else ""
    names = " and ".join(f"{what} {m.name}" for what, m in (("captioner", caption), ("translator", text)) if m)

    def serving() -> None:  # once the port takes connections (the models loaded): a client may start now
        print(f"attention-serve: serving the {names} {_where(server.devices)} at http://{shown}:{args.port}/"
              f"{shown_also} (the API: /openapi.json)", file=sys.stderr, flush=True)  # fmt: skip
        if args.host not in LOOPBACK and not args.api_key:
            print(f"attention-serve: note: listening on {args.host}, reachable from other machines, with no "
                  "authentication: anyone who can reach it can use it (set $ATTENTION_SERVE_API_KEY to require a key)",
                  file=sys.stderr, flush=True)  # fmt: skip

    server.on_serving = serving
    replaced = _stop_gracefully(server, args.grace)
    try:
        return _serve(server, args)
    finally:  # a caller in this process (a test, a notebook) gets its own handlers back, not a dead server's stop
        _restore({**replaced, **before})


def _where(devices: list) -> str:
    """Where the models run, from LitServe's ``devices``: ``["cpu"]``, or a list per GPU of ``"cuda:N"`` names (one
    each unless a worker spans several)."""
    if devices == ["cpu"]:
        return "on the CPU"
    flat = [d for group in devices for d in ([group] if isinstance(group, str) else group)]
    numbers = [str(d).partition(":")[2] or str(d) for d in flat]
    return f"on GPU {numbers[0]}" if len(numbers) == 1 else f"on GPUs {', '.join(numbers)}"


def _restore(handlers: dict) -> None:
    for number, handler in handlers.items():
        signal.signal(number, handler)


def _serve(server, args: argparse.Namespace) -> int:
    """Run the server until it stops; the exit code, with its line."""
    from attention_serve import header_deadline
    from attention_serve.apis import LinesWithout  # imported by build_server
    from attention_serve.workers import PortTaken, StartFailed

    # LitServe's "Swagger UI is available at .../docs" at --log-level info: /docs is switched off here; uvicorn's
    # "Cancel N running task(s), timeout graceful shutdown exceeded": each request it cancels has its own 503 line
    logging.getLogger("litserve.server").addFilter(LinesWithout(SWAGGER))
    logging.getLogger("litserve.server").addFilter(LinesWithout(NOT_ALIVE))
    logging.getLogger("uvicorn.error").addFilter(LinesWithout(CANCEL_COUNT))
    try:
        server.run(host=args.host, port=args.port, num_api_servers=1, log_level=args.log_level,
                   generate_client_file=False, access_log=False,
                   http=header_deadline.protocol(args.read_timeout))  # fmt: skip
    except PortTaken as err:  # its workers ended by LitServe's shutdown; nothing was served
        fail("attention-serve", f"cannot listen on {_address(args.host, args.port)}: {err.strerror} (another process "
             "took the port while the models loaded)")  # fmt: skip
    except StartFailed as err:  # its workers and LitServe's manager are ended (workers.SupervisedServer)
        print(f"attention-serve: stopped (exit 1): {err}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:  # a stop while the models loaded: nothing was served; the workers are ended likewise
        _say("attention-serve: stopped")
        return 0
    except (EOFError, ConnectionError) as err:  # LitServe's manager killed: its shutdown event is gone with it (a
        # traceback of the main process, exit 1 without a line); the supervisor said what it found
        said = "" if server.gave_up else f": LitServe's manager process is gone ({type(err).__name__})"
        print(f"attention-serve: stopped (exit 1){said}", file=sys.stderr, flush=True)  # the supervisor's said why
        return 1
    if server.gave_up is not None:  # its line is in the log already (workers.py)
        _say("attention-serve: stopped (exit 1)")
        return 1
    _say("attention-serve: stopped")
    return 0


# the console script; the teardown it skips (a garbage collection over torch's, FastAPI's and the models' objects)
# took 1.4 s of every stop after "stopped" was printed
main = leaving(serve_main)


if __name__ == "__main__":
    main()
