"""``translate --jsonl FILE --resume``: the records an interrupted run wrote are continued into the very file one run
writes, alone or beside --output (where the run stopped between writing the two, both go on after the fewer); a
--jsonl record of the run (FILE.run.json) refuses another model or options, --unsure included; a file missing beside
the other's lines is refused, every file untouched. On a small subword model built here (random weights: the tests
check the plumbing)."""

from __future__ import annotations

import json

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file
from helpers.translate_run import run_translate

LINES = [*DE, "Ein Hund läuft.", "", DE[2]]  # an empty line: its record (an error, or blank's) counts as done


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return str(tiny_subword_model_file(tmp_path_factory.mktemp("m")))


def _run(model_file, capsys, monkeypatch, *args: str, stdin: str = "") -> tuple[int, str, str]:
    argv = ["--model", model_file, "--max-len", "5", "--batch-size", "3", "--unsure-below", "0.3", *args]
    return run_translate(argv, capsys, monkeypatch, stdin)


def _cut(data: bytes, whole_lines: int, part: int = 3) -> bytes:
    """``data``'s first ``whole_lines`` lines and ``part`` bytes of the next: a run stopped mid-write."""
    lines = data.split(b"\n")
    return b"".join(line + b"\n" for line in lines[:whole_lines]) + lines[whole_lines][:part]


@pytest.mark.parametrize("via", ["arguments", "stdin"])
def test_resumed_records_are_the_file_one_run_writes(model_file, tmp_path, capsys, monkeypatch, via):
    whole, part = tmp_path / "whole.jsonl", tmp_path / "part.jsonl"
    stdin = "".join(f"{line}\n" for line in LINES) if via == "stdin" else ""
    inputs = [] if stdin else LINES
    code, lines, _ = _run(model_file, capsys, monkeypatch, *inputs, "--jsonl", str(whole), stdin=stdin)
    failed = 1 if via == "arguments" else 0  # an empty argument fails; stdin's blank line is no error
    assert code == failed
    written = whole.read_bytes()
    records = [json.loads(line) for line in written.decode().splitlines()]
    assert [r["input"] for r in records] == list(range(1, len(LINES) + 1))
    assert ("error" in records[-2]) == bool(failed) and records[-2]["source"] == ""
    assert all("word_probs" in r for r in records if r.get("tokens"))  # --unsure's fields, on every translation
    kept = json.loads((tmp_path / "whole.jsonl.run.json").read_text())
    assert kept["options"]["--unsure"] == 0.3 and kept["options"]["--evidence"] is False
    part.write_bytes(_cut(written, 4))
    code, resumed, err = _run(model_file, capsys, monkeypatch, *inputs, "--jsonl", str(part), "--resume", stdin=stdin)
    assert code == failed and part.read_bytes() == written, err
    assert resumed.splitlines() == lines.splitlines()[4:]  # stdout: this run's plain lines
    assert ("input 8: empty sentence" in err) == bool(failed)  # the inputs keep their numbers
    code, _, _ = _run(model_file, capsys, monkeypatch, *inputs, "--jsonl", str(part), "--resume", stdin=stdin)
    assert code == 0 and part.read_bytes() == written  # all done: nothing written again


def test_both_files_go_on_after_the_fewer_lines(model_file, tmp_path, capsys, monkeypatch):
    out, jsonl = tmp_path / "o.txt", tmp_path / "r.jsonl"
    both = ("--output", str(out), "--jsonl", str(jsonl))
    assert _run(model_file, capsys, monkeypatch, *LINES, *both)[0] == 1
    lines, records = out.read_bytes(), jsonl.read_bytes()
    for out_lines, records_held in [(6, 3), (2, 5), (4, 4)]:  # stopped between the two, or after both
        out.write_bytes(_cut(lines, out_lines, 1))
        jsonl.write_bytes(_cut(records, records_held, 5))
        code, _, err = _run(model_file, capsys, monkeypatch, *LINES, *both, "--resume")
        assert code == 1 and out.read_bytes() == lines and jsonl.read_bytes() == records, err
        fewest = min(out_lines, records_held)
        longer = f"--output {out} holds 6 line(s)" if out_lines == 6 else f"--jsonl {jsonl} holds 5 record(s)"
        note = [line for line in err.splitlines() if "--resume" in line]
        if out_lines == records_held:
            assert note == []
        else:
            assert len(note) == 1 and note[0].startswith(f"translate: note: --resume: {longer}, ")
            assert f"both go on after input {fewest}" in note[0]


def test_a_file_missing_beside_the_others_lines_is_refused_untouched(model_file, tmp_path, capsys, monkeypatch):
    out, jsonl = tmp_path / "o.txt", tmp_path / "r.jsonl"
    out.write_text("a\nb\n")
    code, _, err = _run(model_file, capsys, monkeypatch, *LINES, "--output", str(out), "--jsonl", str(jsonl),
                        "--resume")  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.strip() == (
        f"translate: error: --resume: --output {out} holds 2 line(s) but --jsonl {jsonl} does not exist: the run "
        "that wrote one did not write the other; resume without --jsonl, or start afresh without --resume"
    )
    assert out.read_text() == "a\nb\n" and not jsonl.exists()
    jsonl.write_text("")  # there, empty (the run stopped before its first records): both from input 1
    assert _run(model_file, capsys, monkeypatch, *LINES, "--output", str(out), "--jsonl", str(jsonl),
                "--resume")[0] == 1  # fmt: skip
    assert len(out.read_text().splitlines()) == len(jsonl.read_text().splitlines()) == len(LINES)


