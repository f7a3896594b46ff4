"""Attention scores against hand computations, masking, precompute, gradients."""

import math

import pytest
import torch

from text_attn.core.attention import (
    AdditiveAttention,
    HardAttention,
    LuongAttention,
    MultiHeadAttention,
    ProjectedKeys,
    build_attention,
    masked_softmax,
)


def _set(linear: torch.nn.Linear, weight, bias=None):
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(weight, dtype=torch.float32))
        if bias is not None:
            linear.bias.copy_(torch.tensor(bias, dtype=torch.float32))


def test_additive_scores_match_hand_computation():
    att = AdditiveAttention(query_dim=1, key_dim=1, attn_dim=1)
    _set(att.query_proj, [[2.0]])
    _set(att.key_proj, [[1.0]], [0.0])
    _set(att.v, [[3.0]])
    q = torch.tensor([[0.5]])  # (B=1, Q=1)
    keys = torch.tensor([[[0.0], [1.0]]])  # (B=1, S=2, K=1)
    ctx, w = att(q, keys)
    s = torch.tensor([3 * math.tanh(1.0 + 0.0), 3 * math.tanh(1.0 + 1.0)])  # v tanh(W q + U k)
    expected = torch.softmax(s, 0)
    assert torch.allclose(w[0], expected, atol=1e-6)
    assert torch.allclose(ctx[0], (expected * torch.tensor([0.0, 1.0])).sum(0, keepdim=True), atol=1e-6)


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_luong_scores_match_hand_computation(score):
    att = LuongAttention(query_dim=2, key_dim=2, score=score, attn_dim=2)
    q = torch.tensor([[1.0, 2.0]])
    k = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    if score == "dot":
        s = torch.tensor([1.0, 2.0, 3.0])
    elif score == "general":
        W = [[1.0, 2.0], [0.0, 1.0]]  # maps k -> W k
        _set(att.W, W)
        Wk = k[0] @ torch.tensor(W).T
        s = Wk @ q[0]  # qᵀ W k
    else:
        _set(att.W_q, [[1.0, 0.0], [0.0, 1.0]])
        _set(att.W_k, [[0.5, 0.0], [0.0, -1.0]], [0.0, 0.0])
        _set(att.v, [[1.0, 1.0]])
        cat = torch.cat([q.expand(3, 2), k[0]], dim=1)  # [q; k] with W = [W_q, W_k]
        W = torch.tensor([[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, -1.0]])
        s = torch.tanh(cat @ W.T).sum(1)
    _, w = att(q, k)
    assert torch.allclose(w[0], torch.softmax(s, 0), atol=1e-6)


@pytest.mark.parametrize("kind", ["bahdanau", "luong-dot", "luong-general", "luong-concat"])
def test_weights_sum_to_one_and_masked_positions_are_zero(kind):
    torch.manual_seed(0)
    att = build_attention(kind, query_dim=8, key_dim=8, attn_dim=6)
    keys = torch.randn(3, 5, 8)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    ctx, w = att(torch.randn(3, 8), keys, mask=mask)
    assert ctx.shape == (3, 8) and w.shape == (3, 5)
    assert torch.allclose(w.sum(-1), torch.ones(3), atol=1e-6)
    assert (w[~mask] == 0).all()
    assert torch.allclose(w[2, 0], torch.tensor(1.0))
    assert torch.allclose(ctx[2], keys[2, 0], atol=1e-6)


def test_fully_masked_row_gives_zeros_not_nan():
    att = AdditiveAttention(4, 4, 4)
    mask = torch.tensor([[False, False, False], [True, True, False]])
    ctx, w = att(torch.randn(2, 4), torch.randn(2, 3, 4), mask=mask)
    assert not torch.isnan(w).any() and not torch.isnan(ctx).any()
    assert (w[0] == 0).all() and (ctx[0] == 0).all()
    # gradients stay finite through a fully masked row
    scores = torch.randn(2, 3, requires_grad=True)
    masked_softmax(scores, mask).sum().backward()
    assert torch.isfinite(scores.grad).all()


@pytest.mark.parametrize("kind", ["bahdanau", "luong-general", "luong-concat"])
def test_precomputed_keys_equal_fresh_projection_and_multi_step_queries(kind):
    torch.manual_seed(1)
    att = build_attention(kind, query_dim=6, key_dim=6, attn_dim=5)
    keys, values = torch.randn(2, 7, 6), torch.randn(2, 7, 3)
    pk = att.precompute(keys)
    assert isinstance(pk, ProjectedKeys)
    q = torch.randn(2, 4, 6)  # (B, T, Q): four decoder steps at once
    ctx_all, w_all = att(q, pk, values)
    assert ctx_all.shape == (2, 4, 3) and w_all.shape == (2, 4, 7)
    for t in range(4):
        ctx_t, w_t = att(q[:, t], keys, values)
        assert torch.allclose(w_all[:, t], w_t, atol=1e-6)
        assert torch.allclose(ctx_all[:, t], ctx_t, atol=1e-6)


