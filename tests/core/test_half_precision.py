"""float16 and bfloat16 inputs to the core's numerics (text_attn.core.precision): sampling draws from the
distribution it is given, hard attention's entropy and log-probability and the attention-supervision loss stay finite
and match float64 references, and float32 inputs give the numbers they always gave."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from text_attn.core.attention import HardAttention
from text_attn.core.attention_supervision import attention_supervision_loss
from text_attn.core.decoding import Sampling
from text_attn.core.precision import float32_network, widened


@pytest.fixture(autouse=True)
def _threads(one_thread):
    """One torch thread (tests/conftest.py)."""


def test_a_bfloat16_distribution_is_sampled_as_its_float32_values():
    torch.manual_seed(0)
    vocab, draws = 1000, 20000
    log_probs = torch.log_softmax(torch.randn(1, vocab), dim=-1).to(torch.bfloat16)  # spread out: no word above 1%
    rows = log_probs.expand(draws, vocab)
    tokens = Sampling().draw(rows, torch.Generator().manual_seed(0))
    # the same draws as from the same numbers in float32 (one uniform per row, the same stream)
    assert torch.equal(tokens, Sampling().draw(rows.float(), torch.Generator().manual_seed(0)))
    p = log_probs[0].double().exp()
    p = p / p.sum()  # (V,) the distribution the bfloat16 log-probabilities stand for
    frequencies = torch.bincount(tokens, minlength=vocab).double() / draws
    # 20,000 draws over 1,000 words: about 0.08 from sampling noise alone; a bfloat16 cumsum drew at about 0.4
    assert 0.5 * float((frequencies - p).abs().sum()) < 0.12


def _peaked_hard_attention() -> tuple[HardAttention, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scores so spread that float16 weights hold exact zeros; the last row has every position masked."""
    torch.manual_seed(0)
    attention = HardAttention(8, 12, 16)
    with torch.no_grad():
        attention.scorer.v.weight.mul_(300)
    query, keys = torch.randn(4, 8) * 3, torch.randn(4, 30, 12) * 3
    mask = torch.ones(4, 30, dtype=torch.bool)
    mask[3] = False
    return attention, query, keys, mask


@pytest.mark.parametrize("mode", ["sample", "argmax"])
def test_hard_attention_entropy_and_log_prob_are_finite_in_float16(mode):
    attention, query, keys, mask = _peaked_hard_attention()
    attention = attention.half()
    out = attention.attend(query.half(), keys.half(), mask=mask, mode=mode, generator=torch.Generator().manual_seed(0))
    assert bool((out.weights[:3] == 0).any())  # the case: weights of exactly 0
    w = out.weights.double()  # (N, S) the float16 weights, exactly
    entropy = -torch.special.xlogy(w, w).sum(-1)  # 0 log 0 = 0
    torch.testing.assert_close(out.entropy.double(), entropy, rtol=2e-3, atol=1e-3)
    chosen = w.gather(1, out.index.unsqueeze(1)).squeeze(1)[:3]
    torch.testing.assert_close(out.log_prob[:3].double(), chosen.log(), rtol=2e-3, atol=1e-3)
    assert out.log_prob[3].item() == 0.0 and out.entropy[3].item() == 0.0  # nothing to attend to
    (out.log_prob.float().sum() + out.entropy.float().sum()).backward()
    assert all(bool(torch.isfinite(p.grad).all()) for p in attention.parameters())


def test_hard_attention_in_float32_is_the_formula_as_written():
    attention, query, keys, mask = _peaked_hard_attention()
    out = attention.attend(query, keys, mask=mask, mode="sample", generator=torch.Generator().manual_seed(0))
    w = out.weights
    assert torch.equal(out.entropy, -(w * torch.log(w.clamp_min(1e-12))).sum(-1))
    chosen = torch.log(w.gather(1, out.index.unsqueeze(1)).squeeze(1).clamp_min(1e-12)).masked_fill(~mask.any(-1), 0)
    assert torch.equal(out.log_prob, chosen)


def test_attention_supervision_is_finite_in_float16_and_unchanged_in_float32():
    weights = torch.tensor([[[0.75, 0.25, 0.0], [0.0, 1.0, 0.0]]])  # (1, 2, 3): zero attention on a target cell
    target = torch.tensor([[[0.5, 0.0, 0.5], [0.0, 1.0, 0.0]]])
    mask = torch.tensor([[True, True]])
    # by hand: step 0 costs -(0.5 log .75 + 0.5 log eps), step 1 -log 1; the mean of the two. float16's eps is
    # 2 / 65504 (its gradient -t / eps must stay finite), float32's 1e-8
    expected = -(0.5 * math.log(0.75) + 0.5 * math.log(1e-8)) / 2
    half = weights.half().requires_grad_()
    loss = attention_supervision_loss(half, target, mask)  # was nan: 1e-8 is 0 in float16
    assert loss.item() == pytest.approx(-(0.5 * math.log(0.75 + 2 / 65504) + 0.5 * math.log(2 / 65504)) / 2, rel=1e-3)
    loss.backward()  # the zero cell's gradient, -0.5 / eps / 2 steps, was -inf: nan weights a step later
    assert torch.isfinite(half.grad).all() and half.grad[0, 0, 2].item() == pytest.approx(-0.25 * 65504 / 2, rel=1e-3)
    full = attention_supervision_loss(weights, target, mask)
    assert full.dtype == torch.float32 and full.item() == pytest.approx(expected, rel=1e-6)
    w, t = weights, target
    assert torch.equal(full, -(t * torch.log(w + 1e-8)).sum(-1).sum() / 2)  # float32: the formula as written


def test_float32_network_copies_only_a_half_network():
    net = nn.Linear(3, 2)
    assert float32_network(net) is net and float32_network(net.double()) is net
    half = nn.Linear(3, 2).half()
    copy = float32_network(half)
    assert copy is not half and copy.weight.dtype == torch.float32 and half.weight.dtype == torch.float16
    assert torch.equal(copy.weight, half.weight.float())
    x = torch.randn(2, dtype=torch.float64)
    assert (
        widened(x) is x
        and widened(x.bfloat16()).dtype == torch.float32
        and widened(torch.ones(2, dtype=int)).dtype == torch.int64
    )
