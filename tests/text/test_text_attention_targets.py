"""Attention supervision: the targets the text data module carries when asked -- reorder's true alignment as one-hot
source positions. (The shared loss by hand: tests/core/test_attention_supervision.py; the caption targets:
tests/captioning/test_caption_attention_targets.py.)"""

from __future__ import annotations

import pytest

from text_attn.core.vocab import Vocabulary
from text_attn.translation.data import PairDataset, TranslationDataModule, collate
from text_attn.translation.pairs import Example


# --- reorder alignment -----------------------------------------------------------------------------------------------
def test_reorder_alignment_targets_by_hand():
    src_vocab = Vocabulary.build([["ka", "bako", "dime", "lu"]])
    tgt_vocab = Vocabulary.build([["fen", "zuhen", "wafor", "jin"]])
    examples = [
        Example(["ka", "bako", "dime"], ["fen", "zuhen", "wafor"], [0, 2, 1]),
        Example(["ka", "lu"], ["fen", "jin"], [0, 1]),
    ]
    ds = PairDataset(examples, src_vocab, tgt_vocab)
    batch = collate(ds, [0, 1], attention_targets=True)
    # src: 3 + eos = 4 positions; tgt: bos + 3 + eos -> 4 output steps (3 words, then eos)
    assert batch["attn_targets"].shape == (2, 4, 4) and batch["attn_targets_mask"].shape == (2, 4)
    assert batch["attn_targets_mask"].tolist() == [[True, True, True, False], [True, True, False, False]]
    assert batch["attn_targets"][0, :3].argmax(-1).tolist() == [0, 2, 1]
    assert batch["attn_targets"][1, :2].argmax(-1).tolist() == [0, 1]
    assert batch["attn_targets"].sum(-1).tolist() == [[1, 1, 1, 0], [1, 1, 0, 0]]  # one-hot rows, zeros elsewhere
    assert "attn_targets" not in collate(ds, [0, 1])


def test_reorder_data_module_targets_follow_the_alignment():
    kw = dict(task="reorder", train_size=24, val_size=4, test_size=4, batch_size=8, max_len=14)
    dm = TranslationDataModule(**kw, attention_targets=True)
    dm.setup()
    for batch in dm.train_dataloader():
        steps = batch["tgt"].size(1) - 1
        assert batch["attn_targets"].shape == (batch["src"].size(0), steps, batch["src"].size(1))
        for row, i in enumerate(batch["index"].tolist()):
            alignment = dm.splits["train"].examples[i].alignment
            mask = batch["attn_targets_mask"][row]
            assert mask.nonzero().flatten().tolist() == list(range(len(alignment)))
            assert batch["attn_targets"][row, : len(alignment)].argmax(-1).tolist() == alignment
    plain = TranslationDataModule(**kw)
    plain.setup()
    assert "attn_targets" not in next(iter(plain.train_dataloader()))
    with pytest.raises(ValueError, match="only task 'reorder'"):
        TranslationDataModule(task="dates", attention_targets=True)
