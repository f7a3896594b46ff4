"""Hand-written autograd for the training loop's hot spots (the Show-Attend-Tell decoder's 20-odd steps per caption).

Both compute exactly what the plain PyTorch expressions compute (tests compare values and gradients); they only do it
with fewer passes over memory:

- :class:`AdditiveScore`: eᵢ = vᵀ tanh(pᵢ + q) for one decoder step, over (N, S, A) -- the additive attention's
  score, the largest elementwise work of the step. It keeps σ(2x) for the backward (tanh(x) = 2σ(2x) − 1,
  tanh' = 4σ(1 − σ)). For float32 on the CPU a compiled C kernel (:mod:`text_attn.core.native`) does each direction
  in one pass over memory; otherwise PyTorch passes over cache-sized blocks (sigmoid, as PyTorch's CPU tanh is about
  3x slower).
- :class:`DeferredWeightGrad`: a recurrent weight's gradient, Σ_t g_tᵀ x_t, as ONE matrix product over all steps
  after the backward through time, instead of T thin (B-row) products each added into a full-size buffer.
- :class:`ThinLinear`: bias + x Wᵀ for a few-row x (a recurrent step's 32 rows against a 2048 x 2560 weight), with
  the operands in the order the CPU's BLAS runs fastest for such a thin product.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from text_attn.core import native

# Elements of an (rows, S, A) block processed at once: 1M floats = 4 MiB, kept in the CPU's L3 between the passes.
# Measured (20 steps of (32, 196, 512), fwd + bwd, 2 threads): blocks of 128K / 256K / 512K / 1M / 2M floats took
# 299 / 276 / 229 / 199 / 212 ms: the per-call cost of each pass outweighs what a smaller block gains in cache.
SCORE_BLOCK = 1 << 20


def _rows_per_block(S: int, A: int) -> int:
    return max(1, SCORE_BLOCK // (S * A))


def _native(*tensors: Tensor) -> native.Kernels | None:
    """The compiled score kernels (:mod:`text_attn.core.native`) if they can take these tensors (float32, CPU)."""
    if any(t.dtype != torch.float32 or t.device.type != "cpu" for t in tensors):
        return None
    return native.kernels()


def _threads() -> int:
    return torch.get_num_threads()


def additive_score(q: Tensor, proj: Tensor, v: Tensor, keep: Tensor | None = None, doubled: bool = False) -> Tensor:
    """e (N, S) with e[n, s] = vᵀ tanh(proj[n // g, s] + q[n]) for q (N, A), proj (B, S, A), v (1, A); g = N / B query
    rows share each row of ``proj`` (1 in training; beam search's K). ``keep`` (N, S, A): where to leave σ(2x) for
    a backward; None (inference) computes block by block in a small scratch buffer, never the whole (N, S, A).
    ``doubled``: ``proj`` holds 2·proj (made once for many steps), which saves one pass per step: 2x = 2p + 2q."""
    N, (B, S, A) = q.size(0), proj.shape
    if B == 0 or N % B:
        raise ValueError(f"{N} query rows cannot share {B} source rows")
    g = N // B
    # The kernel takes exactly q (N, A), v of A and σ into a contiguous (N, S, A); anything else (a broadcast q, ...)
    # goes the PyTorch way, which broadcasts or raises as PyTorch does.
    fits = q.shape == (N, A) and v.numel() == A and (keep is None or (keep.shape == (N, S, A) and keep.is_contiguous()))
    kernels = _native(q, proj, v, *(() if keep is None else (keep,))) if fits and not doubled else None
    if kernels is not None:  # one pass: 2x, σ, the product with v (and σ kept) per element
        q, proj, vv, out = q.contiguous(), proj.contiguous(), v.reshape(A).contiguous(), proj.new_empty(N, S)
        kept = None if keep is None else keep.data_ptr()
        p, qp, vp, ep = proj.data_ptr(), q.data_ptr(), vv.data_ptr(), out.data_ptr()
        kernels.score_forward(p, qp, vp, kept, ep, N, S, A, g, _threads())
        if keep is not None:  # written behind autograd's back: bump its version as PyTorch's out= would, so that a
            # retained graph that saved this (pooled) buffer refuses to run after a later step rewrote it
            torch.autograd.graph.increment_version(keep)
        return out
    rows, vv = _rows_per_block(S, A), v.reshape(A)
    scratch = proj.new_empty(rows, S, A) if keep is None else None
    source = torch.arange(N, device=q.device) // g if g > 1 else None  # (N,) the proj row of each query row
    out = proj.new_empty(N, S)
    for i in range(0, N, rows):
        n = min(rows, N - i)
        buf = scratch[:n] if keep is None else keep[i : i + n]
        p = proj[i : i + n] if source is None else torch.index_select(proj, 0, source[i : i + n], out=buf)
        if doubled:
            x = torch.add(p, q[i : i + n].unsqueeze(1), alpha=2, out=buf)  # 2p + 2q
        else:
            x = torch.add(p, q[i : i + n].unsqueeze(1), out=buf).mul_(2)
        torch.matmul(x.sigmoid_(), vv, out=out[i : i + n])  # vᵀσ(2x)
    return out.mul_(2).sub_(vv.sum())  # vᵀ tanh(x) = 2 vᵀσ(2x) − Σv


class ScratchPool:
    """Large buffers that a training loop needs at every step (the additive score's saved σ, 12.8 MB per decoder step
    at the paper's size, and its block scratch), kept from one training step to the next.

    Why: glibc gives large freed blocks back to the operating system, so fresh buffers are fresh pages, and writing
    into them the first time costs more than the arithmetic: profiled at the paper's size, the score's additions took
    63 ms per training step into fresh buffers and 25 ms into reused ones. A buffer returns here when the backward
    that read it has run; if a graph kept with ``retain_graph`` is run backward again after a later step reused its
    buffer, autograd's in-place check raises its usual error instead of computing with the wrong numbers (the reuse
    writes into the buffer, which bumps the version autograd saved)."""

    def __init__(self, max_bytes: int = 1 << 30):
        self.max_bytes = max_bytes  # free buffers kept at most; beyond that they go back to the allocator
        self.free: dict[tuple, list[Tensor]] = {}
        self.held = 0  # bytes in ``free``

    @staticmethod
    def _key(shape: tuple[int, ...] | torch.Size, like: Tensor) -> tuple:
        return tuple(shape), like.dtype, like.device

    def take(self, shape: tuple[int, ...], like: Tensor) -> Tensor:
        bufs = self.free.get(self._key(shape, like))
        if not bufs:
            return like.new_empty(shape)
        buf = bufs.pop()
        self.held -= buf.numel() * buf.element_size()
        return buf

    def give(self, buf: Tensor) -> None:
        if buf.is_inference():  # made under inference_mode: training could never write into it
            return
        size, bufs = buf.numel() * buf.element_size(), self.free.setdefault(self._key(buf.shape, buf), [])
        if self.held + size > self.max_bytes or any(b is buf for b in bufs):  # full, or given back twice
            return
        bufs.append(buf)
        self.held += size

    def clear(self) -> None:
        self.free.clear()
        self.held = 0


SCRATCH = ScratchPool()


class SinkProgress:
    """How many steps of a :class:`KeyGradSink` ran forward and how many of their backwards ran since its total was
    last returned. 0 < done < steps after a backward means the keys' gradient never came out: some step's score did
    not reach the loss (its backward never runs), so the total waits for it."""

    __slots__ = ("steps", "done")

    def __init__(self) -> None:
        self.steps = 0
        self.done = 0


class KeyGradSink:
    """Where the steps of one teacher-forced sequence add their gradients for the shared projected keys (B, S, A).

    Every step reads the same ``proj``; left to autograd, each step's backward writes a full (B, S, A) gradient that
    is then added to the running sum: two extra passes over memory per step. With a sink, each step adds its block
    into one buffer while it is in the cache, and the step whose backward runs last returns the total."""

    def __init__(self, proj: Tensor):
        self.proj = proj
        self.doubled: Tensor | None = None  # 2·proj, made by the first step, read by all (no gradient of its own)
        self.progress = SinkProgress()  # a caller may keep it (no tensors) to check the backward later
        self.total: Tensor | None = None


class AdditiveScore(torch.autograd.Function):
    """:func:`additive_score` with its backward. Saves σ(2x) (N, S, A): the memory autograd would keep for tanh.
    ``sink`` (a :class:`KeyGradSink` for this ``proj``, one query row per key row): the keys' gradient is summed
    over the steps there."""

    @staticmethod
    def forward(ctx, q: Tensor, proj: Tensor, v: Tensor, sink: KeyGradSink | None = None) -> Tensor:  # type: ignore[override]
        ctx.g = q.size(0) // proj.size(0)
        ctx.sink = sink if ctx.g == 1 and sink is not None and sink.proj is proj else None
        if ctx.sink is None:
            sig = proj.new_empty(q.size(0), *proj.shape[1:])
            out = additive_score(q, proj, v, keep=sig)
        else:  # a teacher-forced loop: σ from the pool (given back by the backward)
            sig = SCRATCH.take((q.size(0), *proj.shape[1:]), proj)
            if _native(q, proj, v) is not None:
                out = additive_score(q, proj, v, keep=sig)
            else:  # PyTorch's passes: 2·proj made once saves one per step
                if ctx.sink.doubled is None:
                    ctx.sink.doubled = torch.mul(proj.detach(), 2, out=SCRATCH.take(proj.shape, proj))
                out = additive_score(q, ctx.sink.doubled, v, keep=sig, doubled=True)
            ctx.sink.progress.steps += 1
        ctx.save_for_backward(sig, v)
        return out

    @staticmethod
    def backward(ctx, de: Tensor) -> tuple[Tensor, Tensor | None, Tensor, None]:  # type: ignore[override]
        sig, v = ctx.saved_tensors
        sink, de = ctx.sink, de.contiguous()
        # ∂e/∂x · de = de ⊗ v · tanh'(x) = de ⊗ v · 4σ(1 − σ), written to dx or added into the sink's total
        kernels = _native(sig, de, v) if ctx.g == 1 else None
        if sink is None:
            dx, add = torch.empty_like(sig), False
        elif kernels is not None:  # the first backward to run writes the total, the others add
            dx, add = (torch.empty_like(sig), False) if sink.total is None else (sink.total, True)
        else:  # PyTorch adds even the first (into zeros) through a block scratch taken before any σ of this
            # backward goes back to the pool: a σ given back may not be written while a retained graph could read it
            dx, add = (torch.zeros_like(sig) if sink.total is None else sink.total), True
        if sink is not None:
            sink.total = dx
        if kernels is not None:
            (dq, dv), scratch = _native_score_backward(kernels, sig, de, v, dx, add), None
        else:
            dq, dv, scratch = _score_backward(sig, de, v, dx, add)
        if sink is not None:
            SCRATCH.give(sig)  # read for the last time: the next training step's forward reuses it
            if scratch is not None:  # after σ: the next step's backward takes it back, not this σ
                SCRATCH.give(scratch)
            progress = sink.progress
            progress.done += 1
            if progress.done < progress.steps:
                return dq, None, dv.view_as(v), None  # the last step to run its backward returns the sum
            dx, sink.total, progress.done = sink.total, None, 0
            if sink.doubled is not None:
                SCRATCH.give(sink.doubled)
                sink.doubled = None
        elif ctx.g > 1:  # query rows sharing a source row add their gradients into it
            dx = dx.view(-1, ctx.g, *dx.shape[1:]).sum(1)
        return dq, dx, dv.view_as(v), None


def _native_score_backward(kernels: native.Kernels, sig: Tensor, de: Tensor, v: Tensor, dx: Tensor, add: bool):
    """(dq (N, A), dv (A)) of :class:`AdditiveScore` in one pass; dx (N, S, A) written, or added to when ``add``."""
    N, S, A = sig.shape
    dq, dv, vv = sig.new_empty(N, A), sig.new_empty(A), v.reshape(A).contiguous()
    if kernels.score_backward(
        sig.data_ptr(),
        de.data_ptr(),
        vv.data_ptr(),
        dx.data_ptr(),
        int(add),
        dq.data_ptr(),
        dv.data_ptr(),
        N,
        S,
        A,
        _threads(),
    ):
        raise MemoryError("the attention score's backward could not allocate its few kilobytes")
    return dq, dv


def _score_backward(sig: Tensor, de: Tensor, v: Tensor, dx: Tensor, add: bool) -> tuple[Tensor, Tensor, Tensor | None]:
    """:func:`_native_score_backward` in PyTorch: a few passes per cache-sized block. Also returns the block scratch
    taken from :data:`SCRATCH` when ``add`` (the caller gives it back)."""
    N, S, A = sig.shape
    rows, v4 = _rows_per_block(S, A), v.reshape(A) * 4
    scratch = SCRATCH.take((min(rows, N), S, A), sig) if add else None
    dq = sig.new_empty(N, A)
    dv = sig.new_zeros(A)
    for i in range(0, N, rows):
        s, d = sig[i : i + rows], de[i : i + rows]
        x = scratch[: s.size(0)] if scratch is not None else dx[i : i + rows]
        # y = de·σ(1 − σ) in two passes; then ∂x = y·(4v) is added into the sink in one more (addcmul), and
        # ∂q = Σ_s ∂x = 4v · Σ_s y needs only the sum of y: no pass writes y·4v on its own.
        torch.mul(s, d.unsqueeze(-1), out=x).addcmul_(x, s, value=-1)
        torch.sum(x, 1, out=dq[i : i + rows]).mul_(v4)
        if scratch is not None:
            dx[i : i + rows].addcmul_(x, v4)
        else:
            x.mul_(v4)
        dv.addmv_(s.reshape(-1, A).t(), d.reshape(-1))  # Σ de · σ
    return dq, dv.mul_(2).sub_(de.sum()), scratch  # ∂e/∂v = tanh(x) = 2σ − 1


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
    """

    @staticmethod
    def forward(ctx, x: Tensor, bias: Tensor, w: Tensor, wt: Tensor, tap: Tensor | None = None) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(wt)  # saved, not kept as an attribute: a pooled wt reused too early fails the check
        return torch.addmm(bias.t(), w, x.t()).t()  # (O, B) -> (B, O)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor, None, None, Tensor | None]:  # type: ignore[override]
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
    kernels = _native(logits) if wanted and 0.0 <= label_smoothing <= 1.0 else None
    if kernels is not None and targets.dtype == torch.int64 and targets.device.type == "cpu":
        rows, n = logits.shape
        if targets.size(0) == rows and not bool((((targets < 0) | (targets >= n)) & (targets != ignore_index)).any()):
            return CompiledCrossEntropy.apply(logits, targets, ignore_index, float(label_smoothing), kernels)
    return F.cross_entropy(logits, targets, ignore_index=ignore_index, label_smoothing=label_smoothing)


def _ce_rows(kernels: native.Kernels, x: Tensor, t: Tensor, ignore_index: int, eps: float) -> tuple[Tensor, Tensor]:
    """(row losses (R,), their gradient (R, C)) of contiguous float32 x (R, C) and int64 t (R,)."""
    R, C = x.shape
    rows, grad = x.new_empty(R), torch.empty_like(x)
    kernels.cross_entropy(x.data_ptr(), t.data_ptr(), R, C, ignore_index, eps, rows.data_ptr(), grad.data_ptr(),
                          _threads())  # fmt: skip
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
