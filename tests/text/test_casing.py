"""Reading a line typed without capitals (text_attn/core/casing.py): the casing learned by hand-countable
examples, which lines it touches and which it leaves, the model file keeping it, the translator reading with it
(``read_as``, ``keep_case``), and translate's note and --keep-case."""

from __future__ import annotations

import io

import pytest
import torch
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.core.casing import Casing, changed_reading, composed, learn_casing, opening, says_nothing, valid_casing
from text_attn.core.modelfile import ModelFileError
from text_attn.core.vocab import Vocabulary
from text_attn.translation.source_check import source_check
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator

TRAIN = [
    "Ein Mann isst im Park.",  # "Ein" starts the line: not counted as a form
    "Der Mann und die Frau essen.",
    "Eine Frau und ein Mann gehen zum Essen.",
    "Das Essen ist gut.",
    "Zwei Kinder essen Essen auf der Straße.",
    "ein Mann am Tor.",  # a line starting lowercase: 1 of 6 lines
]


def test_each_word_keeps_its_most_frequent_form_away_from_a_lines_start():
    casing = learn_casing(TRAIN)
    # Mann 4 times, Frau 2, Park, Essen 3 against essen 2, Straße, Tor, Kinder: kept. "ein" (twice, mid-line) and
    # "und", "essen" and the rest lowercase are not; "Ein", "Der", "Das", "Zwei" and "Eine" only start lines
    assert casing["words"].split() == sorted(["Essen", "Frau", "Kinder", "Mann", "Park", "Straße", "Tor"])
    assert casing["first"] is True  # 5 of the 6 lines start with a capital
    assert learn_casing(["ein mann", "der hund"]) is None  # no capital anywhere: nothing to learn
    # lowercase text still has what a line in capitals cannot give back
    assert learn_casing([line.lower() for line in TRAIN]) == {"first": False, "words": "straße"}
    assert learn_casing(["ein mann", "eine frau", "Der hund"]) == {"first": False, "words": ""}  # 1 of 3 starts


def test_a_form_that_casefold_gives_back_is_not_stored_but_one_it_does_not_is():
    # "weiße" is lowercase, but a line in capitals ("WEISSE") cannot give back its ß
    assert learn_casing(["Eine weiße Katze.", "Der weiße Hund."])["words"].split() == ["Hund", "Katze", "weiße"]


def test_only_a_line_whose_case_says_nothing_is_recased():
    assert says_nothing("ein mann fährt fahrrad .") and says_nothing("EIN MANN") and says_nothing("Ein mann im park")
    assert not says_nothing("Ein Mann") and not says_nothing("ein Mann") and not says_nothing("2024 !")
    casing = Casing(learn_casing(TRAIN))
    assert casing.recase("ein mann und eine frau gehen im park .") == "Ein Mann und eine Frau gehen im Park ."
    # what a line without capitals costs: "essen" (to eat) is read as the training text's more frequent "Essen" (food)
    assert casing.recase("die kinder essen") == "Die Kinder Essen"
    assert casing.recase("ZWEI KINDER AUF DER STRASSE!") == "Zwei Kinder auf der Straße!"  # casefold: SS -> ß
    assert casing.recase("Ein mann am tor") == "Ein Mann am Tor"  # only its first capital: recased
    assert casing.recase("Ein Mann isst essen") == "Ein Mann isst essen"  # its own capitals: as typed
    assert casing.recase("2 männer  im   park") == "2 männer  im   Park"  # a number first: no capital; spaces kept
    assert casing.recase('"ein mann"') == '"Ein Mann"'
    assert opening("2 boys") is None and opening('  "a') == 3
    not_first = Casing({"first": False, "words": "Mann"})
    assert not_first.recase("ein mann") == "ein Mann"


def test_the_words_in_capitals_of_a_line_with_case_are_recased_and_only_they():
    """ "EIN MANN fährt Fahrrad." was read as typed (its own capitals: "Fahrrad") and the bundled Transformer wrote
    "ANNNNNNNN."; a word or two typed with Caps Lock is now written as training writes it, the rest as typed."""
    known = {w.lower() for line in TRAIN for w in line.split()}  # the source check's words, lowercased
    casing = Casing(learn_casing(TRAIN), known)
    assert casing.recase("EIN MANN geht im Park .") == "Ein Mann geht im Park ."  # the first word: a capital
    assert Casing(learn_casing(TRAIN)).recase("EIN MANN geht") == "EIN Mann geht"  # no words known: forms only
    assert casing.recase("Texas AM im PM Park") == "Texas AM im PM Park"  # 2 letters, or not a training word: kept
    assert casing.recase("Ein Mann isst ESSEN") == "Ein Mann isst Essen"  # ESSEN says nothing: training's form
    assert casing.recase("Ein Mann isst essen") == "Ein Mann isst essen"  # typed lowercase on purpose: kept
    assert casing.recase("Ein A im PARK , 2 X") == "Ein A im Park , 2 X"  # one letter: an initial, kept
    assert casing.recase("Ein MaNN am Tor") == "Ein MaNN am Tor"  # mixed: the typist's
    not_first = Casing({"first": False, "words": "Mann"}, {"ein"})
    assert not_first.recase("EIN mann") == "ein mann"  # the lines start lowercase: so does the first word


