"""The words of an input that the model's training text never has (source_check.unseen_words): a subword model
translates them from their pieces, a guess. On the result (Translator.translate and read), in translate's closing
note (not for an input already noted as unlike the training text) and in attention-serve's answer."""

from __future__ import annotations

import io
import re

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file, tiny_word_model_file

from attention_serve.apis import TranslateAPI
from attention_serve.openapi import TRANSLATE_ANSWER
from text_attn.translation import source_check as sc
from text_attn.translation.records import empty_record
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translate_streams import unseen_note
from text_attn.translation.translator import Translator

CHECK = {"logp": {}, "floor": -9.0, "threshold": -3.0,
         "words": {"logp": {"ein": -1.0, "mann": -2.0, "im": -2.0}, "floor": -8.0, "threshold": 6.0}}  # fmt: skip


def test_the_unseen_words_are_those_the_profile_lacks_as_typed_each_once_in_order():
    line = "Ein Mann im Regenwald, 3 REGENWALD und Eis-Hütte; regenwald."
    # compared lowercased, kept as first typed; numbers and punctuation are not words; a hyphenated word is one
    assert sc.unseen_words(CHECK, line) == ["Regenwald", "und", "Eis-Hütte"]
    assert sc.unseen_words(CHECK, "Ein Mann.") == [] and sc.unseen_words(CHECK, "42 !") == []


def test_without_a_word_profile_or_with_a_full_one_nothing_is_called_unseen(monkeypatch):
    assert sc.unseen_words(None, "Regenwald") == []
    assert sc.unseen_words({k: v for k, v in CHECK.items() if k != "words"}, "Regenwald") == []  # an older file
    monkeypatch.setattr(sc, "WORDS", 3)  # the profile holds as many words as it keeps: a missing word may be rare
    assert sc.unseen_words(CHECK, "Regenwald") == []


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("m"))


def test_each_translation_and_reading_names_its_unseen_words(model_file, tmp_path):
    translator = Translator.load(model_file)
    lines = [f"{DE[0]} Regenwald", DE[1]]  # the tiny corpus's training text holds DE, not "Regenwald"
    assert [t.unseen_words for t in translator.translate(lines, beam_size=1, max_len=3)] == [["Regenwald"], []]
    (given,) = translator.read([lines[0]], "A man rides a bike.")
    assert given.unseen_words == ["Regenwald"]
    # a list item's marker is put back, not read: not a word the model never saw ("b) ..." named "b")
    assert translator.unseen_words(f"b) {DE[0]}\nx) {DE[1]}") == [] and translator.unseen_words(f"{DE[0]} b") == ["b"]
    # a word model reads such a word as <unk> and names it in `unknown`: not twice
    word = Translator.load(tiny_word_model_file(tmp_path / "w.pt"))
    (tr,) = word.translate(["ein regenwald"], beam_size=1, max_len=2)
    assert tr.unknown == ["regenwald"] and tr.unseen_words == []


def test_the_note_names_one_input_and_its_words_or_the_first_ten_inputs():
    known = "the German text the model learned from"
    assert unseen_note({}, known) is None
    assert unseen_note({"unseen": 1, "unseen_first": [(2, ["Regenwald"])]}, known) == (
        "input 2: Regenwald is not in the German text the model learned from: translated from its pieces, a guess"
    )
    assert unseen_note({"unseen": 1, "unseen_first": [(1, ["Regenwald", "Hütte"])]}, known).startswith(
        "input 1: Regenwald, Hütte are not in the German"
    )
    first = [(n, ["Hütte"]) for n in range(1, 11)]
    assert unseen_note({"unseen": 12, "unseen_first": first}, known) == (
        "inputs " + ", ".join(f"{n} (Hütte)" for n in range(1, 11)) + " and 2 more: words not in the German text "
        "the model learned from, translated from their pieces: a guess"
    )


