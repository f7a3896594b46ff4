"""``translate --resume``: an --output file an interrupted run wrote (its last line cut mid-write) is continued into
the very file one run writes, from arguments and from stdin; the progress bar starts at the inputs done; refusals in
one line. On a small subword model built here (random weights: the tests check the plumbing)."""

from __future__ import annotations

import json
import sys

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file, translate_run

from text_attn.core.file_digest import sha256_of
from text_attn.translation.translator import Translator

# with no file to continue (stdout is none)
NO_FILE = "--resume continues the --output FILE (and --jsonl FILE) an interrupted run wrote: give --output FILE"
LINES = [*DE, "Ein Hund läuft.", "", DE[2]]  # an empty line: its empty output line (failed or blank) counts as done


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("m"))


def _run(model_file, capsys, *args: str, stdin: str | None = None, monkeypatch=None) -> tuple[int, str]:
    return translate_run(model_file, capsys, monkeypatch, *args, stdin=stdin)


@pytest.mark.parametrize("via", ["arguments", "stdin"])
def test_a_resumed_file_is_the_file_one_run_writes(model_file, tmp_path, capsys, monkeypatch, via):
    whole, part = tmp_path / "whole.txt", tmp_path / "part.txt"
    stdin = "".join(f"{line}\n" for line in LINES) if via == "stdin" else None
    inputs = [] if stdin else LINES
    code, _ = _run(model_file, capsys, *inputs, "--output", str(whole), stdin=stdin, monkeypatch=monkeypatch)
    failed = 1 if via == "arguments" else 0  # an empty argument fails; stdin's blank line is a blank line out
    assert code == failed
    written = whole.read_bytes()
    lines = written.split(b"\n")
    # stopped after 4 inputs, writing the 5th: its line cut off mid-write
    part.write_bytes(b"\n".join(lines[:4]) + b"\n" + lines[4][:3])
    code, err = _run(model_file, capsys, *inputs, "--output", str(part), "--resume", stdin=stdin,
                     monkeypatch=monkeypatch)  # fmt: skip
    assert code == failed and part.read_bytes() == written
    assert ("input 8: empty sentence" in err) == bool(failed)  # the inputs keep their numbers
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
    # a file on stdin: the bar counts its bytes, from those of the inputs done (its offset, 64 KiB read ahead, had
    # started a small file's bar near 100%)
    from text_attn.translation.translate_cli import translate_main

    lines = [f"{line}\n" for line in LINES if line]
    (tmp_path / "in.txt").write_text("".join(lines), encoding="utf-8")
    out = tmp_path / "o2.txt"
    out.write_text("a\nb\n")
    with (tmp_path / "in.txt").open(encoding="utf-8") as f:
        monkeypatch.setattr("sys.stdin", f)
        assert translate_main(["--model", str(model_file), "--output", str(out), "--resume", "--max-len", "3"]) == 0
    sizes = [len(line.encode()) for line in lines]
    assert (bars[1]["initial"], bars[1]["total"]) == (sum(sizes[:2]), sum(sizes))


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ([], NO_FILE),
        (["--output", "-"], NO_FILE),
        (["--output", "o.txt", "--html", "p.html"], "--resume continues --output o.txt; --html would hold a page"),
        (["--output", "o.txt", "--alignments", "a.txt"], "; --alignments would hold a file of its own"),
        (["--output", "o.txt", "--n-best", "1"], "; --n-best would hold lines numbered by input"),
        (["--output", "o.txt", "--references", "long.txt"], "; --references would hold the scores of this run's"),
        (["--output", "long.txt"], "--resume: --output long.txt holds 3 line(s), more than the 2 input(s): it is not"),
        (["--jsonl", "long.txt"], "--resume: --jsonl long.txt holds 3 record(s), more than the 2 input(s): it is not"),
        (["--output", "-", "--jsonl", "-"], "--output - and --jsonl - both name stdout"),
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


