"""The source check (text_attn/translation/source_check.py): a character-trigram profile of a model's training source
side that flags input unlike it. Hand-computed scores, the threshold's guarantee on its own val lines, other languages
flagged, the model file keeping it, and translate's note."""

from __future__ import annotations

import io
import math

import pytest
import torch
from helpers.multi30k import DE, EN, FR, write_corpus
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.core.modelfile import ModelFileError
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.source_check import (
    MARGIN,
    line_score,
    restored,
    source_check,
    stored,
    trigrams,
    unlike_source,
    word_profile,
    word_score,
    words_of,
)
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator


def test_trigrams_are_lowercased_with_whitespace_runs_as_one_space():
    assert trigrams("Ab \t c") == [" ab", "ab ", "b c", " c "]
    assert trigrams("") == []


def test_a_line_scores_its_mean_trigram_log_probability_with_the_floor_for_unknown_trigrams():
    check = {"logp": {" ab": -1.0, "ab ": -2.0}, "floor": -5.0, "threshold": -3.0}
    assert line_score(check, "AB") == pytest.approx(-1.5)  # " ab", "ab "
    assert line_score(check, "ab c") == pytest.approx((-1 - 2 - 5 - 5) / 4)  # "b c", " c " are unknown
    assert not unlike_source(check, "ab") and unlike_source(check, "ab c")


def test_the_profile_holds_log_probabilities_of_the_training_trigrams():
    check = source_check(["aaa", "aab"], ["aaa"])
    # trigrams: " aa", "aaa", "aa " | " aa", "aab", "ab ": 6 in all, " aa" twice
    assert check["logp"][" aa"] == pytest.approx(math.log(2 / 6), abs=1e-3)
    assert check["logp"]["aab"] == pytest.approx(math.log(1 / 6), abs=1e-3)
    assert check["floor"] == pytest.approx(math.log(1 / 6 / 10), abs=1e-3)  # a tenth of the rarest kept trigram's
    assert source_check([], ["x"]) is None and source_check(["x"], []) is None


def test_its_own_val_lines_pass_and_other_languages_are_flagged():
    check = source_check(DE, DE[:4], "de")
    # fewer than 100 val lines: the threshold is the lowest val score less the margin
    assert check["threshold"] == pytest.approx(min(line_score(check, s) for s in DE[:4]) - MARGIN, abs=1e-3)
    assert check["lang"] == "de"
    assert not any(unlike_source(check, s) for s in DE)
    assert all(unlike_source(check, s) for s in EN + FR)


def test_a_corpus_data_module_makes_the_check_and_a_synthetic_one_none(tmp_path):
    dm = TranslationDataModule(task="pair", root=str(write_corpus(tmp_path / "c")), src_lang="de", tgt_lang="en")
    dm.setup("fit")
    assert dm.source_check["lang"] == "de"
    # its val lines pass (a tiny corpus's other lines may hold words rarer than any val line's: the word part)
    assert not any(unlike_source(dm.source_check, s) for s in DE[:2]) and unlike_source(dm.source_check, EN[0])
    synthetic = TranslationDataModule(task="reorder", train_size=20, val_size=4, test_size=4)
    synthetic.setup("fit")
    assert synthetic.source_check is None


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("m"))


def test_the_model_file_keeps_the_check_and_a_damaged_one_is_one_line(model_file, tmp_path):
    translator = Translator.load(model_file)
    assert translator.unlike_source(EN[1]) is True and translator.unlike_source(DE[1]) is False
    data = torch.load(model_file, weights_only=True)
    good = data["source_check"]
    for bad in ({"logp": {}}, {**good, "logp": []}, {**good, "threshold": "low"}, {**good, "lang": 5}, [good]):
        data["source_check"] = bad
        torch.save(data, tmp_path / "bad.pt")
        with pytest.raises(ModelFileError, match=r"bad\.pt: damaged .*source_check is not a trigram profile"):
            Translator.load(tmp_path / "bad.pt")
    del data["source_check"]  # a model file from before the check: no note, no error
    torch.save(data, tmp_path / "old.pt")
    assert Translator.load(tmp_path / "old.pt").unlike_source(EN[1]) is None


