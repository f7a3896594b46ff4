"""attention-serve's command line: --help, and every bad option or model file refused in one line with exit code 2
before anything starts (no worker process, no port held)."""

from __future__ import annotations

import os
import socket

import pytest
from helpers.tiny_translator import tiny_word_model_file

from attention_serve.cli import _parser, serve_main


def _refused(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        serve_main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("attention-serve: error: "), err
    return err[0]


def test_help_names_the_routes_and_options(capsys):
    with pytest.raises(SystemExit) as exc:
        serve_main(["--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "POST /caption" in out and "--max-upload-mb" in out and "--api-key" in out
    # a key typed on the command line is in the process list, readable by every local user: the variable is advised
    assert "Prefer the variable" in " ".join(out.split()) and "--allowed-host" in out  # argparse wraps the lines


def test_device_is_the_accelerators_other_name_and_no_option_is_abbreviated(capsys):
    """caption and translate spell it --device: argparse completed a serve --device to --devices ("--devices takes a
    number of GPUs or auto, got 'cpu'"). Now it is --accelerator's other name, and no prefix stands for an option."""
    assert _parser().parse_args(["--device", "cpu"]).accelerator == "cpu"
    assert _parser().parse_args(["--devices", "2"]).devices == "2"
    said = "unrecognized arguments: --dev (did you mean --device or --devices?) cpu"
    assert said in _refused(["--dev", "cpu"], capsys)
    assert "unrecognized arguments: --accel (did you mean --accelerator?) cuda" in _refused(["--accel", "cuda"], capsys)
    with pytest.raises(SystemExit):
        serve_main(["--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    assert "--accelerator {auto,cpu,cuda}, --device {auto,cpu,cuda} where the models run: auto (the default" in out
    assert "--log-level {debug,info,warning,error} the least severe of LitServe's and uvicorn's log lines" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--port", "80"], "--port must be from 1024 to 65535"),
        (["--host", "10.1.2.3"], "--host 10.1.2.3"),
        (["--max-upload-mb", "0"], "--max-upload-mb must be more than 0"),
        (["--max-queue", "-1"], "--max-queue"),
        (["--batch-timeout", "-1"], "--batch-timeout must be 0 or more"),
        (["--devices", "two"], "--devices"),
        (["--caption-model", "none", "--text-model", "none"], "nothing to serve"),
        (["--text-model", "none", "--text-ensemble", "bahdanau"], "--text-ensemble translates with --text-model"),
        (["--text-ensemble", "/nowhere/m.pt"], "--text-ensemble /nowhere/m.pt: no such model file"),
        (["--colour", "red"], "--colour"),
        (["--allowed-host", ":8000"], "--allowed-host needs a name"),
        # 1e-9 was taken, then every photo refused "at most 0.0 megapixels"
        (["--max-pixels", "1e-9"], "--max-pixels must be at least 0.1 (megapixels), got 1e-09"),
        (["--devices", "2", "--accelerator", "cpu"], "--devices 2 counts GPUs: with --accelerator cpu"),  # was ignored
        (["--max-search", "0"], "--max-search must be more than 0"),
        (["--max-evidence", "-5"], "--max-evidence must be more than 0"),
        # a traceback from LitServe once the start was under way
        (["--batch-timeout", "200"], "--batch-timeout 200 must be at most --timeout 120"),
        # taken, then a server that answered nothing: every upload "at most 0.0 KiB", every request timed out
        (["--max-upload-mb", "1e-7"], "--max-upload-mb must be at least 0.001 (1 KB), got 1e-07"),
        (["--timeout", "1e-9"], "--timeout must be at least 0.01 s, got 1e-09"),
        (["--read-timeout", "1e-9"], "--read-timeout must be at least 0.01 s, got 1e-09"),
        (["--threads", "100000"], "--threads must be at most 1024, got 100000"),  # the worker crashed (SIGSEGV)
        (["--api-key", ""], "--api-key is empty: give the key"),  # "$KEY" unset: it was an open server, unsaid
        (["--api-key", "abc\n"], "--api-key: the key has spaces at its ends or control characters"),  # 401 always
        (["--api-key", " abc"], "--api-key: the key has spaces at its ends"),
    ],
)
def test_a_bad_option_is_one_line(argv, says, capsys):
    assert says in _refused(argv, capsys)


@pytest.mark.parametrize("devices", ["auto", "1"])
def test_cuda_without_a_usable_gpu_is_one_line(devices, monkeypatch, capsys):
    """Each worker failed to load its model ("Found no NVIDIA driver") or, with --devices auto, none was started, and
    the server waited for them for ever, its port never open."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on this machine, also on one with a GPU
    line = _refused(["--accelerator", "cuda", "--devices", devices, "--port", str(_free_port())], capsys)
    assert "--accelerator cuda: torch finds no usable GPU here" in line


def test_more_devices_than_gpus_is_one_line(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    line = _refused(["--accelerator", "cuda", "--devices", "2", "--port", str(_free_port())], capsys)
    assert line.endswith("--devices 2: torch finds 1 usable GPU here"), line


def test_a_model_file_that_is_missing_or_of_the_other_family_is_one_line(tmp_path, capsys):
    assert "nope.pt: no such model file" in _refused(["--caption-model", str(tmp_path / "nope.pt")], capsys)
    text = tiny_word_model_file(tmp_path / "t.pt")
    assert "t.pt" in _refused(
        ["--caption-model", str(text), "--text-model", "none", "--port", str(_free_port())], capsys
    )


def test_a_caption_model_whose_recorded_beam_is_wider_than_its_vocabulary_is_refused(tmp_path):
    """Such a file (its info written by hand: caption-export refuses it) was served, and every /caption answered with
    an empty caption; `caption` refuses it too. (The models' check itself, so that a regression fails here rather
    than start a server.)"""
    from attention_serve.models import load_caption
    from tests.helpers.tiny_captioner import tiny_model_file
    from text_attn.core.modelfile import ModelFileError, update_info

    model = tiny_model_file(tmp_path / "m.pt")
    update_info(model, {"decoding": {"beam_size": 50}})
    with pytest.raises(ModelFileError) as exc:
        load_caption(model)
    assert f"{model}: its recorded decoding's beam size 50 is more than the model's 25 words" in str(exc.value)


def test_a_port_in_use_is_one_line(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert f"cannot listen on 127.0.0.1:{port}" in _refused(["--port", str(port)], capsys)
    if not socket.has_ipv6:
        return
    with socket.socket(socket.AF_INET6) as s:  # an IPv6 address in brackets (":::8203" read as nothing)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind(("::", 0))
        s.listen()
        port = s.getsockname()[1]
        assert f"cannot listen on [::]:{port}: " in _refused(["--host", "::", "--port", str(port)], capsys)


def test_a_model_path_that_is_no_file_is_named_so(tmp_path, capsys):
    """A folder or a FIFO given as a model said "no such model file", though it is there."""
    import os

    (tmp_path / "dir.pt").mkdir()
    os.mkfifo(tmp_path / "fifo.pt")
    said = _refused(["--caption-model", str(tmp_path / "dir.pt")], capsys)
    assert said.endswith(f"--caption-model {tmp_path / 'dir.pt'}: a folder, not a model file"), said
    said = _refused(["--text-model", str(tmp_path / "fifo.pt")], capsys)
    assert said.endswith("not a regular file (a FIFO, device or socket), not a model file"), said


def test_a_port_taken_while_the_models_loaded_is_refused_not_waited_on():
    """Two servers started together both pass the start's check (nothing listens yet) and both bind; the one whose
    HTTP process listened second never listened and waited forever. Its socket listens before the HTTP process
    starts: the loser's is PortTaken, which the command says in one line (exit 2)."""
    import errno

    from attention_serve.workers import PortTaken, SupervisedServer

    with socket.socket() as ours, socket.socket() as theirs:
        for s in (ours, theirs):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's bind_socket does
        ours.bind(("127.0.0.1", 0))
        port = ours.getsockname()[1]
        theirs.bind(("127.0.0.1", port))  # both bound: neither listens yet
        theirs.listen()
        with pytest.raises(PortTaken) as err:
            SupervisedServer._start_server(None, port, 1, "info", [ours], "process")
        assert err.value.errno == errno.EADDRINUSE


def test_serve_main_gives_a_callers_signal_handlers_back(monkeypatch, capsys):
    """serve_main called in this process (a test, a notebook) left its stop handlers for SIGTERM and SIGINT installed,
    bound to a server that had ended: a later SIGTERM reached them (Lightning's handler calls the one before it)."""
    import signal
    import threading

    import attention_serve.cli as cli
    import attention_serve.worker_start as worker_start

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("handlers are set on the main thread only")

    class Ended:  # a server whose run returns at once, as after a stop
        devices, gave_up, on_serving = ["cpu"], None, None

        def run(self, **kwargs):
            return None

    monkeypatch.setattr(worker_start, "start_worker_template", lambda: None)
    monkeypatch.setattr(cli, "build_server", lambda args, template: (Ended(), None, None))
    before = {n: signal.signal(n, h) for n, h in ((signal.SIGTERM, signal.SIG_DFL),
                                                   (signal.SIGINT, signal.default_int_handler),
                                                   (signal.SIGHUP, signal.SIG_DFL))}  # fmt: skip
    try:
        assert serve_main(["--port", str(_free_port())]) == 0
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL
    finally:
        for n, h in before.items():
            signal.signal(n, h)
    assert capsys.readouterr().err.strip().splitlines()[-1] == "attention-serve: stopped"


def test_a_server_on_every_address_names_addresses_to_open(monkeypatch, capsys):
    """--host 0.0.0.0 printed "serving ... at http://0.0.0.0:8000/", an address that opens nothing: the local one,
    and the machine's name for other machines."""
    import signal
    import socket as sockets
    import threading

    import attention_serve.cli as cli
    import attention_serve.worker_start as worker_start

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("handlers are set on the main thread only")

    class Serving:
        devices, gave_up, on_serving = ["cpu"], None, None

        def run(self, **kwargs):
            self.on_serving()

    class Named:
        name = "m.pt"

    monkeypatch.setattr(worker_start, "start_worker_template", lambda: None)
    monkeypatch.setattr(cli, "build_server", lambda args, template: (Serving(), None, Named()))
    port = _free_port()
    saved = {n: signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert serve_main(["--host", "0.0.0.0", "--port", str(port)]) == 0
    finally:
        for n, h in saved.items():
            signal.signal(n, h)
    line = next(x for x in capsys.readouterr().err.splitlines() if "serving the" in x)
    assert f"at http://localhost:{port}/ (from other machines: http://{sockets.gethostname()}:{port}/)" in line
    assert "serving the translator m.pt on the CPU at" in line  # where the models run (it was not said)
    assert cli._where([["cuda:0"]]) == "on GPU 0" and cli._where([["cuda:0"], ["cuda:1"]]) == "on GPUs 0, 1"
    # with --allowed-host, that name (the machine's own would be refused: the server answers those names alone)
    port = _free_port()
    try:
        assert serve_main(["--host", "0.0.0.0", "--port", str(port), "--allowed-host", "serve.example"]) == 0
    finally:
        for n, h in saved.items():
            signal.signal(n, h)
    line = next(x for x in capsys.readouterr().err.splitlines() if "serving the" in x)
    assert f"(from other machines: http://serve.example:{port}/)" in line


def test_a_stop_while_the_models_load_is_said_and_exits_0(monkeypatch, capsys):
    """SIGTERM (or a hangup) before the server's own stop was set ended it silently with 143, a /tmp/pymp-* folder
    left; it is a stop as later ones are: "stopped", exit 0, the caller's handlers given back."""
    import os
    import signal
    import threading

    import attention_serve.cli as cli
    import attention_serve.worker_start as worker_start

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("handlers are set on the main thread only")

    def loading(args, template):  # a signal while the models load
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("not reached: the stop raises first")

    monkeypatch.setattr(worker_start, "start_worker_template", lambda: None)
    monkeypatch.setattr(cli, "build_server", loading)
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        assert serve_main(["--port", str(_free_port())]) == 0
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)
    assert capsys.readouterr().err.strip().splitlines()[-1] == "attention-serve: stopped"


def test_a_passphrase_key_is_taken(monkeypatch, capsys):
    """A key with inner spaces is sent whole in a header: taken (the first check refused it)."""
    import attention_serve.cli as cli

    args = cli._parser().parse_args(["--port", str(_free_port()), "--caption-model", "shapes", "--text-model", "none",
                                     "--api-key", "correct horse battery staple"])  # fmt: skip
    cli._check(args)
    assert args.api_key == "correct horse battery staple"


def test_an_empty_key_variable_is_said(monkeypatch, capsys):
    import attention_serve.cli as cli

    monkeypatch.setenv("ATTENTION_SERVE_API_KEY", "")
    args = cli._parser().parse_args(["--port", str(_free_port()), "--caption-model", "shapes", "--text-model", "none"])
    cli._check(args)
    assert args.api_key is None
    assert "$ATTENTION_SERVE_API_KEY is set but empty: no key is required" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_size_never_reads_like_the_limit():
    """0.1 MB of rounding said "the body is 0.7 MB; at most 0.7 MB": where the two read alike, the bytes are given."""
    from attention_serve.front import _too_big

    assert _too_big(772_100, 772_096) == "772,100 bytes; at most 772,096"
    assert _too_big(21 * 2**20, 20 * 2**20) == "21.0 MiB; at most 20.0 MiB"


def test_info_keeps_a_model_info_value_written_on_its_next_line():
    # translate --model-info writes "test scores default decoding:" with its value on an indented next line
    from attention_serve.models import _details

    lines = ["model:          m.pt", "test scores default decoding:", "                test beam 8: sacreBLEU 41.54",
             "decoding:       beam_size 8"]  # fmt: skip
    assert _details(lines) == {"model": "m.pt", "test_scores_default_decoding": "test beam 8: sacreBLEU 41.54",
                               "decoding": "beam_size 8"}  # fmt: skip


def test_the_log_never_points_at_the_pages_that_are_off():
    """At --log-level info LitServe said "Swagger UI is available at .../docs", a page switched off here (404)."""
    import logging

    from attention_serve.apis import LinesWithout
    from attention_serve.cli import SWAGGER

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("litserve.server", logging.INFO, __file__, 1, msg, None, None)

    assert not LinesWithout(SWAGGER).filter(record("Swagger UI is available at http://127.0.0.1:8000/docs"))
    assert LinesWithout(SWAGGER).filter(record("Uvicorn running on http://127.0.0.1:8000"))


def test_info_answers_json_whatever_a_model_file_holds():
    """A file written before caption-export refused NaN held one in its info: /info was a plain-text 500."""
    import json
    import math

    from attention_serve.models import json_safe

    info = {"x": math.nan, "scores": [1.0, math.inf, {"y": -math.inf}], "name": "m", "n": 3}
    assert json_safe(info) == {"x": None, "scores": [1.0, None, {"y": None}], "name": "m", "n": 3}
    json.dumps(json_safe(info), allow_nan=False)  # what the answer's encoder demands


def test_what_a_translation_request_may_ask_follows_the_timeout():
    """One line of 1,000 letters (8,008 wide at beam 8) ran past --timeout 20 and the short request behind it too:
    the limits of one request's work follow --timeout, unless given."""
    from helpers.server import free_port

    from attention_serve.cli import _check

    def limits(*argv: str) -> tuple[int, int]:
        args = _parser().parse_args([*argv, "--port", str(free_port())])
        _check(args)
        return args.max_search, args.max_evidence

    assert limits() == (2_500_000, 4000)
    assert limits("--timeout", "20") == (416_667, 667)
    assert limits("--timeout", "20", "--max-search", "9000", "--max-evidence", "10") == (9000, 10)


def test_a_translation_requests_evidence_is_counted_by_hand():
    """evidence=1 takes (S + 1) rows a step for each output token, the output as long as it may run: the given text's
    tokens + 1 (its end), else max_len + 1, else the search's own cap 2 x (S + 1) + 10 (at most the longest)."""
    from attention_serve.limits import ClientError, Limits, check_work, evidence_steps

    two = [3, 1]  # two sentences of 3 and 1 tokens
    assert evidence_steps(two, {"evidence": 1, "given": "a dog"}, 512, given=2) == 4 * 3 + 2 * 3
    assert evidence_steps(two, {"evidence": 1, "max_len": 7}, 512) == 4 * 8 + 2 * 8  # 7 tokens and the end
    assert evidence_steps(two, {"evidence": 1}, 512) == 4 * 18 + 2 * 14
    assert evidence_steps(two, {"evidence": 1}, 15) == 4 * 15 + 2 * 14
    assert evidence_steps(two, {"evidence": 0, "max_len": 7}, 512) == 0
    check_work(two, {"evidence": 1, "given": "a dog"}, Limits(max_evidence=18), 512, given=2)  # at the limit
    with pytest.raises(ClientError, match="may take 18 model steps") as refused:
        check_work(two, {"evidence": 1, "given": "a dog"}, Limits(max_evidence=17), 512, given=2)
    assert refused.value.status == 413


def test_max_batch_size_1_is_no_warning(tmp_path):
    """LitServe warned "both batch and unbatch methods implemented, but the max_batch_size parameter was not set"
    (with its source path) for --max-batch-size 1: the size was set."""
    import warnings

    from attention_serve.apis import CaptionAPI, TranslateAPI

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for api in (CaptionAPI, TranslateAPI):
            api(tmp_path / "m.pt", "m", threads=1, max_batch_size=1, batch_timeout=0.0)


def test_litserves_own_line_for_a_request_timed_out_in_the_queue_is_quiet():
    """The server's line says it (504 ... --timeout); LitServe's second one, in its own format, advised a LitServe
    argument. Its other lines stay."""
    import logging

    from attention_serve.apis import QUEUE_TIMEOUT, LinesWithout

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("litserve.loops.simple_loops", logging.ERROR, __file__, 1, msg, None, None)

    said = "Request 1f was waiting in the queue for too long (4.0 seconds) and has been timed out."
    assert not LinesWithout(QUEUE_TIMEOUT).filter(record(said))
    assert LinesWithout(QUEUE_TIMEOUT).filter(record("LitAPI ran into an error while processing the batch"))


def test_a_tmpdir_too_long_for_unix_sockets_has_them_made_in_tmp(tmp_path, monkeypatch):
    """A scheduler's long per-job TMPDIR: the start ended in a traceback (AF_UNIX path too long) as multiprocessing
    bound the template's socket under it. Its folder for sockets is made in /tmp instead; TMPDIR stays as it is."""
    import shutil
    import tempfile
    from multiprocessing import process
    from multiprocessing.connection import Listener

    from attention_serve.worker_start import short_socket_folder

    config = process.current_process()._config
    monkeypatch.delitem(config, "tempdir", raising=False)  # given back as it was after the test
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    assert short_socket_folder() is None and "tempdir" not in config  # short enough: nothing changes
    long = tmp_path / ("x" * 90)
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    line = short_socket_folder()
    folder = config["tempdir"]
    try:
        assert line == (f"TMPDIR {long} is too long for the Unix sockets the server's processes talk over (at most 75 "
                        f"bytes): they are made in {folder}")  # fmt: skip
        assert folder.startswith("/tmp/pymp-") and oct(os.stat(folder).st_mode & 0o777) == "0o700"
        with Listener(family="AF_UNIX") as listener:  # what failed: a socket's path under the long TMPDIR
            assert listener.address.startswith(folder)
        assert tempfile.gettempdir() == str(long)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
