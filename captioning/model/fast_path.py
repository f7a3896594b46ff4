"""The caption decoder's training fast path: its teacher-forced loop (``ShowAttendTellDecoder.forward`` with
``decoder.fast_path: true``, the default) and the caption loss's cross-entropy, by hand-written autograd.

Everything here computes what the plain PyTorch expressions compute -- the decoder's plain loop over ``step``
(``fast_path: false``, the paper's equations as written) and ``F.cross_entropy`` -- in values and gradients (tests
compare them, soft and hard attention); it only does it with fewer passes over memory. Measured at the paper's size on
2 CPU threads (docs/speed.md): the training step about 6x the popular PyTorch port's.

- :func:`fused_steps`: the LSTM's input projection W_ih [E y; z] + W_hh h split into W_e E y, known for every step at
  once (one (B·T, E) product), and [W_z W_hh] [z; h], one (B, D + H) product per step; the steps' additive scores add
  the region keys' gradient into one buffer (text_attn.core.fused.KeyGradSink).
- :class:`DeferredWeightGrad`: a recurrent weight's gradient, Σ_t g_tᵀ x_t, as ONE matrix product over all steps
  after the backward through time, instead of T thin (B-row) products each added into a full-size buffer.
- :class:`ThinLinear`: bias + x Wᵀ for a few-row x (a recurrent step's 32 rows against a 2048 x 2560 weight), with
  the operands in the order the CPU's BLAS runs fastest for such a thin product.
- :func:`cross_entropy`: ``F.cross_entropy`` over the vocabulary by a compiled kernel (text_attn.core.native) for
  float32 CPU logits.

First-order gradients only: the LSTM weights' gradients come from :class:`DeferredWeightGrad`, whose inputs are
detached, so a second-order gradient through the loop (``create_graph=True``, a gradient penalty) would miss their
terms. Such a backward raises a RuntimeError naming the plain loop (``fast_path: false``), which is twice
differentiable. Under ``torch.compile``, tracing and ``torch.func`` the decoder runs the plain loop itself (its pools
and the list the steps fill live in Python).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from text_attn.core import native
from text_attn.core.fused import SCRATCH, plain_only
from text_attn.core.precision import widened

if TYPE_CHECKING:
    from text_attn.core.attention import ProjectedKeys


def _native(*tensors: Tensor) -> native.Kernels | None:
    """The compiled kernels (:mod:`text_attn.core.native`) if they can take these tensors (float32, CPU)."""
    if any(t.dtype != torch.float32 or t.device.type != "cpu" for t in tensors):
        return None
    return native.kernels()


def fused_steps(
    decoder: nn.Module, emb: Tensor, h: Tensor, c: Tensor, keys: ProjectedKeys, use_soft: Tensor | None
) -> list[tuple]:
    """The decoder's recurrence over all T steps of emb (B, T, E) -> per step (h_t, c_t, z_t, α_t, hard): the same
    numbers as T calls of its plain step, faster.

    The weight gradient of the per-step product is deferred to one product over all steps
    (:class:`DeferredWeightGrad`); the steps compute only their inputs' gradients, with the operands in BLAS's fast
    order for a 32-row product (:class:`ThinLinear`). Gate order i, f, g, o as in nn.LSTMCell, whose parameters these
    are.
    """
    B, T, E = emb.shape
    lstm = decoder.lstm
    # (B, T, 4H) as T tensors (B, 4H): the backward stacks their gradients once, where indexing [:, t] would
    # scatter each into its own zero (B, T, 4H) gradient and add the T of them up. The weight's gradient comes
    # from DeferredWeightGrad with the recurrent part's (one product over all steps for all of W_ih).
    gates_emb = F.linear(emb, lstm.weight_ih[:, :E].detach(), lstm.bias_ih + lstm.bias_hh).unbind(1)
    # [W_z W_hh] (4H, D + H) and its transpose, in memory kept between training steps. Only with gradients:
    # without, no backward gives wt back (each validation batch would drain the pool), and buffers made under
    # inference_mode (Lightning's validation) could not be written by a later training step.
    with_grad = torch.is_grad_enabled()
    with torch.no_grad():
        H4, DH = lstm.weight_hh.size(0), lstm.weight_ih.size(1) - E + lstm.weight_hh.size(1)
        w_buf = SCRATCH.take((H4, DH), lstm.weight_hh) if with_grad else None
        w = torch.cat([lstm.weight_ih[:, E:], lstm.weight_hh], dim=1, out=w_buf)
        device = emb.device.type
        if torch.is_autocast_enabled(device):  # the products' dtype under autocast: cast once, not per step
            w = w.to(torch.get_autocast_dtype(device))
        # (D + H, 4H): the steps' input gradients (ThinLinear)
        wt = SCRATCH.take((DH, H4), w).copy_(w.t()) if with_grad else w.t().contiguous()
    inputs: list[Tensor] = []  # [z_t; h_{t-1}] (B, D + H) per step, for the deferred weight gradients
    zeros = None
    if with_grad and (lstm.weight_ih.requires_grad or lstm.weight_hh.requires_grad):
        words = emb.detach().transpose(0, 1).reshape(T * B, E)  # W_ih's first E inputs, rows in step order
        # Its backward runs after every step's: then wt goes back to the pool.
        zeros = DeferredWeightGrad.apply(B, T, inputs, words, [wt], lstm.weight_ih, lstm.weight_hh)
    steps = []
    # The steps add the region keys' gradient into one buffer (the decoder's KeyGradSummer hands it out).
    with decoder.key_grads.sequence(keys.proj) as sink:
        for t in range(T):
            context, alpha, hard = decoder.attend(h, keys, use_soft, key_grad_sink=sink)
            x = torch.cat([context, h], dim=-1)  # (B, D + H)
            if zeros is not None:
                inputs.append(x.detach())
            # (B, 4H); zeros[t] takes the gates' gradient for the deferred weight gradient
            gates = ThinLinear.apply(x, gates_emb[t], w, wt, None if zeros is None else zeros[t])
            i, f, g, o = gates.chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            steps.append((h, c, context, alpha, hard))
    if w_buf is not None:
        SCRATCH.give(w_buf)  # read by the forward only; wt goes back after DeferredWeightGrad's backward
    return steps


class DeferredWeightGrad(torch.autograd.Function):
    """T zero tensors (B, O), one per step, whose gradients are the steps' output gradients g_t; the weights'
    gradients are computed once from all of them.

    Use: ``y_t = F.linear(x_t, weight.detach()) + zeros[t]`` (or :class:`ThinLinear` with ``tap=zeros[t]``) with x_t
    (B, I) appended (detached) to ``inputs``; the backward through time then computes only the inputs' gradients
    (g_t W) per step, and this function's backward, which runs once every g_t is known, returns the weight's
    gradient Σ_t g_tᵀ x_t as one (O, T·B) x (T·B, I) product. Several weights W_1 (O, I_1), ..., W_k (O, I_k) may
    share the g_t: W_j's inputs are the j-th block of columns of [prefix | x_t] (``prefix`` (T·B, P): inputs known
    for all steps before the loop, rows in step order, e.g. the embedded words of an LSTM whose W_ih reads
    [E y; z] and W_hh reads h), and each gets its own contiguous gradient: no slicing of a joint one.
    ``release``: :data:`SCRATCH` buffers that the steps' backward reads (e.g. ThinLinear's Wᵀ), given back when
    this backward runs, which is after all of theirs.

    Once differentiable: the inputs x_t are detached, so the weights' gradient it returns is not a function of them
    to autograd; differentiating it again raises PyTorch's once_differentiable error instead of a wrong number.
    """

    @staticmethod
    def forward(
        ctx,
        batch: int,
        steps: int,
        inputs: list[Tensor],
        prefix: Tensor | None,
        release: list[Tensor],
        *weights: Tensor,
    ) -> tuple[Tensor, ...]:  # type: ignore[override]
        ctx.inputs, ctx.prefix = inputs, prefix  # inputs: filled by the caller's loop; complete before the backward
        ctx.release = release
        ctx.widths = [w.size(1) for w in weights]
        ctx.set_materialize_grads(True)  # a step whose output got no gradient contributes zeros
        return tuple(weights[0].new_zeros(batch, weights[0].size(0)) for _ in range(steps))

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        g = torch.cat(grads)  # (T·B, O)
        x = torch.cat(ctx.inputs).to(g.dtype)  # (T·B, I) (autocast may have made the inputs half precision)
        if g.size(0) != x.size(0):
            raise RuntimeError(f"DeferredWeightGrad: {len(ctx.inputs)} inputs recorded for {len(grads)} steps")
        if ctx.prefix is not None:
            x = torch.cat([ctx.prefix.to(g.dtype), x], dim=1)
        if sum(ctx.widths) != x.size(1):
            raise RuntimeError(f"DeferredWeightGrad: inputs of {x.size(1)} columns for weights of {ctx.widths}")
        out, start = [], 0
        for width in ctx.widths:
            out.append(g.t() @ x[:, start : start + width])  # (O, width): Σ_t g_tᵀ x_t over this weight's columns
            start += width
        for buf in ctx.release:
            SCRATCH.give(buf)
        return (None, None, None, None, None, *out)


class ThinLinear(torch.autograd.Function):
    """y = bias + x Wᵀ (B, O) for x (B, I) with few rows, the weight W (O, I) held fixed (its gradient is taken
    elsewhere, e.g. by :class:`DeferredWeightGrad`); ``wt`` = Wᵀ made contiguous (I, O), once per sequence.
    ``tap``: one of :class:`DeferredWeightGrad`'s all-zero (B, O) tensors, which gets the output's gradient; adding
    zeros changes nothing, so it is not added (that addition, on the transposed output, cost more than the product's
    bias).

    Why: MKL's sgemm runs a thin product about twice as fast with the large matrix first, contiguous and not
    transposed, and the thin one second, transposed: measured for (32 x 2560)(2560 x 2048) on 2 threads, x Wᵀ took
    6.1 ms and (W xᵀ)ᵀ 3.2 ms; for the backward, g W took 6.3 ms and (Wᵀ gᵀ)ᵀ with Wᵀ contiguous 3.7 ms. The output
    is the transposed view of an (O, B) result.

    Twice differentiable while W is a constant (no ``tap``: its backward is linear in the incoming gradient). With a
    ``tap``, W is a weight whose gradient :class:`DeferredWeightGrad` takes from detached inputs, so a backward that
    builds a graph (``create_graph=True``) raises a RuntimeError: the second-order terms through W would be missing.
    """

    @staticmethod
    def forward(ctx, x: Tensor, bias: Tensor, w: Tensor, wt: Tensor, tap: Tensor | None = None) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(wt)  # saved, not kept as an attribute: a pooled wt reused too early fails the check
        ctx.deferred = tap is not None
        return torch.addmm(bias.t(), w, x.t()).t()  # (O, B) -> (B, O)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor, None, None, Tensor | None]:  # type: ignore[override]
        if ctx.deferred and torch.is_grad_enabled():
            raise RuntimeError(
                "the caption decoder's fast path gives first-order gradients only (its LSTM weights' gradients are "
                "deferred); for a second-order gradient (create_graph=True, a gradient penalty) run the plain loop: "
                "DecoderConfig(fast_path=False) (model.decoder.fast_path: false), teacher_forced(..., fast_path=False)"
            )
        (wt,) = ctx.saved_tensors
        wt = wt if wt.dtype == grad.dtype else wt.to(grad.dtype)  # autocast: the output's precision
        dx = (wt @ grad.t()).t() if ctx.needs_input_grad[0] else None  # (I, O)(O, B) -> (B, I)
        tapped = len(ctx.needs_input_grad) > 4 and ctx.needs_input_grad[4]
        return dx, grad, None, None, grad if tapped else None


def cross_entropy(logits: Tensor, targets: Tensor, ignore_index: int = -100, label_smoothing: float = 0.0) -> Tensor:
    """F.cross_entropy(logits (R, C), targets (R,), ignore_index, label_smoothing), mean over the rows not ignored.
    Float32 CPU logits that need a gradient go to the compiled kernel (:class:`CompiledCrossEntropy`); everything else,
    and anything PyTorch would refuse (targets out of range or of another length, smoothing outside [0, 1]), to
    PyTorch."""
    wanted = torch.is_grad_enabled() and logits.requires_grad and logits.dim() == 2 and targets.dim() == 1
    wanted = wanted and not plain_only(logits)  # torch.compile, tracing, torch.func: no ctypes kernel
    kernels = _native(logits) if wanted and 0.0 <= label_smoothing <= 1.0 else None
    if kernels is not None and targets.dtype == torch.int64 and targets.device.type == "cpu":
        rows, n = logits.shape
        if targets.size(0) == rows and not bool((((targets < 0) | (targets >= n)) & (targets != ignore_index)).any()):
            return CompiledCrossEntropy.apply(logits, targets, ignore_index, float(label_smoothing), kernels)
    # float32 at least: with label smoothing a float16 loss sums every word's log-probability and overflows to inf
    return F.cross_entropy(widened(logits), targets, ignore_index=ignore_index, label_smoothing=label_smoothing)


def _ce_rows(kernels: native.Kernels, x: Tensor, t: Tensor, ignore_index: int, eps: float) -> tuple[Tensor, Tensor]:
    """(row losses (R,), their gradient (R, C)) of contiguous float32 x (R, C) and int64 t (R,)."""
    R, C = x.shape
    rows, grad = x.new_empty(R), torch.empty_like(x)
    kernels.cross_entropy(x.data_ptr(), t.data_ptr(), R, C, ignore_index, eps, rows.data_ptr(), grad.data_ptr(),
                          torch.get_num_threads())  # fmt: skip
    return rows, grad


class CompiledCrossEntropy(torch.autograd.Function):
    """:func:`cross_entropy` by ``csrc/cross_entropy.c``: the forward writes each row's loss and its gradient
    (softmax − smoothed one-hot) in three passes over the logits; the backward scales that gradient in place by the
    incoming one over the row count and hands it over (not kept: autograd may accumulate into it). A retained graph
    run again computes the gradient anew from the saved logits. Measured on (640, 10000), 2 threads: forward and
    backward 8-10 ms, PyTorch's 17.5-20 ms."""

    @staticmethod
    def forward(ctx, logits: Tensor, targets: Tensor, ignore_index: int, eps: float, kernels) -> Tensor:  # type: ignore[override]
        x, t = logits.detach().contiguous(), targets.contiguous()
        rows, grad = _ce_rows(kernels, x, t, ignore_index, eps)
        count = (t != ignore_index).sum().to(x.dtype)  # 0 rows: 0 / 0 = nan, as PyTorch's mean
        ctx.save_for_backward(x, t, count)
        ctx.grad, ctx.args = grad, (kernels, ignore_index, eps)  # grad: neither input nor output, scaled in place
        return rows.sum() / count

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):  # type: ignore[override]
        x, t, count = ctx.saved_tensors
        kernels, ignore_index, eps = ctx.args
        grad, ctx.grad = ctx.grad, None
        if grad is None:  # a retained graph, run again
            grad = _ce_rows(kernels, x, t, ignore_index, eps)[1]
        # no rows counted: PyTorch's gradient is zeros (every row's is), not 0 · inf
        return grad.mul_(g / count.clamp_min(1)), None, None, None, None
