"""MultiHeadAttention against torch.nn.MultiheadAttention with the same weights, masks, cache-style keys, edge cases."""

import math

import pytest
import torch

from text_attn.core.attention import HeadKV, MultiHeadAttention

B, T, S, D, H = 3, 4, 6, 16, 4
ATOL = 1e-5


@pytest.fixture
def pair():
    """Our module and torch's, same weights (the parameter names match), eval mode."""
    torch.manual_seed(0)
    ours = MultiHeadAttention(D, H)
    ref = torch.nn.MultiheadAttention(D, H, batch_first=True)
    with torch.no_grad():  # non-zero biases, so the bias slicing is exercised too
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    ours.load_state_dict(ref.state_dict())
    return ours.eval(), ref.eval()


def _inputs(self_attention: bool = False):
    torch.manual_seed(1)
    q = torch.randn(B, T, D)
    if self_attention:
        return q, q, q
    k = torch.randn(B, S, D)
    return q, k, torch.randn(B, S, D)


def _check(ours, ref, q, k, v, ours_kw, ref_kw):
    want, want_w = ref(q, k, v, average_attn_weights=False, **ref_kw)  # (B, T, D), (B, H, T, S)
    _, want_mean = ref(q, k, v, average_attn_weights=True, **ref_kw)  # (B, T, S)
    got, got_w = ours(q, k, None if v is k else v, need_weights=True, **ours_kw)
    fast, none_w = ours(q, k, None if v is k else v, need_weights=False, **ours_kw)
    assert got_w.shape == (B, H, q.size(1), k.size(1)) and none_w is None
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    torch.testing.assert_close(fast, want, atol=ATOL, rtol=0)  # the scaled_dot_product_attention path
    torch.testing.assert_close(got_w, want_w, atol=ATOL, rtol=0)
    torch.testing.assert_close(got_w.mean(1), want_mean, atol=ATOL, rtol=0)


def test_matches_torch_without_mask(pair):
    _check(*pair, *_inputs(), {}, {})


def test_matches_torch_with_key_padding_mask(pair):
    q, k, v = _inputs()
    lens = torch.tensor([6, 3, 1])
    keep = torch.arange(S) < lens.unsqueeze(1)  # (B, S) True = real
    _check(*pair, q, k, v, {"mask": keep}, {"key_padding_mask": ~keep})
    # the masked keys get exactly zero weight
    _, w = pair[0](q, k, v, mask=keep, need_weights=True)
    assert (w[1, :, :, 3:] == 0).all() and (w[2, :, :, 1:] == 0).all()


def test_matches_torch_with_causal_mask_self_attention(pair):
    q, k, v = _inputs(self_attention=True)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)  # torch: True = not allowed
    _check(*pair, q, k, v, {"causal": True}, {"attn_mask": future})
    _, w = pair[0](q, q, causal=True, need_weights=True)
    assert (w.masked_select(future) == 0).all()


def test_matches_torch_with_causal_and_padding_masks(pair):
    q, k, v = _inputs(self_attention=True)
    keep = torch.arange(T) < torch.tensor([4, 2, 3]).unsqueeze(1)  # (B, T)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    _check(*pair, q, k, v, {"causal": True, "mask": keep}, {"attn_mask": future, "key_padding_mask": ~keep})


def test_per_query_mask_matches_torch(pair):
    q, k, v = _inputs()
    torch.manual_seed(2)
    keep = torch.rand(B, T, S) > 0.4
    keep[..., 0] = True  # at least one key per row (torch gives NaN otherwise)
    want, _ = pair[1](q, k, v, attn_mask=(~keep).repeat_interleave(H, 0))  # torch: (B*H, T, S)
    got, _ = pair[0](q, k, v, mask=keep)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


