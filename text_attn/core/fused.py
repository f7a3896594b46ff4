"""Hand-written autograd for the additive attention score, the hot spot of every recurrent attention model's steps
(the Show-Attend-Tell decoder's 20-odd per caption, the Bahdanau decoder's per word): both families use it through
:class:`text_attn.core.attention.AdditiveAttention`. (The caption decoder's own fast path is
captioning.model.fast_path.)

- :class:`AdditiveScore`: eᵢ = vᵀ tanh(pᵢ + q) for one decoder step, over (N, S, A). It computes exactly what the
  plain expression computes (tests compare values and gradients) with fewer passes over memory: it keeps σ(2x) for
  the backward (tanh(x) = 2σ(2x) − 1, tanh' = 4σ(1 − σ)); for float32 on the CPU a compiled C kernel
  (:mod:`text_attn.core.native`) does each direction in one pass over memory; otherwise PyTorch passes over
  cache-sized blocks (sigmoid, as PyTorch's CPU tanh is about 3x slower).
- :class:`KeyGradSink` / :class:`KeyGradSummer`: in a teacher-forced loop every step reads the same projected keys;
  the steps add their gradients for them into one buffer instead of autograd summing T full ones.
- :data:`SCRATCH`: large buffers kept from one training step to the next (fresh pages cost more than the arithmetic).

Where these cannot be seen or are refused -- ``torch.jit.trace`` and the legacy ONNX export (they record tensor
operations, not a ctypes call or an ``out=`` write), ``torch.compile`` and ``torch.export`` (fake tensors have no data
pointer), the ``torch.func`` transforms (vmap, grad, jacrev) -- callers take the plain expression
(:func:`plain_only`). A second-order gradient (``create_graph=True``) through :class:`AdditiveScore` is computed by
differentiable PyTorch operations of its inputs, so it equals the plain expression's.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

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


def plain_only(t: Tensor) -> bool:
    """True where the hand-written autograd and the kernels must give way to plain PyTorch expressions: while
    ``torch.jit.trace`` (and so the legacy ONNX export) records, under ``torch.compile`` / ``torch.export``, inside a
    ``torch.func`` transform, or for a tensor subclass (fake, functional, distributed tensors). A few flag reads."""
    return (
        torch.jit.is_tracing()
        or torch.compiler.is_compiling()
        or torch._C._are_functorch_transforms_active()
        or type(t) is not Tensor
    )


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
        self.widened: tuple[Tensor, KeyGradSink] | None = None  # see widen

    def widen(self, dtype: torch.dtype) -> tuple[Tensor, KeyGradSink]:
        """``proj`` cast to ``dtype`` (half keys scored in float32) once for the whole sequence, and the sink its
        steps add their gradients into (sharing this one's progress): the total goes back through one cast, not T."""
        if self.widened is None:
            wide = KeyGradSink(self.proj.to(dtype))
            wide.progress = self.progress
            self.widened = (wide.proj, wide)
        return self.widened


class KeyGradSummer:
    """Gives a teacher-forced loop one :class:`KeyGradSink` per sequence (``with summer.sequence(proj) as sink``) and
    warns when the previous sequence's keys' gradient was lost: its total comes out when the last of its steps'
    backwards has run, so a step whose score never reached the loss holds it back, which only the next sequence can
    see. The loop's owner keeps one (training-loop state: never in the shared attention modules)."""

    def __init__(self) -> None:
        self._last: SinkProgress | None = None

    @contextmanager
    def sequence(self, proj: Tensor) -> Iterator[KeyGradSink]:
        last = self._last
        if last is not None and 0 < last.done < last.steps:
            warnings.warn(
                f"the attention keys' gradient of the previous sequence was lost: {last.done} of its {last.steps} "
                "steps ran backward (each step's score must reach the loss)",
                RuntimeWarning,
                stacklevel=3,
            )
        sink = KeyGradSink(proj)
        self._last = sink.progress
        yield sink


class AdditiveScore(torch.autograd.Function):
    """:func:`additive_score` with its backward. Saves σ(2x) (N, S, A): the memory autograd would keep for tanh.
    ``sink`` (a :class:`KeyGradSink` for this ``proj``, one query row per key row): the keys' gradient is summed
    over the steps there. Twice differentiable: a backward that builds a graph (``create_graph=True``, e.g. a
    gradient penalty) computes the gradients with differentiable operations of the saved inputs (and leaves the sink
    alone: each step then returns its own keys' gradient), so second-order gradients equal the plain expression's."""

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
        ctx.save_for_backward(sig, v, q, proj)  # q and proj: inputs, saved without a copy (for create_graph)
        return out

    @staticmethod
    def backward(ctx, de: Tensor) -> tuple[Tensor, Tensor | None, Tensor, None]:  # type: ignore[override]
        sig, v, q, proj = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: σ and the kernels are constants to autograd, the inputs are not
            return (*_differentiable_score_backward(q, proj, v, de), None)
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


def _differentiable_score_backward(q: Tensor, proj: Tensor, v: Tensor, de: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(dq (N, A), dproj (B, S, A), dv (1, A)) of :class:`AdditiveScore` as plain operations of its inputs and the
    incoming gradient de (N, S), so that autograd can differentiate them again: t = tanh(proj + q),
    dx = de · v · (1 − t²), dq = Σ_s dx, dproj = Σ over the g query rows of a source row of dx, dv = Σ de · t."""
    (B, S, A), N = proj.shape, q.size(0)
    t = torch.tanh(proj.unsqueeze(1) + q.view(B, N // B, 1, A))  # (B, g, S, A)
    d = de.reshape(B, N // B, S, 1)
    dx = d * v.reshape(A) * (1 - t * t)
    return dx.sum(2).reshape(N, A), dx.sum(1), (d * t).sum((0, 1, 2)).view_as(v)


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
