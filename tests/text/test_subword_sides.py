"""A subword model reads each side's text with that side's pieces (no <unk> for a word in letters it has seen), text
as written (no NFKC) for models trained now, and typographic quotes a side lacks folded to ASCII, where the user sees
it (``read_as``)."""

from __future__ import annotations

import pytest
import torch
from helpers.multi30k import DE, EN, write_corpus, write_unshared_pieces

from text_attn.core.casing import Casing
from text_attn.core.vocab import Vocabulary, tokenize
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.subwords import Subwords
from text_attn.translation.tokens import TextCodec
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator


@pytest.fixture(scope="module")
def bundled() -> Translator:
    return Translator.load()


def tiny(src: Vocabulary, tgt: Vocabulary, codec: TextCodec | str) -> Translator:
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(src_vocab_size=len(src), tgt_vocab_size=len(tgt), embed_dim=8, enc_hidden=8, dec_hidden=8,
                        attn_dim=8)  # fmt: skip
    return Translator(Seq2Seq(cfg), src, tgt, codec)


def test_the_bundled_model_spells_words_from_source_pieces(bundled, capsys):
    # the joint model splits these into "präch" and "nast", pieces only the English side used: <unk> before
    for sentence in ("Ein Mann führt ein Telefongespräch.", "Eine Sportgymnastin springt."):
        tokens = bundled.tokenize(sentence)
        assert all(t in bundled.src_vocab.stoi for t in tokens), tokens
        assert bundled.codec.decode(tokens) == sentence
    assert translate_main(["--beam-size", "1", "Ein Mann führt ein Telefongespräch."]) == 0
    assert "unknown word" not in capsys.readouterr().err
    # the model file keeps the SentencePiece model as trained: the restriction is made on load
    assert bundled.codec.metadata()["subword_model"].numpy().tobytes() == bundled.codec.subwords.proto


def test_training_reads_its_train_split_as_the_restricted_codec_does(tmp_path):
    dm = TranslationDataModule(task="pair", root=str(write_corpus(tmp_path / "c")), src_lang="de", tgt_lang="en",
                               tokenizer="subword", subword_vocab=300)  # fmt: skip
    dm.setup("fit")
    sided = dm.codec.for_vocabularies(dm.src_vocab, dm.tgt_vocab)
    for e in dm.splits["train"].examples:
        assert sided.encode(e.src_text, "source") == e.src and sided.encode(e.tgt_text, "target") == e.tgt


def test_validation_reads_its_sentences_as_translate_does(tmp_path):
    # text-train validate read val and test with the joint model: "gh" was <unk> on the source side, where translate
    # (and translate --references) spells it "g" "h"
    dm = TranslationDataModule(task="pair", root=str(write_unshared_pieces(tmp_path / "c")), src_lang="de",
                               tgt_lang="en", tokenizer="subword", subword_vocab=300)  # fmt: skip
    dm.setup("fit")
    translator = tiny(dm.src_vocab, dm.tgt_vocab, dm.codec)
    sided = dm.codec.for_vocabularies(dm.src_vocab, dm.tgt_vocab)
    assert "gh" in dm.codec.encode("Ein Mann in Pittsburgh.") and "gh" not in dm.src_vocab.stoi  # the joint split
    for split in ("val", "test"):
        ds = dm.splits[split]
        for i, e in enumerate(ds.examples):
            assert e.src == translator.tokenize(e.src_text) and e.tgt == sided.encode(e.tgt_text, "target")
            assert dm.src_vocab.unk_id not in ds.src[i].tolist(), e.src
        assert ds.examples[0].src[-3:] == ["g", "h", "."]


# typed as written: Chinese full-width punctuation, an ellipsis, a fraction, a trade mark, an acute accent used as an
# apostrophe, French's no-break space before "!": SentencePiece's default rule (nmt_nfkc) changed each
WRITTEN = ["你好，朋友？是的！（好）", "Warte… ½ Liter™, Peter´s Hund.", "Bonjour\xa0! Ça va\xa0?", *DE, *EN]


