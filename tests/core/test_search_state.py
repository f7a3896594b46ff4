"""Beam search never copies what is constant within a source: the attention modules answer K query rows against one
key row like K copies of that row. (One-row-per-source and source-constant state in a real search against the plain,
fully reordered state: tests/captioning/test_caption_search_state.py, tests/text/test_text_search_state.py.)"""

from __future__ import annotations

import pytest
import torch

from text_attn.core.attention import AdditiveAttention, HardAttention, LuongAttention


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


@pytest.mark.parametrize("score", LuongAttention.SCORES)
@pytest.mark.parametrize("grad", [True, False])
def test_luong_attention_answers_k_query_rows_per_key_row_like_k_copies(score, grad):
    torch.manual_seed(0)
    attn = LuongAttention(6, 6, score, attn_dim=7)
    B, K, S = 3, 4, 11
    query, keys = torch.randn(B * K, 6, requires_grad=grad), torch.randn(B, S, 6)
    mask = torch.arange(S) < torch.tensor([11, 6, 2]).unsqueeze(1)  # (B, S)
    with torch.set_grad_enabled(grad):
        ctx, w = attn(query, attn.precompute(keys), mask=mask)
        copies, copied_mask = keys.repeat_interleave(K, dim=0), mask.repeat_interleave(K, dim=0)
        ref_ctx, ref_w = attn(query, attn.precompute(copies), mask=copied_mask)
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(ctx, ref_ctx)
    assert w.shape == (B * K, S) and bool((w[K * 2 :, 2:] == 0).all())  # the third source's mask holds
    torch.testing.assert_close(w.sum(-1), torch.ones(B * K))
    if grad:  # the query's gradient through the shared keys is the copies' gradient
        (g,) = torch.autograd.grad(ctx.square().sum(), query)
        (ref_g,) = torch.autograd.grad(ref_ctx.square().sum(), query)
        torch.testing.assert_close(g, ref_g)
    with pytest.raises(ValueError, match="cannot share"):
        attn(torch.randn(5, 6), keys)
    empty_ctx, empty_w = attn(torch.randn(0, 6), attn.precompute(torch.randn(0, S, 6)))  # a batch of none
    assert empty_ctx.shape == (0, 6) and empty_w.shape == (0, S)


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
