"""Greedy and batched beam search over a small step protocol.

A model that wants to be decoded implements :class:`StepModel`:

- ``step(tokens, state) -> (log_probs, attention, new_state)``: ``tokens`` (N,) are the previous tokens of N rows;
  ``log_probs`` (N, V) the next-token log-probabilities; ``attention`` (N, ...) that step's attention weights (or None).
- ``reorder_state(state, index) -> state`` (optional): select rows ``index`` (N',) of every tensor in the state.
  The default, :func:`index_state`, does that for nested tuples / lists / dicts of batch-first tensors.
- ``static_state`` (optional): names of the entries of a dict state that are constant within a source (encoder
  memory, projected keys, masks). Beam search expands them to the K beams once and never reorders them: a beam's
  parent is always a beam of the same source, so they would be copied onto themselves at every step.
- ``shared_state`` (optional): such entries that beam search does not even expand: they keep one row per source,
  and ``step`` reads row r // K of them for its row r (text_attn.core.attention does this for additive and hard
  attention: their queries may have K rows per key row).

The initial state is the model's business (encode the source, build the decoder's first state) and is passed in.
Search is pure tensor logic over whole batches: no Python loop over sentences, only over output steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor


class StepModel(Protocol):
    def step(self, tokens: Tensor, state: Any) -> tuple[Tensor, Tensor | None, Any]: ...


def index_state(state: Any, index: Tensor) -> Any:
    """Select rows ``index`` along dim 0 of every tensor in a nested state; non-tensors pass through."""
    if isinstance(state, Tensor):
        return state.index_select(0, index)
    if isinstance(state, tuple) and hasattr(state, "_fields"):  # NamedTuple
        return type(state)(*(index_state(s, index) for s in state))
    if isinstance(state, (tuple, list)):
        return type(state)(index_state(s, index) for s in state)
    if isinstance(state, dict):
        return {k: index_state(v, index) for k, v in state.items()}
    return state


def _reorder(model: Any, state: Any, index: Tensor, within_sources: bool = True) -> Any:
    """Select rows ``index`` of the state. ``within_sources``: every new row comes from a row of the same source
    sentence / image (beam search's per-step reorder), so the entries a model names in ``static_state`` (what never
    changes within a source: encoder memory, projected keys, masks; identical across its beams) are left as they are
    instead of being copied at every step."""
    reorder = getattr(model, "reorder_state", None)
    if reorder is not None:
        return reorder(state, index)
    keep = set(getattr(model, "shared_state", ()))
    if within_sources:
        keep |= set(getattr(model, "static_state", ()))
    if keep and isinstance(state, dict):
        return {k: v if k in keep else index_state(v, index) for k, v in state.items()}
    return index_state(state, index)


@dataclass
class SearchResult:
    tokens: Tensor  # (B, T) generated ids (no bos), eos included when produced, pad after it
    lengths: Tensor  # (B,) number of generated tokens, eos included
    scores: Tensor  # (B,) total log-probability (beam: divided by length**length_penalty)
    attention: Tensor | None  # (B, T, ...) attention of each generated step; zeros after the end
    eos_id: int | None = None

    def token_lists(self) -> list[list[int]]:
        """The generated ids per sentence, without eos and padding."""
        out = []
        for row, n in zip(self.tokens.tolist(), self.lengths.tolist(), strict=True):
            row = row[:n]
            out.append(row[:-1] if row and row[-1] == self.eos_id else row)
        return out


@torch.no_grad()
def greedy_search(
    model: StepModel,
    state: Any,
    batch_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int,
    pad_id: int = 0,
) -> SearchResult:
    """Pick the arg-max token at every step until every sentence has produced eos or ``max_len`` tokens."""
    device = _state_device(state)
    prev = torch.full((batch_size,), bos_id, dtype=torch.long, device=device)
    finished = torch.zeros(batch_size, dtype=torch.bool, device=device)
    scores = torch.zeros(batch_size, device=device)
    lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
    tokens, attns = [], []
    for _ in range(max_len):
        log_probs, attn, state = model.step(prev, state)
        best_lp, tok = log_probs.max(dim=-1)  # (B,)
        tok = tok.masked_fill(finished, pad_id)
        scores += best_lp.masked_fill(finished, 0.0)
        lengths += (~finished).long()
        if attn is not None:
            attns.append(attn.masked_fill(_expand(finished, attn), 0.0))
        tokens.append(tok)
        finished |= tok == eos_id
        prev = tok
        if bool(finished.all()):
            break
    return _result(tokens, lengths, scores, attns, eos_id)


@torch.no_grad()
def beam_search(
    model: StepModel,
    state: Any,
    batch_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.0,
    pad_id: int = 0,
) -> SearchResult:
    """Batched beam search: the B sentences' K beams are B*K rows of one batch.

    A beam that produced eos stays in the beam with its score frozen (it can only extend with pad at log-prob 0),
    so finished and live hypotheses compete for the K slots. The winner per sentence is chosen among the final K by
    ``score / length**length_penalty`` (0 = raw log-probability, 1 = per-token average). A sentence whose beams never
    produce eos still returns its best hypothesis after ``max_len`` steps.
    """
    B, K = batch_size, beam_size
    device = _state_device(state)
    # The first step runs once per source (its K beams would all start from the same bos and state); its state is
    # then expanded to the K beams, the row of beam k of source b being b*K + k.
    first = model.step(torch.full((B,), bos_id, dtype=torch.long, device=device), state)  # (B, V), ...
    expand = torch.arange(B, device=device).repeat_interleave(K)  # (B*K,)
    prev = torch.full((B * K,), bos_id, dtype=torch.long, device=device)  # the previous token of every beam
    # Only beam 0 is live at the start: the K copies are identical and must not fill the beam with duplicates.
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0
    scores = scores.view(-1)  # (B*K,)
    finished = torch.zeros(B * K, dtype=torch.bool, device=device)
    lengths = torch.zeros(B * K, dtype=torch.long, device=device)
    offsets = (torch.arange(B, device=device) * K).unsqueeze(1)  # (B, 1)
    parents, step_tokens, step_attns = [], [], []
    for t in range(max_len):
        if t == 0:
            log_probs, attn, state = first[0][expand], None if first[1] is None else first[1][expand], first[2]
            state = _reorder(model, state, expand, within_sources=False)
        else:
            log_probs, attn, state = model.step(prev, state)  # (B*K, V)
        V = log_probs.size(-1)
        # Finished rows may only continue with pad, at no cost.
        frozen = torch.full_like(log_probs, float("-inf"))
        frozen[:, pad_id] = 0.0
        log_probs = torch.where(finished.unsqueeze(1), frozen, log_probs)
        cand = (scores.unsqueeze(1) + log_probs).view(B, K * V)
        top_scores, top_idx = cand.topk(K, dim=-1)  # (B, K)
        rows = (offsets + top_idx // V).view(-1)  # (B*K,) parent row of each new beam
        tok = (top_idx % V).view(-1)
        scores = top_scores.view(-1)
        finished = finished[rows]
        lengths = lengths[rows] + (~finished).long()
        parents.append(rows)
        step_tokens.append(tok)
        if attn is not None:
            step_attns.append(attn[rows].masked_fill(_expand(finished, attn), 0.0))
        finished = finished | (tok == eos_id)
        prev = tok
        state = _reorder(model, state, rows)
        if bool(finished.all()):
            break
    norm = scores / lengths.clamp(min=1).float().pow(length_penalty)
    best = norm.view(B, K).argmax(dim=-1)  # (B,)
    row = offsets.squeeze(1) + best  # (B,) final row of each sentence's winner
    tokens, attns = [], []
    for t in range(len(step_tokens) - 1, -1, -1):  # backtrack through the parent pointers
        tokens.append(step_tokens[t][row])
        if step_attns:
            attns.append(step_attns[t][row])
        row = parents[t][row]
    tokens.reverse()
    attns.reverse()
    return _result(
        tokens,
        lengths[offsets.squeeze(1) + best],
        norm.view(B, K)[torch.arange(B), best],
        attns,
        eos_id,
    )


def _expand(mask: Tensor, like: Tensor) -> Tensor:
    return mask.view(-1, *([1] * (like.dim() - 1)))


def _state_device(state: Any) -> torch.device:
    if isinstance(state, Tensor):
        return state.device
    items = state.values() if isinstance(state, dict) else state if isinstance(state, (tuple, list)) else []
    for s in items:
        try:
            return _state_device(s)
        except ValueError:
            continue
    raise ValueError("the decoder state holds no tensor")


def _result(tokens: list[Tensor], lengths: Tensor, scores: Tensor, attns: list[Tensor], eos_id: int):
    toks = torch.stack(tokens, dim=1)  # (B, T)
    attention = torch.stack(attns, dim=1) if attns else None  # (B, T, ...)
    return SearchResult(toks, lengths, scores, attention, eos_id)


def search(
    model: StepModel,
    state: Any,
    batch_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int,
    beam_size: int = 1,
    length_penalty: float = 0.0,
    pad_id: int = 0,
) -> SearchResult:
    """Greedy search for ``beam_size`` 1, batched beam search above."""
    if beam_size <= 1:
        return greedy_search(model, state, batch_size, bos_id, eos_id, max_len, pad_id=pad_id)
    return beam_search(model, state, batch_size, bos_id, eos_id, max_len, beam_size, length_penalty, pad_id=pad_id)


class GenerateMixin:
    """``generate`` for text encoder-decoders that have ``encode(src, src_lens) -> state`` and ``cfg.pad_id``."""

    @torch.no_grad()
    def generate(
        self,
        src: Tensor,
        src_lens: Tensor,
        bos_id: int,
        eos_id: int,
        max_len: int,
        beam_size: int = 1,
        length_penalty: float = 0.0,
    ) -> SearchResult:
        """src (B, S), src_lens (B,) -> the search result for the whole batch."""
        state = self.encode(src, src_lens)
        return search(self, state, src.size(0), bos_id, eos_id, max_len, beam_size, length_penalty, self.cfg.pad_id)
