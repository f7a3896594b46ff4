"""Attention modules shared by every model in the project.

One signature for all: ``forward(query, keys, values=None, mask=None) -> (context, weights)``.

- ``query``: (B, Q) for one decoder step, or (B, T, Q) for T steps at once (not :class:`HardAttention`: one step).
- ``keys``: (B, S, K) encoder states, or a :class:`ProjectedKeys` made by ``precompute(keys)``: keys that do not
  change across decoder steps are projected once per source, not at every step.
- ``values``: (B, S, V); defaults to the (unprojected) keys.
- ``mask``: (B, S) bool, True where a position is real and may be attended, False for padding (a mask of another
  dtype: a TypeError).
- returns ``context`` (B, V) / (B, T, V) and ``weights`` (B, S) / (B, T, S), the softmax over source positions.

Masked positions get exactly zero weight, and a row whose every position is masked gets all-zero weights and a zero
context (never NaN). A batch of 0 rows gives empty results.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from text_attn.core.fused import AdditiveScore, KeyGradSink, additive_score, plain_only
from text_attn.core.precision import widened

_WIDE = (torch.float32, torch.float64)  # the dtypes the one-step additive score computes in as they are


class ProjectedKeys(NamedTuple):
    """Keys with their step-independent projection cached. A NamedTuple, so state reordering indexes it."""

    keys: Tensor  # (B, S, K) the raw keys (also the default values)
    proj: Tensor  # (B, S, A) the keys' projection used in the score


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over the last dim; masked positions get exactly 0, fully masked rows get all zeros.

    scores: (B, S) or (B, T, S); mask: (B, S) bool, True = keep.
    """
    check_mask(mask)
    if mask is not None and scores.dim() == 3:
        mask = mask.unsqueeze(1)  # (B, 1, S) broadcast over the T queries
    return softmax_keep(scores, mask)


def check_mask(mask: Tensor | None) -> None:
    """A mask must be bool: a float or integer 0/1 mask would be read as an additive bias by PyTorch's attention (masked
    keys attended) or refused deep inside ``masked_fill``; one clear TypeError for every module instead."""
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"mask must be bool (True = attend), got {mask.dtype}")


def softmax_keep(scores: Tensor, keep: Tensor | None) -> Tensor:
    """Softmax over the last dim with ``keep`` (bool, broadcastable to scores; None = all) already shaped."""
    if keep is None:
        return torch.softmax(scores, dim=-1)
    # The most negative finite value (not -inf) keeps a fully masked row finite; multiplying by the mask afterwards
    # zeroes that row exactly. In other rows exp(min - max) underflows to exactly 0.
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * keep


def _weighted_sum(weights: Tensor, values: Tensor) -> Tensor:
    """weights (B, S) or (B, T, S), values (B, S, V) -> (B, V) or (B, T, V). Shared sources: weights (B*g, S) of g
    query rows per source row of values (B, S, V) -> (B*g, V), without copying the values g times."""
    if weights.dim() == 2:
        g = _group(weights.size(0), values.size(0))
        # sizes spelt out, not -1: a batch of 0 rows has no size to infer
        return torch.bmm(weights.view(values.size(0), g, weights.size(1)), values).view(weights.size(0), values.size(2))
    return torch.bmm(weights, values)


def _group(query_rows: int, source_rows: int) -> int:
    """How many query rows share each source row: beam search keeps a source's keys once for its K beams (rows
    b*K .. b*K+K-1 of the queries read row b of the keys). 1 in the ordinary case."""
    if query_rows == source_rows:
        return 1
    if source_rows == 0 or query_rows % source_rows:
        raise ValueError(f"{query_rows} query rows cannot share {source_rows} source rows")
    return query_rows // source_rows


def _rows_mask(mask: Tensor | None, query_rows: int) -> Tensor | None:
    """A (B, S) mask for B*g query rows sharing B sources: each source's mask row repeated for its g queries."""
    if mask is None or mask.dim() != 2 or mask.size(0) == query_rows:
        return mask
    return mask.repeat_interleave(_group(query_rows, mask.size(0)), dim=0)