@pytest.mark.parametrize("kind", ["bahdanau", "luong-dot", "luong-general", "luong-concat"])
def test_multi_step_queries_with_a_mask_equal_one_step_at_a_time(kind):
    # T = S = 4: a mask broadcast over the wrong axis would mask query steps instead of source positions, silently
    torch.manual_seed(2)
    att = build_attention(kind, query_dim=6, key_dim=6, attn_dim=5)
    keys, q = torch.randn(2, 4, 6), torch.randn(2, 4, 6)
    mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    ctx_all, w_all = att(q, keys, mask=mask)
    assert (w_all[1, :, 2:] == 0).all() and torch.allclose(w_all.sum(-1), torch.ones(2, 4), atol=1e-6)
    for t in range(4):
        ctx_t, w_t = att(q[:, t], keys, mask=mask)
        assert torch.allclose(w_all[:, t], w_t, atol=1e-6)
        assert torch.allclose(ctx_all[:, t], ctx_t, atol=1e-6)


def test_key_projection_runs_once_per_source_when_precomputed():
    att = AdditiveAttention(4, 4, 4)
    calls = []
    att.key_proj.register_forward_hook(lambda *a: calls.append(1))
    pk = att.precompute(torch.randn(1, 5, 4))
    for _ in range(10):
        att(torch.randn(1, 4), pk)
    assert len(calls) == 1


@pytest.mark.parametrize("kind", ["bahdanau", "luong-dot", "luong-general", "luong-concat"])
def test_gradients_flow_to_query_keys_and_parameters(kind):
    att = build_attention(kind, 5, 5, 5)
    q = torch.randn(2, 5, requires_grad=True)
    k = torch.randn(2, 3, 5, requires_grad=True)
    ctx, _ = att(q, k)
    ctx.pow(2).sum().backward()
    assert q.grad.abs().sum() > 0 and k.grad.abs().sum() > 0
    for p in att.parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0


def test_bad_configuration_is_rejected():
    with pytest.raises(ValueError, match="unknown attention"):
        build_attention("luong-cosine", 4, 4, 4)
    with pytest.raises(ValueError, match="query_dim == key_dim"):
        LuongAttention(4, 6, score="dot")


def test_hard_attention_log_prob_and_entropy_match_torch_distributions():
    from text_attn.core.attention import HardAttention

    torch.manual_seed(3)
    att = HardAttention(6, 6, 5)
    q, k = torch.randn(4, 6), torch.randn(4, 7, 6)
    mask = torch.ones(4, 7, dtype=torch.bool)
    mask[1, 5:] = False
    out = att.attend(q, k, mask=mask, mode="sample")
    dist = torch.distributions.Categorical(probs=out.weights)
    assert torch.allclose(out.log_prob, dist.log_prob(out.index), atol=1e-5)
    assert torch.allclose(out.entropy, dist.entropy(), atol=1e-5)
    assert torch.equal(out.context, k[torch.arange(4), out.index])
    assert (out.index[1] < 5).item()  # never samples a masked position


def test_hard_attention_samples_follow_alpha_and_soft_rows_use_the_expectation():
    from text_attn.core.attention import HardAttention

    torch.manual_seed(0)
    att = HardAttention(3, 3, 3)
    q, k = torch.randn(1, 3).expand(4000, 3), torch.randn(1, 5, 3).expand(4000, 5, 3)
    out = att.attend(q, k, mode="sample")
    freq = torch.bincount(out.index, minlength=5).float() / 4000
    assert torch.allclose(freq, out.weights[0], atol=0.03)
    soft = torch.zeros(4000, dtype=torch.bool)
    soft[::2] = True
    mixed = att.attend(q, k, mode="sample", use_soft=soft)
    expected = out.weights[0] @ k[0]
    assert torch.allclose(mixed.context[0], expected, atol=1e-6) and (mixed.log_prob[soft] == 0).all()
    arg = att.attend(q[:1], k[:1], mode="argmax")
    assert arg.index.item() == out.weights[0].argmax().item()


def test_hard_attention_reports_the_argmax_where_the_soft_context_was_used():
    from text_attn.core.attention import HardAttention

    torch.manual_seed(5)
    att = HardAttention(3, 3, 3)
    q, k = torch.randn(64, 3), torch.randn(64, 6, 3)
    out = att.attend(q, k, mode="sample", use_soft=torch.ones(64, dtype=torch.bool))
    assert torch.equal(out.index, out.weights.argmax(-1))


def test_a_mask_of_floats_and_an_unbatched_input_are_refused_by_name():
    """A float 0/1 mask was read as an additive bias (the masked keys attended) and raised with need_weights; (S, D)
    keys were an IndexError or a reshape error deep inside; 0 heads a ZeroDivisionError."""
    mha = MultiHeadAttention(8, 2).eval()
    x, mem = torch.randn(1, 3, 8), torch.randn(1, 4, 8)
    keep = torch.tensor([[True, True, False, False]])
    for want in (False, True):
        with pytest.raises(TypeError, match="mask must be bool \\(True = attend\\), got torch.float32"):
            mha(x, mem, mask=keep.float(), need_weights=want)
    with pytest.raises(ValueError, match="keys must be \\(B, S, D\\)"):
        mha(torch.randn(3, 8), torch.randn(4, 8))
    with pytest.raises(ValueError, match="keys must be \\(B, S, K\\)"):
        AdditiveAttention(5, 6, 8)(torch.randn(5), torch.randn(4, 6))
    for heads in (0, -2):
        with pytest.raises(ValueError, match="must be at least 1"):
            MultiHeadAttention(8, heads)


