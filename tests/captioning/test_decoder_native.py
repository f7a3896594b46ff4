"""The compiled attention-score kernel (text_attn/core/native) in the caption decoder's training step: the same
gradients as the PyTorch fallback. (The kernel alone, and how it is built, cached and turned off:
tests/core/test_native.py.)"""

import os

import pytest
import torch
import torch.nn.functional as F

from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder
from text_attn.core import fused, native

KERNEL_OFF = os.environ.get("TEXT_ATTN_NATIVE") == "0"
pytestmark = pytest.mark.skipif(KERNEL_OFF, reason="the compiled kernels are turned off (TEXT_ATTN_NATIVE=0)")


@pytest.fixture(autouse=True)
def compiled():
    assert native.kernels() is not None, f"the score kernel did not build here: {native.status()}"


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_training_gradients_equal_the_pytorch_path(attention, monkeypatch):
    """The same decoder step with the kernel and with the PyTorch passes (the fallback where no compiler works)."""
    cfg = DecoderConfig(vocab_size=11, feature_dim=8, embed_dim=7, hidden_dim=9, attn_dim=13, dropout=0.0,
                        attention=attention, soft_prob=0.5)  # fmt: skip
    feats, caps = torch.randn(3, 6, 8), torch.randint(1, 11, (3, 5))

    def grads() -> list[torch.Tensor]:
        torch.manual_seed(0)
        dec = ShowAttendTellDecoder(cfg).train()
        out = dec(feats, caps)
        loss = F.cross_entropy(out.logits.flatten(0, 1), caps.flatten())
        if attention == "hard":
            loss = loss + out.attn_log_probs.sum()
        return torch.autograd.grad(loss, list(dec.parameters()))

    compiled = grads()
    monkeypatch.setattr(fused, "_native", lambda *tensors: None)
    for a, b in zip(compiled, grads(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
