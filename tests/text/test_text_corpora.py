"""Real corpora for the text models: the ``<split>.<lang>[.gz]`` layout (task ``pair``) with the corpus's own splits,
gzipped parallel files, misaligned files and bad encodings in one line naming the file and line; subword units
(SentencePiece) that round-trip real text and never produce <unk>; sacreBLEU and chrF on a hand-computed case. All on
small files written here (Multi30k itself never enters the repository)."""

from __future__ import annotations

import gzip

import pytest
import torch
from helpers.multi30k import DE, EN, write_corpus

from text_attn.core.metrics import sacre_scores
from text_attn.translation.corpora import corpus_file, read_lines, read_parallel_text, read_tsv_text
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.pairs import TaskError
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.subwords import SubwordError, Subwords
from text_attn.translation.tokens import TextCodec
from text_attn.translation.translator import Translator


# --- readers ------------------------------------------------------------------------------------------------------
def test_pair_task_uses_the_corpus_own_splits_gzipped_or_not(tmp_path):
    for gz in (True, False):
        root = write_corpus(tmp_path / f"m30k-{gz}", {"train": 6, "val": 2, "test_2016_flickr": 3}, gz=gz)
        dm = TranslationDataModule(task="pair", root=str(root), src_lang="de", tgt_lang="en", val_size=0, test_size=0)
        dm.setup("fit")
        assert {k: len(v) for k, v in dm.splits.items()} == {"train": 6, "val": 2, "test": 3}
        first = dm.splits["test"].examples[0]
        assert first.src_text == DE[0] and first.tgt_text == EN[0]  # as written, in the file's order: no shuffling
        assert first.src == ["ein", "mann", "fährt", "fahrrad", "."]  # word tokens, lowercased (data.lower)


def test_split_names_are_configurable_and_missing_files_are_named(tmp_path):
    root = write_corpus(tmp_path / "c", {"train": 6, "dev": 2, "test2017": 2})
    kw = dict(task="pair", root=str(root), src_lang="de", tgt_lang="en", val_size=0, test_size=0)
    dm = TranslationDataModule(**kw, split_names={"val": "dev", "test": "test2017"})
    dm.setup("fit")
    assert len(dm.splits["val"]) == 2
    with pytest.raises(ValueError) as err:  # named, with the option that names them
        TranslationDataModule(**kw).setup("fit")
    assert str(err.value) == (f"{root}: found neither val.de nor val.de.gz: the val split's files; data.split_names "
                              "names them (now {'train': 'train', 'val': 'val', 'test': 'test_2016_flickr'}), e.g. "
                              "--data.split_names '{test: test}'")  # fmt: skip
    with pytest.raises(ValueError, match="unknown split"):
        TranslationDataModule(**kw, split_names={"dev": "dev"})
    with pytest.raises(ValueError, match="task pair needs data.root"):
        TranslationDataModule(task="pair", src_lang="de", tgt_lang="en")


def test_misaligned_files_empty_lines_and_bad_bytes_name_file_and_line(tmp_path):
    de, en = tmp_path / "a.de.gz", tmp_path / "a.en"
    de.write_bytes(gzip.compress(b"Ein Hund.\nZwei Hunde.\n"))
    en.write_text("A dog.\nTwo dogs.\nThree dogs.\n")
    with pytest.raises(TaskError, match=r"a\.de\.gz has 2 lines but .*a\.en has 3"):
        read_parallel_text(de, en)
    en.write_text("A dog.\n\n")
    with pytest.raises(TaskError, match=r"a\.en:2: empty sentence \(line 2 of .*a\.de\.gz is not\)"):
        read_parallel_text(de, en)
    en.write_text("A dog.\n\u200b\u200e\n")  # invisible characters alone: as empty
    with pytest.raises(TaskError, match=r"a\.en:2: empty sentence \(line 2 of .*a\.de\.gz is not\)"):
        read_parallel_text(de, en)
    en.write_text("A dog.\nTwo dogs.\n")
    assert read_parallel_text(de, en) == [("Ein Hund.", "A dog."), ("Zwei Hunde.", "Two dogs.")]
    tsv = tmp_path / "p.tsv"
    tsv.write_text("Ein Hund.\tA dog.\n\u200b\tTwo dogs.\nEin Fahr\u00adrad.\tA bike.\n")
    with pytest.raises(TaskError, match=r"p\.tsv:2: empty sentence in column 0"):
        read_tsv_text(tsv)
    tsv.write_bytes(b"Ein Hund.\tA dog.\r\nZwei.\tTwo.\rDrei.\tThree.\n")  # read as one pair, "Three." dropped
    with pytest.raises(TaskError, match=r"p\.tsv:2: a carriage return inside the line: its lines end in line feeds"):
        read_tsv_text(tsv)
    # references, a translation given: the line kept whole, as translate reads its input's
    assert read_lines(tsv)[1] == "Zwei.\tTwo.\rDrei.\tThree."
    tsv.write_text("Ein Hund.\tA dog.\nEin Fahr\u00adrad.\tA bike.\n")
    assert [(s, t) for s, t, _ in read_tsv_text(tsv)][1] == ("Ein Fahrrad.", "A bike.")  # trained as translated
    de.write_bytes(gzip.compress(b"Ein Hund.\nZwei H\xfcnde.\n"))  # Latin-1, not UTF-8
    with pytest.raises(TaskError, match=r"a\.de\.gz:2: not valid UTF-8"):
        read_parallel_text(de, en)
    de.write_bytes(gzip.compress(b"Ein Hund.\n")[:-6])  # a truncated download
    with pytest.raises(TaskError, match=r"a\.de\.gz: cannot read it"):
        read_parallel_text(de, en)