def test_translate_notes_the_inputs_with_unseen_words_across_batches_but_not_those_unlike_the_training_text(
    model_file, capsys, monkeypatch, tmp_path
):
    # the tiny corpus's check flags any line with a word it never had as unlike it: here only the one with "Eis"
    monkeypatch.setattr(Translator, "unlike_source", lambda self, text: "Eis" in text)
    lines = [f"{DE[0]} Regenwald", DE[1], f"{DE[2]} Eis", f"{DE[3]} Hütte Regenwald"]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    html = tmp_path / "r.html"
    assert translate_main(["--model", str(model_file), "--max-len", "3", "--batch-size", "2", "--html", str(html)]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "pieces" in line]
    assert notes == ["translate: note: inputs 1 (Regenwald), 4 (Hütte, Regenwald): words not in the German text the "
                     "model learned from, translated from their pieces: a guess"]  # fmt: skip
    # --html: each section's note, the unlike one's in place of the words (the page's words: unseen_words_line)
    found = re.findall(
        r'<section class="item tr" id="s(\d)"[^>]*><h2>[^<]*</h2>(?:<p class="note">([^<]*)</p>)?', html.read_text()
    )
    said = "not in the text the model learned from, translated from {} pieces (a guess): "
    assert [(int(n), note) for n, note in found] == [
        (1, said.format("its") + "Regenwald"), (2, ""), (3, Translator.load(model_file).note()),
        (4, said.format("their") + "Hütte, Regenwald")
    ]  # fmt: skip


def test_attention_serve_answers_the_unseen_words(model_file):
    api = TranslateAPI(str(model_file), "translate", 1, 4, 0.01, idle_wait=False)
    api.load("cpu")
    records = api._translate([f"{DE[0]} Regenwald", DE[1]], {"beam_size": 1, "length_penalty": 0.0, "max_len": 3})
    assert [r["unseen_words"] for r in records] == [["Regenwald"], []]
    assert empty_record("...")["unseen_words"] == []
    # a text of marks alone is answered as typed, as translate writes it (the model made sentences up of it)
    records = api._translate(["* * *", DE[1]], {"beam_size": 1, "length_penalty": 0.0, "max_len": 3})
    assert records[0]["translation"] == "* * *" and records[0]["tokens"] == [] and records[1]["tokens"]
    answer = TRANSLATE_ANSWER["properties"]["translations"]["items"]["properties"]
    assert answer["unseen_words"]["items"] == {"type": "string"}
    assert answer["unknown_words"]["items"] == {"type": "string"} and empty_record("...")["unknown_words"] == []


def test_attention_serve_names_the_words_holding_unknown_tokens_as_translate_does():
    """An emoji in a German sentence: the API answered its byte pieces ('<0xF0>', ...) in ``unknown``, no note, and
    the page said nothing, where ``translate`` noted "unknown word(s) 🐶 read as <unk>"."""
    from text_attn.translation.bundled import BUNDLED_MODEL

    api = TranslateAPI(str(BUNDLED_MODEL), "translate", 1, 4, 0.01, idle_wait=False)
    api.load("cpu")
    (record,) = api._translate(["Ein Hund 🐶 rennt."], {"beam_size": 1, "length_penalty": 0.0, "max_len": 12})
    assert record["unknown"] and all(t.startswith("<0x") for t in record["unknown"])
    assert record["unknown_words"] == ["🐶"]


def test_the_bundled_transformer_notes_a_word_its_pictures_never_named(capsys):
    """The word "Eisfischerhütte" (an ice-fishing hut) is in no Multi30k training sentence: the bundled Transformer
    wrote "ice cream lod" for it (2026-12-03); the note says it guessed."""
    assert translate_main(["Eine Frau sitzt in einer Eisfischerhütte.", DE[1]]) == 0
    err = capsys.readouterr().err
    assert "translate: note: input 1: Eisfischerhütte is not in the German text the model learned from" in err


def test_a_character_spelled_in_bytes_is_named_read_as_unk_and_drawn_as_a_box(capsys, tmp_path, monkeypatch):
    """The characters "中文", which the bundled Transformer's vocabulary spells in bytes it never learned ("<0xE4>"
    ...): read as <unk>, they were also said to be "translated from its pieces, a guess"; drawn by --plot as boxes
    (the labels are the characters), they went unsaid, as the note looked at the byte tokens' ASCII names."""
    from matplotlib import font_manager

    from text_attn.core import fonts

    latin = font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans"))  # matplotlib's own: no CJK
    monkeypatch.setattr(fonts, "_fonts", lambda bold: (("DejaVu Sans", latin),))
    monkeypatch.setattr(fonts, "_rescan", lambda: False)
    assert translate_main(["--plot", str(tmp_path / "p.png"), "Ein Hund läuft 中文."]) == 0
    err = capsys.readouterr().err
    assert "translate: note: input 1: unknown word(s) 中文. read as <unk>" in err
    assert "not in the German text the model learned from" not in err
    assert (
        "translate: note: --plot: 2 character(s) of the labels are in no installed font and are drawn as boxes: 中 文"
        in err
    )
    # where the page, the records and the server read them too
    assert Translator.load().unseen_words("Ein Hund läuft 中文 Xylofonbaum.") == ["Xylofonbaum"]