class _Attention(nn.Module):
    """Common plumbing: key precompute, masking, weighted sum. Subclasses define the projection and score."""

    def project_keys(self, keys: Tensor) -> Tensor:  # (B, S, K) -> (B, S, A)
        return keys

    def precompute(self, keys: Tensor | ProjectedKeys) -> ProjectedKeys:
        """Project the keys once per source; pass the result as ``keys`` at every decoder step."""
        if isinstance(keys, ProjectedKeys):
            return keys
        if keys.dim() != 3:  # an unbatched (S, K): an IndexError deep in the score otherwise
            raise ValueError(f"keys must be (B, S, K), a batch of sources, got {tuple(keys.shape)}")
        return ProjectedKeys(keys, self.project_keys(keys))

    def score(self, query: Tensor, proj: Tensor) -> Tensor:  # (B, [T,] Q), (B, S, A) -> (B, [T,] S)
        raise NotImplementedError

    def forward(
        self,
        query: Tensor,
        keys: Tensor | ProjectedKeys,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        key_grad_sink: KeyGradSink | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``key_grad_sink``: a teacher-forced loop's sink for the keys' gradient (additive scores only; see
        :class:`text_attn.core.fused.KeyGradSummer`)."""
        pk = self.precompute(keys)
        scores = self.score(query, pk.proj) if key_grad_sink is None else self.score(query, pk.proj, key_grad_sink)
        weights = masked_softmax(scores, _rows_mask(mask, query.size(0)))
        context = _weighted_sum(weights, pk.keys if values is None else values)
        return context, weights


class AdditiveAttention(_Attention):
    """Bahdanau et al. 2015 (and Show-Attend-Tell's soft attention): score = vᵀ tanh(W q + U k).

    U k does not depend on the decoder step, so it lives in ``precompute``.
    """

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int):
        super().__init__()
        self.query_proj = nn.Linear(query_dim, attn_dim, bias=False)  # W
        self.key_proj = nn.Linear(key_dim, attn_dim)  # U (its bias is the usual b inside the tanh)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.key_proj(keys)  # (B, S, A)

    def score(self, query: Tensor, proj: Tensor, key_grad_sink: KeyGradSink | None = None) -> Tensor:
        """(B, [T,] Q), (B, S, A) -> (B, [T,] S). ``key_grad_sink``: the steps of a teacher-forced loop add the keys'
        gradient there (text_attn.core.fused.KeyGradSummer) instead of each writing a full one for autograd to sum."""
        q = self.query_proj(query)  # (B, A) or (B, T, A)
        if q.dim() == 2 and q.device.type == "cpu" and not plain_only(q) and q.size(0):  # not a batch of none
            return self._fused_score(q, proj, key_grad_sink)  # one step (training or search), in cache-sized blocks
        if q.dim() == 2:  # (B, g, 1, A) + (B, 1, S, A): g query rows per source (beam search's K; 1 in training)
            e = torch.tanh(proj.unsqueeze(1) + q.view(proj.size(0), _group(q.size(0), proj.size(0)), 1, q.size(-1)))
            return self.v(e).view(q.size(0), proj.size(1))  # (N, S)
        # (B, T, 1, A) + (B, 1, S, A) -> (B, T, S, A) -> (B, T, S)
        return self.v(torch.tanh(proj.unsqueeze(1) + q.unsqueeze(2))).squeeze(-1)

    def _fused_score(self, q: Tensor, proj: Tensor, key_grad_sink: KeyGradSink | None) -> Tensor:
        """The one-step score by text_attn.core.fused, in one dtype: keys projected outside autocast (float32) meet
        a bfloat16 query; float16 and bfloat16 are computed in float32 (their 2 vᵀσ(2x) − Σv cancels: 3-4x the
        error of tanh in the half dtype) and handed back in the half dtype. float32 and float64 pass unchanged."""
        v = self.v.weight  # (1, A)
        if q.dtype is proj.dtype is v.dtype and q.dtype in _WIDE:  # checked first: each cast costs a microsecond
            return self._fused(q, proj, v, key_grad_sink)
        dtype = torch.promote_types(q.dtype, proj.dtype)  # what proj + q gives
        wide = torch.promote_types(dtype, torch.float32)
        if proj.dtype != wide and key_grad_sink is not None and key_grad_sink.proj is proj:
            proj, key_grad_sink = key_grad_sink.widen(wide)  # a teacher-forced loop: the keys cast once, not per step
        return self._fused(q.to(wide), proj.to(wide), v.to(wide), key_grad_sink).to(dtype)

    @staticmethod
    def _fused(q: Tensor, proj: Tensor, v: Tensor, key_grad_sink: KeyGradSink | None) -> Tensor:
        if not torch.is_grad_enabled():
            return additive_score(q, proj, v)
        return AdditiveScore.apply(q, proj, v, key_grad_sink)


class LuongAttention(_Attention):
    """Luong et al. 2015 global attention with score ``dot`` (qᵀk), ``general`` (qᵀ W k) or
    ``concat`` (vᵀ tanh(W [q; k])).

    For ``general`` the precompute stores W k, for ``concat`` the key half of W [q; k]: both are step-independent.
    """

    SCORES = ("dot", "general", "concat")

    def __init__(self, query_dim: int, key_dim: int, score: str = "general", attn_dim: int | None = None):
        super().__init__()
        if score not in self.SCORES:
            raise ValueError(f"unknown Luong score {score!r}; choose one of {self.SCORES}")
        self.score_name = score
        if score == "dot":
            if query_dim != key_dim:
                raise ValueError(f"dot score needs query_dim == key_dim, got {query_dim} and {key_dim}")
        elif score == "general":
            self.W = nn.Linear(key_dim, query_dim, bias=False)  # k -> W k in query space
        else:
            attn_dim = attn_dim or query_dim
            # W [q; k] = W_q q + W_k k: splitting W lets the key half be precomputed.
            self.W_q = nn.Linear(query_dim, attn_dim, bias=False)
            self.W_k = nn.Linear(key_dim, attn_dim)
            self.v = nn.Linear(attn_dim, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        if self.score_name == "dot":
            return keys
        if self.score_name == "general":
            return self.W(keys)  # (B, S, Q)
        return self.W_k(keys)  # (B, S, A)

    def score(self, query: Tensor, proj: Tensor) -> Tensor:
        """(N, Q), (B, S, A) -> (N, S), N = B*g: g query rows per source row (beam search's K beams of one sentence,
        rows b*g .. b*g+g-1 reading key row b; 1 in training), or (B, T, Q) -> (B, T, S)."""
        if query.dim() == 2:
            B, S = proj.size(0), proj.size(1)
            g = _group(query.size(0), B)
            if self.score_name in ("dot", "general"):  # (B, S, Q) x (B, Q, g): a source's g queries in one product
                scores = torch.bmm(proj, query.view(B, g, query.size(-1)).transpose(1, 2))  # (B, S, g)
                return scores.transpose(1, 2).reshape(query.size(0), S)
            q = self.W_q(query).view(B, g, 1, proj.size(-1))  # (B, g, 1, A) + (B, 1, S, A)
            return self.v(torch.tanh(proj.unsqueeze(1) + q)).view(query.size(0), S)
        if self.score_name in ("dot", "general"):
            return torch.bmm(query, proj.transpose(1, 2))  # (B, T, S)
        q = self.W_q(query)
        return self.v(torch.tanh(proj.unsqueeze(1) + q.unsqueeze(2))).squeeze(-1)


def build_attention(kind: str, query_dim: int, key_dim: int, attn_dim: int) -> _Attention:
    """``bahdanau``/``additive`` or ``luong-dot``/``luong-general``/``luong-concat`` (also bare dot/general/concat)."""
    if kind in ("bahdanau", "additive"):
        return AdditiveAttention(query_dim, key_dim, attn_dim)
    score = kind.removeprefix("luong-").removeprefix("luong_")
    if score in LuongAttention.SCORES:
        return LuongAttention(query_dim, key_dim, score=score, attn_dim=attn_dim)
    raise ValueError(f"unknown attention {kind!r}; choose bahdanau, luong-dot, luong-general or luong-concat")


# --- multi-head scaled dot-product attention (Vaswani et al. 2017) ----------------------------------------------------


class HeadKV(NamedTuple):
    """Keys and values already projected and split into heads. A NamedTuple of batch-first tensors, so
    ``decoding.select_rows`` reorders it. The Transformer keeps one per decoder layer: the memory's (computed once per
    source) and the self-attention cache (grown by one position per generated token)."""

    k: Tensor  # (B, H, S, Dh)
    v: Tensor  # (B, H, S, Dh)

    def extend(self, new: HeadKV) -> HeadKV:
        """Append ``new`` positions (B, H, S', Dh) after these: the self-attention cache at the next step."""
        if self.k.size(2) == 0:  # the empty start cache: take new's dtype (it may be bf16 under autocast)
            return new
        return HeadKV(torch.cat([self.k, new.k], dim=2), torch.cat([self.v, new.v], dim=2))


class MultiHeadAttention(nn.Module):
    """Multi-head attention: softmax(Q Kᵀ / √d_h) V in H heads of d_h = D / H, then an output projection.

    Same signature as the other modules: ``forward(query, keys, values=None, mask=None) -> (context, weights)``:

    - ``query`` (B, D) for one step or (B, T, D); ``keys`` (B, S, D) or a :class:`HeadKV` from ``precompute``;
      ``values`` (B, S, D), default the keys; ``mask`` (B, S) bool, True = attend (padding is False), or (B, T, S).
    - ``causal=True``: query t sees keys up to t (aligned at the end when S > T: the last query sees every key, as in
      cached decoding where the keys are the whole prefix).
    - ``context`` (B, [T,] D). ``weights`` (B, H, [T,] S) per head when asked for (``need_weights=True`` or the
      ``need_weights`` attribute, e.g. for plots), else None: the fast path runs
      ``torch.nn.functional.scaled_dot_product_attention`` and never materialises the weights.

    Parameter names match ``torch.nn.MultiheadAttention`` (``in_proj_weight`` (3D, D) = [W_q; W_k; W_v],
    ``in_proj_bias``, ``out_proj``), so a state dict moves between the two. A fully masked row gives zero weights and
    attends to nothing (its heads' context is 0, so its output is the output projection's bias), never NaN. The
    returned weights are the softmax before attention dropout.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if num_heads < 1 or embed_dim < 1:
            raise ValueError(f"embed_dim and num_heads must be at least 1, got {embed_dim} and {num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.dropout = dropout
        self.need_weights = False
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim)) if bias else None
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)
        if bias:
            nn.init.zeros_(self.out_proj.bias)

    # --- projections ---------------------------------------------------------------------------------------------
    def _proj(self, x: Tensor, part: slice) -> Tensor:
        bias = None if self.in_proj_bias is None else self.in_proj_bias[part]
        return nn.functional.linear(x, self.in_proj_weight[part], bias)

    def _heads(self, x: Tensor) -> Tensor:  # (B, S, D) -> (B, H, S, Dh)
        return x.view(x.size(0), x.size(1), self.num_heads, self.head_dim).transpose(1, 2)

    def precompute(self, keys: Tensor | HeadKV, values: Tensor | None = None) -> HeadKV:
        """Project keys (B, S, D) and values (default: the keys) into heads once: (B, H, S, Dh) each."""
        if isinstance(keys, HeadKV):
            return keys
        if keys.dim() != 3:  # an unbatched (S, D): a reshape error otherwise
            raise ValueError(f"keys must be (B, S, D), a batch of sources, got {tuple(keys.shape)}")
        D = self.embed_dim
        if values is None or values is keys:  # one matmul for W_k and W_v
            k, v = self._proj(keys, slice(D, 3 * D)).chunk(2, dim=-1)
        else:
            k, v = self._proj(keys, slice(D, 2 * D)), self._proj(values, slice(2 * D, 3 * D))
        return HeadKV(self._heads(k), self._heads(v))

    # --- attention -----------------------------------------------------------------------------------------------
    def forward(
        self,
        query: Tensor,
        keys: Tensor | HeadKV,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        causal: bool = False,
        need_weights: bool | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        one_step = query.dim() == 2
        if one_step:
            query = query.unsqueeze(1)  # (B, 1, D)
        B, T, D = query.shape
        if keys is query and values is None:  # self-attention: one matmul for W_q, W_k, W_v
            q, k, v = (self._heads(x) for x in self._proj(query, slice(0, 3 * D)).chunk(3, dim=-1))
        else:
            q = self._heads(self._proj(query, slice(0, D)))  # (B, H, T, Dh)
            k, v = self.precompute(keys, values)  # (B, H, S, Dh), or (B / g, H, S, Dh): see _rows_per_key
        g = self._rows_per_key(B, k.size(0), causal, mask)
        if g > 1:  # g query rows of each key row become g * T query positions of it: (B / g, H, g * T, Dh)
            B, T = B // g, g * T
            q = q.reshape(B, g, self.num_heads, T // g, self.head_dim).transpose(1, 2).reshape(B, -1, T, self.head_dim)
        S = k.size(2)
        keep = self._keep_mask(mask, causal, T, S, query.device)  # (B|1, 1, T|1, S) bool or None
        want = self.need_weights if need_weights is None else need_weights
        p = self.dropout if self.training else 0.0
        weights = None
        if want:
            scores = torch.matmul(q, k.transpose(-2, -1)) * self.head_dim**-0.5  # (B, H, T, S)
            weights = softmax_keep(scores, keep)  # exact zeros where masked, a fully masked row all zero
            ctx = torch.matmul(nn.functional.dropout(weights, p, self.training), v)  # (B, H, T, Dh)
        else:
            # A causal mask alone, with T == S, is the kernel's own is_causal (no mask tensor at all).
            plain_causal = causal and mask is None and T == S
            ctx = nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=None if plain_causal else keep, dropout_p=p, is_causal=plain_causal
            )
            # Kernels differ on fully masked rows (0 or NaN): make them 0. Only a given mask, or a causal one with more
            # queries than keys, can leave a row nothing; always zeroed then (asking whether any row is dead would
            # read a value back: a host sync per layer and step on a GPU, and no meta tensors or torch.export).
            if mask is not None or (causal and T > S):
                ctx = ctx.masked_fill(~keep.any(-1, keepdim=True), 0.0)  # (B|1, 1, T|1, 1) True where dead
        if g > 1:  # back to the queries' own rows: (B, H, g * T, ...) -> (B * g, H, T, ...)
            ctx, weights = (None if x is None else self._unfold(x, g) for x in (ctx, weights))
            B, T = B * g, T // g
        context = self.out_proj(ctx.transpose(1, 2).reshape(B, T, D))  # (B, T, D)
        if one_step:
            return context.squeeze(1), None if weights is None else weights.squeeze(2)
        return context, weights

    @staticmethod
    def _rows_per_key(rows: int, key_rows: int, causal: bool, mask: Tensor | None) -> int:
        """How many query rows share each key row: 1, or g where the keys (and the mask) hold one row per g query
        rows, query row r reading key row r // g (beam search's K beams of one source: ``one_row_per_source_state``,
        the memory never copied K times). Only without a causal mask or a (B, T, S) one."""
        if rows == key_rows or key_rows == 0:
            return 1
        if rows % key_rows or causal or (mask is not None and (mask.dim() != 2 or mask.size(0) != key_rows)):
            raise ValueError(
                f"{rows} query rows for {key_rows} key rows: the keys need a row per query row, or one per g query "
                "rows (then no causal mask, and a (key rows, S) mask)"
            )
        return rows // key_rows

    @staticmethod
    def _unfold(x: Tensor, g: int) -> Tensor:
        """(B, H, g * T, E) -> (B * g, H, T, E): the g query rows folded into one key row's positions, back apart."""
        B, H, gT, E = x.shape
        return x.reshape(B, H, g, gT // g, E).transpose(1, 2).reshape(B * g, H, gT // g, E)

    @staticmethod
    def _keep_mask(mask: Tensor | None, causal: bool, T: int, S: int, device: torch.device) -> Tensor | None:
        """Combine a padding mask (B, S) or (B, T, S) and a causal mask into one (B|1, 1, T|1, S) bool, True = keep."""
        keep = None
        if mask is not None:
            check_mask(mask)
            keep = mask[:, None, None, :] if mask.dim() == 2 else mask[:, None]
        if causal and T > 1:  # a single (last) query sees every key anyway
            # Query t (of the last T positions) sees key s when s <= t + (S - T).
            tri = torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)
            keep = tri if keep is None else keep & tri
        return keep


def sample_categorical(probs: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One draw per row of probs (N, S) -> (N,): exactly ``torch.multinomial(probs, 1, generator=generator)[:, 0]``
    (its own one-sample algorithm, argmax(p / q) with q ~ Exp(1), the same random numbers drawn), without its checks
    of the probabilities, which read values back to the host (``.item()``) and so stall a GPU's launch queue and
    cannot be captured in a CUDA graph. Where multinomial would refuse a row (nan, or all zeros: every region masked)
    this gives an index anyway (a nan's, or 0): a nan there makes the loss nan, which training stops on."""
    q = torch.empty_like(probs).exponential_(1, generator=generator)  # (N, S)
    return (probs / q).argmax(-1)


class HardAttentionResult(NamedTuple):
    context: Tensor  # (B, V) the chosen region's value (or the expected context where soft)
    weights: Tensor  # (B, S) α, the distribution s_t is drawn from
    index: Tensor  # (B,) the chosen location s_t (the arg-max of α where the soft context was used)
    log_prob: Tensor  # (B,) log α[s_t]; 0 where the soft context was used (nothing was sampled)
    entropy: Tensor  # (B,) H[α] = -Σ α log α


def _log_clamped(p: Tensor) -> Tensor:
    """log(max(p, 1e-12)) computed in float32 at least, in ``p``'s dtype: 1e-12 is 0 in float16, where a weight of 0
    then gave log 0 = -inf and the entropy's 0 * -inf = nan."""
    return torch.log(widened(p).clamp_min(1e-12)).to(p.dtype)


def attention_entropy(weights: Tensor) -> Tensor:
    """H[α] = -Σ α log α over the last axis, in float32 at least (a zero weight adds nothing): (..., S) -> (...).
    Hard attention's entropy bonus, the teacher's entropy in attention distillation, a benchmark's sharpness."""
    wide = widened(weights)
    return -(wide * _log_clamped(wide)).sum(-1)


class HardAttention(nn.Module):
    """Show-Attend-Tell's stochastic hard attention (Xu et al. 2015, sec. 4.1).

    α comes from an additive scorer; s_t ~ Multinoulli(α) and the context is the value at s_t. ``attend`` returns
    log p(s_t) and H[α] for the REINFORCE and entropy terms of the paper's eq. 12. ``mode`` picks how to attend:
    ``sample`` (training), ``argmax`` or ``expect`` (inference: the arg-max location or the expected, soft context).
    ``use_soft`` (B,) bool selects rows that take the expected context instead of a sample (the paper does this with
    probability 0.5 per caption during training). One step at a time: ``query`` is (B, Q) only (a ValueError for
    (B, T, Q)), ``context`` (B, V) and ``weights`` (B, S).
    """

    MODES = ("sample", "argmax", "expect")

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int):
        super().__init__()
        self.scorer = AdditiveAttention(query_dim, key_dim, attn_dim)

    def precompute(self, keys: Tensor | ProjectedKeys) -> ProjectedKeys:
        return self.scorer.precompute(keys)

    def attend(
        self,
        query: Tensor,
        keys: Tensor | ProjectedKeys,
        values: Tensor | None = None,
        mask: Tensor | None = None,
        mode: str = "sample",
        use_soft: Tensor | None = None,
        generator: torch.Generator | None = None,
        key_grad_sink: KeyGradSink | None = None,
    ) -> HardAttentionResult:
        if mode not in self.MODES:
            raise ValueError(f"unknown hard attention mode {mode!r}; choose one of {self.MODES}")
        if query.dim() != 2:  # one location drawn per step: T steps at once would index the wrong rows
            raise ValueError(f"HardAttention takes one step's query (B, Q) only, got {tuple(query.shape)}")
        pk = self.scorer.precompute(keys)
        values = pk.keys if values is None else values  # (B, S, V); beam search: B sources for B*K query rows
        scores = self.scorer.score(query, pk.proj, key_grad_sink)  # (N, S)
        weights = masked_softmax(scores, _rows_mask(mask, query.size(0)))
        if mode == "sample":
            index = sample_categorical(weights.detach().float(), generator)  # (B,)
        else:
            index = weights.argmax(-1)
        log_prob = _log_clamped(weights.gather(1, index.unsqueeze(1)).squeeze(1))  # (N,)
        rows = torch.arange(query.size(0), device=values.device) // _group(query.size(0), values.size(0))
        context = values[rows, index]  # (N, V)
        if mask is not None:  # a row whose every position is masked: a zero context, as soft attention's (no read)
            alive = weights.sum(-1, keepdim=True) > 0  # (N, 1)
            context = context * alive.to(context.dtype)
            log_prob = log_prob.masked_fill(~alive.squeeze(1), 0.0)
        soft = torch.ones_like(index, dtype=torch.bool) if mode == "expect" else use_soft
        if soft is not None:
            expected = _weighted_sum(weights, values)
            context = torch.where(soft.unsqueeze(1), expected, context)
            log_prob = log_prob.masked_fill(soft, 0.0)
            index = torch.where(soft, weights.argmax(-1), index)  # nothing was sampled: report the arg-max
        entropy = attention_entropy(weights).to(weights.dtype)  # (N,)
        return HardAttentionResult(context, weights, index, log_prob, entropy)

    def forward(
        self, query: Tensor, keys: Tensor | ProjectedKeys, values: Tensor | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        out = self.attend(query, keys, values, mask, mode="sample" if self.training else "argmax")
        return out.context, out.weights