# --- subwords -----------------------------------------------------------------------------------------------------
SENTENCES = [
    "Ein Mann fährt Fahrrad.",
    'Die Straße ist 3,5 km lang, sagt Jürgen\'s Freund: "Schön!"',
    "It's 10:30 — the café's crème brûlée costs $4.50 (tax incl.).",
    "Größe ÄÖÜ äöü ß; l'homme d'affaires à Paris?",
]


@pytest.fixture(scope="module")
def subwords() -> Subwords:
    return Subwords.train(DE + EN + SENTENCES, vocab_size=400)


def test_subwords_round_trip_real_text(subwords):
    for text in SENTENCES + DE + EN:
        pieces = subwords.encode(text)
        assert subwords.decode(pieces) == text
    codec = TextCodec("subword", False, subwords)
    assert codec.decode(codec.encode("  Ein   Mann\tfährt  ")) == "Ein Mann fährt"  # whitespace runs become one space
    assert codec.words(codec.encode("A Man, fast.")) == ["a", "man", ",", "fast", "."]  # the tutorials' BLEU units


def test_unseen_characters_fall_back_to_bytes_not_unk(subwords):
    text = "Ein Mann 🚲 fährt 東京"
    pieces = subwords.encode(text)
    assert subwords.decode(pieces) == text and "<unk>" not in pieces
    assert any(p.startswith("<0x") for p in pieces)  # the emoji and the kanji are spelled as UTF-8 bytes


def test_a_subword_model_travels_in_a_weights_only_model_file(subwords, tmp_path):
    root = write_corpus(tmp_path / "c")
    dm = TranslationDataModule(
        task="pair", root=str(root), src_lang="de", tgt_lang="en", tokenizer="subword", subword_vocab=300
    )
    dm.setup("fit")
    assert dm.codec.mode == "subword" and dm.splits["train"].examples[0].src[0].startswith("▁")
    cfg = Seq2SeqConfig(
        src_vocab_size=len(dm.src_vocab), tgt_vocab_size=len(dm.tgt_vocab), embed_dim=8, enc_hidden=8, dec_hidden=8,
        attn_dim=8,
    )  # fmt: skip
    torch.manual_seed(0)
    path = Translator(Seq2Seq(cfg), dm.src_vocab, dm.tgt_vocab, dm.codec).save(tmp_path / "m.pt")
    data = torch.load(path, weights_only=True)
    assert data["tokenizer"] == "subword" and data["subword_model"].dtype == torch.uint8
    loaded = Translator.load(path)
    assert loaded.tokenize(DE[0]) == dm.codec.encode(DE[0])
    out = loaded.translate([DE[0]], max_len=8)[0]  # an untrained network: any pieces, but never <unk>
    assert "<unk>" not in out.tokens and out.text == loaded.codec.decode(out.tokens)


def test_bad_subword_settings_are_one_line():
    # SentencePiece's own words (its source file and line) give way to the number that matters
    with pytest.raises(SubwordError, match=r"^5000 subword units are more than this training text gives: at most \d+$"):
        Subwords.train(["a b c", "d e f"], vocab_size=5000)
    many = ["".join(chr(0x400 + i) for i in range(k, k + 40)) for k in range(0, 200, 5)]  # 240 characters, each one
    with pytest.raises(SubwordError, match=r"^300 subword units are fewer than this training text needs: at least"):
        Subwords.train(many, vocab_size=300)
    with pytest.raises(SubwordError, match="not a SentencePiece model"):
        Subwords(b"not a model")
    with pytest.raises(ValueError, match="data.tokenizer subword is for real text"):
        TranslationDataModule(task="reorder", tokenizer="subword")


# --- metrics ------------------------------------------------------------------------------------------------------
def test_sacrebleu_and_chrf_against_hand_computed_values():
    # 5 tokens, the last wrong: precisions 4/5, 3/4, 2/3, 1/2; no brevity penalty: BLEU = 0.2 ** 0.25
    scores = sacre_scores(["a b c d f"], ["a b c d e"])
    assert scores["sacrebleu"] == pytest.approx(100 * 0.2**0.25, abs=1e-3)
    assert sacre_scores(["The cat sat."], ["The cat sat."])["sacrebleu"] == pytest.approx(100)
    assert sacre_scores(["The cat sat."], ["The cat sat."])["chrf"] == pytest.approx(100)
    # cased: a lowercased hypothesis loses the capital's n-grams
    assert sacre_scores(["The cat sat on it."], ["the cat sat on it."])["sacrebleu"] < 100
    assert (
        scores["signature"].startswith("BLEU nrefs:1|case:mixed|eff:no|tok:13a")
        and "; chrF nrefs:1" in scores["signature"]
    )


def test_a_stray_quote_in_a_pairs_csv_is_said_and_a_file_for_the_corpus_folder_too(tmp_path, capsys):
    """A quote opening a field that closes lines later reads those lines as one sentence, other pairs with it."""
    path = tmp_path / "pairs.csv"
    path.write_text('ein hund,a dog\n"zwei katzen,two cats\ndrei mäuse,three mice\nvier",four\n')
    assert len(read_tsv_text(path)) == 2
    assert "pairs.csv: 1 row(s) run over more than one line (first: lines 2-4)" in capsys.readouterr().err
    path.write_text('ein hund,a dog\n"zwei katzen",two cats\n')
    read_tsv_text(path)
    assert "more than one line" not in capsys.readouterr().err
    with pytest.raises(TaskError, match="pairs.csv: a file, not a folder"):
        corpus_file(path, "train", "de")
