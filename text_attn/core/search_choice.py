"""One search step's choice from the model's next-token log-probabilities: the tokens never written (banned ids,
repeated n-grams), each row's best tokens, and beam search's K beams of each source. Pure tensor logic that reads
nothing on the host except where said (the fixed-shape search, text_attn.core.fixed_search, captures
:func:`beam_choice` and :func:`end_choice` in a CUDA graph)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def ban_tokens(log_probs: Tensor, banned: Sequence[int]) -> Tensor:
    """(N, V) log-probabilities with the ``banned`` token ids at -inf (unchanged when there are none)."""
    if not banned:
        return log_probs
    return log_probs.index_fill(1, torch.tensor(list(banned), device=log_probs.device), float("-inf"))


def ban_repeated_ngrams(log_probs: Tensor, history: Tensor, n: int) -> Tensor:
    """Forbid (log-prob -inf) every token that would repeat an n-gram already in its row: history (N, t) of generated
    tokens, log_probs (N, V). The last n-1 tokens are compared with every earlier (n-1)-gram; the tokens that
    followed those are banned."""
    found = repeated_ngram_bans(history, n)
    if found is None:
        return log_probs
    following, hits = found
    # a token banned by any earlier window: count the hits per token (scatter_add), not the last write
    banned = torch.zeros(log_probs.shape, device=log_probs.device).scatter_add_(1, following, hits.float()) > 0
    return log_probs.masked_fill(banned, float("-inf"))


def repeated_ngram_bans(history: Tensor, n: int) -> tuple[Tensor, Tensor] | None:
    """The tokens that would repeat an n-gram of their row, as (candidates, banned) (N, L) each: ``candidates`` the
    token after each of the row's earlier (n-1)-grams, ``banned`` True where that (n-1)-gram is the row's last one
    (n = 1: every token of the row). None where nothing can be banned yet."""
    t = history.size(1)
    if n < 1 or t < n - 1 or (n == 1 and t == 0):
        return None
    if n == 1:
        return history, torch.ones_like(history, dtype=torch.bool)
    windows = history.unfold(1, n - 1, 1)  # (N, t-n+2, n-1)
    earlier = windows[:, :-1]  # (N, t-n+1, n-1): each is followed by a token
    if earlier.size(1) == 0:
        return None
    hits = (earlier == windows[:, -1:]).all(dim=-1)  # (N, t-n+1)
    return history[:, n - 1 :], hits  # the token after each earlier window


def beam_choice(
    log_probs: Tensor, scores: Tensor, finished: Tensor, lengths: Tensor, offsets: Tensor, K: int, pad_id: int
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """One beam-search step's choice for B sources of K beams: ``log_probs`` (B*K, V) this step's, ``scores``,
    ``finished``, ``lengths`` (B*K,) the beams' so far, ``offsets`` (B, 1) each source's first row. A finished beam may
    only continue with pad, at no cost. Returns (parent row, token, score, finished, length) of each new beam (B*K,);
    finished as the parent was (the caller adds this step's eos). Reads nothing on the host (the fixed-shape search
    captures it too: text_attn.core.fixed_search)."""
    top_lp, top_tok = row_best(log_probs, K)
    return choose_beams(top_lp, top_tok, scores, finished, lengths, offsets, K, pad_id)[:5]


def beam_choice_whole(
    log_probs: Tensor, scores: Tensor, finished: Tensor, lengths: Tensor, offsets: Tensor, K: int, pad_id: int
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """:func:`beam_choice` as it was until 2026-12-04, for comparison (tests, benchmarks/beam_search.py): every row's
    whole distribution scored, (B, K*V) candidates. The same result up to the order of exact ties."""
    V = log_probs.size(-1)
    frozen = torch.full_like(log_probs, float("-inf"))
    frozen[:, pad_id] = 0.0
    log_probs = torch.where(finished.unsqueeze(1), frozen, log_probs)
    cand = (scores.unsqueeze(1) + log_probs).view(-1, K * V)  # (B, K*V)
    top_scores, top_idx = cand.topk(K, dim=-1)  # (B, K)
    rows = (offsets + top_idx // V).view(-1)  # (B*K,) parent row of each new beam
    finished = finished[rows]
    return rows, (top_idx % V).view(-1), top_scores.view(-1), finished, lengths[rows] + (~finished).long()


def row_best(
    log_probs: Tensor, k: int, banned: Sequence[int] = (), history: Tensor | None = None, no_repeat_ngram: int = 0
) -> tuple[Tensor, Tensor]:
    """Each row's ``k`` (at most V) best tokens, best first, none of them ``banned`` nor one that would repeat an
    n-gram of its row's ``history`` (N, t) (``no_repeat_ngram`` n > 0): log-probs and ids (N, k) each (-inf where
    fewer than k tokens are left). A new beam extends its parent row with one of that row's own K best tokens (the
    parent's score is the same for all of them), so beam search needs no more than this of each row: no (N, V) tensor
    of its own (a full-vocabulary fill, where, add and index_fill were a third of the bundled Transformer's beam-5
    step on the CPU). What is banned is dropped from the row's k + m best (m: the most any row bans) rather than
    written into a copy of the whole distribution; with an n-gram ban m is read on the host (one sync a step)."""
    V = log_probs.size(-1)
    k = min(k, V)
    ids = sorted(set(banned))
    repeats = repeated_ngram_bans(history, no_repeat_ngram) if history is not None else None
    most = len(ids) + (0 if repeats is None else int(repeats[1].sum(dim=1).max()))
    if most == 0:
        return log_probs.topk(k, dim=-1)
    lp, tok = log_probs.topk(min(V, k + most), dim=-1)  # (N, k + m)
    out = torch.isin(tok, torch.tensor(ids, dtype=tok.dtype, device=tok.device))  # (N, k + m)
    if repeats is not None:
        candidates, hits = repeats  # (N, L) each
        out |= ((tok.unsqueeze(2) == candidates.unsqueeze(1)) & hits.unsqueeze(1)).any(dim=2)
    lp, pick = lp.masked_fill(out, float("-inf")).topk(k, dim=-1)  # (N, k)
    return lp, tok.gather(1, pick)


def choose_beams(
    top_lp: Tensor,
    top_tok: Tensor,
    scores: Tensor,
    finished: Tensor,
    lengths: Tensor,
    offsets: Tensor,
    K: int,
    pad_id: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Beam search's second stage: the K best of the B sources' K*k candidates, ``top_lp`` / ``top_tok`` (B*K, k)
    each row's best tokens (:func:`row_best`); the other arguments as :func:`beam_choice`'s. An ended row's only
    candidate is pad at log-prob 0 (whatever its row held). Returns beam_choice's five (B*K,) and the log-prob each
    new beam's token had given its parent row (0 where that row had ended)."""
    k = top_lp.size(1)
    ended = finished.unsqueeze(1)  # (N, 1)
    first = torch.arange(k, device=top_lp.device) == 0  # (k,)
    frozen = torch.where(first, 0.0, float("-inf")).to(top_lp.dtype)  # (k,) pad first, nothing else
    top_lp = torch.where(ended, frozen, top_lp)
    top_tok = torch.where(ended, pad_id, top_tok)
    cand = (scores.unsqueeze(1) + top_lp).view(-1, K * k)  # (B, K*k): the same sums as over the whole vocabulary
    top_scores, top_idx = cand.topk(K, dim=-1)  # (B, K)
    rows = (offsets + top_idx // k).view(-1)  # (B*K,) parent row of each new beam
    finished = finished[rows]
    tok = top_tok.view(-1, K * k).gather(1, top_idx).view(-1)  # (B*K,)
    chosen_lp = top_lp.view(-1, K * k).gather(1, top_idx).view(-1)  # (B*K,)
    return rows, tok, top_scores.view(-1), finished, lengths[rows] + (~finished).long(), chosen_lp


def end_choice(choice: Tensor, choice_lp: Tensor, finished: Tensor, eos_id: int, pad_id: int):
    """The step a search with ``end_step`` takes after ``max_len`` tokens, where ``max_len`` counts words or tokens,
    not steps: room for the end alone. A row still searching ends there where its choice (its arg-max: greedy and
    each beam alike; sampling's draw) is the end, its log-prob ``choice_lp`` added; any other row is cut off after
    ``max_len`` tokens, as a search without the step cuts it (pad, nothing added: its score as then). ``choice``,
    ``choice_lp``, ``finished`` (N,). Returns (token, log-prob added, whether the row took the step) (N,) each.
    Reads nothing on the host (the fixed-shape search takes it too)."""
    ends = ~finished & (choice == eos_id) & choice_lp.isfinite()
    return torch.where(ends, choice, pad_id), choice_lp.masked_fill(~ends, 0.0), ends
