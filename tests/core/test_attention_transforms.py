"""The attention modules used in someone's own code under PyTorch's transforms: ``torch.jit.trace``, the legacy ONNX
export, ``torch.func`` (vmap, jacrev, grad), ``torch.export``, meta tensors. Where the hand-written autograd and the
compiled kernels cannot be seen (text_attn.core.fused.plain_only) the plain expression runs, so each gives eager's
numbers on an input it was not traced with (they traced the kernel's output as a constant, or dropped the query)."""

from __future__ import annotations

import io

import pytest
import torch
from torch.func import grad, jacrev, vmap

from text_attn.core.attention import AdditiveAttention, MultiHeadAttention
from text_attn.core.sync_check import no_host_sync

# torch.jit.trace is deprecated, and warns that the shapes it reads become constants: both known, neither the subject
pytestmark = pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning", "ignore:`torch.jit.trace:FutureWarning")


def _attention():
    torch.manual_seed(0)
    return AdditiveAttention(4, 4, 6).eval()


def _inputs(seed: int, n: int = 3):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g), torch.randn(n, 5, 4, generator=g)


def _plain(att: AdditiveAttention, q, k):  # the weights as the paper writes them: softmax(vᵀ tanh(U k + W q))
    e = att.v(torch.tanh(att.key_proj(k) + att.query_proj(q).unsqueeze(-2))).squeeze(-1)
    return torch.softmax(e, -1)


@pytest.mark.parametrize("grad_mode", [False, True])  # search (the kernel) and training (the autograd Function)
def test_a_traced_additive_step_equals_eager_on_a_new_input(grad_mode):
    att, (q, k), (q2, k2) = _attention(), _inputs(0), _inputs(1)
    with torch.set_grad_enabled(grad_mode):
        traced = torch.jit.trace(att, (q, k), check_trace=False)
        for a, b in zip(traced(q2, k2), att(q2, k2), strict=True):
            torch.testing.assert_close(a, b)


def test_the_legacy_onnx_export_of_an_additive_step_keeps_the_query_and_equals_eager():
    ort = pytest.importorskip("onnxruntime")
    att, (q, k), (q2, k2) = _attention(), _inputs(0), _inputs(1)
    buf = io.BytesIO()
    torch.onnx.export(att, (q, k), buf, dynamo=False, input_names=["query", "keys"], output_names=["ctx", "weights"])
    session = ort.InferenceSession(buf.getvalue())
    assert [i.name for i in session.get_inputs()] == ["query", "keys"]
    context, weights = session.run(None, {"query": q2.numpy(), "keys": k2.numpy()})
    eager = att(q2, k2)
    torch.testing.assert_close(torch.from_numpy(context), eager[0].detach())
    torch.testing.assert_close(torch.from_numpy(weights), eager[1].detach())


def test_torch_func_transforms_of_an_additive_step_equal_the_plain_expression():
    att, (q, k) = _attention(), _inputs(0)
    per_row = vmap(lambda qi, ki: att(qi[None], ki[None])[1][0])(q, k)  # rows one at a time, batched by vmap
    torch.testing.assert_close(per_row, _plain(att, q, k))
    torch.testing.assert_close(jacrev(lambda x: att(x, k)[1])(q), jacrev(lambda x: _plain(att, x, k))(q))
    torch.testing.assert_close(grad(lambda x: att(x, k)[0].square().sum())(q),
                               grad(lambda x: (_plain(att, x, k).unsqueeze(1) @ k).square().sum())(q))  # fmt: skip


def test_an_exported_additive_step_equals_eager_on_a_new_input():
    att, (q, k), (q2, k2) = _attention(), _inputs(0), _inputs(1)
    exported = torch.export.export(att, (q, k)).module()
    for a, b in zip(exported(q2, k2), att(q2, k2), strict=True):
        torch.testing.assert_close(a, b)


def test_multi_head_attention_with_a_mask_reads_nothing_back_and_runs_on_meta_tensors():
    """A fully masked row's zeroing asked ``bool(dead.any())`` first: a host sync per layer and decoding step on a
    GPU, an error on meta tensors and in torch.export. It is applied unconditionally now, with the same result."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    x, mem, mask = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool)
    mask[1] = False  # a row with nothing to attend: zero heads' context, the output projection's bias
    with no_host_sync():
        out, _ = mha(x, mem, mask=mask)
    torch.testing.assert_close(out[1], mha.out_proj.bias.expand(3, 8))
    torch.testing.assert_close(out[0], mha(x[:1], mem[:1])[0][0])
    meta, _ = mha.to("meta")(x.to("meta"), mem.to("meta"), mask=mask.to("meta"))
    assert meta.shape == (2, 3, 8)
