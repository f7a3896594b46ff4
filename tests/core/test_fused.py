"""The hand-written additive score equals plain PyTorch: values and gradients; the keys' gradient summed over a
sequence's steps. (The caption decoder's fast path: tests/captioning/test_fast_path.py.)"""

import pytest
import torch

from text_attn.core import fused
from text_attn.core.fused import AdditiveScore, KeyGradSink, KeyGradSummer, additive_score


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


def test_a_sequence_whose_step_missed_the_loss_is_reported_when_the_next_one_starts():
    """The keys' gradient comes out when the last step's backward runs: a step whose score never reaches the loss
    holds it back. That cannot be seen during the backward, so the next teacher-forced sequence warns."""
    import warnings

    from text_attn.core.attention import AdditiveAttention

    torch.manual_seed(0)
    att, summer = AdditiveAttention(4, 6, 5), KeyGradSummer()

    def sequence(steps_in_loss: int) -> None:
        proj = att.project_keys(torch.randn(2, 3, 6))
        with summer.sequence(proj) as sink:
            scores = [att.score(torch.randn(2, 4), proj, sink) for _ in range(3)]
        sum(e.sum() for e in scores[:steps_in_loss]).backward()

    sequence(2)  # the third step's score is left out of the loss
    assert att.key_proj.weight.grad is None  # held back: no step returned the keys' gradient
    with pytest.warns(RuntimeWarning, match="2 of its 3 steps ran backward"):
        sequence(3)
    assert att.key_proj.weight.grad is not None  # a whole sequence gives it...
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sequence(3)  # ...and the next one has nothing to report


@pytest.mark.parametrize(("g", "with_sink"), [(1, False), (3, False), (1, True)])
def test_additive_score_is_twice_differentiable(g, with_sink):
    """A backward that builds a graph (create_graph: a gradient penalty, a Hessian-vector product) computes the
    gradients from the saved inputs with differentiable operations: σ was a constant to autograd (wrong second-order
    gradients) and PyTorch's passes raised about out= arguments. A sink is left alone then (each step its own)."""
    torch.manual_seed(0)
    B, S, A = 2, 3, 4
    q = torch.randn(B * g, A, dtype=torch.float64, requires_grad=True)
    proj = torch.randn(B, S, A, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, A, dtype=torch.float64, requires_grad=True)

    def score(q, proj, v):
        return AdditiveScore.apply(q, proj, v, KeyGradSink(proj) if with_sink else None)

    assert torch.autograd.gradgradcheck(score, (q, proj, v))


@pytest.mark.parametrize("kernel", ["compiled", "pytorch"])
def test_a_gradient_penalty_through_additive_attention_equals_the_plain_expressions(kernel, monkeypatch):
    """float32, one step, as a model uses it: the query's penalty gradient was None, the weights' were wrong."""
    from text_attn.core.attention import AdditiveAttention

    if kernel == "pytorch":
        monkeypatch.setattr(fused, "_native", lambda *tensors: None)
    torch.manual_seed(0)
    att, keys, query = AdditiveAttention(4, 6, 5), torch.randn(3, 7, 6), torch.randn(3, 4)

    def penalty_grads():
        q = query.clone().requires_grad_()
        att.zero_grad()
        context, weights = att(q, keys)
        (dq,) = torch.autograd.grad(context.sum() + weights.square().sum(), q, create_graph=True)
        dq.square().sum().backward()
        return [q.grad] + [p.grad for p in att.parameters()]

    ours = penalty_grads()
    plain = lambda self, query, proj, sink=None: _plain_score(self.query_proj(query), proj, self.v.weight)  # noqa: E731
    monkeypatch.setattr(AdditiveAttention, "score", plain)
    for a, b in zip(ours, penalty_grads(), strict=True):
        torch.testing.assert_close(a, b)
