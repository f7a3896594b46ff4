"""``translate --resume`` refuses other inputs than the run it continues: FILE.run.json keeps a digest of the inputs
its lines translate (translate_resume.InputsRead), rewritten after each batch; another stdin or other arguments had
the translations of one text appended to another's, exit 0. On a small subword model built here (random weights)."""

from __future__ import annotations

import hashlib
import json

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file, translate_run

from text_attn.translation.translate_resume import InputsRead

LINES = [*DE, "Ein Hund läuft.", DE[2]]
OTHER = [*LINES[:3], "Eine Katze schläft.", *LINES[4:]]  # input 4 differs


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("m"))


def _run(model_file, capsys, monkeypatch, *args: str, stdin: str | None = None) -> tuple[int, str]:
    return translate_run(model_file, capsys, monkeypatch, *args, stdin=stdin, batch_size=2)


def _digest(lines: list[str]) -> str:
    """By hand: each input as a JSON string and a newline."""
    return hashlib.sha256(b"".join(json.dumps(line).encode() + b"\n" for line in lines)).hexdigest()


def _state(lines: list[str]) -> dict:
    """A record's ``inputs`` of ``lines``, by hand: their count, digest, and the digests of the first 1, 2, 4, ..."""
    marks = {str(2**k): _digest(lines[: 2**k]) for k in range(len(lines).bit_length())}
    return {"count": len(lines), "sha256": _digest(lines), "marks": marks}


def test_the_digest_is_of_the_inputs_in_order_a_crlf_file_as_its_lines():
    read = InputsRead({3})
    for line in ["Ein Mann.\r", "Zwei\nHunde.", "x", "y", "z"]:
        read.add(line)
    lines = ["Ein Mann.", "Zwei\nHunde.", "x", "y", "z"]
    assert read.state() == _state(lines) and sorted(read.state()["marks"]) == ["1", "2", "4"]
    assert read.at == {0: _digest([]), 1: _digest(lines[:1]), 2: _digest(lines[:2]), 3: _digest(lines[:3]),
                       4: _digest(lines[:4])}  # fmt: skip
    # a line's end cannot run two inputs into one: "a\nb" as one input is not "a" then "b"
    assert _digest(["a\nb"]) != _digest(["a", "b"])


@pytest.mark.parametrize("via", ["arguments", "stdin"])
def test_a_resume_of_other_inputs_is_refused_and_of_the_same_continued(model_file, tmp_path, capsys, monkeypatch, via):
    out, record = tmp_path / "o.txt", tmp_path / "o.txt.run.json"

    def run(lines: list[str], *args: str) -> tuple[int, str]:
        stdin = "".join(f"{line}\n" for line in lines) if via == "stdin" else None
        return _run(model_file, capsys, monkeypatch, *([] if stdin else lines), "--output", str(out), *args,
                    stdin=stdin)  # fmt: skip

    assert run(LINES)[0] == 0
    whole = out.read_bytes()
    assert json.loads(record.read_text())["inputs"] == _state(LINES)
    out.write_bytes(b"".join(whole.splitlines(keepends=True)[:4]))  # stopped after 4 inputs
    kept = json.loads(record.read_text())
    kept["inputs"] = {"count": 4, "sha256": _digest(LINES[:4])}  # as the record after the second batch
    record.write_text(json.dumps(kept))
    cut = out.read_bytes()
    code, err = run(OTHER, "--resume")
    given = "the sentences given" if via == "arguments" else "stdin"
    assert code == 2 and err.strip() == (
        f"translate: error: --resume: {out}'s first 4 line(s) translate other inputs than the first 4 of {given}: "
        f"resume with the input the run read, or give another --output FILE (to go on anyway, remove {record})"
    )
    assert out.read_bytes() == cut and json.loads(record.read_text()) == kept  # refused: untouched
    code, err = run(LINES, "--resume")
    assert code == 0 and "--resume" not in err and out.read_bytes() == whole
    assert json.loads(record.read_text())["inputs"] == _state(LINES)  # all of them now