def test_a_resume_with_another_model_or_decoding_is_refused_naming_it(model_file, tmp_path, capsys):
    """FILE.run.json records what FILE's lines were made with: one model's greedy lines and another's beam lines
    went into one file, told apart by nothing."""
    out, record = tmp_path / "o.txt", tmp_path / "o.txt.run.json"
    assert _run(model_file, capsys, *LINES[:2], "--output", str(out))[0] == 0
    kept = json.loads(record.read_text())
    assert kept["model"] == str(model_file) and kept["model_sha256"] == sha256_of(model_file)
    assert (kept["options"]["--beam-size"], kept["options"]["--max-len"], kept["options"]["--sample"]) == (1, 5, False)
    assert "--keep-case" in kept["options"]  # the model reads a line typed without capitals with its casing
    other = Translator.load(model_file)
    other.info = {**other.info, "data": "another corpus"}  # the same weights: another file all the same
    other_file = other.save(tmp_path / "other.pt")
    written = out.read_bytes()
    for args, says in [
        (["--beam-size", "3"], "--beam-size 1 (this run: 3)"),
        (["--keep-case"], "--keep-case not given (this run: given)"),
        (["--sample", "--sample-seed", "7"], "--sample not given (this run: given); --temperature not given (this run: "
                                             "1.0)"),
        (["--model", str(other_file)], f"another model file ({model_file}; this run: {other_file})"),
    ]:  # fmt: skip
        code, err = _run(model_file, capsys, *LINES[:4], "--output", str(out), "--resume", *args)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert f"translate: error: --resume: {out}'s lines were made with {says}" in err
        assert err.strip().endswith(f"or give another --output FILE (to mix them anyway, remove {record})")
        assert out.read_bytes() == written and json.loads(record.read_text()) == kept  # refused: untouched
    code, err = _run(model_file, capsys, *LINES[:4], "--output", str(out), "--resume")  # the same: continued
    assert code == 0 and "--resume" not in err
    assert len(out.read_text().splitlines()) == 4
    # a seed's draws repeat: its own seed continues, another is refused
    sampled = tmp_path / "s.txt"
    _run(model_file, capsys, *LINES[:2], "--output", str(sampled), "--sample", "--sample-seed", "7")
    code, err = _run(model_file, capsys, *LINES[:4], "--output", str(sampled), "--resume", "--sample", "--sample-seed",
                     "8")  # fmt: skip
    assert code == 2 and "were made with --sample-seed 7 (this run: 8)" in err
    code, err = _run(model_file, capsys, *LINES[:4], "--output", str(sampled), "--resume", "--sample", "--sample-seed",
                     "7")  # fmt: skip
    assert code == 0 and "--resume" not in err


def test_a_file_written_without_a_record_is_continued_with_a_note(model_file, tmp_path, capsys):
    out, record = tmp_path / "o.txt", tmp_path / "o.txt.run.json"
    _run(model_file, capsys, *LINES[:2], "--output", str(out))
    record.unlink()  # as a run before records left it
    code, err = _run(model_file, capsys, *LINES[:4], "--output", str(out), "--resume")
    assert code == 0 and err.splitlines()[0] == (
        f"translate: note: --resume: {out} has no run record for its 2 line(s) (written before 2026-12-02): they "
        "cannot be checked against this model and options; o.txt.run.json covers the lines from this run on"
    )
    assert json.loads(record.read_text())["lines_before"] == 2 and len(out.read_text().splitlines()) == 4
    code, err = _run(model_file, capsys, *LINES[:5], "--output", str(out), "--resume", "--beam-size", "2")
    assert (
        code == 2
        and f"--resume: {out}'s lines after its first 2 (which no run record covers) were made with "
        "--beam-size 1 (this run: 2)"
        in err
    )
    assert _run(model_file, capsys, *LINES[:5], "--output", str(out), "--resume")[0] == 0
    assert json.loads(record.read_text())["lines_before"] == 2  # carried on


def test_a_rerun_without_resume_says_it_starts_each_file_afresh(model_file, tmp_path, capsys, monkeypatch):
    """caption's --jsonl said so and translate's files did not: a forgotten --resume emptied hours of work unsaid."""
    out, records = tmp_path / "o.txt", tmp_path / "o.jsonl"
    files = ["--output", str(out), "--jsonl", str(records)]
    code, err = _run(model_file, capsys, *LINES[:2], *files, monkeypatch=monkeypatch)
    assert code == 0 and "afresh" not in err  # new files
    code, err = _run(model_file, capsys, *LINES[:2], *files, monkeypatch=monkeypatch)
    assert code == 0 and [line for line in err.splitlines() if "afresh" in line] == [
        f"translate: {flag} {path} existed and is started afresh (--resume continues a file instead)"
        for flag, path in (("--output", out), ("--jsonl", records))
    ]
    code, err = _run(model_file, capsys, *LINES[:2], *files, "--resume", monkeypatch=monkeypatch)
    assert code == 0 and "afresh" not in err