def test_records_made_with_other_options_are_refused_naming_them(model_file, tmp_path, capsys, monkeypatch):
    jsonl, record = tmp_path / "r.jsonl", tmp_path / "r.jsonl.run.json"
    assert _run(model_file, capsys, monkeypatch, *LINES[:2], "--jsonl", str(jsonl))[0] == 0
    written, kept = jsonl.read_bytes(), record.read_text()
    for args, says in [
        (["--unsure-below", "0.5"], "--unsure-below 0.3 (this run: --unsure-below 0.5)"),
        (["--beam-size", "2"], "--beam-size 1 (this run: 2)"),
    ]:
        code, _, err = _run(model_file, capsys, monkeypatch, *LINES[:4], "--jsonl", str(jsonl), "--resume", *args)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert f"translate: error: --resume: {jsonl}'s records were made with {says}" in err
        assert err.strip().endswith(f"or give another --jsonl FILE (to mix them anyway, remove {record})")
        assert jsonl.read_bytes() == written and record.read_text() == kept  # refused: untouched
    record.unlink()  # as a --jsonl run before records left it: continued with one note
    code, _, err = _run(model_file, capsys, monkeypatch, *LINES[:4], "--jsonl", str(jsonl), "--resume")
    assert code == 0 and err.splitlines()[0] == (
        f"translate: note: --resume: {jsonl} has no run record for its 2 record(s) (written before 2026-12-04): they "
        "cannot be checked against this model and options; r.jsonl.run.json covers the records from this run on"
    )
    assert [json.loads(line)["input"] for line in jsonl.read_text().splitlines()] == [1, 2, 3, 4]
    # no record and lines that are no records of translate (a text file, caption's records): they were counted as
    # inputs done, the translations appended after them, exit 0
    for lines in ("A man.\nA dog.\n", '{"image": "a.jpg", "caption": "a dog"}\n', '{"input": 2}\n'):
        other = tmp_path / "other.jsonl"
        other.write_text(lines)
        code, _, err = _run(model_file, capsys, monkeypatch, *LINES[:4], "--jsonl", str(other), "--resume")
        assert code == 2 and err.strip() == (f"translate: error: --resume: --jsonl {other}'s line 1 is not translate's "
                                             'record of input 1 ({"input": 1, ...}): it is not a run of translate; '
                                             "give another --jsonl FILE"), err  # fmt: skip
        assert other.read_text() == lines


def test_records_on_stdout_beside_a_resumed_output_are_this_runs_numbered_by_input(
    model_file, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "o.txt"
    assert _run(model_file, capsys, monkeypatch, *LINES, "--output", str(out))[0] == 1
    lines = out.read_bytes()
    out.write_bytes(_cut(lines, 5))
    code, printed, _ = _run(model_file, capsys, monkeypatch, *LINES, "--output", str(out), "--jsonl", "-", "--resume")
    assert code == 1 and out.read_bytes() == lines  # stdout's records are no file to continue: --output says
    records = [json.loads(line) for line in printed.splitlines()]
    assert [r["input"] for r in records] == [6, 7, 8, 9] and records[0]["source"] == LINES[5]


def test_a_link_for_either_file_is_refused_before_the_other_is_cut_back(model_file, tmp_path, capsys, monkeypatch):
    out, jsonl, target = tmp_path / "o.txt", tmp_path / "r.jsonl", tmp_path / "elsewhere.jsonl"
    out.write_text("a\nb\nc\n")
    target.write_text('{"input": 1}\n')
    jsonl.symlink_to(target)  # one record: counted, the output would be cut back to it
    code, _, err = _run(model_file, capsys, monkeypatch, *LINES, "--output", str(out), "--jsonl", str(jsonl),
                        "--resume")  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.strip().startswith(f"translate: error: cannot write --jsonl {jsonl}: {jsonl} is a symbolic link")
    assert out.read_text() == "a\nb\nc\n" and target.read_text() == '{"input": 1}\n'


@pytest.mark.parametrize("piece", [1, 3, 4, 1 << 20])
def test_the_lines_counted_and_their_bytes_across_pieces(tmp_path, monkeypatch, piece):
    from text_attn.translation import translate_resume

    monkeypatch.setattr(translate_resume, "READ", piece)  # the file read a few bytes at a time: lines cross pieces
    f = tmp_path / "f.txt"
    f.write_bytes(b"ab\n\ncde\nf\ngh")  # 4 complete lines (one empty), then one cut off
    assert translate_resume.done_lines(str(f)) == (4, 10)
    assert [translate_resume.done_lines(str(f), most=k) for k in range(5)] == [(0, 0), (1, 3), (2, 4), (3, 8), (4, 10)]
    assert translate_resume.done_lines(str(tmp_path / "none.txt")) == (0, None)


def test_a_refused_resume_of_files_apart_is_one_line_without_the_note(model_file, tmp_path, capsys, monkeypatch):
    out, jsonl = tmp_path / "o.txt", tmp_path / "r.jsonl"
    both = ("--output", str(out), "--jsonl", str(jsonl))
    assert _run(model_file, capsys, monkeypatch, *LINES, *both)[0] == 1
    out.write_bytes(_cut(out.read_bytes(), 6))
    jsonl.write_bytes(_cut(jsonl.read_bytes(), 3))
    written = out.read_bytes(), jsonl.read_bytes()
    code, _, err = _run(model_file, capsys, monkeypatch, *LINES, *both, "--resume", "--beam-size", "2")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--beam-size 1 (this run: 2)" in err, err
    assert (out.read_bytes(), jsonl.read_bytes()) == written
