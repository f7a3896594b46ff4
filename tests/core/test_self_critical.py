"""The shared self-critical loss (text_attn.core.self_critical): its value by hand, its baselines, and the sign of its
gradient on a toy policy -- a sample better than the baseline gains probability, a worse one loses it, and a sample
exactly as good as the baseline gets no gradient at all (the negative control)."""

from __future__ import annotations

import pytest
import torch

from text_attn.core.self_critical import (
    greedy_baseline,
    leave_one_out_baseline,
    scst_baseline,
    self_critical_loss,
    teacher_inputs,
)

T, V = 3, 4  # toy sequences: 3 tokens over a 4-word vocabulary


def _seq_log_probs(logits: torch.Tensor, seqs: torch.Tensor) -> torch.Tensor:
    """Per-token log-probs under a position-wise categorical policy.  logits (T, V), seqs (N, T) -> (N, T)"""
    logp = torch.log_softmax(logits, dim=-1)  # (T, V)
    return logp.gather(1, seqs.t()).t()  # (N, T)


def _train(sample: list[int], reward: float, baseline: float, steps: int = 5) -> tuple[float, float, torch.Tensor]:
    """A few SGD steps of SCST on one sample; returns p(sample) before, after, and the first step's gradient."""
    torch.manual_seed(0)
    logits = torch.randn(T, V).requires_grad_()
    seq = torch.tensor([sample])
    mask = torch.ones(1, T, dtype=torch.bool)
    opt = torch.optim.SGD([logits], lr=0.5)

    def prob() -> float:
        with torch.no_grad():
            return float(_seq_log_probs(logits, seq).sum().exp())

    before, first_grad = prob(), None
    for _ in range(steps):
        opt.zero_grad()
        loss, _ = self_critical_loss(
            _seq_log_probs(logits, seq), mask, torch.tensor([reward]), torch.tensor([baseline])
        )
        loss.backward()
        first_grad = logits.grad.clone() if first_grad is None else first_grad
        opt.step()
    return before, prob(), first_grad


def test_a_sample_better_than_greedy_gains_probability_and_a_worse_one_loses_it():
    torch.manual_seed(0)
    greedy = torch.randn(T, V).argmax(dim=-1).tolist()  # the policy's own greedy sequence
    other = [(w + 1) % V for w in greedy]  # a different sample
    before, after, _ = _train(other, reward=1.0, baseline=0.4)  # better than greedy's 0.4
    assert after > before * 1.5
    before, after, _ = _train(other, reward=0.1, baseline=0.4)  # worse
    assert after < before * 0.7


def test_reward_equal_to_the_baseline_gives_zero_gradient():
    before, after, grad = _train([0, 1, 2], reward=0.7, baseline=0.7)
    assert torch.count_nonzero(grad) == 0 and after == before


def test_loss_value_and_normalisations_by_hand():
    logp = torch.tensor([[-1.0, -2.0, -5.0], [-0.5, -0.5, -0.5]], requires_grad=True)
    mask = torch.tensor([[True, True, False], [True, True, True]])  # row 0: 2 real tokens, then padding
    rewards, baseline = torch.tensor([2.0, 1.0]), torch.tensor([1.0, 3.0])  # advantages +1, -2
    # Σ_t log p over real tokens: -3 and -1.5; -(A · Σ) = 3 and -3.
    loss, stats = self_critical_loss(logp, mask, rewards, baseline)
    assert loss.item() == pytest.approx((3.0 - 3.0) / 5)  # over 5 real tokens
    loss, _ = self_critical_loss(logp, mask, rewards, baseline, normalise="sequences")
    assert loss.item() == pytest.approx(0.0)
    loss, _ = self_critical_loss(logp, mask, torch.tensor([2.0, 3.0]), baseline, normalise="sequences")
    assert loss.item() == pytest.approx(3.0 / 2)
    loss.backward()
    assert logp.grad[0, 2] == 0  # padding gets no gradient
    assert stats["reward"].item() == 1.5 and stats["advantage"].item() == -0.5
    assert stats["better"].item() == 0.5 and stats["tokens"].item() == 2.5
    # a padded -inf log-prob (a banned token after eos) cannot turn the loss into nan
    inf = torch.tensor([[-1.0, float("-inf")]])
    loss, _ = self_critical_loss(inf, torch.tensor([[True, False]]), torch.tensor([1.0]), torch.tensor([0.0]))
    assert loss.item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="normalise"):
        self_critical_loss(logp, mask, rewards, baseline, normalise="batch")
    with pytest.raises(ValueError, match=r"must be \(2,\)"):
        self_critical_loss(logp, mask, rewards[:1], baseline)