def test_hard_attention_gives_a_fully_masked_row_a_zero_context():
    """As the module promises for every attention (soft did; hard read region 0 and logged log 1e-12)."""
    torch.manual_seed(0)
    hard = HardAttention(5, 6, 8).eval()
    q, keys = torch.randn(2, 5), torch.randn(2, 4, 6)
    mask = torch.tensor([[True, True, False, False], [False] * 4])
    ctx, w = hard(q, keys, mask=mask)
    assert torch.equal(ctx[1], torch.zeros(6)) and torch.equal(w[1], torch.zeros(4))
    assert torch.equal(ctx[0], keys[0, int(w[0].argmax())])  # a live row reads its arg-max region, as before
    sampled = hard.attend(q, keys, mask=mask, mode="sample", generator=torch.Generator().manual_seed(0))
    assert float(sampled.log_prob[1]) == 0.0 and torch.equal(sampled.context[1], torch.zeros(6))


@pytest.mark.parametrize("module", [AdditiveAttention, HardAttention])
def test_keys_precomputed_outside_autocast_meet_a_bfloat16_step(module):
    """Keys projected once in float32, the step under bfloat16 autocast (the query bfloat16): addmv refused the two
    dtypes. Now one dtype; the weights are float32's to bfloat16's precision."""
    torch.manual_seed(0)
    att = module(4, 4, 6).eval()
    q, keys = torch.randn(3, 4), att.precompute(torch.randn(3, 5, 4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        context, weights = att(q, keys)
    want_context, want_weights = att(q, keys)
    torch.testing.assert_close(weights.float(), want_weights, rtol=0, atol=2e-2)
    torch.testing.assert_close(context.float(), want_context, rtol=0, atol=5e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_one_step_score_is_as_accurate_as_tanh_in_that_dtype(dtype):
    """2 vᵀσ(2x) − Σv cancels where v is large (a trained one): in a half dtype the fused step was 3-4x less accurate
    than vᵀ tanh(x) computed in that dtype. Half dtypes are computed in float32 now."""
    torch.manual_seed(0)
    att = AdditiveAttention(64, 64, 64)
    with torch.no_grad():
        att.v.weight.mul_(8).add_(0.05)  # sum(v) ~ 3, |v| up to ~1: a trained scorer's scale
    q, keys = torch.randn(8, 64), torch.randn(8, 50, 64)
    wide = AdditiveAttention(64, 64, 64).double()
    wide.load_state_dict({k: t.double() for k, t in att.state_dict().items()})
    exact = wide.score(q.double(), wide.precompute(keys.double()).proj)
    half = att.to(dtype)
    with torch.no_grad():
        proj = half.precompute(keys.to(dtype)).proj
        ours = half.score(q.to(dtype), proj)
        tanh = half.v(torch.tanh(proj + half.query_proj(q.to(dtype)).unsqueeze(1))).squeeze(-1)
    assert ours.dtype == dtype
    assert (ours.double() - exact).abs().max() <= (tanh.double() - exact).abs().max()


def test_a_batch_of_none_gives_empty_results():
    """ZeroDivisionError (additive, hard), a reshape error (Luong); multi-head attention gave empty results already."""
    for att in (AdditiveAttention(4, 4, 6), LuongAttention(4, 4, "general"), HardAttention(4, 4, 6).eval()):
        for query in (torch.randn(0, 4), torch.randn(0, 2, 4)):
            if isinstance(att, HardAttention) and query.dim() == 3:
                continue
            context, weights = att(query, torch.randn(0, 5, 4), mask=torch.ones(0, 5, dtype=torch.bool))
            assert context.shape == (*query.shape[:-1], 4) and weights.shape == (*query.shape[:-1], 5)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int64, torch.float32])
def test_every_attention_refuses_a_mask_that_is_not_bool_by_name(dtype):
    """MultiHeadAttention's TypeError, from the shared mask path: masked_fill's own error before (or a mask of
    floats read as numbers)."""
    q, keys, mask = torch.randn(2, 4), torch.randn(2, 5, 4), torch.ones(2, 5, dtype=dtype)
    for att in (
        AdditiveAttention(4, 4, 6),
        LuongAttention(4, 4, "concat"),
        HardAttention(4, 4, 6),
        MultiHeadAttention(4, 2),
    ):
        with pytest.raises(TypeError, match=f"mask must be bool \\(True = attend\\), got {dtype}"):
            att(q, keys, mask=mask)


def test_hard_attention_takes_one_steps_query_only():
    """(B, T, Q) indexed the wrong rows (an IndexError, or a wrong context where T fit)."""
    with pytest.raises(ValueError, match=r"one step's query \(B, Q\) only, got \(2, 3, 4\)"):
        HardAttention(4, 4, 6).eval()(torch.randn(2, 3, 4), torch.randn(2, 5, 4))
