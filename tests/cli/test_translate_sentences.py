"""``translate`` and attention-serve translate a line of several sentences sentence by sentence, by default: the
bundled Transformer, which dropped the second sentence of a two-sentence line, now writes both on the line's one output
line; ``--no-split`` translates the line whole, as before; a record, page and alignment line per input line still;
a translation given (``--given``) is read sentence by sentence where it has as many sentences."""

import json

import pytest
from helpers.tiny_translator import tiny_subword_model_file

from attention_serve.apis import TranslateAPI
from attention_serve.limits import TRANSLATE_OPTIONS, parse_options
from text_attn.translation.translate_cli import translate_main

FIRST, SECOND = "Ein Hund läuft über die Wiese.", "Eine Katze schläft auf dem Sofa."
LINE = f"{FIRST} {SECOND}"


def _out(capsys, args: list[str]) -> list[str]:
    assert translate_main(args) == 0
    return capsys.readouterr().out.splitlines()


def test_both_sentences_of_a_line_are_translated_on_its_one_line(capsys, tmp_path):
    alone = _out(capsys, [FIRST, SECOND])
    record, page, links = tmp_path / "r.jsonl", tmp_path / "p.html", tmp_path / "a.txt"
    assert _out(capsys, [LINE, FIRST, "--jsonl", str(record), "--html", str(page), "--alignments", str(links)]) == [
        f"{alone[0]} {alone[1]}",
        alone[0],
    ]
    assert "cat" in alone[1]
    whole = _out(capsys, [LINE, "--no-split"])
    assert len(whole) == 1 and "cat" not in whole[0]  # translated whole, the second sentence is dropped
    first, second = (json.loads(line) for line in record.read_text().splitlines())
    assert first["input"] == 1 and first["translation"] == f"{alone[0]} {alone[1]}"
    assert first["sentence_count"] == 2 and second["sentence_count"] == 1
    assert first["source_tokens"].count("<eos>") == 1 and first["source_tokens"][-1] == "<eos>"
    assert len(first["attention"]) == len(first["tokens"])
    assert all(len(row) == len(first["source_tokens"]) for row in first["attention"])
    assert second["translation"] == alone[0]
    assert len(links.read_text().splitlines()) == 2  # a line of word links per input line
    assert page.read_text().count("<section") == 2


def test_a_translation_given_is_read_sentence_by_sentence_where_it_has_as_many(capsys):
    given = "A dog runs across the grass. A cat sleeps on the couch."
    (split,) = _out(capsys, [LINE, "--given", given])
    (whole,) = _out(capsys, [LINE, "--given", given, "--no-split"])
    parts = ("A dog runs across the grass.", "A cat sleeps on the couch.")
    alone = [_out(capsys, [s, "--given", t])[0] for s, t in zip((FIRST, SECOND), parts, strict=True)]
    probs = [[float(p) for p in line.split("\t")[3].split()] for line in (split, *alone)]
    # each word's probability as read alone (4 significant digits written); the line's end the last sentence's
    assert probs[0] == pytest.approx(probs[1][:-1] + probs[2], rel=1e-3)
    assert split.split("\t")[:3] != whole.split("\t")[:3]  # read whole, its score differs


def test_the_server_translates_each_sentence_of_a_line(tmp_path):
    api = TranslateAPI(tiny_subword_model_file(tmp_path), "translate", 1, 4, 0.01, idle_wait=False)
    api.load("cpu")
    options = {"beam_size": 1, "length_penalty": 0.0, "max_len": 4}
    line, first, second = api._translate([LINE, FIRST, SECOND], options)
    assert line["translation"] == f"{first['translation']} {second['translation']}"
    assert line["tokens"] == first["tokens"] + second["tokens"]
    assert line["sentence_count"] == 2 and first["sentence_count"] == 1
    (given,) = api._translate([LINE], {**options, "given": "A dog."})  # one sentence given: read against the line
    assert given["source_tokens"].count("<eos>") == 1 and given["sentence_count"] == 1
    (both,) = api._translate([LINE], {**options, "given": "A dog. A cat."})  # as many: sentence by sentence
    assert both["sentence_count"] == 2
    (whole,) = api._translate([LINE], {**options, "split": 0})  # as translate --no-split
    assert whole["sentence_count"] == 1 and whole["source_tokens"] == line["source_tokens"]
    assert api._translate(["  "], {**options, "split": 0})[0]["sentence_count"] == 0  # nothing to translate
    parsed = parse_options({"split": "0"}, TRANSLATE_OPTIONS, {}, 1000)
    assert parsed["split"] == 0


def test_no_split_is_in_the_help(capsys):
    with pytest.raises(SystemExit):
        translate_main(["--help"])
    assert "--no-split" in capsys.readouterr().out


def test_a_line_typed_without_capitals_is_read_sentence_by_sentence(capsys, tmp_path):
    record = tmp_path / "r.jsonl"
    (line,) = _out(capsys, ["ein hund läuft. eine katze schläft.", "--jsonl", str(record)])
    found = json.loads(record.read_text())
    assert found["sentence_count"] == 2 and found["read_as"] == "Ein Hund läuft. Eine Katze schläft."
    assert "cat" in line
