"""TranslationDataModule: splits, vocabulary from train only, length-homogeneous padded batches."""

from torch.utils.data import DistributedSampler

from text_attn.core.batching import EpochShuffle, LengthBatchSampler
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


def test_sampler_reshuffles_each_epoch_but_keeps_batches_sorted():
    s = LengthBatchSampler(EpochShuffle(range(100), seed=1), list(range(100)), batch_size=10)
    first = list(s)
    s.sampler.set_epoch(1)
    second = list(s)
    assert first != second
    assert all(b == sorted(b) for b in first)
    s.sampler.set_epoch(0)
    assert list(s) == first  # the order is a function of seed and epoch alone


def test_sampler_skip_resumes_mid_epoch_and_only_once():
    s = LengthBatchSampler(EpochShuffle(range(50), seed=3), [i % 7 for i in range(50)], batch_size=8)
    full = list(s)
    s.skip = (0, 3)
    assert list(s) == full[3:]
    assert list(s) == full  # the next pass (same epoch here) is whole again


def test_distributed_shares_are_disjoint_equal_and_cover_the_data():
    lengths = [i % 13 for i in range(96)]
    ranks = []
    for rank in range(2):
        dist = DistributedSampler(range(96), num_replicas=2, rank=rank, shuffle=True, seed=0)
        dist.set_epoch(4)
        ranks.append([i for b in LengthBatchSampler(dist, lengths, batch_size=8) for i in b])
    assert len(ranks[0]) == len(ranks[1]) == 48
    assert not set(ranks[0]) & set(ranks[1])
    assert sorted(ranks[0] + ranks[1]) == list(range(96))


def test_char_tokenizer_round_trip():
    toks = tokenize_text("3  March 2015", "char")
    assert toks[:3] == ["3", "▁", "m"]
    assert detokenize(toks, "char") == "3 march 2015"