def test_the_record_is_rewritten_as_each_batch_is_written(model_file, tmp_path, capsys, monkeypatch):
    """A record a batch behind its file (the run stopped between writing the two) checks the inputs it covers."""
    out, record = tmp_path / "o.txt", tmp_path / "o.txt.run.json"
    seen = []
    import text_attn.translation.translate_cli as cli

    real = cli._keep_records

    def keep(args, settings):
        real(args, settings)
        seen.append((len(out.read_text().splitlines()), json.loads(record.read_text())["inputs"]["count"]))

    monkeypatch.setattr(cli, "_keep_records", keep)
    assert _run(model_file, capsys, monkeypatch, *LINES, "--output", str(out))[0] == 0
    assert seen == [(2, 2), (4, 4), (6, 6), (8, 8)]  # --batch-size 2: the lines written, then their inputs' digest
    out.write_bytes(b"".join(out.read_bytes().splitlines(keepends=True)[:5]))
    kept = json.loads(record.read_text())
    kept["inputs"] = {"count": 4, "sha256": _digest(LINES[:4])}  # 5 lines written, the record of 4 inputs
    record.write_text(json.dumps(kept))
    code, err = _run(model_file, capsys, monkeypatch, *LINES[:4], "Ganz anders.", *LINES[5:], "--output", str(out),
                     "--resume")  # fmt: skip
    assert code == 0, err  # input 5 is beyond the digest: the 4 it covers are the same
    code, err = _run(model_file, capsys, monkeypatch, *OTHER, "--output", str(out), "--resume")
    assert code == 2 and "first 8 line(s) translate other inputs than the first 8" in err


def test_jsonl_records_and_paragraphs_are_checked_and_an_old_record_is_not(model_file, tmp_path, capsys, monkeypatch):
    jsonl, record = tmp_path / "r.jsonl", tmp_path / "r.jsonl.run.json"
    text = "Ein Mann\nfährt Fahrrad.\n\nZwei Hunde.\n\nEin Hund läuft.\n"
    assert _run(model_file, capsys, monkeypatch, "--jsonl", str(jsonl), "--paragraphs", stdin=text)[0] == 0
    assert json.loads(record.read_text())["inputs"]["count"] == 3  # a paragraph an input
    full = jsonl.read_bytes()
    jsonl.write_bytes(b"".join(full.splitlines(keepends=True)[:2]))
    kept = json.loads(record.read_text())
    kept["inputs"] = {"count": 2, "sha256": _digest(["Ein Mann fährt Fahrrad.", "Zwei Hunde."])}
    record.write_text(json.dumps(kept))
    changed = text.replace("Zwei Hunde.", "Drei Hunde.")
    code, err = _run(model_file, capsys, monkeypatch, "--jsonl", str(jsonl), "--paragraphs", "--resume", stdin=changed)
    assert code == 2 and "first 2 record(s) translate other inputs than the first 2 of stdin" in err
    del kept["inputs"]  # a record from before the digest: nothing to check the inputs against
    record.write_text(json.dumps(kept))
    code, err = _run(model_file, capsys, monkeypatch, "--jsonl", str(jsonl), "--paragraphs", "--resume", stdin=changed)
    assert code == 0 and "--resume" not in err
    # from now on: every input, the skipped ones too
    assert json.loads(record.read_text())["inputs"] == _state(
        ["Ein Mann fährt Fahrrad.", "Drei Hunde.", "Ein Hund läuft."]
    )


def test_a_file_holding_fewer_lines_than_its_record_is_checked_by_the_marks(model_file, tmp_path, capsys, monkeypatch):
    """Lines removed by hand to redo them, or a last line cut off: the record covers more inputs than the file holds,
    and another text's translations were appended unchecked, exit 0. The first 2**k inputs the file holds are
    checked; a record from before the marks is said, not checked."""
    out, record = tmp_path / "o.txt", tmp_path / "o.txt.run.json"
    stdin = "".join(f"{line}\n" for line in LINES)
    assert _run(model_file, capsys, monkeypatch, "--output", str(out), stdin=stdin)[0] == 0
    whole, kept = out.read_bytes(), json.loads(record.read_text())
    out.write_bytes(b"".join(whole.splitlines(keepends=True)[:5]))  # 5 of the record's 8: its first 4 checked
    other = "".join(f"{line}\n" for line in [*LINES[:3], "Eine Katze schläft.", *LINES[4:]])  # input 4 differs
    code, err = _run(model_file, capsys, monkeypatch, "--output", str(out), "--resume", stdin=other)
    assert code == 2 and "first 4 line(s) translate other inputs than the first 4 of stdin" in err, err
    code, err = _run(model_file, capsys, monkeypatch, "--output", str(out), "--resume", stdin=stdin)
    assert code == 0 and out.read_bytes() == whole, err
    out.write_bytes(b"".join(whole.splitlines(keepends=True)[:5]))
    del kept["inputs"]["marks"]  # a record from before them
    record.write_text(json.dumps(kept))
    code, err = _run(model_file, capsys, monkeypatch, "--output", str(out), "--resume", stdin=other)
    assert code == 0 and (f"translate: note: --resume: {out} holds 5 line(s), fewer than the 8 its record covers, "
                          "which keeps no digest of fewer") in err  # fmt: skip
