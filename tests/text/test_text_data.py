"""TranslationDataModule: splits, vocabulary from train only, length-homogeneous padded batches. (The batch sampler
alone: tests/core/test_batching.py.)"""

import itertools

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
