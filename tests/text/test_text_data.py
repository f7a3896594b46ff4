"""TranslationDataModule: splits, vocabulary from train only, length-homogeneous padded batches. (The batch sampler
alone: tests/core/test_batching.py.)"""

import itertools
import unicodedata

import pytest

from text_attn.translation.data import TranslationDataModule
from text_attn.translation.tokens import detokenize, tokenize_text


def test_synthetic_splits_differ_and_vocab_comes_from_train():
    dm = TranslationDataModule(task="reorder", train_size=200, val_size=20, test_size=30, batch_size=16, max_len=20)
    dm.setup()
    sizes = {k: len(v) for k, v in dm.splits.items()}
    assert sizes == {"train": 200, "val": 20, "test": 30}
    train_words = {w for e in dm.splits["train"].examples for w in e.src}
    assert set(dm.src_vocab.itos[4:]) == train_words
    assert dm.splits["train"].examples[0].src != dm.splits["test"].examples[0].src
    # a split iterates as a sequence: each index once, then it stops (it ran forever: any index was a pair)
    assert list(itertools.islice(dm.splits["val"], 100)) == list(range(20))
    with pytest.raises(IndexError):
        dm.splits["val"][20]


def test_batches_are_padded_length_homogeneous_and_cover_every_example():
    dm = TranslationDataModule(task="reorder", train_size=640, val_size=10, test_size=10, batch_size=32)
    dm.setup()
    seen, spreads = [], []
    for b in dm.train_dataloader():
        lens = b["src_lens"]
        assert b["src"].shape == (len(lens), int(lens.max()))
        assert ((b["src"] != 0).sum(1) == lens).all()  # padding only after the real tokens
        assert (b["tgt"][:, 0] == dm.tgt_vocab.bos_id).all()
        seen += b["index"].tolist()
        spreads.append(int(lens.max() - lens.min()))
    assert sorted(seen) == list(range(640))
    assert sum(spreads) / len(spreads) < 10  # sources 5-60 long, yet each batch spans only a few lengths


def test_char_tokenizer_round_trip():
    toks = tokenize_text("3  March 2015", "char")
    assert toks[:3] == ["3", "▁", "m"]
    assert detokenize(toks, "char") == "3 march 2015"


