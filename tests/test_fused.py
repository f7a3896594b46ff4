"""The hand-written autograd of the training loop equals plain PyTorch: values and gradients."""

import pytest
import torch
import torch.nn.functional as F

from captioning.decoder import DecoderConfig, ShowAttendTellDecoder
from text_attn.core import fused
from text_attn.core.fused import AdditiveScore, DeferredWeightGrad, ThinLinear, additive_score


def _plain_score(q, proj, v):  # vᵀ tanh(proj[n // g] + q[n]), (N, S)
    g = q.size(0) // proj.size(0)
    return torch.tanh(proj.repeat_interleave(g, 0) + q.unsqueeze(1)) @ v.view(-1)


@pytest.mark.parametrize("g", [1, 3])
def test_additive_score_equals_tanh_expression_in_value_and_gradient(g, monkeypatch):
    monkeypatch.setattr(fused, "SCORE_BLOCK", 2 * 7 * 5)  # 2 rows per block: 5 sources -> a partial last block
    torch.manual_seed(0)
    B, S, A = 5, 7, 5
    q = torch.randn(B * g, A, dtype=torch.float64, requires_grad=True)
    proj = torch.randn(B, S, A, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, A, dtype=torch.float64, requires_grad=True)
    de = torch.randn(B * g, S, dtype=torch.float64)
    ours = AdditiveScore.apply(q, proj, v)
    ours_grads = torch.autograd.grad((ours * de).sum(), (q, proj, v))
    plain = _plain_score(q, proj, v)
    plain_grads = torch.autograd.grad((plain * de).sum(), (q, proj, v))
    torch.testing.assert_close(ours, plain)
    for a, b in zip(ours_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b)
    with torch.no_grad():  # the inference path (a small scratch buffer) gives the same numbers
        torch.testing.assert_close(additive_score(q, proj, v), plain)
    assert torch.autograd.gradcheck(AdditiveScore.apply, (q, proj, v))


def test_deferred_weight_gradient_is_the_sum_over_steps():
    torch.manual_seed(0)
    w = torch.randn(4, 3, requires_grad=True)
    xs = [torch.randn(2, 3) for _ in range(5)]
    inputs: list[torch.Tensor] = []
    zeros = DeferredWeightGrad.apply(2, 5, inputs, None, [], w)
    h = torch.zeros(2, 4)
    for t, x in enumerate(xs):  # a toy recurrence: the step's output feeds the next step
        inputs.append(x)
        h = torch.tanh(F.linear(x, w.detach()) + zeros[t] + h)
    (h**2).sum().backward()
    ours = w.grad.clone()
    w.grad = None
    h = torch.zeros(2, 4)
    for x in xs:
        h = torch.tanh(F.linear(x, w) + h)
    (h**2).sum().backward()
    torch.testing.assert_close(ours, w.grad)