def test_the_model_file_keeps_the_tables_as_strings_and_reads_older_plain_ones(model_file, tmp_path):
    translator = Translator.load(model_file)
    lengths = translator.source_check["lengths"]  # recorded beside the check (tests/cli/test_translate_long_inputs.py)
    assert translator.source_check == {**source_check(DE, DE[:2], "de"), "lengths": lengths}  # every value back exactly
    data = torch.load(model_file, weights_only=True)
    raw = data["source_check"]
    assert set(raw["logp"]) == set(raw["words"]["logp"]) == {"keys", "values"} and isinstance(raw["logp"]["keys"], str)
    assert stored(translator.source_check) == raw and restored(raw) == translator.source_check
    data["source_check"] = translator.source_check  # plain dicts, as model files were written before
    torch.save(data, tmp_path / "plain.pt")
    assert Translator.load(tmp_path / "plain.pt").source_check == translator.source_check
    for bad in ({"keys": "a\nb", "values": "-1.0"}, {"keys": "a", "values": "low"}, {"keys": 1, "values": "-1"}):
        data["source_check"] = {**raw, "logp": bad}
        torch.save(data, tmp_path / "bad.pt")
        with pytest.raises(ModelFileError, match=r"bad\.pt: damaged .*source_check is not a trigram profile"):
            Translator.load(tmp_path / "bad.pt")


