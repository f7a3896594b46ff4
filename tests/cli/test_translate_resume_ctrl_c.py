"""A real ``translate --output FILE --jsonl FILE`` stopped by Ctrl-C (SIGINT) mid-run and run again with ``--resume``
ends with the very two files one uninterrupted run writes. The stopped run reads a pipe that pauses after its first
lines, so it is stopped with lines written and more to come. On a small subword model built here (random weights:
the test checks the plumbing)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
RUN = "import sys; from text_attn.translation.translate_cli import main; sys.exit(main())"  # argv: sys.argv[1:]
LINES = [f"{DE[k % len(DE)]} {k}" for k in range(40)]


def _translate(args: list[str], **kw) -> subprocess.Popen:
    # SIGINT at its default in the child, as a terminal leaves it (a test worker's children inherit it ignored)
    return subprocess.Popen([sys.executable, "-c", RUN, *args], env=ENV, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kw)  # fmt: skip


def _ten_then_ctrl_c(stopped: subprocess.Popen, written) -> None:
    """Send ``stopped`` the first ten lines, then a pause: once ``written()`` counts ten records written, Ctrl-C
    (SIGINT); it must end with exit code 130."""
    stopped.stdin.write("".join(f"{line}\n" for line in LINES[:10]))
    stopped.stdin.flush()  # they are translated and written as the pipe waits
    deadline = time.monotonic() + 120
    while written() < 10:
        assert time.monotonic() < deadline and stopped.poll() is None, "the first records were not written"
        time.sleep(0.05)
    stopped.send_signal(signal.SIGINT)
    try:
        assert stopped.wait(timeout=60) == 130
    finally:
        stopped.kill()  # a no-op once it ended


@pytest.mark.long
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is a POSIX signal")
def test_ctrl_c_then_resume_gives_both_files_of_one_run(tmp_path):
    model = tiny_subword_model_file(tmp_path)
    common = ["--model", str(model), "--max-len", "5", "--batch-size", "4", "--unsure"]
    corpus = tmp_path / "in.de"
    corpus.write_text("".join(f"{line}\n" for line in LINES))
    whole_out, whole_jsonl = tmp_path / "whole.txt", tmp_path / "whole.jsonl"
    with corpus.open() as stdin:
        done = _translate([*common, "--output", str(whole_out), "--jsonl", str(whole_jsonl)], stdin=stdin)
        assert done.wait(timeout=120) == 0, done.stderr.read()

    out, jsonl = tmp_path / "o.txt", tmp_path / "r.jsonl"
    stopped = _translate([*common, "--output", str(out), "--jsonl", str(jsonl)], stdin=subprocess.PIPE)
    _ten_then_ctrl_c(stopped, lambda: len(jsonl.read_text().splitlines()) if jsonl.exists() else 0)
    err = stopped.stderr.read()
    assert f"translate: interrupted after 10 input(s) in {out} and {jsonl}" in err, err
    stopped.stdin.close()

    with corpus.open() as stdin:
        resumed = _translate([*common, "--output", str(out), "--jsonl", str(jsonl), "--resume"], stdin=stdin)
        assert resumed.wait(timeout=120) == 0, resumed.stderr.read()
    assert out.read_bytes() == whole_out.read_bytes()
    # the same records; their scores and probabilities as a batch of other inputs gives them (an input after the
    # stop sits in another batch than the whole run's: its padding moves the last float digit on some CPUs)
    resumed_records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    _assert_close(resumed_records, [json.loads(line) for line in whole_jsonl.read_text().splitlines()])


def _assert_close(got, want, where: str = "") -> None:
    """JSON values equal, their floats within a relative 1e-5."""
    if isinstance(want, float) and not isinstance(got, bool) and isinstance(got, (int, float)):
        assert got == pytest.approx(want, rel=1e-5), where
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), where
        for k in want:
            _assert_close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for k, (a, b) in enumerate(zip(got, want, strict=True)):
            _assert_close(a, b, f"{where}[{k}]")
    else:
        assert got == want, where


@pytest.mark.long
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is a POSIX signal")
def test_ctrl_c_ends_the_json_list_after_the_inputs_done(tmp_path):
    """``translate --json`` stopped mid-run prints a whole JSON list of the records of the inputs it did."""
    model = tiny_subword_model_file(tmp_path)
    out = tmp_path / "out.json"
    with out.open("w") as stdout:
        stopped = _translate(["--model", str(model), "--max-len", "5", "--batch-size", "4", "--json"],
                             stdin=subprocess.PIPE, stdout=stdout)  # fmt: skip
        _ten_then_ctrl_c(stopped, lambda: out.read_text().count('{"input": '))
    assert "translate: interrupted after 10 input(s)" in stopped.stderr.read()
    stopped.stdin.close()
    records = json.loads(out.read_text())
    assert [r["input"] for r in records] == list(range(1, 11)) and records[0]["source"] == LINES[0]
