"""``translate --jsonl``: a JSON record an input, in input order, the fields of attention-serve's /translate answer
(text_attn.translation.records, which both use) and the input's number; a failed input's record holds its error;
--unsure, --n-best and --given(-file) add theirs; '-' puts the records on stdout in place of the plain lines; --json
prints the same records as one JSON list; what cannot be written with them is refused in one line."""

from __future__ import annotations

import json

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file
from helpers.translate_run import run_translate as _run

from text_attn.translation.records import input_record, translation_record
from text_attn.translation.translate_streams import JsonList
from text_attn.translation.translator import Translator


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(tiny_subword_model_file(tmp_path_factory.mktemp("m")))


def test_each_input_s_record_is_the_server_s_with_its_number_and_a_failed_one_holds_its_error(
    model, capsys, monkeypatch
):
    lines = [DE[0], "", DE[1]]
    code, out, err = _run(["--model", model, "--jsonl", "-", *lines], capsys, monkeypatch)
    assert code == 1 and "input 2: empty sentence" in err  # one input failed: said, and in its record
    records = [json.loads(line) for line in out.splitlines()]  # no plain lines: the records replace them
    assert [r["input"] for r in records] == [1, 2, 3]
    assert records[1] == {"input": 2, "source": "", "error": "empty sentence"}
    translator = Translator.load(model)
    for record, line in zip([records[0], records[2]], [lines[0], lines[2]], strict=True):
        (tr,) = translator.translate([line])  # the same recorded decoding
        expected = json.loads(json.dumps({"input": record["input"]} | translation_record(translator, line, tr)))
        assert record == expected
        assert record["translation"] == tr.text and len(record["attention"]) == len(tr.tokens)
        assert "token_probs" not in record  # the model's own without --unsure: no probabilities


def test_the_records_go_to_their_file_beside_the_plain_lines(model, capsys, monkeypatch, tmp_path):
    path = tmp_path / "out.jsonl"
    code, out, _ = _run(["--model", model, "--jsonl", str(path)], capsys, monkeypatch, stdin=f"{DE[0]}\n{DE[1]}\n")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert code == 0 and out.splitlines() == [r["translation"] for r in records]
    text = tmp_path / "out.txt"  # --output has the plain lines: '-' puts the records on stdout beside them
    code, out, _ = _run(["--model", model, "--output", str(text), "--jsonl", "-", DE[0]], capsys, monkeypatch)
    assert code == 0 and json.loads(out)["translation"] == text.read_text(encoding="utf-8").rstrip("\n")


def test_unsure_n_best_and_translations_given_add_their_fields(model, capsys, monkeypatch):
    argv = ["--model", model, "--jsonl", "-", "--unsure-below", "0.5", "--beam-size", "3", "--n-best", "2", DE[0]]
    code, out, _ = _run(argv, capsys, monkeypatch)
    (record,) = [json.loads(line) for line in out.splitlines()]
    (tr,) = Translator.load(model).translate([DE[0]], beam_size=3, n_best=2, probs=True)
    assert code == 0 and record["token_probs"] == pytest.approx(tr.probs, abs=1e-6)
    assert record["words"] == tr.words and record["word_probs"] == pytest.approx(tr.word_probs, abs=1e-6)
    assert [w for w, _ in record["unsure"]] == [w for w, _ in tr.unsure(0.5)]
    assert [h["translation"] for h in record["n_best"]] == [text for text, _, _ in tr.nbest]
    given = ["a man", "two dogs play in the snow"]
    code, out, _ = _run(["--model", model, "--jsonl", "-", "--given", given[0], "--given", given[1], DE[0]], capsys,
                        monkeypatch)  # fmt: skip
    (record,) = [json.loads(line) for line in out.splitlines()]
    scores = [h["score"] for h in record["ranked"]]
    assert code == 0 and record["given"] is True and scores == sorted(scores, reverse=True)
    assert record["translation"] == record["ranked"][0]["translation"] and record["score"] == scores[0]
    assert {h["translation"] for h in record["ranked"]} == set(given) and len(record["token_probs"]) > 0


def test_json_prints_the_records_as_one_list_a_record_a_line(model, capsys, monkeypatch, tmp_path):
    lines = [DE[0], "", DE[1]]
    code, out, err = _run(["--model", model, "--jsonl", "-", *lines], capsys, monkeypatch)
    records = [json.loads(line) for line in out.splitlines()]
    code_json, out_json, err_json = _run(["--model", model, "--json", *lines], capsys, monkeypatch)
    assert (code_json, err_json) == (code, err) == (1, err)  # the failed input said as with --jsonl
    assert json.loads(out_json) == records and len(records) == 3
    assert out_json.count("\n") == 3 and out_json.startswith('[{"input": 1') and out_json.endswith("}]\n")
    text = tmp_path / "out.txt"  # --output has the plain lines; the list is on stdout beside them
    code, out, _ = _run(["--model", model, "--output", str(text), "--json", DE[0]], capsys, monkeypatch)
    (record,) = json.loads(out)
    assert code == 0 and record["translation"] == text.read_text(encoding="utf-8").rstrip("\n")


