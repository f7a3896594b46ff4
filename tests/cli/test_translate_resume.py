"""``translate --resume``: an --output file an interrupted run wrote (its last line cut mid-write) is continued into
the very file one run writes, from arguments and from stdin; the progress bar starts at the inputs done; refusals in
one line. On a small subword model built here (random weights: the tests check the plumbing)."""

from __future__ import annotations

import io
import sys

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.translation.translate_cli import translate_main

LINES = [*DE, "Ein Hund läuft.", "", DE[2]]  # an empty line: a failed input's empty output line counts as done


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("m"))


def _run(model_file, capsys, *args: str, stdin: str | None = None, monkeypatch=None) -> tuple[int, str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8"))
    try:
        code = translate_main(["--model", str(model_file), "--max-len", "5", "--batch-size", "3", *args])
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("via", ["arguments", "stdin"])
def test_a_resumed_file_is_the_file_one_run_writes(model_file, tmp_path, capsys, monkeypatch, via):
    whole, part = tmp_path / "whole.txt", tmp_path / "part.txt"
    stdin = "".join(f"{line}\n" for line in LINES) if via == "stdin" else None
    inputs = [] if stdin else LINES
    code, _ = _run(model_file, capsys, *inputs, "--output", str(whole), stdin=stdin, monkeypatch=monkeypatch)
    assert code == 1  # the empty line failed, as in any run
    written = whole.read_bytes()
    lines = written.split(b"\n")
    # stopped after 4 inputs, writing the 5th: its line cut off mid-write
    part.write_bytes(b"\n".join(lines[:4]) + b"\n" + lines[4][:3])
    code, err = _run(model_file, capsys, *inputs, "--output", str(part), "--resume", stdin=stdin,
                     monkeypatch=monkeypatch)  # fmt: skip
    assert code == 1 and part.read_bytes() == written
    assert "input 8: empty sentence" in err  # the inputs keep their numbers
    code, _ = _run(model_file, capsys, *inputs, "--output", str(part), "--resume", stdin=stdin,
                   monkeypatch=monkeypatch)  # fmt: skip
    assert code == 0 and part.read_bytes() == written  # all done: nothing written again
    fresh = tmp_path / "fresh.txt"  # no file yet: a run from the start
    _run(model_file, capsys, *inputs, "--output", str(fresh), "--resume", stdin=stdin, monkeypatch=monkeypatch)
    assert fresh.read_bytes() == written


def test_the_progress_bar_starts_at_the_inputs_done(model_file, tmp_path, capsys, monkeypatch):
    import tqdm.auto

    bars = []

    class Bar(tqdm.auto.tqdm):
        def __init__(self, *a, **k):
            bars.append(k)
            super().__init__(*a, **k)

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: the bar
    out = tmp_path / "o.txt"
    out.write_text("a\nb\n")
    assert _run(model_file, capsys, *LINES[:5], "--output", str(out), "--resume")[0] == 0
    assert (bars[0]["initial"], bars[0]["total"]) == (2, 5)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ([], "--resume continues the --output FILE an interrupted run wrote: give --output FILE"),
        (["--output", "-"], "--resume continues the --output FILE an interrupted run wrote: give --output FILE"),
        (["--output", "o.txt", "--html", "p.html"], "--resume continues --output o.txt; --html would hold a page"),
        (["--output", "o.txt", "--alignments", "a.txt"], "; --alignments would hold a file of its own"),
        (["--output", "o.txt", "--n-best", "1"], "; --n-best would hold lines numbered by input"),
        (["--output", "o.txt", "--references", "long.txt"], "; --references would hold the scores of this run's"),
        (["--output", "long.txt"], "--resume: --output long.txt holds 3 line(s), more than the 2 input(s): it is not"),
    ],
)
def test_refusals_are_one_line(model_file, tmp_path, capsys, monkeypatch, args, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "long.txt").write_text("x\ny\nz\n")
    (tmp_path / "o.txt").write_text("")
    code, err = _run(model_file, capsys, DE[0], DE[1], "--resume", *args)
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1, err
    assert (tmp_path / "long.txt").read_text() == "x\ny\nz\n"  # refused: untouched


def test_stdin_shorter_than_the_output_is_refused_with_the_file_untouched(model_file, tmp_path, capsys, monkeypatch):
    out = tmp_path / "o.txt"
    out.write_bytes(b"a\nb\nc\npart")
    code, err = _run(model_file, capsys, "--output", str(out), "--resume", stdin="Ein Mann.\nZwei Hunde.\n",
                     monkeypatch=monkeypatch)  # fmt: skip
    assert code == 2 and err.strip().endswith("holds 3 line(s), more than the 2 input(s): it is not a run of these "
                                              "inputs")  # fmt: skip
    assert out.read_bytes() == b"a\nb\nc\npart"
