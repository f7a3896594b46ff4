"""text_attn.core.sync_check.no_host_sync: each kind of host sync it names is refused inside the block, in the forward
and in a backward, with the operation named; the same work without the sync passes and computes what it computes
outside; the guard is gone after the block. The sync-free region sampler draws exactly what torch.multinomial draws."""

from __future__ import annotations

import pytest
import torch

from text_attn.core.attention import sample_categorical
from text_attn.core.sync_check import HostSyncError, no_host_sync

X = torch.tensor([0.5, -1.0, 2.0, -3.0])


@pytest.mark.parametrize(
    ("what", "work", "named"),
    [
        (".item()", lambda: X.sum().item(), "_local_scalar_dense"),
        ("if tensor:", lambda: bool(X.sum() > 0), "_local_scalar_dense"),
        ("float()", lambda: float(X[0]), "_local_scalar_dense"),
        (".tolist()", lambda: X.tolist(), "tolist"),
        ("torch.equal", lambda: torch.equal(X, X), "aten.equal"),
        ("torch.allclose", lambda: torch.allclose(X, X), "aten.allclose"),
        ("nonzero", lambda: X.nonzero(), "aten.nonzero"),
        ("where(cond)", lambda: torch.where(X > 0), "aten.nonzero"),
        ("a boolean mask", lambda: X[X > 0], "boolean mask"),
        ("a boolean mask assigned", lambda: X.clone().__setitem__(X > 0, 0.0), "boolean mask"),
        ("masked_select", lambda: X.masked_select(X > 0), "aten.masked_select"),
        ("unique", lambda: X.unique(), "unique"),
        ("repeat_interleave counts", lambda: X.repeat_interleave(torch.tensor([1, 2, 1, 0])), "repeat_interleave"),
        ("multinomial", lambda: torch.multinomial(X.abs(), 1), "aten.multinomial"),
        (".to(device)", lambda: X.to("meta"), "copies between cpu and meta"),
        # (outside the guard this one fails too: a meta tensor has no data to copy)
        (".cpu()", lambda: torch.ones(2, device="meta").cpu(), "copies between meta and cpu"),
        ("torch.tensor(device=)", lambda: torch.tensor([1.0], device="meta"), "copies Python data"),
    ],
)
def test_each_host_sync_is_refused_naming_the_operation(what, work, named):
    if what != ".cpu()":
        work()  # runs outside the guard: the guard is what refuses it
    with pytest.raises(HostSyncError, match=named), no_host_sync():
        work()


def test_a_sync_in_the_backward_is_refused_too():
    class ReadsInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * float(g.sum())  # a host read, in the backward only

    x = torch.ones(3, requires_grad=True)
    with no_host_sync():
        y = ReadsInBackward.apply(x).sum()  # the forward passes
        with pytest.raises(HostSyncError, match="_local_scalar_dense"):
            y.backward()


def test_work_without_syncs_passes_and_computes_what_it_computes_outside():
    def work():
        x = torch.linspace(-2, 2, 12).reshape(3, 4).requires_grad_()
        w = torch.where(x > 0, x, x * 0.1)  # elementwise, no size from the data
        y = (w.softmax(-1) * torch.arange(4.0)).sum() + x.repeat_interleave(torch.tensor([1, 2, 1]), dim=0,
                                                                          output_size=4).sum()  # fmt: skip
        y.backward()
        return y.detach(), x.grad

    expected = work()
    with no_host_sync():
        got = work()
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
    assert X.sum().item() == pytest.approx(-1.5)  # the guard is gone after the block


def test_the_sync_free_sampler_draws_what_multinomial_draws():
    probs = torch.softmax(torch.randn(64, 49, generator=torch.Generator().manual_seed(0)) * 3, dim=-1)  # (N, S)
    for seed in range(3):
        a, b = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        assert torch.equal(sample_categorical(probs, a), torch.multinomial(probs, 1, generator=b)[:, 0])
        assert torch.equal(a.get_state(), b.get_state())  # the same random numbers consumed
    torch.manual_seed(5)
    drawn = sample_categorical(probs)  # the default generator, as the decoder draws
    torch.manual_seed(5)
    assert torch.equal(drawn, torch.multinomial(probs, 1)[:, 0])
    assert len(set(drawn.tolist())) > 5  # real draws over many regions, not a constant
    with no_host_sync():
        sample_categorical(probs)
