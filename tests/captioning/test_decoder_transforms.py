"""The Show-Attend-Tell decoder used in someone's own code: a gradient penalty (second-order gradients, create_graph)
equals the one of the same score written in plain PyTorch, or, through the fast path whose LSTM weight gradients are
deferred, is refused by name; ``torch.compile`` of the decoder in training mode runs and equals eager."""

from __future__ import annotations

import pytest
import torch

from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder
from text_attn.core import fused
from text_attn.core.attention import AdditiveAttention


def _decoder():
    torch.manual_seed(0)
    cfg = DecoderConfig(vocab_size=20, feature_dim=16, embed_dim=8, hidden_dim=8, attn_dim=8, dropout=0.0)
    return ShowAttendTellDecoder(cfg).train(), torch.randn(2, 9, 16), torch.randint(4, 20, (2, 5))


def _penalty_grads(dec, feats, caps, fast_path: bool) -> dict[str, torch.Tensor]:
    """A gradient penalty on the features: |∂ loss / ∂ features|², then its gradient for the features and weights."""
    f = feats.clone().requires_grad_()
    dec.zero_grad()
    (g,) = torch.autograd.grad(dec.teacher_forced(f, caps, fast_path=fast_path).logits.sum(), f, create_graph=True)
    g.square().sum().backward()
    grads = {n: p.grad.clone() for n, p in dec.named_parameters() if p.grad is not None}
    return {"features": f.grad, **grads}


def _plain_score(self, query, proj, key_grad_sink=None):  # vᵀ tanh(U k + W q): autograd's own, twice differentiable
    return self.v(torch.tanh(proj + self.query_proj(query).unsqueeze(1))).squeeze(-1)


@pytest.mark.parametrize("kernel", ["compiled", "pytorch"])
def test_a_gradient_penalty_through_the_plain_loop_equals_plain_pytorchs(kernel, monkeypatch):
    """The hand-written score's backward was a constant to autograd: the penalty's gradients differed from plain
    PyTorch's (the compiled kernels), or raised about out= arguments (PyTorch's passes)."""
    if kernel == "pytorch":
        monkeypatch.setattr(fused, "_native", lambda *tensors: None)
    dec, feats, caps = _decoder()
    ours = _penalty_grads(dec, feats, caps, fast_path=False)
    with monkeypatch.context() as m:
        m.setattr(AdditiveAttention, "score", _plain_score)
        reference = _penalty_grads(dec, feats, caps, fast_path=False)
    assert ours.keys() == reference.keys() and "lstm.weight_hh" in ours
    for name, a in ours.items():
        torch.testing.assert_close(a, reference[name], rtol=1e-4, atol=1e-6, msg=name)


def test_the_fast_path_refuses_a_second_order_gradient_unless_its_lstm_is_frozen(monkeypatch):
    """Its LSTM weights' gradients come from detached inputs, so the penalty's terms through them would be missing
    (they were: lstm.weight_ih / weight_hh silently differed). A frozen LSTM has none: then it is exact."""
    dec, feats, caps = _decoder()
    with pytest.raises(RuntimeError, match=r"first-order gradients only.*fast_path=False"):
        _penalty_grads(dec, feats, caps, fast_path=True)
    dec.lstm.requires_grad_(False)
    ours = _penalty_grads(dec, feats, caps, fast_path=True)
    reference = _penalty_grads(dec, feats, caps, fast_path=False)
    for name, a in ours.items():
        torch.testing.assert_close(a, reference[name], rtol=1e-4, atol=1e-6, msg=name)


def test_the_decoder_compiled_in_training_mode_equals_eager():
    """torch.compile saw the fast path's autograd Functions and pools (DeferredWeightGrad's list, filled after it
    runs: "cat expects at least one tensor"); compiled, the decoder runs the plain loop."""
    dec, feats, caps = _decoder()

    def run(model):
        dec.zero_grad()
        logits = model(feats, caps).logits
        logits.square().mean().backward()
        return logits.detach(), {n: p.grad.clone() for n, p in dec.named_parameters()}

    eager_logits, eager_grads = run(dec)  # the fast path
    compiled_logits, compiled_grads = run(torch.compile(dec, backend="eager"))
    torch.testing.assert_close(compiled_logits, eager_logits)
    for name, g in eager_grads.items():
        torch.testing.assert_close(compiled_grads[name], g, rtol=1e-4, atol=1e-6, msg=name)