def test_a_new_subword_model_keeps_text_as_written():
    subwords = Subwords.train(WRITTEN, vocab_size=400)
    for text in WRITTEN:
        assert subwords.decode(subwords.encode(text)) == text
    assert subwords.decode(subwords.encode("  Ein \t Mann\n fährt  ")) == "Ein Mann fährt"  # runs of spaces: one
    assert subwords.decode(subwords.encode("Ça va\u0300")) == "Ça và"  # composed (NFC) as the codec reads it
    # a side that never wrote a no-break space reads it as a space (as nmt_nfkc did), not as <unk> bytes
    source = subwords.restricted(p for text in DE for p in subwords.encode(text))
    assert source.encode("Ein\xa0Mann") == subwords.encode("Ein Mann")


def test_given_with_an_acute_for_an_apostrophe_has_a_probability_per_word(bundled):
    # the bundled model's nmt_nfkc made "´" a space and an accent: 6 words' probabilities for 5 given
    (read,) = bundled.read(["Der Hund eines Mannes rennt."], "A man´s dog is running.")
    assert read.text == "A man's dog is running." and len(read.word_probs) == 5


def test_typographic_quotes_fold_where_the_source_lacks_them(tmp_path, capsys):
    words = Vocabulary.build([tokenize("a man's dog \" is n't don't", lower=True)])
    word_model = tiny(words, words, "word")
    (tr,) = word_model.translate(["A man’s dog is “running”"], max_len=3)
    assert tr.read_as == 'A man\'s dog is "running"' and tr.source[:3] == ["a", "man's", "dog"]
    path = word_model.save(tmp_path / "w.pt")  # the command says so in a note of its own, not as a recasing
    assert translate_main(["--model", str(path), "--max-len", "3", "A man’s dog", "A man's dog"]) == 0
    err = capsys.readouterr().err
    assert "input 1: typographic quotes" in err and "unknown" not in err and "capitals" not in err, err
    # a subword model: an English-only side has no "’"
    subwords = Subwords.train(EN + ['The man\'s dog "runs".'] * 3, vocab_size=300)
    codec = TextCodec("subword", False, subwords)
    src = Vocabulary.build([subwords.encode(t) for t in EN + ['The man\'s dog "runs".']])
    (tr,) = tiny(src, src, codec).translate(["The man’s dog “runs”."], max_len=3)
    assert tr.read_as == 'The man\'s dog "runs".' and tr.unknown == []


def test_a_typographic_apostrophe_joins_a_word():
    assert tokenize("Aujourd’hui, l’homme ‘dit’", lower=False) == ["Aujourd’hui", ",", "l’homme", "‘", "dit", "’"]
    casing = Casing({"first": True, "words": "L’Homme"})
    assert casing.recase("aujourd’hui l’homme") == "Aujourd’hui L’Homme"
    # a word vocabulary built when "’" split words ("aujourd", "’", "hui") still reads such a word so
    old = Vocabulary.build([["aujourd", "’", "hui"]])
    codec = TextCodec("word", True).for_vocabularies(old, old)
    assert codec.encode("aujourd’hui", "source") == ["aujourd", "’", "hui"]


def test_a_capped_vocabulary_of_subword_pieces_is_noted_with_its_unknown_share(tmp_path, capsys):
    """data.max_vocab / data.min_freq beside subwords left pieces out, read as <unk> unsaid (max_vocab 50: 23% of the
    training tokens)."""
    root = write_corpus(tmp_path / "c")
    dm = TranslationDataModule(task="pair", root=str(root), src_lang="de", tgt_lang="en", tokenizer="subword",
                               subword_vocab=300, max_vocab=30)  # fmt: skip
    dm.setup("fit")
    tokens = [(e.src, dm.src_vocab) for e in dm.splits["train"].examples]
    tokens += [(e.tgt, dm.tgt_vocab) for e in dm.splits["train"].examples]
    unknown, total = sum(t not in v for toks, v in tokens for t in toks), sum(len(toks) for toks, _ in tokens)
    (note,) = [line for line in capsys.readouterr().err.splitlines() if "left subword pieces out" in line]
    assert unknown > 0 and note == (
        f"text data: note: data.max_vocab 30 left subword pieces out of the vocabulary: {unknown:,} of the {total:,} "
        f"training tokens ({100 * unknown / total:.1f}%) are read as <unk>; a subword model spells every word from "
        "its pieces: size it with data.subword_vocab and leave these out"
    )
    TranslationDataModule(task="pair", root=str(root), src_lang="de", tgt_lang="en", tokenizer="subword",
                          subword_vocab=300).setup("fit")  # fmt: skip
    assert "left subword pieces out" not in capsys.readouterr().err  # nothing capped: nothing said
