"""Attention modules shared by every model in the project.

One signature for all: ``forward(query, keys, values=None, mask=None) -> (context, weights)``.

- ``query``: (B, Q) for one decoder step, or (B, T, Q) for T steps at once.
- ``keys``: (B, S, K) encoder states, or a :class:`ProjectedKeys` made by ``precompute(keys)``: keys that do not
  change across decoder steps are projected once per source, not at every step.
- ``values``: (B, S, V); defaults to the (unprojected) keys.
- ``mask``: (B, S) bool, True where a position is real and may be attended, False for padding.
- returns ``context`` (B, V) / (B, T, V) and ``weights`` (B, S) / (B, T, S), the softmax over source positions.

Masked positions get exactly zero weight, and a row whose every position is masked gets all-zero weights and a zero
context (never NaN).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn


class ProjectedKeys(NamedTuple):
    """Keys with their step-independent projection cached. A NamedTuple, so state reordering indexes it."""

    keys: Tensor  # (B, S, K) the raw keys (also the default values)
    proj: Tensor  # (B, S, A) the keys' projection used in the score


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over the last dim; masked positions get exactly 0, fully masked rows get all zeros.

    scores: (B, S) or (B, T, S); mask: (B, S) bool, True = keep.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    if scores.dim() == 3:
        mask = mask.unsqueeze(1)  # (B, 1, S) broadcast over the T queries
    # The most negative finite value (not -inf) keeps a fully masked row finite; multiplying by the mask afterwards
    # zeroes that row exactly. In other rows exp(min - max) underflows to exactly 0.
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * mask


def _weighted_sum(weights: Tensor, values: Tensor) -> Tensor:
    """weights (B, S) or (B, T, S), values (B, S, V) -> (B, V) or (B, T, V)."""
    if weights.dim() == 2:
        return torch.bmm(weights.unsqueeze(1), values).squeeze(1)
    return torch.bmm(weights, values)


class _Attention(nn.Module):
    """Common plumbing: key precompute, masking, weighted sum. Subclasses define the projection and score."""

    def project_keys(self, keys: Tensor) -> Tensor:  # (B, S, K) -> (B, S, A)
        return keys

    def precompute(self, keys: Tensor | ProjectedKeys) -> ProjectedKeys:
        """Project the keys once per source; pass the result as ``keys`` at every decoder step."""
        if isinstance(keys, ProjectedKeys):
            return keys
        return ProjectedKeys(keys, self.project_keys(keys))

    def score(self, query: Tensor, proj: Tensor) -> Tensor:  # (B, [T,] Q), (B, S, A) -> (B, [T,] S)
        raise NotImplementedError

    def forward(
        self,
        query: Tensor,
        keys: Tensor | ProjectedKeys,
        values: Tensor | None = None,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        pk = self.precompute(keys)
        weights = masked_softmax(self.score(query, pk.proj), mask)
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

    def score(self, query: Tensor, proj: Tensor) -> Tensor:
        q = self.query_proj(query)  # (B, A) or (B, T, A)
        if q.dim() == 2:
            return self.v(torch.tanh(proj + q.unsqueeze(1))).squeeze(-1)  # (B, S)
        # (B, T, 1, A) + (B, 1, S, A) -> (B, T, S, A) -> (B, T, S)
        return self.v(torch.tanh(proj.unsqueeze(1) + q.unsqueeze(2))).squeeze(-1)


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
        if self.score_name in ("dot", "general"):
            if query.dim() == 2:
                return torch.bmm(proj, query.unsqueeze(2)).squeeze(2)  # (B, S)
            return torch.bmm(query, proj.transpose(1, 2))  # (B, T, S)
        q = self.W_q(query)
        if q.dim() == 2:
            return self.v(torch.tanh(proj + q.unsqueeze(1))).squeeze(-1)
        return self.v(torch.tanh(proj.unsqueeze(1) + q.unsqueeze(2))).squeeze(-1)


def build_attention(kind: str, query_dim: int, key_dim: int, attn_dim: int) -> _Attention:
    """``bahdanau``/``additive`` or ``luong-dot``/``luong-general``/``luong-concat`` (also bare dot/general/concat)."""
    if kind in ("bahdanau", "additive"):
        return AdditiveAttention(query_dim, key_dim, attn_dim)
    score = kind.removeprefix("luong-").removeprefix("luong_")
    if score in LuongAttention.SCORES:
        return LuongAttention(query_dim, key_dim, score=score, attn_dim=attn_dim)
    raise ValueError(f"unknown attention {kind!r}; choose bahdanau, luong-dot, luong-general or luong-concat")
