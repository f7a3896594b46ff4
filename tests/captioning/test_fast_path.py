"""The caption decoder's fast path (captioning.model.fast_path) equals the plain one: the teacher-forced forward with
``fast_path: true`` against the plain loop over the paper's equations and against the step-by-step search path, in
values and gradients, soft and hard, under autocast and inference mode; its pieces alone (deferred weight gradients,
thin linears, the compiled cross-entropy) against PyTorch. (The shared additive score: tests/core/test_fused.py.)"""

import pytest
import torch
import torch.nn.functional as F

from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder
from captioning.model.fast_path import DeferredWeightGrad, ThinLinear, cross_entropy
from text_attn.core import fused, native


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

    from text_attn.core.fused import KeyGradSummer

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
    monkeypatch.setattr(KeyGradSummer, "sequence", lambda self, proj: contextlib.nullcontext())  # no sink
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


@pytest.mark.parametrize(("attention", "soft_prob"), [("soft", 0.5), ("hard", 0.0), ("hard", 0.5)])
def test_the_fast_path_equals_the_plain_loop_in_values_and_gradients(attention, soft_prob):
    """``fast_path: true`` (the default) against ``false`` (the paper's equations, step by step) on the same weights
    and the same random draws: logits, α, and for hard attention the sampled regions, their log-probabilities and
    entropies, and every parameter's gradient of a loss that uses them all."""

    def run(fast: bool):
        torch.manual_seed(0)
        cfg = DecoderConfig(vocab_size=11, feature_dim=8, embed_dim=7, hidden_dim=9, attn_dim=5, dropout=0.0,
                            attention=attention, soft_prob=soft_prob, fast_path=fast)  # fmt: skip
        dec = ShowAttendTellDecoder(cfg).train()
        feats, caps = torch.randn(3, 6, 8, requires_grad=True), torch.randint(1, 11, (3, 5))
        out = dec(feats, caps)
        loss = F.cross_entropy(out.logits.flatten(0, 1), caps.roll(-1, 1).flatten()) + out.alphas.square().sum()
        if out.attn_log_probs is not None:
            loss = loss + out.attn_log_probs.sum() + out.entropies.sum()
        grads = torch.autograd.grad(loss, [*dec.parameters(), feats])
        return out, grads, [n for n, _ in dec.named_parameters()] + ["features"]

    (fast, fast_grads, names), (plain, plain_grads, _) = run(True), run(False)
    for a, b in zip(fast, plain, strict=True):
        if a is None:
            assert b is None
        elif a.is_floating_point():
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(a, b)  # the same regions sampled, the same captions sampled
    for name, a, b in zip(names, fast_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)


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


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("C", [13, 16])  # a tail of lanes only / whole lanes
def test_compiled_cross_entropy_equals_pytorchs_in_value_and_gradient(eps, C):
    torch.manual_seed(0)
    x = (5 * torch.randn(37, C)).requires_grad_()
    t = torch.randint(0, C, (37,))
    t[::4] = 2  # ignored rows (pad)
    ours = cross_entropy(x, t, ignore_index=2, label_smoothing=eps)
    if native.kernels() is not None:  # TEXT_ATTN_NATIVE=0 or no compiler: PyTorch's, checked alike below
        assert type(ours.grad_fn).__name__ == "CompiledCrossEntropyBackward"
    plain = F.cross_entropy(x, t, ignore_index=2, label_smoothing=eps)
    torch.testing.assert_close(ours, plain)
    g_ours = torch.autograd.grad(1.7 * ours, x, retain_graph=True)[0]  # an incoming gradient other than 1
    torch.testing.assert_close(g_ours, torch.autograd.grad(1.7 * plain, x)[0])
    assert g_ours[::4].abs().sum() == 0  # ignored rows get nothing
    torch.testing.assert_close(torch.autograd.grad(0.5 * ours, x)[0], g_ours / 3.4)  # a retained graph, run again


def test_compiled_cross_entropy_edge_cases_match_pytorch():
    x = torch.randn(3, 9, requires_grad=True)
    ignored = torch.full((3,), -100)
    ours = cross_entropy(x, ignored)
    assert torch.isnan(ours) and torch.isnan(F.cross_entropy(x, ignored))  # 0 / 0, and a zero gradient as PyTorch's
    assert torch.equal(torch.autograd.grad(ours, x)[0], torch.zeros(3, 9))
    for bad in ({"targets": torch.tensor([0, 1])}, {"label_smoothing": 1.5}):  # PyTorch's errors, not a number
        with pytest.raises((ValueError, RuntimeError)):
            cross_entropy(**{"logits": x, "targets": torch.tensor([0, 1, 2]), **bad})
    masked = torch.randn(2, 9)
    masked[0, 3] = float("-inf")  # a word masked out: no smoothing, so a finite loss as PyTorch's
    masked.requires_grad_()
    torch.testing.assert_close(
        cross_entropy(masked, torch.tensor([1, 2])), F.cross_entropy(masked, torch.tensor([1, 2]))
    )
    huge = torch.tensor([[1e4, -1e4, 0.0, 3.0, 1e4, 2.0, -5.0, 7.0, 1.0]], requires_grad=True)
    t = torch.tensor([4])
    torch.testing.assert_close(cross_entropy(huge, t), F.cross_entropy(huge, t))
    with pytest.raises((IndexError, RuntimeError)):  # out of range: PyTorch's own error, no read past the row
        cross_entropy(x, torch.tensor([0, 9, 1]))
    with torch.no_grad():  # no gradient wanted: PyTorch's
        torch.testing.assert_close(
            cross_entropy(x, torch.tensor([0, 8, 1])), F.cross_entropy(x, torch.tensor([0, 8, 1]))
        )


def test_compiled_cross_entropy_gradient_accumulates_through_a_view_of_a_leaf():
    """caption_loss reshapes (B, T, V) logits: the gradient handed to a leaf through that view becomes its .grad and
    is accumulated into; the kernel's buffer must not be reused afterwards (a retained graph recomputes it)."""
    torch.manual_seed(0)
    leaf = torch.randn(2, 3, 11, requires_grad=True)
    t = torch.randint(0, 11, (6,))
    loss = cross_entropy(leaf.reshape(-1, 11), t)
    for _ in range(3):
        loss.backward(retain_graph=True)
    once = torch.autograd.grad(F.cross_entropy(leaf.reshape(-1, 11), t), leaf)[0]
    torch.testing.assert_close(leaf.grad, 3 * once)