def test_token_normalisation_divides_by_the_real_tokens_not_the_samples():
    # advantages +1 and 0 (the by-hand test above sums to 0 under either normalisation): -(A · Σ_t log p) = 3 and 0
    logp = torch.tensor([[-1.0, -2.0, -5.0], [-0.5, -0.5, -0.5]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    rewards, baseline = torch.tensor([2.0, 3.0]), torch.tensor([1.0, 3.0])
    loss, stats = self_critical_loss(logp, mask, rewards, baseline)
    assert loss.item() == pytest.approx(3.0 / 5)  # 5 real tokens, not the mean over 2 samples (1.5)
    loss, _ = self_critical_loss(logp, mask, rewards, baseline, normalise="sequences")
    assert loss.item() == pytest.approx(3.0 / 2)
    assert stats["better"].item() == 0.5  # a sample only as good as its baseline is not better


def test_teacher_inputs_by_hand():
    # row 0: two words, eos, then what the search left after it; row 1: one word and eos; row 2: cut at the cap
    tokens = torch.tensor([[5, 6, 2, 7], [8, 2, 9, 9], [4, 4, 4, 4]])
    inputs, targets, mask = teacher_inputs(tokens, torch.tensor([3, 2, 4]), bos_id=1, pad_id=0)
    assert targets.tolist() == [[5, 6, 2, 0], [8, 2, 0, 0], [4, 4, 4, 4]]
    assert inputs.tolist() == [[1, 5, 6, 2], [1, 8, 2, 0], [1, 4, 4, 4]]  # bos + the targets, shifted
    # the eos that ended a sample is a real token: its probability decides the length the reward scored
    assert mask.tolist() == [[True, True, True, False], [True, True, False, False], [True] * 4]


def test_baselines():
    rewards = torch.tensor([1.0, 2.0, 3.0, 10.0, 20.0, 30.0])  # 2 sources x 3 samples, source-major
    torch.testing.assert_close(leave_one_out_baseline(rewards, 3), torch.tensor([2.5, 2.0, 1.5, 25.0, 20.0, 15.0]))
    torch.testing.assert_close(greedy_baseline(torch.tensor([0.5, 7.0]), 3), torch.tensor([0.5] * 3 + [7.0] * 3))
    torch.testing.assert_close(scst_baseline("leave_one_out", rewards, 3), leave_one_out_baseline(rewards, 3))
    torch.testing.assert_close(
        scst_baseline("greedy", rewards, 3, torch.tensor([0.5, 7.0])), greedy_baseline(torch.tensor([0.5, 7.0]), 3)
    )
    # a sample equal to the mean of its source's others has advantage 0: the leave-one-out negative control
    same = torch.tensor([4.0, 4.0])
    assert torch.equal(same - leave_one_out_baseline(same, 2), torch.zeros(2))
    with pytest.raises(ValueError, match="at least 2 samples"):
        leave_one_out_baseline(rewards, 1)
    with pytest.raises(ValueError, match="needs greedy_rewards"):
        scst_baseline("greedy", rewards, 3)
    with pytest.raises(ValueError, match="unknown baseline"):
        scst_baseline("mean", rewards, 3)