def test_translate_notes_the_inputs_unlike_the_training_text(model_file, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{DE[0]}\n{EN[1]}\n{DE[2]}\n{FR[3]}\n"))
    assert translate_main(["--model", str(model_file), "--max-len", "3"]) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 4  # every input is still translated
    notes = [line for line in out.err.splitlines() if "looks unlike" in line or "look unlike" in line]
    assert notes == ["translate: note: inputs 2, 4 look unlike the German text the model learned from: their "
                     "translations may be wrong"], out.err  # fmt: skip


def test_model_info_says_the_model_checks_its_input(model_file, capsys):
    assert translate_main(["--model", str(model_file), "--model-info"]) == 0
    out = capsys.readouterr().out
    assert (
        "input check:    notes input unlike the German text the model learned from, by its language and words\n" in out
    )


def test_the_note_names_the_first_ten_and_counts_the_rest(model_file, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{DE[0]}\n" + f"{EN[1]}\n" * 12))
    assert translate_main(["--model", str(model_file), "--max-len", "2", "--batch-size", "5"]) == 0
    err = capsys.readouterr().err
    assert "inputs 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 2 more look unlike the German text the model learned from" in err


def test_after_ctrl_c_the_note_names_only_the_inputs_written(model_file, tmp_path, capsys, monkeypatch):
    calls = {"n": 0}
    real = Translator.translate_tokens  # what translate calls for each batch

    def interrupted(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 2:  # the second batch (inputs 3 and 4, with English in it): Ctrl-C
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(Translator, "translate_tokens", interrupted)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{DE[0]}\n{EN[1]}\n{FR[2]}\n{EN[3]}\n"))
    out = tmp_path / "out.txt"
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(model_file), "--batch-size", "2", "--max-len", "50", "--output", str(out)])
    assert exc.value.code == 130
    err = capsys.readouterr().err.splitlines()
    assert err[-2:] == [
        "translate: note: input 2 looks unlike the German text the model learned from: the translation may be wrong",
        f"translate: interrupted after 2 input(s) in {out}",
    ], err
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2


def test_an_unlike_input_too_long_for_memory_is_still_refused(model_file, capsys, monkeypatch):
    from text_attn.translation import translate_cli

    monkeypatch.setattr(translate_cli, "SENTENCE_BYTES", 4 * 8 * 30 * 30)  # a tiny memory, for the test
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{DE[0]}\n{EN[1] * 20}\n"))  # English, and too long
    assert translate_main(["--model", str(model_file), "--beam-size", "8", "--max-len", "30"]) == 1
    err = capsys.readouterr().err
    assert "input 2:" in err and "split it into sentences" in err and "unlike" not in err


def test_the_word_profile_is_add_half_smoothed_log_probabilities_by_hand():
    words = word_profile(["A b.", "a 12 c-d"])  # words: a, b, a, c-d (numbers and punctuation left out)
    total = 4 + 0.5 * (3 + 1)  # 4 words, 3 kinds, and room for the unseen
    assert words["logp"] == pytest.approx({"a": math.log(2.5 / total), "b": math.log(1.5 / total),
                                           "c-d": math.log(1.5 / total)}, abs=1e-3)  # fmt: skip
    assert words["floor"] == pytest.approx(math.log(0.5 / total), abs=1e-3)
    assert word_score(words, "A zebra!") == pytest.approx(
        -(math.log(2.5 / total) + math.log(0.5 / total)) / 2, abs=2e-3
    )
    assert word_score(words, "42 ?") == 0.0 and words_of("Ein Auto-Bahn, 3 Kinder's") == [
        "ein",
        "auto-bahn",
        "kinder's",
    ]
    assert word_profile(["1 2 3"]) is None


def test_both_parts_together_flag_at_most_two_percent_of_val_and_unseen_words_are_flagged():
    train = [f"ein mann {w} hund" for w in "und der die das mit auf im am".split()] * 20
    # 100 val lines of the training text's world, 4 of them with a word it never had, one of those in English
    val = [f"ein mann {w} hund" for w in "und der die das mit auf im am".split()] * 12 + [
        "ein mann und ein zebra",
        "ein mann und ein kamel",
        "der hund und der wal",
        "the man walks the dog",
    ]
    check = source_check(train, val, "de")
    assert len(val) == 100 and sum(unlike_source(check, line) for line in val) <= 2  # int(100 x 2%)
    assert unlike_source(check, "the man walks the dog")  # the language part
    assert unlike_source(check, "die bundesregierung beschloss ein gesetz")  # German words the corpus never had
    assert not unlike_source(check, "ein mann mit hund")


def test_model_files_keep_the_word_part_and_older_files_without_it_still_check_the_language(model_file, tmp_path):
    data = torch.load(model_file, weights_only=True)
    assert "words" in data["source_check"] and data["source_check"]["words"]["threshold"] > 0
    data["source_check"] = {k: v for k, v in data["source_check"].items() if k != "words"}  # a file from before
    torch.save(data, tmp_path / "older.pt")
    older = Translator.load(tmp_path / "older.pt")
    assert older.unlike_source(EN[1]) is True and older.unlike_source(DE[1]) is False
    data["source_check"]["words"] = {"logp": {"ein": "x"}, "floor": -3.0, "threshold": 5.0}
    torch.save(data, tmp_path / "bad.pt")
    with pytest.raises(ModelFileError, match=r"bad\.pt: damaged"):
        Translator.load(tmp_path / "bad.pt")


def test_the_note_says_what_the_model_learned_from(model_file, tmp_path):
    translator = Translator.load(model_file)
    assert (
        translator.note()
        == "this sentence looks unlike the German text the model learned from: the translation may be wrong"
    )
    translator.source_check["about"] = "descriptions of pictures"
    assert translator.known() == "the German text the model learned from (descriptions of pictures)"


def test_each_translation_names_the_addresses_typed_that_it_lacks(model_file):
    """Translator.translate and read: what `translate` notes, on the result itself (attention-serve answers it too)."""
    translator = Translator.load(model_file)
    lines = [f"{DE[0]} http://www.example.com/a-b", DE[1], f"{DE[2]} info@beispiel.de"]
    done = translator.translate(lines, beam_size=1, max_len=3)  # 3 tokens of a word model: no address copied
    assert [t.lost_addresses for t in done] == [["http://www.example.com/a-b"], [], ["info@beispiel.de"]]
    (given,) = translator.read([lines[2]], "Write to info@beispiel.de")
    assert given.lost_addresses == []


def test_translate_notes_the_inputs_whose_address_the_translation_lacks(model_file, capsys, monkeypatch):
    """A model that learned from no addresses garbles them ("http://www.example.com/a-b" came back "high-guards"): the
    closing note names those inputs, across batches, and says to put the address back."""
    lines = [f"{DE[0]} http://www.example.com/a-b", DE[1], f"{DE[2]} info@beispiel.de", DE[3]]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{line}\n" for line in lines)))
    assert translate_main(["--model", str(model_file), "--max-len", "3", "--batch-size", "2"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "address" in line]
    assert notes == ["translate: note: inputs 1, 3: a web or e-mail address typed there is missing from the "
                     "translations (the model learned from text without addresses and does not copy them): put it "
                     "back by hand"]  # fmt: skip