def _corpus(task: str, folder, pairs: list[tuple[str, str]], src: str) -> dict[str, str]:
    """``pairs`` written as a TSV (task tsv) or as two files, ``c.<src>`` and ``c.en`` (parallel): the data options."""
    if task == "tsv":
        (folder / "pairs.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
        return {"path": str(folder / "pairs.tsv")}
    (folder / f"c.{src}").write_text("".join(f"{s}\n" for s, _ in pairs), encoding="utf-8")
    (folder / "c.en").write_text("".join(f"{t}\n" for _, t in pairs), encoding="utf-8")
    return {"src_path": str(folder / f"c.{src}"), "tgt_path": str(folder / "c.en")}


@pytest.mark.parametrize("task", ["tsv", "parallel"])
def test_a_repeated_pair_is_kept_once_so_no_val_or_test_pair_is_a_train_pair(task, tmp_path, capsys):
    """Tatoeba and Anki exports repeat lines: 200 lines, 100 of them repeats, put 19 of 30 test pairs in train too."""
    pairs = [(f"Der Satz für die Zahl {i}.", f"The sentence for the number {i}.") for i in range(100)]
    # the repeats as a pair may be typed again: "ü" decomposed (NFD), two spaces, a zero-width space
    pairs += [(unicodedata.normalize("NFD", s) if i % 3 == 0 else s.replace(" ", "  " if i % 3 else " \u200b"), t)
              for i, (s, t) in enumerate(pairs)]  # fmt: skip
    where = _corpus(task, tmp_path, pairs, "de")
    dm = TranslationDataModule(task=task, train_size=0, val_size=20, test_size=30, **where)
    dm.setup("fit")
    split = {k: [(e.src_text, e.tgt_text) for e in ds.examples] for k, ds in dm.splits.items()}
    assert len(split["train"]) == 50 and len(set(split["train"])) == 50  # 100 pairs, each once: 50 left for train
    assert not set(split["train"]) & (set(split["val"]) | set(split["test"]))
    assert capsys.readouterr().err.count("left out 100 repeated pair(s)") == 1


@pytest.mark.parametrize("task", ["tsv", "parallel"])
def test_the_language_pair_given_is_recorded_and_none_is_guessed(task, tmp_path):
    """data.src_lang / data.tgt_lang were read by task pair's check alone: a TSV's or two files' model recorded no
    pair, and translate --model-info showed none. Given, both are recorded and shown; not given, nothing is said."""
    from types import SimpleNamespace

    from text_attn.translation.module import TranslationModule
    from text_attn.translation.translate_cli import model_info

    pairs = [(f"Muž číslo {i} jede na kole.", f"Man number {i} rides a bike.") for i in range(12)]
    where = _corpus(task, tmp_path, pairs, "cs")

    def info(**langs) -> list[str]:
        dm = TranslationDataModule(task=task, val_size=2, test_size=2, **where, **langs)
        module = TranslationModule(network={"embed_dim": 8, "enc_hidden": 8, "dec_hidden": 8, "attn_dim": 8})
        module.trainer = SimpleNamespace(datamodule=dm)
        module.setup("fit")
        translator = module.translator()
        assert translator.source_lang == langs.get("src_lang")  # the served page's and --html's source language
        return [line for line in model_info(translator, "m.pt") if line.startswith(("languages", "input check"))]

    assert info(src_lang="cs", tgt_lang="en") == [
        "input check:    notes input unlike the Czech text the model learned from, by its language and words",
        "languages:      Czech -> English",
    ]
    assert info(tgt_lang="en")[1] == "languages:      (not given) -> English"
    assert info() == ["input check:    notes input unlike the text the model learned from, by its language and words"]


@pytest.mark.parametrize(("task", "copies", "said"), [("tsv", 40, "every pair has"),
                                                   ("parallel", 4, "4 of the 40 pairs (10%) have"),
                                                   ("tsv", 1, None)])  # fmt: skip
def test_pairs_the_same_on_both_sides_are_noted(task, copies, said, tmp_path, capsys):
    """One file given for both sides (or a column of copies) trained a model to copy its input, unsaid. A few alike
    (a name, "OK!") are normal: 1 of 40 is not noted."""
    pairs = [(f"Der Satz für die Zahl {i}.", f"The sentence for the number {i}.") for i in range(40)]
    pairs = [(s, s if i < copies else t) for i, (s, t) in enumerate(pairs)]
    pairs[0] = (pairs[0][0], " " + pairs[0][0].replace(" ", "  ")) if copies else pairs[0]  # read as the codecs read
    dm = TranslationDataModule(task=task, val_size=2, test_size=2, **_corpus(task, tmp_path, pairs, "de"))
    dm.setup("fit")
    notes = [line for line in capsys.readouterr().err.splitlines() if "the same text on both sides" in line]
    if said is None:
        assert notes == []
    else:
        (note,) = notes
        assert f": {said} the same text on both sides: the model learns to copy them" in note


@pytest.mark.parametrize("task", ["tsv", "parallel"])
def test_a_language_code_the_text_clearly_is_not_is_recorded_as_the_text_reads(task, tmp_path, capsys):
    """data.src_lang en for German sources was noted at fit and then recorded: translate --model-info said "English ->
    English" and its check called German input "unlike the English text". The text's own language is recorded."""
    from types import SimpleNamespace

    from text_attn.translation.module import TranslationModule
    from text_attn.translation.translate_cli import model_info

    pairs = [(f"Der Mann und die Frau sind mit dem Hund {i} in der Stadt.", f"The man and the woman are with the dog "
              f"{i} in the city.") for i in range(12)]  # fmt: skip
    where = _corpus(task, tmp_path, pairs, "src")
    dm = TranslationDataModule(task=task, val_size=2, test_size=2, **where, src_lang="en", tgt_lang="en")
    module = TranslationModule(network={"embed_dim": 8, "enc_hidden": 8, "dec_hidden": 8, "attn_dim": 8})
    module.trainer = SimpleNamespace(datamodule=dm)
    module.setup("fit")
    (note,) = [line for line in capsys.readouterr().err.splitlines() if "columns or codes swapped?" in line]
    assert note.endswith("The model file records German, what they read as")
    translator = module.translator()
    assert translator.source_lang == "de"
    assert [line for line in model_info(translator, "m.pt") if line.startswith(("languages", "input check"))] == [
        "input check:    notes input unlike the German text the model learned from, by its language and words",
        "languages:      German -> English",
    ]


def test_a_resume_whose_val_and_test_changed_since_the_checkpoint_says_so(tmp_path, capsys):
    """A corpus grown since: pairs moved between the splits (a test pair into train), and the resumed fit went on
    unsaid, its best checkpoint chosen on other pairs."""
    from types import SimpleNamespace

    pairs = [(f"Der Satz für die Zahl {i}.", f"The sentence for the number {i}.") for i in range(40)]

    def module(rows) -> TranslationDataModule:
        where = _corpus("tsv", tmp_path, rows, "de")
        dm = TranslationDataModule(task="tsv", val_size=4, test_size=4, batch_size=8, **where)
        dm.setup("fit")
        dm.trainer = SimpleNamespace(state=SimpleNamespace(fn="fit"), ckpt_path="last.ckpt")
        return dm

    saved = {"epoch": 0, "batches_done": 1, "batch_size": 8, "held_out": module(pairs)._held_out_digest()}
    capsys.readouterr()
    module(pairs).load_state_dict(saved)
    assert "not those of the run" not in capsys.readouterr().err
    module([*pairs, ("Ein neuer Satz.", "A new sentence.")]).load_state_dict(saved)
    (note,) = [line for line in capsys.readouterr().err.splitlines() if "not those of the run" in line]
    assert note.startswith("data: note: this run's val and test are not those of the run the checkpoint comes from")
    assert note.endswith("--model.init_from last.ckpt")
