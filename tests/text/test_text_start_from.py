"""A text run started from a trained model (``model.init_from``) on another corpus reads it the model's way: the
model's tokenizer (its SentencePiece model: none is learned) and vocabularies, whose tokens keep their ids; the corpus's
new tokens are added after them (``model.init_vocab: extend``, rows starting as the mean of the old rows) or read as
<unk> (``keep``). Checked against the start's weights row by row and the line text-train prints."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from text_attn.translation.data import TranslationDataModule
from text_attn.translation.module import TranslationModule
from text_attn.translation.translator import Translator

NET = {"attention": "bahdanau", "embed_dim": 16, "enc_hidden": 16, "dec_hidden": 32, "attn_dim": 16, "dropout": 0.0}
FIRST = [("Ein Mann fährt Rad.", "A man rides a bike."), ("Zwei Hunde spielen.", "Two dogs play."),
         ("Ein Hund läuft.", "A dog runs."), ("Eine Frau liest.", "A woman reads."),
         ("Ein Kind spielt.", "A child plays."), ("Zwei Männer laufen.", "Two men run.")]  # fmt: skip
# another corpus: the first's words and new ones ("Zorblat" / "zorblat" three times, "Quux" / "quux" once)
SECOND = [("Ein Zorblat fährt Rad.", "A zorblat rides a bike."), ("Zwei Zorblat spielen.", "Two zorblat play."),
          ("Ein Zorblat läuft.", "A zorblat runs."), ("Ein Quux liest.", "A quux reads."),
          ("Ein Hund läuft.", "A dog runs."), ("Eine Frau liest.", "A woman reads.")]  # fmt: skip


@pytest.fixture(autouse=True)
def _threads(one_thread):
    """One torch thread (tests/conftest.py): tiny models on a shared CPU."""


def _corpus(path, pairs) -> str:
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return str(path)


def _built(corpus: str, data: dict | None = None, **model) -> TranslationModule:
    """A module whose network is built (setup) from the corpus, without a Trainer, as text-train's fit builds it."""
    options = {"task": "tsv", "path": corpus, "val_size": 1, "test_size": 1, "batch_size": 4, "min_freq": 2}
    dm = TranslationDataModule(**{**options, **(data or {})})
    dm.setup("fit")  # Lightning sets the data module up before the module
    torch.manual_seed(0)
    module = TranslationModule(network=dict(NET), **model)
    module.trainer = SimpleNamespace(datamodule=dm)
    module.setup("fit")
    return module


@pytest.fixture
def start_file(tmp_path):
    start = _built(_corpus(tmp_path / "first.tsv", FIRST), data={"min_freq": 1})
    return start.translator().save(tmp_path / "start.pt"), start


def test_extend_keeps_ids_and_rows_and_adds_the_new_words(start_file, tmp_path, capsys):
    path, start = start_file
    run = _built(_corpus(tmp_path / "second.tsv", SECOND), init_from=str(path))
    for theirs, ours in ((start.src_vocab, run.src_vocab), (start.tgt_vocab, run.tgt_vocab)):
        assert ours.itos[: len(theirs)] == theirs.itos
    assert run.src_vocab.itos[len(start.src_vocab) :] == ["zorblat"]  # "quux" once: below data.min_freq 2 (lowercased:
    # the word tokenizer's data.lower)
    assert run.tgt_vocab.itos[len(start.tgt_vocab) :] == ["zorblat"]
    err = capsys.readouterr().err
    assert f"model.init_from {path}: its word tokenizer and vocabularies" in err, err
    assert "1 source tokens added (zorblat)" in err and "1 other source tokens (quux) seen fewer than" in err
    before, after = start.net.state_dict(), run.net.state_dict()
    grown = [k for k in after if after[k].shape != before[k].shape]
    assert grown, "no vocabulary-sized weight grew"
    for k in grown:  # old rows as they were; the new row the mean of the old ones
        old = before[k].shape[0]
        assert torch.equal(after[k][:old], before[k]), k
        assert torch.allclose(after[k][old:], before[k].mean(dim=0, keepdim=True), atol=1e-6), k
    assert all(torch.equal(after[k], before[k]) for k in after if k not in grown)
    # file names alone: no machine's folders in the file; the start's own corpus named, and this run's, with their
    # training pairs (6 a corpus, 1 val and 1 test held out)
    info = run.translator().info
    assert info["started_from"] == f"{path.name}, trained on first.tsv: 4 training pairs"
    assert info["trained_on"] == "second.tsv: 4 training pairs"


def test_a_corpus_model_names_its_files_and_training_pairs(tmp_path):
    """``translate --model-info``'s "trained on:" line for each kind of corpus of the user's: the file or folder's
    name alone, and the pairs trained on once read (a TSV's 6 pairs less 1 val and 1 test)."""
    tsv = _corpus(tmp_path / "mine.tsv", FIRST)
    assert TranslationDataModule(task="tsv", path=tsv).facts == {"trained_on": "mine.tsv"}  # not yet read
    assert _built(tsv).translator().info == {"trained_on": "mine.tsv: 4 training pairs"}
    (tmp_path / "a.de").write_text("".join(s + "\n" for s, _ in FIRST), encoding="utf-8")
    (tmp_path / "a.en").write_text("".join(t + "\n" for _, t in FIRST), encoding="utf-8")
    parallel = TranslationDataModule(task="parallel", src_path=str(tmp_path / "a.de"), tgt_path=str(tmp_path / "a.en"),
                                     src_lang="de", tgt_lang="en")  # fmt: skip
    assert parallel.facts == {"trained_on": "a.de and a.en", "languages": "German -> English"}
    assert TranslationDataModule(task="reorder").facts == {}  # a made-up task: nothing to name


