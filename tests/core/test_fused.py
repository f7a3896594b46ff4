"""The hand-written autograd of the training loop equals plain PyTorch: values and gradients. (Through the caption
decoder: tests/captioning/test_decoder_fused.py.)"""

import pytest
import torch
import torch.nn.functional as F

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