def test_the_bundled_translator_reads_a_word_typed_in_capitals_as_a_word():
    translator = Translator.load()  # wrote "ANNNNNNNN." / "A FreA is singing." / "... driving a FAAA."
    for typed, read in (("EIN MANN fährt Fahrrad.", "Ein Mann fährt Fahrrad."),
                        ("Eine FRAU singt.", "Eine Frau singt."),
                        ("Ein Mann trägt ein T-SHIRT.", "Ein Mann trägt ein T-Shirt."),
                        ("Ein Mann in den USA.", "Ein Mann in den USA."),
                        ("Texas AM spielt.", "Texas AM spielt.")):  # fmt: skip
        assert translator.read_as(typed) == read
        assert translator.read_as(typed, keep_case=True) == typed


def test_the_check_keeps_the_casing_and_a_damaged_one_is_one_line(tmp_path):
    check = source_check(DE, DE[:2], "de")
    assert check["casing"] == learn_casing(DE) and valid_casing(check["casing"])
    assert "casing" not in source_check([s.lower() for s in DE], [DE[0].lower()], "de")
    model = tiny_subword_model_file(tmp_path)
    assert Translator.load(model).source_check["casing"] == check["casing"]
    data = torch.load(model, weights_only=True)
    for bad in ({"first": "yes", "words": ""}, {"first": True, "words": ["Mann"]}, "Mann"):
        data["source_check"]["casing"] = bad
        torch.save(data, tmp_path / "bad.pt")
        with pytest.raises(ModelFileError, match=r"bad\.pt: damaged"):
            Translator.load(tmp_path / "bad.pt")


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("m"))


def test_the_translator_reads_a_line_without_capitals_with_the_training_texts(model_file):
    translator = Translator.load(model_file)
    assert translator.casing is translator.casing is not None  # built once
    typed = DE[0].lower()  # "ein mann fährt fahrrad."
    assert translator.read_as(typed) == DE[0]
    assert translator.tokenize(typed) == translator.tokenize(DE[0]) != translator.codec.encode(typed)
    out = translator.translate([typed, DE[1]], beam_size=1, max_len=4)
    assert out[0].read_as == DE[0] and out[1].read_as is None
    assert out[0].source == translator.tokenize(DE[0])
    translator.keep_case = True
    assert translator.read_as(typed) == typed and translator.tokenize(typed) == translator.codec.encode(typed)
    translator.keep_case = False
    translator.codec.lower = True  # a model that lowercases its input anyway: nothing to recase
    assert translator.read_as(typed) == typed and translator.casing is None
    translator.codec.lower = False
    del translator.source_check["casing"]  # a model file from before the casing: lines as typed
    assert translator.read_as(typed) == typed


