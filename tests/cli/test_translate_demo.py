"""translate's defaults for a newcomer: the bundled model when --model is omitted (one line when it is missing),
--model-info (the network, tokens, training data, terms, scores), --demo (fixed German sentences, each output word
with the source word it looked at). On a small subword model trained for a few steps here."""

from __future__ import annotations

import pytest
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.translation import translate_cli
from text_attn.translation.translate_cli import translate_main, word_alignment
from text_attn.translation.translator import Translator

INFO = {"training_data": "Multi30k (tiny test copy)", "terms": "non-commercial research and education",
        "test_scores": {"sacreBLEU": 1.5}}  # fmt: skip


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("m"), info=INFO)


def test_model_info_prints_network_tokens_and_info(model_file, capsys):
    assert translate_main(["--model", str(model_file), "--model-info"]) == 0
    out = capsys.readouterr().out
    assert "GRU encoder-decoder, attention bahdanau" in out and "subword units (SentencePiece" in out
    assert "non-commercial research and education" in out and "sacreBLEU 1.5" in out


def test_demo_translates_its_sentences_with_word_alignment(model_file, capsys):
    assert translate_main(["--model", str(model_file), "--demo", "--max-len", "6"]) == 0
    out = capsys.readouterr().out
    for sentence in translate_cli.DEMO_SENTENCES:
        assert f"{sentence}\n" in out
    assert out.count(" <- ") >= len(translate_cli.DEMO_SENTENCES)  # every output word names a source word
    assert not out.startswith("\n")  # no blank line before the first block
    first = out.strip().split("\n\n")[0].splitlines()
    assert first[0] == translate_cli.DEMO_SENTENCES[0]  # the output starts with the demo block: no bare list before
    assert out.count(f"\n{first[1]}\n") == 1  # each translation printed once
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(model_file), "--demo", "Ein Satz."])
    assert exc.value.code == 2
    capsys.readouterr()
    for flag in (["--n-best", "2", "--beam-size", "2"], ["--plot", "p.png"]):  # each was dropped (exit 0)
        with pytest.raises(SystemExit) as exc:
            translate_main(["--model", str(model_file), "--demo", *flag])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and f"translate: error: {flag[0]} is for your sentences' translations" in err


def test_word_alignment_joins_pieces_into_words(model_file):
    tr = Translator.load(model_file)
    (out,) = tr.translate(["Ein Mann fährt Fahrrad."], max_len=5)
    lines = word_alignment(tr, out)
    source_words = {"Ein", "Mann", "fährt", "Fahrrad."}
    assert lines and all(line.split(" <- ")[1].rsplit(" (", 1)[0] in source_words for line in lines)
    shares = [float(line.rsplit("(", 1)[1].rstrip("%)")) for line in lines]
    assert all(0 < s <= 100 for s in shares)


def test_without_model_uses_the_bundled_one_or_says_it_is_missing(model_file, monkeypatch, capsys, tmp_path):
    from text_attn.translation import bundled

    monkeypatch.setattr(bundled, "BUNDLED_MODEL", model_file)  # where the command and Translator.load() find it
    monkeypatch.setattr(translate_cli, "BUNDLED_MODEL", model_file)
    assert translate_main(["Ein Mann fährt Fahrrad.", "--max-len", "4"]) == 0
    assert capsys.readouterr().out.count("\n") == 1
    monkeypatch.setattr(bundled, "BUNDLED_MODEL", tmp_path / "gone.pt")
    monkeypatch.setattr(translate_cli, "BUNDLED_MODEL", tmp_path / "gone.pt")
    with pytest.raises(SystemExit) as exc:
        translate_main(["Ein Mann."])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "gone.pt is not installed; pass --model FILE" in err
