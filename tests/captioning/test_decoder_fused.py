"""The hand-written autograd of the training loop equals plain PyTorch, through the caption decoder: its teacher-forced
forward (text_attn.core.fused's score, deferred weight gradients, thin linears, the scratch pool) against the
step-by-step search path, under autocast and inference mode. (The fused operations alone: tests/core/test_fused.py.)"""

import pytest
import torch
import torch.nn.functional as F

from captioning.decoder import DecoderConfig, ShowAttendTellDecoder
from text_attn.core import fused


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
