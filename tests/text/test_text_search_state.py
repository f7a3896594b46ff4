"""Beam search never copies what is constant within a source, and drops a source once its beams have all ended: the text
networks' source-constant state (the encoder's memory, never reordered; the attention models' kept one row per
sentence for its K beams, the context of a model without attention expanded once) gives exactly the search of the
plain, fully reordered state stepped on every row. (The attention modules' K query rows per key row:
tests/core/test_search_state.py; sources leaving the batch, on a model built to end them at chosen steps:
tests/core/test_decoding.py.)"""

from __future__ import annotations

import pytest
import torch
from helpers.plain_model import Plain

from text_attn.core.decoding import beam_search
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.transformer import Transformer, TransformerConfig


@pytest.mark.parametrize("arch", ["bahdanau", "luong-general", "luong-dot", "luong-concat", "none", "transformer"])
def test_text_beam_search_with_source_constant_memory_equals_the_fully_reordered_search(arch):
    torch.manual_seed(0)
    if arch != "transformer":
        net = Seq2Seq(Seq2SeqConfig(src_vocab_size=20, tgt_vocab_size=25, attention=arch, embed_dim=8, enc_hidden=8,
                                    dec_hidden=16, attn_dim=8))  # fmt: skip
        assert bool(net.one_row_per_source_state) == (arch != "none")
    else:
        net = Transformer(TransformerConfig(src_vocab_size=20, tgt_vocab_size=25, d_model=16, num_heads=2,
                                            enc_layers=1, dec_layers=1, ff_dim=32))  # fmt: skip
    net.eval()
    assert net.source_constant_state
    src = torch.randint(4, 20, (3, 7))
    lens = torch.tensor([7, 5, 3])
    src[1, 5:], src[2, 3:] = 0, 0
    with torch.no_grad():
        a = beam_search(net, net.encode(src, lens), 3, 1, 2, 10, beam_size=3)
        b = beam_search(Plain(net), net.encode(src, lens), 3, 1, 2, 10, beam_size=3)
    assert torch.equal(a.tokens, b.tokens)
    torch.testing.assert_close(a.scores, b.scores)
    torch.testing.assert_close(a.attention, b.attention)