def test_one_step_query_and_precomputed_keys(pair):
    ours = pair[0]
    q, k, v = _inputs()
    full, full_w = ours(q, k, v, need_weights=True)
    kv = ours.precompute(k, v)
    assert isinstance(kv, HeadKV) and kv.k.shape == (B, H, S, D // H)
    step, step_w = ours(q[:, 2], kv, need_weights=True)  # (B, D) query: one decoder step
    assert step.shape == (B, D) and step_w.shape == (B, H, S)
    torch.testing.assert_close(step, full[:, 2], atol=ATOL, rtol=0)
    torch.testing.assert_close(step_w, full_w[:, :, 2], atol=ATOL, rtol=0)


def test_causal_end_aligned_queries_match_full_self_attention(pair):
    """The last queries against all keys (as with a key/value cache) equal those rows of full causal attention."""
    ours = pair[0]
    x, _, _ = _inputs(self_attention=True)
    full, _ = ours(x, x, causal=True)
    kv = ours.precompute(x)  # keys of all T positions
    for fast in (False, True):
        tail, _ = ours(x[:, 2:], kv, causal=True, need_weights=not fast)  # queries 2..T-1
        torch.testing.assert_close(tail, full[:, 2:], atol=ATOL, rtol=0)


def test_scaled_dot_product_by_hand():
    """One head, identity projections: context = softmax(q k / sqrt(d)) v."""
    att = MultiHeadAttention(2, 1, bias=False)
    with torch.no_grad():
        att.in_proj_weight.copy_(torch.eye(2).repeat(3, 1))
        att.out_proj.weight.copy_(torch.eye(2))
    q = torch.tensor([[[1.0, 0.0]]])
    k = torch.tensor([[[2.0, 0.0], [0.0, 2.0]]])
    v = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    ctx, w = att(q, k, v, need_weights=True)
    a = math.exp(2 / math.sqrt(2))
    p = a / (a + 1)
    torch.testing.assert_close(w, torch.tensor([[[[p, 1 - p]]]]))
    torch.testing.assert_close(ctx, torch.tensor([[[p, 1 - p]]]))


def test_fully_masked_row_gives_zero_weights_and_no_nan(pair):
    ours = pair[0].train()  # gradients too
    q, k, v = _inputs()
    q.requires_grad_(True)
    keep = torch.ones(B, S, dtype=torch.bool)
    keep[1] = False  # sentence 1 has no key at all
    for need in (True, False):
        out, w = ours(q, k, v, mask=keep, need_weights=need)
        assert torch.isfinite(out).all()
        # no key to attend: the heads' context is 0, so the output is the output projection's bias
        torch.testing.assert_close(out[1], ours.out_proj.bias.expand(T, D))
        if need:
            assert (w[1] == 0).all() and torch.allclose(w[0].sum(-1), torch.ones(H, T))
        out.sum().backward()
        assert torch.isfinite(q.grad).all()
        q.grad = None


def test_dropout_only_in_training():
    torch.manual_seed(0)
    att = MultiHeadAttention(D, H, dropout=0.5)
    q, k, v = _inputs()
    a, _ = att.eval()(q, k, v)
    b, _ = att(q, k, v)
    assert torch.equal(a, b)
    c, _ = att.train()(q, k, v)
    assert not torch.allclose(a, c)


def test_embed_dim_must_divide_by_heads():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 4)


@pytest.mark.parametrize("steps", [None, 2])
def test_query_rows_sharing_a_key_row_read_it_as_if_it_were_repeated(pair, steps):
    """g query rows per key row (beam search's K beams of one source, the memory kept once): row r reads key row
    r // g, exactly as with the keys and mask repeated g times."""
    ours, _ = pair
    ours.need_weights = True
    g = 3
    torch.manual_seed(2)
    query = torch.randn(B * g, D) if steps is None else torch.randn(B * g, steps, D)
    memory = ours.precompute(torch.randn(B, S, D))  # (B, H, S, Dh)
    mask = torch.ones(B, S, dtype=torch.bool)
    mask[1, 4:], mask[2, 2:] = False, False
    shared, w_shared = ours(query, memory, mask=mask)
    repeated = HeadKV(*(x.repeat_interleave(g, dim=0) for x in memory))
    each, w_each = ours(query, repeated, mask=mask.repeat_interleave(g, dim=0))
    torch.testing.assert_close(shared, each, atol=ATOL, rtol=0)
    torch.testing.assert_close(w_shared, w_each, atol=ATOL, rtol=0)
    assert (w_shared.view(B, g, H, -1, S)[2, ..., 2:] == 0).all()  # the third source's padding, in all its rows
    ours.need_weights = False
    fast, _ = ours(query, memory, mask=mask)  # the kernel's path (no weights) folds the same way
    torch.testing.assert_close(fast, each, atol=ATOL, rtol=0)


def test_query_rows_that_do_not_divide_into_the_key_rows_are_refused(pair):
    ours, _ = pair
    memory = ours.precompute(torch.randn(B, S, D))
    with pytest.raises(ValueError, match="7 query rows for 3 key rows"):
        ours(torch.randn(7, D), memory)
    with pytest.raises(ValueError, match="6 query rows for 3 key rows"):  # a (B, T, S) mask cannot be shared
        ours(torch.randn(6, 2, D), memory, mask=torch.ones(6, 2, S, dtype=torch.bool))
