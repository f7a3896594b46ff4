"""Beam search never copies what is constant within a source: shared state (kept once per source, K query rows per
key row) and static state (expanded once, never reordered) give exactly the search of the plain, fully reordered
state; the attention modules answer K query rows against one key row like K copies of that row."""

from __future__ import annotations

import pytest
import torch

from captioning.decoder import DecoderConfig, ShowAttendTellDecoder
from text_attn.core.attention import AdditiveAttention, HardAttention
from text_attn.core.decoding import beam_search
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.transformer import Transformer, TransformerConfig


class Plain:
    """The same model with no shared / static state: beam search expands and reorders everything (the reference)."""

    def __init__(self, model):
        self.model = model

    def step(self, tokens, state):
        return self.model.step(tokens, state)


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_caption_beam_search_with_shared_keys_equals_the_fully_reordered_search(attention):
    torch.manual_seed(0)
    cfg = DecoderConfig(vocab_size=30, feature_dim=24, embed_dim=8, hidden_dim=16, attn_dim=8, attention=attention)
    dec = ShowAttendTellDecoder(cfg).eval()
    assert dec.shared_state == ("keys",)
    feats = torch.randn(3, 9, 24)
    a = beam_search(dec, dec.init_state(feats), 3, 1, 2, 12, beam_size=4)
    b = beam_search(Plain(dec), dec.init_state(feats), 3, 1, 2, 12, beam_size=4)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths)
    torch.testing.assert_close(a.scores, b.scores)
    torch.testing.assert_close(a.attention, b.attention)
    assert a.tokens.size(1) > 2  # a random decoder does not stop at once: the comparison covers reordering steps


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_text_beam_search_with_static_memory_equals_the_fully_reordered_search(arch):
    torch.manual_seed(0)
    if arch == "rnn":
        net = Seq2Seq(Seq2SeqConfig(src_vocab_size=20, tgt_vocab_size=25, embed_dim=8, enc_hidden=8, dec_hidden=16,
                                    attn_dim=8))  # fmt: skip
    else:
        net = Transformer(TransformerConfig(src_vocab_size=20, tgt_vocab_size=25, d_model=16, num_heads=2,
                                            enc_layers=1, dec_layers=1, ff_dim=32))  # fmt: skip
    net.eval()
    assert net.static_state
    src = torch.randint(4, 20, (3, 7))
    lens = torch.tensor([7, 5, 3])
    src[1, 5:], src[2, 3:] = 0, 0
    with torch.no_grad():
        a = beam_search(net, net.encode(src, lens), 3, 1, 2, 10, beam_size=3)
        b = beam_search(Plain(net), net.encode(src, lens), 3, 1, 2, 10, beam_size=3)
    assert torch.equal(a.tokens, b.tokens)
    torch.testing.assert_close(a.scores, b.scores)
    torch.testing.assert_close(a.attention, b.attention)


@pytest.mark.parametrize("grad", [True, False])  # training path, and inference's cache-sized blocks
def test_additive_attention_answers_k_query_rows_per_key_row_like_k_copies(grad):
    torch.manual_seed(0)
    attn = AdditiveAttention(6, 5, 7)
    B, K, S = 3, 4, 11
    query, keys = torch.randn(B * K, 6), torch.randn(B, S, 5)
    mask = torch.arange(S) < torch.tensor([11, 6, 2]).unsqueeze(1)  # (B, S)
    copies = keys.repeat_interleave(K, dim=0)
    with torch.set_grad_enabled(grad):
        ctx, w = attn(query, attn.precompute(keys), mask=mask)
        ref_ctx, ref_w = attn(query, attn.precompute(copies), mask=mask.repeat_interleave(K, dim=0))
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(ctx, ref_ctx)
    assert w.shape == (B * K, S) and bool((w[K * 2 :, 2:] == 0).all())  # the third source's mask holds
    with pytest.raises(ValueError, match="cannot share"):
        attn(torch.randn(5, 6), keys)


def test_inference_blocks_compute_the_training_path_scores():
    torch.manual_seed(1)
    attn = AdditiveAttention(8, 8, 300)
    query, keys = torch.randn(40, 8), torch.randn(40, 50, 8)  # 40 x 50 x 300 = 600,000 elements: several blocks
    pk = attn.precompute(keys)
    with torch.no_grad():
        blocked = attn.score(query, pk.proj)
    one_shot = attn.score(query, pk.proj).detach()  # grad enabled: the one-tensor path
    torch.testing.assert_close(blocked, one_shot)


def test_hard_attention_reads_each_query_rows_own_source():
    torch.manual_seed(2)
    hard = HardAttention(6, 5, 7).eval()
    B, K = 2, 3
    query, keys = torch.randn(B * K, 6), torch.randn(B, 8, 5)
    out = hard.attend(query, keys, mode="argmax")
    ref = hard.attend(query, keys.repeat_interleave(K, dim=0), mode="argmax")
    assert torch.equal(out.index, ref.index)
    torch.testing.assert_close(out.context, ref.context)
    torch.testing.assert_close(out.weights, ref.weights)
