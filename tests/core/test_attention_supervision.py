"""Attention supervision: the shared loss by hand (text_attn.core.attention_supervision) and the dense targets it
reads. (The targets the data modules carry: tests/captioning/test_caption_attention_targets.py for shapes scenes and
Karpathy boxes, tests/text/test_text_attention_targets.py for reorder's alignment.)"""

from __future__ import annotations

import math

import pytest
import torch

from text_attn.core.attention_supervision import attention_supervision_loss, dense_targets


# --- the loss --------------------------------------------------------------------------------------------------------
def test_loss_by_hand_and_its_gradient():
    weights = torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]], requires_grad=True)  # (1, 2, 3)
    target = torch.tensor([[[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]])
    both = attention_supervision_loss(weights, target, torch.tensor([[True, True]]))
    assert both.item() == pytest.approx((math.log(4) + math.log(10)) / 2, rel=1e-6)  # -log .25, -log .1
    first = attention_supervision_loss(weights, target, torch.tensor([[True, False]]))
    assert first.item() == pytest.approx(math.log(4), rel=1e-6)
    first.backward()
    # d/dw of -Σ t log w is -t / w, on the supervised step only
    torch.testing.assert_close(weights.grad, torch.tensor([[[0.0, -2.0, -2.0], [0.0, 0.0, 0.0]]]))
    perfect = attention_supervision_loss(target.clone(), target, torch.tensor([[True, True]]))
    # attention equal to the target costs the target's entropy: log 2 for the split step, 0 for the one-hot one
    assert perfect.item() == pytest.approx(math.log(2) / 2, rel=1e-6)


def test_no_supervised_step_gives_zero_with_a_gradient_path_and_no_nan():
    weights = torch.tensor([[[0.5, 0.5], [float("nan"), 0.0]]], requires_grad=True)
    target = torch.tensor([[[1.0, 0.0], [float("nan"), 1.0]]])
    loss = attention_supervision_loss(weights, target, torch.zeros(1, 2, dtype=torch.bool))
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert torch.equal(weights.grad, torch.zeros(1, 2, 2))
    weights.grad = None
    loss = attention_supervision_loss(
        weights, target, torch.tensor([[True, False]])
    )  # nan only on an unsupervised step
    loss.backward()
    assert loss.item() == pytest.approx(math.log(2), rel=1e-6) and torch.isfinite(weights.grad).all()
    with pytest.raises(ValueError, match=r"mask must be \(B, T\)"):
        attention_supervision_loss(weights, target, torch.ones(2, dtype=torch.bool))


def test_dense_targets():
    target, mask = dense_targets([[(0, [2]), (2, [0, 1]), (5, [1])], []], steps=3, positions=3)
    expect = torch.zeros(2, 3, 3)
    expect[0, 0, 2] = 1.0
    expect[0, 2, :2] = 0.5
    assert torch.equal(target, expect)  # step 5 is beyond the 3 steps: dropped
    assert mask.tolist() == [[True, False, True], [False, False, False]]
    with pytest.raises(ValueError, match="step 0 twice"):
        dense_targets([[(0, [1]), (0, [2])]], 2, 3)
    with pytest.raises(ValueError, match="outside 0..2"):
        dense_targets([[(0, [3])]], 2, 3)