def test_keep_reads_new_words_as_unknown(start_file, tmp_path, capsys):
    path, start = start_file
    run = _built(_corpus(tmp_path / "second.tsv", SECOND), init_from=str(path), init_vocab="keep")
    assert run.src_vocab == start.src_vocab and run.tgt_vocab == start.tgt_vocab
    err = capsys.readouterr().err
    assert "2 other source tokens (zorblat, quux) not among them: read as <unk>" in err, err
    assert err.rstrip().endswith("(model.init_vocab: extend adds them)")
    train = run.trainer.datamodule.splits["train"]
    assert any(start.src_vocab.unk_id in ids.tolist() for ids in train.src)


def test_a_subword_start_reads_the_corpus_with_its_own_pieces(tmp_path):
    subword = {"tokenizer": "subword", "subword_vocab": 300, "min_freq": 1}
    start = _built(_corpus(tmp_path / "first.tsv", FIRST * 3), data=subword)
    path = start.translator().save(tmp_path / "start.pt")
    run = _built(_corpus(tmp_path / "second.tsv", SECOND * 3), data=subword, init_from=str(path))
    mine, theirs = run.codec.metadata()["subword_model"], start.codec.metadata()["subword_model"]
    assert torch.equal(mine, theirs)  # the start's SentencePiece model, not one learned from the second corpus
    assert run.codec.encode("Ein Zorblat") == start.codec.encode("Ein Zorblat")