def test_translate_notes_the_inputs_it_recased_and_keep_case_turns_it_off(model_file, capsys, monkeypatch):
    lines = f"{DE[0]}\n{DE[1].lower()}\n{DE[2].upper()}\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    assert translate_main(["--model", str(model_file), "--max-len", "3"]) == 0
    recased = capsys.readouterr()
    assert len(recased.out.splitlines()) == 3
    note = ("translate: note: inputs 2, 3 have no capital past the first letter, or nothing but capitals: read with "
            "the capitals of the German text the model learned from; --keep-case translates them as typed")  # fmt: skip
    assert note in recased.err.splitlines(), recased.err
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{DE[1]}\n{DE[2]}\n"))  # the lines as the model read them
    assert translate_main(["--model", str(model_file), "--max-len", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == recased.out.splitlines()[1:]
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    assert translate_main(["--model", str(model_file), "--max-len", "3", "--keep-case"]) == 0
    assert "capitals" not in capsys.readouterr().err
    assert translate_main(["--model", str(model_file), "--model-info"]) == 0
    assert "input casing:   a line without capitals of its own is read with the training text's capitals" in (
        capsys.readouterr().out
    )


def test_a_reading_that_only_composes_letters_is_no_change():
    decomposed = "Er la\u0308uft"  # "ä" as "a" + a combining diaeresis
    assert composed(decomposed) == "Er läuft" and len(composed(decomposed)) == len(decomposed) - 1
    assert changed_reading(decomposed, "Er läuft") is None
    assert changed_reading("ein mann la\u0308uft", "Ein Mann läuft") == "Ein Mann läuft"


def test_a_model_file_from_before_the_casing_says_it_reads_a_line_without_capitals_as_typed(
    model_file, tmp_path, capsys, monkeypatch
):
    """A cased model file of before 2026-11-30 has no casing data: "ein mann fährt fahrrad." was translated as typed,
    badly and without a word (an audit). One note a run now, and --model-info says so."""
    data = torch.load(model_file, weights_only=True)
    del data["source_check"]["casing"]
    torch.save(data, tmp_path / "old.pt")
    old = str(tmp_path / "old.pt")
    assert Translator.load(old).casing_missing and not Translator.load(model_file).casing_missing
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{DE[0]}\n{DE[1].lower()}\n{DE[2].upper()}\n{DE[3].lower()}\n"))
    assert translate_main(["--model", old, "--max-len", "3"]) == 0
    note = ("translate: note: this model file has no casing data (made before 2026-11-30): inputs 2, 3, 4 translated "
            "as typed, without the capitals its training text writes; type them, or retrain the model (today's "
            "text-train fit keeps the casing data)")  # fmt: skip
    assert [line for line in capsys.readouterr().err.splitlines() if "casing" in line] == [note]
    assert translate_main(["--model", old, "--max-len", "3", "--keep-case", DE[1].lower()]) == 0  # as asked
    assert "casing" not in capsys.readouterr().err
    assert translate_main(["--model", old, "--model-info"]) == 0
    assert ("input casing:   none: this model file has no casing data (made before 2026-11-30); a line without "
            "capitals is read as typed") in capsys.readouterr().out.splitlines()  # fmt: skip
    # a source text without capitals has no casing to learn, today too: nothing is missing
    lower = Translator.from_data(data, old)
    lower.src_vocab = Vocabulary([*lower.src_vocab.itos[:4], "▁ein", "▁mann", "<0xC3>"])
    assert not lower.casing_missing


def test_a_line_typed_with_caps_lock_is_recased_though_caps_lock_leaves_its_eszett():
    # Caps Lock writes "STRAßE" (ß has no one-letter capital): read as all capitals, as "STRASSE" is; the bundled
    # model read it as typed and wrote "NEEEEEEEE..." to its length cap
    casing = Casing(learn_casing(["Zwei Kinder auf der Straße .", "Ein Mann auf der Straße ."]))
    assert says_nothing("ZWEI KINDER AUF DER STRAßE") and says_nothing("STRAßE")
    assert casing.recase("ZWEI KINDER AUF DER STRAßE") == "Zwei Kinder auf der Straße"
    assert not says_nothing("Zwei Kinder auf der Straße")  # written with care: kept


def test_a_compound_training_never_wrote_whole_is_recased_part_by_part():
    casing = Casing(learn_casing(["Ein Mann hält eine Flagge der USA .", "Ein Mann im Nike Shirt .", "Ein T-Shirt .",
                                  "Ein blaues Hemd ."]))  # fmt: skip
    assert casing.recase("ein mann mit usa-flagge und nike-shirt") == "Ein Mann mit USA-Flagge und Nike-Shirt"
    assert casing.recase("ein t-shirt") == "Ein T-Shirt"  # written whole: as written
    assert casing.recase("ein blau-weißes hemd") == "Ein blau-weißes Hemd"  # parts never capitalised: as they are


def test_the_keep_case_help_quotes_the_measured_scores():
    """--keep-case's help said 16.28 / 40.77 where the README said 16.38 / 40.79: both now quote the measured run."""
    import json
    from pathlib import Path

    from text_attn.translation.translate_parser import translate_parser

    docs = Path(__file__).resolve().parents[2] / "docs"
    (row,) = [r for r in json.loads((docs / "multi30k_casing_transformer.json").read_text())["models"]["transformer"]
              if r["form"] == "lowercased"]  # fmt: skip
    said = " ".join(next(a.help for a in translate_parser()._actions if "--keep-case" in a.option_strings).split())
    assert f"sacreBLEU {row['typed']:.2f} as typed, {row['recased']:.2f} read so" in said
    readme = " ".join((docs.parent / "README.md").read_text().split())
    assert f"sacreBLEU {row['recased']:.2f} instead of {row['typed']:.2f}" in readme