def test_thin_linear_equals_linear_in_value_and_input_gradients():
    torch.manual_seed(0)
    w = torch.randn(6, 4, dtype=torch.float64)
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    full = torch.randn(3, 5, 6, dtype=torch.float64, requires_grad=True)  # a strided bias: one step of (B, T, O)
    tap = torch.zeros(3, 6, dtype=torch.float64, requires_grad=True)  # gets the output's gradient, adds nothing
    ours = ThinLinear.apply(x, full[:, 1], w, w.t().contiguous(), tap)
    plain = F.linear(x, w, full[:, 1]) + tap
    torch.testing.assert_close(ours, plain)
    g = torch.randn(3, 6, dtype=torch.float64)
    ours_grads, plain_grads = (
        torch.autograd.grad(ours, (x, full, tap), g),
        torch.autograd.grad(plain, (x, full, tap), g),
    )
    for a, b in zip(ours_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradcheck(lambda x, b: ThinLinear.apply(x, b, w, w.t().contiguous()), (x, full[:, 1]))


def test_deferred_gradients_of_weights_sharing_the_steps_with_a_prefix():
    """Two weights on one recorded input: W1 reads [prefix | first column], W2 the other two columns (an LSTM's
    W_ih on [E y; z] with the words known up front, W_hh on h); each gets Σ_t g_tᵀ x_t over its own columns."""
    torch.manual_seed(0)
    w1, w2 = torch.randn(4, 3, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    prefix = [torch.randn(2, 2) for _ in range(5)]  # (B, 2) per step, known before the loop
    xs = [torch.randn(2, 3) for _ in range(5)]
    inputs: list[torch.Tensor] = []
    zeros = DeferredWeightGrad.apply(2, 5, inputs, torch.cat(prefix), [], w1, w2)
    h = torch.zeros(2, 4)
    for t, x in enumerate(xs):
        inputs.append(x)
        full = torch.cat([prefix[t], x], dim=1)  # (B, 5) = w1's 3 columns, then w2's 2
        h = torch.tanh(F.linear(full, torch.cat([w1, w2], 1).detach()) + zeros[t] + h)
    ours = torch.autograd.grad((h**2).sum(), (w1, w2))
    h = torch.zeros(2, 4)
    for t, x in enumerate(xs):
        h = torch.tanh(F.linear(torch.cat([prefix[t], x], dim=1), torch.cat([w1, w2], 1)) + h)
    for a, b in zip(ours, torch.autograd.grad((h**2).sum(), (w1, w2)), strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_teacher_forcing_gradients_equal_the_search_steps(attention):
    """forward (hoisted embedding projection, deferred LSTM weight gradient, fused score) against the step-by-step
    search path (nn.LSTMCell, autograd everywhere): the same loss gives the same gradient for every parameter."""
    torch.manual_seed(0)
    cfg = DecoderConfig(vocab_size=11, feature_dim=8, embed_dim=7, hidden_dim=9, attn_dim=5, dropout=0.0,
                        attention=attention, soft_prob=1.0, hard_inference="expect")  # fmt: skip
    dec = ShowAttendTellDecoder(cfg).train()
    feats, caps = torch.randn(3, 6, 8), torch.randint(1, 11, (3, 5))
    logits = dec(feats, caps).logits  # hard with soft_prob 1: the expected context, like "expect" in eval
    loss = F.cross_entropy(logits.flatten(0, 1), caps.roll(-1, 1).flatten())
    fast = torch.autograd.grad(loss, list(dec.parameters()))
    dec.eval()  # step(): the search path ("expect" = the same expected context for hard attention)
    state, steps = dec.init_state(feats), []
    for t in range(caps.size(1)):
        log_probs, _, state = dec.step(caps[:, t], state)
        steps.append(log_probs)
    loss = F.nll_loss(torch.stack(steps, 1).flatten(0, 1), caps.roll(-1, 1).flatten())
    slow = torch.autograd.grad(loss, list(dec.parameters()))
    for (name, _), a, b in zip(dec.named_parameters(), fast, slow, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("soft_prob", [0.0, 0.5])
def test_summed_key_gradients_equal_autograds_sum_in_any_backward_order(soft_prob, monkeypatch):
    """Pure sampling (soft_prob 0) lets a hard step's score gradient arrive before later steps' (no path through the
    context): the sink still returns the whole sum, whichever step's backward runs last."""
    import contextlib

    from text_attn.core.attention import AdditiveAttention

    cfg = DecoderConfig(vocab_size=11, feature_dim=8, embed_dim=7, hidden_dim=9, attn_dim=5, dropout=0.0,
                        attention="hard", soft_prob=soft_prob)  # fmt: skip
    feats, caps = torch.randn(3, 6, 8), torch.randint(1, 11, (3, 5))

    def grads() -> list[torch.Tensor]:
        torch.manual_seed(0)
        dec = ShowAttendTellDecoder(cfg).train()
        out = dec(feats, caps)
        loss = F.cross_entropy(out.logits.flatten(0, 1), caps.flatten()) + out.attn_log_probs.sum()
        return torch.autograd.grad(loss, list(dec.parameters()))

    summed = grads()
    monkeypatch.setattr(AdditiveAttention, "summing_key_grads", lambda self, proj: contextlib.nullcontext())
    plain = grads()
    for a, b in zip(summed, plain, strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_teacher_forcing_under_bf16_autocast_matches_float32(attention):
    """Mixed precision: the per-step products run in the autocast dtype (ThinLinear's backward too), gradients come
    back in the parameters' float32 and agree with a float32 step to bfloat16's precision."""
    cfg = DecoderConfig(vocab_size=11, feature_dim=16, embed_dim=8, hidden_dim=12, attn_dim=8, dropout=0.0,
                        attention=attention, soft_prob=1.0)  # fmt: skip
    torch.manual_seed(0)
    dec = ShowAttendTellDecoder(cfg).train()
    feats, caps = torch.randn(4, 6, 16), torch.randint(1, 11, (4, 5))

    def grads(autocast: bool) -> list[torch.Tensor]:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = dec(feats, caps).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), caps.roll(-1, 1).flatten())
        return torch.autograd.grad(loss, list(dec.parameters()))

    for (name, p), a, b in zip(dec.named_parameters(), grads(True), grads(False), strict=True):
        assert a.dtype == p.dtype and torch.isfinite(a).all(), name
        cos = F.cosine_similarity(a.flatten(), b.flatten(), dim=0)
        assert cos > 0.98, (name, cos.item())


@pytest.mark.parametrize("kernel", ["compiled", "pytorch"])
def test_scratch_pool_reuses_score_buffers_and_keeps_retained_graphs_safe(kernel, monkeypatch):
    """The teacher-forced score takes its saved σ from fused.SCRATCH and gives it back after its backward: the next
    step reuses the same memory. A graph kept with retain_graph still runs backward again with the same gradients
    until a later step has reused its buffers; after that autograd refuses (an error, not wrong numbers)."""
    if kernel == "pytorch":
        monkeypatch.setattr(fused, "_native", lambda *tensors: None)
    fused.SCRATCH.clear()
    torch.manual_seed(0)
    cfg = DecoderConfig(vocab_size=11, feature_dim=8, embed_dim=7, hidden_dim=9, attn_dim=5, dropout=0.0)
    dec = ShowAttendTellDecoder(cfg).train()
    feats, caps = torch.randn(3, 6, 8), torch.randint(1, 11, (3, 5))
    params = list(dec.parameters())

    def loss() -> torch.Tensor:
        return F.cross_entropy(dec(feats, caps).logits.flatten(0, 1), caps.flatten())

    first = loss()
    grads = torch.autograd.grad(first, params, retain_graph=True)
    pooled = {b.data_ptr() for bufs in fused.SCRATCH.free.values() for b in bufs}
    assert len(pooled) >= caps.size(1)  # one σ per step (and the block scratch, 2·proj) came back
    again = torch.autograd.grad(first, params, retain_graph=True)  # nothing reused yet: the same gradients
    for a, b in zip(grads, again, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)

    sigmas = (tuple(feats.shape[:2]) + (cfg.attn_dim,), torch.float32, feats.device)  # σ's shape (also 2·proj's)
    free = len(fused.SCRATCH.free[sigmas])
    second = loss()  # takes the pooled buffers (σ of each step; 2·proj in PyTorch; the backward's scratch stays)...
    doubled = 0 if fused._native(feats) is not None else 1  # the compiled kernel needs no 2·proj
    assert len(fused.SCRATCH.free[sigmas]) == free - caps.size(1) - doubled
    for a, b in zip(grads, torch.autograd.grad(second, params), strict=True):
        torch.testing.assert_close(a, b)  # ...and computes the same gradients in them
    assert {b.data_ptr() for bufs in fused.SCRATCH.free.values() for b in bufs} == pooled  # and gave them back
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(first, params)  # its σ now hold the second step's numbers


def test_inference_mode_forward_leaves_no_buffer_that_training_cannot_write():
    """Lightning validates under torch.inference_mode: the teacher-forced forward there must not hand the pool
    tensors that a later training step would write into (in-place writes to inference tensors are refused)."""
    fused.SCRATCH.clear()
    cfg = DecoderConfig(vocab_size=11, feature_dim=8, embed_dim=7, hidden_dim=9, attn_dim=5, dropout=0.0)
    dec = ShowAttendTellDecoder(cfg).train()
    feats, caps = torch.randn(3, 6, 8), torch.randint(1, 11, (3, 5))
    with torch.inference_mode():
        dec(feats, caps)
    fused.SCRATCH.give(torch.inference_mode()(torch.empty)(3, 6, 5))  # an inference tensor offered directly: refused
    assert not any(b.is_inference() for bufs in fused.SCRATCH.free.values() for b in bufs)
    for _ in range(2):  # training steps after it: pooled buffers written and reused
        F.cross_entropy(dec(feats, caps).logits.flatten(0, 1), caps.flatten()).backward()
    assert fused.SCRATCH.held > 0


def test_a_sequence_whose_step_missed_the_loss_is_reported_when_the_next_one_starts():
    """The keys' gradient comes out when the last step's backward runs: a step whose score never reaches the loss
    holds it back. That cannot be seen during the backward, so the next teacher-forced sequence warns."""
    import warnings

    from text_attn.core.attention import AdditiveAttention

    torch.manual_seed(0)
    att = AdditiveAttention(4, 6, 5)

    def sequence(steps_in_loss: int) -> None:
        proj = att.project_keys(torch.randn(2, 3, 6))
        with att.summing_key_grads(proj):
            scores = [att.score(torch.randn(2, 4), proj) for _ in range(3)]
        sum(e.sum() for e in scores[:steps_in_loss]).backward()

    sequence(2)  # the third step's score is left out of the loss
    assert att.key_proj.weight.grad is None  # held back: no step returned the keys' gradient
    with pytest.warns(RuntimeWarning, match="2 of its 3 steps ran backward"):
        sequence(3)
    assert att.key_proj.weight.grad is not None  # a whole sequence gives it...
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sequence(3)  # ...and the next one has nothing to report