def test_a_run_reads_the_corpus_once_the_start_way_and_learns_no_subwords(tmp_path, monkeypatch):
    import pytorch_lightning as pl

    monkeypatch.chdir(tmp_path)  # the fit writes its model file (model.pt) here, not into the checkout

    from text_attn.translation.subwords import Subwords

    subword = {"tokenizer": "subword", "subword_vocab": 300, "min_freq": 1}
    start = _built(_corpus(tmp_path / "first.tsv", FIRST * 3), data=subword)
    path = start.translator().save(tmp_path / "start.pt")
    learned, reads = [], []
    monkeypatch.setattr(Subwords, "train", lambda *a, **k: learned.append(a))
    # data.subword_vocab's default, 8,000 pieces: more than this corpus could give, had one been learned
    dm = TranslationDataModule(task="tsv", path=_corpus(tmp_path / "second.tsv", SECOND * 3), val_size=1, test_size=1,
                               batch_size=4, tokenizer="subword")  # fmt: skip
    load = dm._load_splits
    monkeypatch.setattr(dm, "_load_splits", lambda: reads.append(1) or load())
    module = TranslationModule(network=dict(NET), init_from=str(path))
    trainer = pl.Trainer(fast_dev_run=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    trainer.fit(module, dm)  # Lightning sets the data module up first: it asks the module for the start
    assert learned == [] and reads == [1]
    assert dm.codec.encode("Ein Zorblat") == start.codec.encode("Ein Zorblat")
    assert module._start_file is None  # the start's weights are not kept beside the network's


def test_a_bundled_name_starts_a_run_and_a_wrong_arch_is_one_line():
    assert Translator.read_start("bahdanau", "rnn")["arch"] == "rnn"
    with pytest.raises(ValueError, match="model.init_from transformer holds a 'transformer' network, but model.arch"):
        Translator.read_start("transformer", "rnn")
    with pytest.raises(ValueError, match="model.init_vocab must be one of extend, keep"):
        TranslationModule(init_vocab="grow")


@pytest.mark.slow
def test_the_bundled_transformer_learns_your_sentences(tmp_path, cli_run_in_tmp, capsys):
    """configs/text/your_pairs.yaml, as a user runs it: 8 steps on three hospital sentences, each once (a repeated
    line is read once), and four more held out for val and test."""
    from text_attn.translation.train_cli import text_train_cli

    # held out: their val BLEU (fit keeps its best epoch) rises as "fever" is learned, as the copies' did before
    held = [("Das Kind hat Fieber.", "The child has a fever."), ("Die Frau hat Fieber.", "The woman has a fever."),
            ("Der Mann hat Fieber.", "The man has a fever."),
            ("Die Ärztin hat Fieber.", "The doctor has a fever.")]  # fmt: skip
    taught_pairs = [("Der Patient hat Fieber.", "The patient has a fever."),
                    ("Die Ärztin untersucht den Patienten.", "The doctor examines the patient."),
                    ("Ein Mann fährt Fahrrad.", "A man rides a bike.")]  # fmt: skip
    pairs = [*held[:3], taught_pairs[0], held[3], *taught_pairs[1:]]  # data.seed 0's shuffle: lines 4, 6, 7 train
    bundled = Translator.load("transformer")
    assert bundled.translate(["Der Patient hat Fieber."])[0].text != "The patient has a fever."
    config = Path(__file__).resolve().parents[2] / "configs/text/your_pairs.yaml"
    text_train_cli(["fit", "--config", str(config), "--data.path", _corpus(tmp_path / "med.tsv", pairs),
                    "--data.val_size", "2", "--data.test_size", "2", "--trainer.max_steps", "8",
                    "--trainer.enable_progress_bar", "false"])  # fmt: skip
    assert "columns swapped?" not in capsys.readouterr().err  # German sources: no note
    taught = Translator.load("runs/your_pairs/model.pt")
    assert taught.translate(["Der Patient hat Fieber."])[0].text == "The patient has a fever."


# German -> English pairs, everyday sentences (the bundled models read German: a start whose check knows its language)
PAIRS = [("Ein Mann fährt mit dem Fahrrad zur Arbeit.", "A man rides his bike to work."),
         ("Zwei Kinder spielen im Garten mit einem Ball.", "Two children play with a ball in the garden."),
         ("Die Frau liest ein Buch auf der Bank.", "The woman reads a book on the bench."),
         ("Ein Hund läuft über die grüne Wiese.", "A dog runs across the green meadow."),
         ("Der Arzt untersucht den Patienten im Krankenhaus.", "The doctor examines the patient in the hospital."),
         ("Wir essen heute Abend in einem kleinen Restaurant.", "We are eating in a small restaurant tonight."),
         ("Das Wetter ist schön und die Sonne scheint.", "The weather is nice and the sun is shining."),
         ("Meine Schwester wohnt in einer großen Stadt.", "My sister lives in a big city."),
         ("Er trinkt jeden Morgen eine Tasse Kaffee.", "He drinks a cup of coffee every morning."),
         ("Die Kinder gehen zusammen in die Schule.", "The children go to school together."),
         ("Ein alter Mann sitzt vor dem Haus.", "An old man sits in front of the house."),
         ("Sie kauft Brot und Käse auf dem Markt.", "She buys bread and cheese at the market.")]  # fmt: skip


@pytest.mark.parametrize("swapped", [False, True])
def test_a_corpus_whose_columns_are_swapped_gets_one_note_and_no_language(swapped, tmp_path, capsys):
    """your_pairs.yaml starts from the bundled German -> English model. Given an Anki file's English -> German pairs as
    they come (the columns not swapped with --data.src_col 1 --data.tgt_col 0) it trained silently, and the model's
    check then flagged German input and let English through. The sources are read by the start's check first: most
    of them unlike its German, one note; else its language is the run's check's, which translate --model-info names."""
    from text_attn.translation.translate_cli import model_info

    corpus = _corpus(tmp_path / "pairs.tsv", PAIRS)
    cols = {"src_col": 1, "tgt_col": 0} if swapped else {}
    dm = TranslationDataModule(task="tsv", path=corpus, val_size=1, test_size=1, **cols)
    module = TranslationModule(arch="rnn", init_from="bahdanau")
    module.trainer = SimpleNamespace(datamodule=dm)
    module.setup("fit")  # fit's setup: the start given to the data module, which reads the corpus
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if "columns swapped?" in line]
    checked = [line for line in model_info(module.translator(), "m.pt") if line.startswith("input check:")]
    if swapped:
        assert len(notes) == 1 and "look unlike the German that model.init_from bahdanau reads" in notes[0], err
        assert "(--data.src_col/--data.tgt_col;" in notes[0] and module.translator().source_lang is None
        assert checked == ["input check:    notes input unlike the text the model learned from, by its language and "
                           "words"]  # fmt: skip
    else:
        assert notes == [] and module.translator().source_lang == "de"
        # the start's language, not its world: the run's check is of this corpus, not Multi30k's pictures
        assert checked == ["input check:    notes input unlike the German text the model learned from, by its "
                           "language and words"]  # fmt: skip


def test_a_network_option_that_changes_what_the_start_computes_is_refused(start_file, tmp_path):
    """An attention of the same shapes (or num_heads 8 beside a 4-head start) re-read the start's weights as another
    network's, unsaid; dropout may differ."""
    path, _ = start_file
    corpus = _corpus(tmp_path / "second.tsv", SECOND)
    with pytest.raises(ValueError, match=r"model.network.attention luong-concat differs from the start's bahdanau: its "
                                         r"weights compute with bahdanau; leave it out"):  # fmt: skip
        TranslationModule.setup(_unbuilt(corpus, path, attention="luong-concat"), "fit")
    tuned = _unbuilt(corpus, path, dropout=0.3)
    tuned.setup("fit")
    assert tuned.config.dropout == 0.3


def _unbuilt(corpus: str, start, **network) -> TranslationModule:
    dm = TranslationDataModule(task="tsv", path=corpus, val_size=1, test_size=1, batch_size=4, min_freq=2)
    dm.setup("fit")
    module = TranslationModule(network={**NET, **network}, init_from=str(start))
    module.trainer = SimpleNamespace(datamodule=dm)
    return module