def test_the_list_writer_keeps_a_record_whole_and_writes_an_empty_list():
    import io

    stream = io.StringIO()
    listed = JsonList(stream)
    listed.write(json.dumps({"a": "x\u2028y"}, ensure_ascii=False) + "\n" + json.dumps({"b": 1}) + "\n")
    listed.write(json.dumps({"c": 2}) + "\n")
    listed.close()
    assert json.loads(stream.getvalue()) == [{"a": "x\u2028y"}, {"b": 1}, {"c": 2}]
    assert stream.getvalue().count("\n") == 3 and not stream.closed
    empty = io.StringIO()
    JsonList(empty).close()
    assert empty.getvalue() == "[]\n"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--jsonl", "r.jsonl", "Ein Hund."], "--json prints the records as one JSON list on stdout; --jsonl FILE "
                                              "writes them a line each: give one of the two"),
        (["--demo"], "--demo prints its own sentences with their alignments: give --json with sentences or stdin"),
        (["--model-info"], "--model-info describes the model and exits: give it without --json"),
    ],
)  # fmt: skip
def test_what_cannot_go_with_json_is_refused_in_one_line(model, capsys, monkeypatch, tmp_path, argv, said):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(["--model", model, "--json", *argv], capsys, monkeypatch)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1 and out == "", err
    assert list(tmp_path.iterdir()) == []


def test_json_with_no_input_prints_an_empty_list_and_says_so(model, capsys, monkeypatch):
    code, out, err = _run(["--model", model, "--json"], capsys, monkeypatch, stdin="")
    assert code == 2 and out == "[]\n" and "no input" in err


def test_a_line_that_is_not_utf8_is_shown_with_escapes():
    record = input_record(None, 4, "\udcff\udcfe kaputt", error="not valid UTF-8 text")
    assert record == {"input": 4, "source": "\\xff\\xfe kaputt", "error": "not valid UTF-8 text"}
    json.dumps(record).encode("utf-8")  # writable


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--resume", "--html", "{tmp}/p.html"], "r.jsonl; --html would hold a page of this run's sentences alone"),
        (["--demo"], "--demo prints its own sentences"),
        (["--output", "{tmp}/r.jsonl"], "name the same file"),
    ],
)
def test_what_cannot_go_with_it_is_refused_in_one_line(model, capsys, monkeypatch, tmp_path, argv, said):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    sentences = [] if "--demo" in argv else [DE[0]]
    code, _, err = _run(["--model", model, "--jsonl", str(tmp_path / "r.jsonl"), *argv, *sentences], capsys,
                        monkeypatch)  # fmt: skip
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.jsonl").exists()


def test_evidence_goes_into_each_record_computed_once_for_every_output_that_shows_it(
    model, capsys, monkeypatch, tmp_path
):
    from text_attn.translation import explain
    from text_attn.translation.records import evidence_fields

    calls = []
    real = explain.translation_evidence
    monkeypatch.setattr(explain, "translation_evidence", lambda *a, **k: calls.append(a) or real(*a, **k))
    argv = ["--model", model, "--jsonl", "-", "--evidence", "--html", str(tmp_path / "p.html"), "--alignments",
            str(tmp_path / "a.txt"), "--align-by", "evidence", *DE[:2]]  # fmt: skip
    code, out, err = _run(argv, capsys, monkeypatch)
    assert code == 0, err
    assert len(calls) == 2  # one an input, shared by the record, the alignments and the page
    translator = Translator.load(model)
    for record, line in zip(map(json.loads, out.splitlines()), DE[:2], strict=True):
        (tr,) = translator.translate([line])
        want = evidence_fields(real(translator, list(tr.source), list(tr.tokens)))
        assert record["agreement"] == want["agreement"]
        flat = [v for row in record["evidence"] for v in row]
        assert flat == pytest.approx([v for row in want["evidence"] for v in row], abs=1e-6)
        assert len(record["evidence"]) == len(tr.tokens) and len(record["evidence"][0]) == len(tr.source) + 1
    code, _, err = _run(["--model", model, "--evidence", DE[0]], capsys, monkeypatch)
    assert code == 2 and "--jsonl FILE" in err  # with nothing to show it in: refused
