"""Greedy and batched beam search over a small step protocol.

A model that wants to be decoded implements :class:`StepModel`:

- ``step(tokens, state) -> (log_probs, attention, new_state)``: ``tokens`` (N,) are the previous tokens of N rows;
  ``log_probs`` (N, V) the next-token log-probabilities; ``attention`` (N, ...) that step's attention weights (or None).
- ``select_state(state, index) -> state`` (optional): select rows ``index`` (N',) of every tensor in the state.
  The default, :func:`select_rows`, does that for nested tuples / lists / dicts of batch-first tensors.
- ``source_constant_state`` (optional): names of the entries of a dict state that are constant within a source
  (encoder memory, projected keys, masks). Beam search expands them to the K beams once and never reorders them: a
  beam's parent is always a beam of the same source, so they would be copied onto themselves at every step.
- ``one_row_per_source_state`` (optional): such entries that beam search does not even expand: they keep one row per
  source, and ``step`` reads row r // K of them for its row r (text_attn.core.attention does this for additive, hard
  and multi-head attention: their queries may have K rows per key row).

The initial state is the model's business (encode the source, build the decoder's first state) and is passed in.
Search is pure tensor logic over whole batches: no Python loop over sentences, only over output steps. A sentence
that has ended leaves the batch (its state rows are dropped; the model steps the others), unless the model has its own
``select_state``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Protocol

import torch
from torch import Tensor

from text_attn.core.heap_trim import every_few_steps
from text_attn.core.precision import widened
from text_attn.core.search_choice import (
    ban_repeated_ngrams,
    ban_tokens,
    beam_choice_whole,
    choose_beams,
    end_choice,
    row_best,
)


class StepModel(Protocol):
    def step(self, tokens: Tensor, state: Any) -> tuple[Tensor, Tensor | None, Any]: ...


def select_rows(state: Any, index: Tensor) -> Any:
    """Select rows ``index`` along dim 0 of every tensor in a nested state; non-tensors pass through."""
    if isinstance(state, Tensor):
        return state.index_select(0, index)
    if isinstance(state, tuple) and hasattr(state, "_fields"):  # NamedTuple
        return type(state)(*(select_rows(s, index) for s in state))
    if isinstance(state, (tuple, list)):
        return type(state)(select_rows(s, index) for s in state)
    if isinstance(state, dict):
        return {k: select_rows(v, index) for k, v in state.items()}
    return state


def _select_state(model: Any, state: Any, index: Tensor, within_sources: bool = True) -> Any:
    """Select rows ``index`` of the state. ``within_sources``: every new row comes from a row of the same source
    sentence / image (beam search's per-step reorder), so the entries a model names in ``source_constant_state``
    (what never changes within a source: encoder memory, projected keys, masks; identical across its beams) are left
    as they are instead of being copied at every step."""
    reorder = getattr(model, "select_state", None)
    if reorder is not None:
        return reorder(state, index)
    keep = set(getattr(model, "one_row_per_source_state", ()))
    if within_sources:
        keep |= set(getattr(model, "source_constant_state", ()))
    if keep and isinstance(state, dict):
        return {k: v if k in keep else select_rows(v, index) for k, v in state.items()}
    return select_rows(state, index)


@dataclass
class SearchResult:
    tokens: Tensor  # (B, T) generated ids (no bos), eos included when produced, pad after it
    lengths: Tensor  # (B,) number of generated tokens, eos included
    scores: Tensor  # (B,) total log-probability divided by length**length_penalty (greedy, sampled and beam alike)
    attention: Tensor | None  # (B, T, ...) attention of each generated step; zeros after the end
    eos_id: int | None = None
    # beam search with n_best > 1: per sentence its n best hypotheses, best first: (ids without eos, score, whether it
    # ended: False where max_len cut it off); those of score -inf left out (more beams than the search found: a copy
    # of another, a banned token), the first always kept
    nbest: list[list[tuple[list[int], float, bool]]] | None = None
    # (B, T) each generated token's log-probability given the tokens before it, eos included, 0 after the end: what
    # reading the output back (read_sequence) gives, without the reading (`caption --unsure`, `translate --unsure`);
    # greedy, sampled (the model's own, not the tempered draw's) and beam alike. None: not kept (fixed_search)
    log_probs: Tensor | None = None

    def cpu(self) -> SearchResult:
        """The result on the host, each tensor copied once (reading it row by row from a GPU is a sync per value)."""
        attention = None if self.attention is None else self.attention.cpu()
        log_probs = None if self.log_probs is None else self.log_probs.cpu()
        return SearchResult(self.tokens.cpu(), self.lengths.cpu(), self.scores.cpu(), attention, self.eos_id,
                            self.nbest, log_probs)  # fmt: skip

    def ended(self) -> Tensor:
        """(B,) bool: whether each sentence's output ended with eos (False: max_len cut it off)."""
        last = self.tokens.gather(1, (self.lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)  # (B,)
        return (last == self.eos_id) & (self.lengths > 0)

    def token_lists(self) -> list[list[int]]:
        """The generated ids per sentence, without eos and padding."""
        out = []
        for row, n in zip(self.tokens.tolist(), self.lengths.tolist(), strict=True):
            row = row[:n]
            out.append(row[:-1] if row and row[-1] == self.eos_id else row)
        return out


# splitmix64 (Steele, Lea & Flood 2014): its increment and its finaliser's multipliers, as signed int64 (torch has no
# uint64 arithmetic; int64's wraps, and the bits are the same)
_GAMMA = 0x9E3779B97F4A7C15
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1


def _signed(value: int) -> int:
    """A 64-bit pattern as the int64 that holds it."""
    value &= _MASK64
    return value - (1 << 64) if value >> 63 else value


def _mix_int(z: int) -> int:
    """splitmix64's finaliser on a Python int (as the unsigned 64-bit pattern, returned signed)."""
    z &= _MASK64
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return _signed(z ^ (z >> 31))


def _mix(z: Tensor) -> Tensor:
    """splitmix64's finaliser on an int64 tensor: ``>>`` is arithmetic on int64, so each shift is masked to the
    logical one's bits; the products wrap modulo 2**64 as uint64's would."""
    z = (z ^ ((z >> 30) & ((1 << 34) - 1))) * _signed(_MIX1)
    z = (z ^ ((z >> 27) & ((1 << 37) - 1))) * _signed(_MIX2)
    return z ^ ((z >> 31) & ((1 << 33) - 1))


def counter_uniform(seed: int, keys: Tensor, step: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """(N,) int64 keys -> (N,) uniforms in [0, 1) of ``dtype``, each a function of (seed, its key, step) alone: a
    counter-based draw (a splitmix64 hash of the three), so a row draws the same whatever rows share its batch, in
    whatever order, in whichever run. On the keys' device; integer arithmetic only, so every device agrees. The
    uniform takes as many of the hash's top bits as ``dtype``'s significand holds (24 for float32, 53 for float64): a
    multiple of 2**-bits below 1, exactly representable (a float64 uniform rounded to float32 could become 1.0)."""
    head = _mix_int(_mix_int(seed + _GAMMA) + step + 1)  # a Python int: the (seed, step) part, shared by the rows
    h = _mix(_mix(keys.long() + head) + _signed(_GAMMA))  # (N,) int64
    bits = 1 - round(math.log2(torch.finfo(dtype).eps))  # the significand's bits, its implicit one counted
    top = (h >> (64 - bits)) & ((1 << bits) - 1)  # (N,) the hash's top bits, as a non-negative integer < 2**bits
    return top.to(dtype) * 2.0**-bits


def copy_keys(keys: Tensor, copies: int) -> Tensor:
    """(B,) int64 keys -> (B * copies,) keys of each input's ``copies`` searches (rows b*K .. b*K+K-1 are input b's),
    its copy index mixed in: the copies of one input draw apart, each as it would in any batch."""
    copy = torch.arange(copies, device=keys.device).repeat(keys.numel())  # (B*K,) 0 .. K-1 per input
    return _mix(_mix(keys.long().repeat_interleave(copies)) + copy)


def text_key(name: str) -> int:
    """A stable 63-bit key of a text (a photo's record name): the same in every run and process (Python's ``hash``
    of a str is salted per process)."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(name.encode("utf-8", "surrogateescape"), digest_size=8).digest(), "big") >> 1


@dataclass(frozen=True)
class Sampling:
    """Draw each token instead of taking the best: from the model's distribution divided by ``temperature``, cut to
    the ``top_k`` most likely tokens (0: no cut) and to the smallest set holding ``top_p`` of the probability
    (nucleus sampling; 1: no cut). ``seed`` makes the draws repeat: a row's draw at a step is a function of (seed, the
    row's key, the step) alone (:func:`counter_uniform`), so an input given its own key (caption: its photo's name;
    translate: its number) draws the same in any batch, order or run. None: torch's global generator."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self):
        # a NaN temperature passed "<= 0" (every comparison with NaN is False) and drew "wir wir wir ..."
        reals = all(isinstance(v, Real) and not isinstance(v, bool) for v in (self.temperature, self.top_p))
        whole = isinstance(self.top_k, Integral) and not isinstance(self.top_k, bool)
        if (not reals or not whole or not math.isfinite(self.temperature) or self.temperature <= 0
                or self.top_k < 0 or not 0 < self.top_p <= 1):  # fmt: skip
            raise ValueError(
                f"sampling needs a finite temperature > 0, an integer top_k >= 0 and 0 < top_p <= 1 (got "
                f"{self.temperature!r}, {self.top_k!r}, {self.top_p!r})"
            )
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, Integral)):
            # "can only concatenate str (not "int") to str" at the first draw, deep in the search
            raise ValueError(f"sampling's seed must be an integer or None, got {self.seed!r}")

    def uniform(self, cdf: Tensor, generator: torch.Generator | None, keys: Tensor | None, step: int) -> Tensor:
        """One uniform in [0, 1) per row of ``cdf`` (N, V), (N, 1) in its dtype and on its device: with a seed, the
        rows' ``keys`` (N,) (None: their positions) and the ``step`` choose it (:func:`counter_uniform`); without,
        ``generator`` (None: torch's global one) draws it, as for SCST's samples (no hashing on that path)."""
        if self.seed is None:
            return torch.rand(cdf.size(0), 1, device=cdf.device, generator=generator, dtype=cdf.dtype)
        if keys is None:
            keys = torch.arange(cdf.size(0), device=cdf.device)
        return counter_uniform(self.seed, keys.to(cdf.device), step, cdf.dtype).unsqueeze(1)

    def draw(
        self, log_probs: Tensor, generator: torch.Generator | None = None, keys: Tensor | None = None, step: int = 0
    ) -> Tensor:
        """(N, V) log-probabilities -> (N,) drawn tokens."""
        # float32 at least: a bfloat16 cumsum (autocast, half models) lost the small probabilities against the running
        # total, and the distribution drawn from was far from the model's (total variation 0.36 on 10,000 words)
        logits = widened(log_probs) / self.temperature  # (N, V)
        if self.top_k and self.top_k < logits.size(-1):
            # tokens tied with the k-th stay (as Hugging Face's TopKLogitsWarper keeps them): no arbitrary pick among
            # equals; a bfloat16 model's coarse log-probs tie more often, so it may draw from a few more than k
            kth = logits.topk(self.top_k, dim=-1).values[:, -1:]  # (N, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            ordered, order = logits.sort(dim=-1, descending=True)
            probs = ordered.softmax(dim=-1)
            drop = probs.cumsum(dim=-1) - probs >= self.top_p  # tokens after the nucleus is full (the first stays)
            logits = logits.scatter(-1, order, ordered.masked_fill(drop, float("-inf")))
        # Inverse-CDF sampling: the first token whose cumulative probability passes a uniform draw (scaled by the
        # total, which rounding may keep off 1). A token of probability 0 never passes first. One uniform per row
        # instead of torch.multinomial's exponential per vocabulary entry (~20 ms for SCST's 320 x 2,600 rows).
        cdf = logits.softmax(dim=-1).cumsum(dim=-1)  # (N, V)
        u = self.uniform(cdf, generator, keys, step) * cdf[:, -1:]
        return torch.searchsorted(cdf, u, right=True).squeeze(1).clamp_(max=cdf.size(-1) - 1)


@torch.no_grad()
def greedy_search(
    model: StepModel,
    state: Any,
    batch_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int,
    pad_id: int = 0,
    *,
    sampling: Sampling | None = None,
    no_repeat_ngram: int = 0,
    banned: Sequence[int] = (),
    drop_ended: bool = True,
    row_max_len: Tensor | None = None,
    keys: Tensor | None = None,
    end_step: bool = False,
) -> SearchResult:
    """Pick the arg-max token (or, with ``sampling``, a drawn one) at every step until every sentence has produced
    eos or ``max_len`` tokens (``end_step``: ``max_len`` tokens and then its end, :func:`end_choice`).
    ``no_repeat_ngram`` n > 0: no n-gram occurs twice in a sentence. ``banned``: token ids never produced (e.g. <unk>:
    the next most likely word stands in for it). ``drop_ended``: stop stepping the sentences that ended (the same
    result, less work; False: every row to the end, for comparison). ``row_max_len`` (B,): each sentence's own cap
    (at most ``max_len``), so that its output does not depend on its batch's longest.
    ``keys`` (B,) int64: with a seeded ``sampling``, each row's key, its draws a function of (seed, key, step) alone,
    the same in any batch (None: the rows' positions, so a batch repeats only as the same batch)."""
    device = _state_device(state)
    prev = torch.full((batch_size,), bos_id, dtype=torch.long, device=device)
    finished = torch.zeros(batch_size, dtype=torch.bool, device=device)
    scores = torch.zeros(batch_size, device=device)
    lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
    if sampling is not None and sampling.seed is not None:
        keys = torch.arange(batch_size, device=device) if keys is None else keys.to(device=device, dtype=torch.long)
        if keys.shape != (batch_size,):
            raise ValueError(f"keys must hold one key per row ({batch_size},), got {tuple(keys.shape)}")
    tokens, attns, lps = [], [], []
    # A sentence that ended leaves the batch (as in beam_search), sampled ones too: a seeded row's draws depend on its
    # key and the step, not on the rows stepped beside it (SCST's unseeded samples: half their rows end early).
    compact = drop_ended and getattr(model, "select_state", None) is None
    live = torch.arange(batch_size, device=device)  # (A,) the rows the model's state holds, in order
    for t in range(max_len + end_step):
        every_few_steps(t)  # a long search's freed cache buffers: their pages back (text_attn.core.heap_trim)
        # The choice reads the live rows' (A, V) alone (the rows that left the batch have ended): widening them to
        # (B, V) first made sampling's softmax and cumsum over every row (3x the draw's work with half the rows left;
        # the bundled Transformer's seeded sampling of 512 test sentences took 1.07x the time, greedy the same)
        log_probs, attn, state = _step_live(model, prev, state, live, widen=False)  # (A, V); attn (B, ...)
        whole = live.numel() == batch_size
        log_probs = ban_tokens(log_probs, banned)
        if no_repeat_ngram:
            history = _history(tokens, batch_size, device)  # (B, t)
            log_probs = ban_repeated_ngrams(log_probs, history if whole else history[live], no_repeat_ngram)
        if sampling is None:
            best_lp, tok = log_probs.max(dim=-1)  # (A,)
        else:
            tok = sampling.draw(log_probs, None, keys if whole or keys is None else keys[live], t)
            best_lp = log_probs.gather(1, tok.unsqueeze(1)).squeeze(1)
        if not whole:  # back to the batch's rows: the others ended (pad, 0 added: masked below anyway)
            tok = tok.new_full((batch_size,), pad_id).index_copy_(0, live, tok)  # (B,)
            best_lp = best_lp.new_zeros(batch_size).index_copy_(0, live, best_lp)
        stepped = ~finished  # (B,) the rows that take this step
        if t == max_len:  # end_step's step after max_len tokens: the end, or cut off before it
            tok, best_lp, stepped = end_choice(tok, best_lp, finished, eos_id, pad_id)
        tok = tok.masked_fill(~stepped, pad_id)
        lps.append(best_lp.masked_fill(~stepped, 0.0))  # (B,) the chosen token's, 0 where the row did not step
        scores += lps[-1]
        lengths += stepped.long()
        if attn is not None:
            attns.append(attn.masked_fill(_expand(~stepped, attn), 0.0))
        tokens.append(tok)
        finished |= tok == eos_id
        if row_max_len is not None:  # a sentence at its own cap stops as it would at max_len alone
            finished |= row_max_len <= t + 1
        prev = tok
        if bool(finished.all()):
            break
        # Compacting copies every live row's state (an image's regions and their keys: ~0.5 MB a row), about what
        # stepping a row costs: so only once a quarter of the live rows have ended, not at every step someone ends.
        if compact and int(finished[live].sum()) * 4 >= live.numel():
            state, live = _next_state(model, state, torch.arange(batch_size, device=device), live, finished, 1)
    return _result(tokens, lengths, scores, attns, eos_id, lps)


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
    *,
    n_best: int = 1,
    no_repeat_ngram: int = 0,
    banned: Sequence[int] = (),
    drop_ended: bool = True,
    row_max_len: Tensor | None = None,
    end_step: bool = False,
    whole_vocabulary: bool = False,
) -> SearchResult:
    """Batched beam search: the B sentences' K beams are B*K rows of one batch.

    ``n_best`` > 1 (at most K): the result's ``nbest`` also lists each sentence's n best final hypotheses.
    ``no_repeat_ngram`` n > 0: no hypothesis repeats an n-gram. ``banned``: token ids never produced.
    ``row_max_len`` (B,): each sentence's own cap (at most ``max_len``): its beams stop there, as they would with
    ``max_len`` equal to it in a batch of its own. ``end_step``: ``max_len`` counts the tokens before the end: one
    more step, in which each beam still searching ends or is cut off (:func:`end_choice`). ``whole_vocabulary``: each
    step's choice made as until 2026-12-04 (:func:`beam_choice_whole`: every row's whole distribution, the ended
    rows' included, the banned ids written into a copy), for comparison: the same result up to exact ties.

    A beam that produced eos stays in the beam with its score frozen (it can only extend with pad at log-prob 0),
    so finished and live hypotheses compete for the K slots. The winner per sentence is chosen among the final K by
    ``score / length**length_penalty`` (0 = raw log-probability, 1 = per-token average). A sentence whose beams never
    produce eos still returns its best hypothesis after ``max_len`` steps.

    A source whose K beams have all ended leaves the batch: later steps run the model on the other sources' rows
    only (a batch runs until its longest caption ends, its mean one ends much sooner). Its rows keep their place in
    the search's own tensors, where an ended beam can only extend with pad, so the result is the same as without.
    A model with its own ``select_state`` is always stepped on every row (its state's layout is its own), as is
    every model with ``drop_ended`` False (for comparison).
    """
    B, K = batch_size, beam_size
    if not 1 <= n_best <= K:
        raise ValueError(f"n_best must be between 1 and the beam size {K}, got {n_best}")
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
    history = torch.zeros(B * K, 0, dtype=torch.long, device=device)  # (B*K, t) each beam's tokens so far
    parents, step_tokens, step_attns, step_lps = [], [], [], []
    compact = drop_ended and getattr(model, "select_state", None) is None
    live = torch.arange(B * K, device=device)  # (A*K,) the rows the model's state holds: the K of each live source
    caps = None if row_max_len is None else row_max_len.to(device).repeat_interleave(K)  # (B*K,)
    for t in range(max_len + end_step):
        every_few_steps(t)  # a long search's freed cache buffers: their pages back (text_attn.core.heap_trim)
        # Usually only each live row's K best tokens are needed (beam_choice's first stage), taken from the live
        # rows alone; the end step needs every row's whole distribution.
        whole = t == max_len or whole_vocabulary
        if t == 0:
            log_probs, attn, state = first[0][expand], None if first[1] is None else first[1][expand], first[2]
            state = _select_state(model, state, expand, within_sources=False)
        else:  # the ended sources' rows get zeros (or none): they are frozen below
            log_probs, attn, state = _step_live(model, prev, state, live, widen=whole)  # (B*K | A*K, V), (B*K, ...)
        if whole:
            log_probs = ban_tokens(log_probs, banned)
            if no_repeat_ngram:
                log_probs = ban_repeated_ngrams(log_probs, history, no_repeat_ngram)
        if t == max_len:  # end_step's step after max_len tokens: each beam ends or is cut off, in its place
            rows = torch.arange(B * K, device=device)
            best_lp, best = log_probs.max(dim=-1)  # (B*K,)
            tok, added, stepped = end_choice(best, best_lp, finished, eos_id, pad_id)
            scores, lengths = scores + added, lengths + stepped.long()
        elif whole_vocabulary:
            rows, tok, scores, finished, lengths = beam_choice_whole(log_probs, scores, finished, lengths, offsets, K,
                                                                     pad_id)  # fmt: skip
            stepped = ~finished
            added = log_probs[rows, tok].masked_fill(~stepped, 0.0)
        else:
            mine = history if not no_repeat_ngram or log_probs.size(0) == B * K else history[live]  # (rows stepped, t)
            top_lp, top_tok = row_best(log_probs, K, banned, mine, no_repeat_ngram)  # (rows stepped, k)
            if top_lp.size(0) < B * K:  # only the live rows were stepped: the others have ended (frozen in choose)
                top_lp = top_lp.new_zeros(B * K, top_lp.size(1)).index_copy_(0, live, top_lp)
                top_tok = top_tok.new_zeros(B * K, top_tok.size(1)).index_copy_(0, live, top_tok)
            rows, tok, scores, finished, lengths, added = choose_beams(top_lp, top_tok, scores, finished, lengths,
                                                                       offsets, K, pad_id)  # fmt: skip
            stepped = ~finished
            added = added.masked_fill(~stepped, 0.0)  # (B*K,) each new beam's token's log-prob, given its parent
        parents.append(rows)
        step_tokens.append(tok)
        step_lps.append(added)
        if attn is not None:
            step_attns.append(attn[rows].masked_fill(_expand(~stepped, attn), 0.0))
        finished = finished | (tok == eos_id)
        if caps is not None:  # a sentence at its own cap: its beams frozen (pad at no cost), as at max_len alone
            finished = finished | (caps <= t + 1)
        prev = tok
        if no_repeat_ngram:
            history = torch.cat([history[rows], tok.unsqueeze(1)], dim=1)
        if bool(finished.all()):
            break
        state, live = _next_state(model, state, rows, live, finished.view(B, K).all(dim=1) if compact else None, K)
    return final_hypotheses(parents, step_tokens, step_attns, scores, lengths, length_penalty, B, K, n_best, eos_id,
                            step_lps)  # fmt: skip


def final_hypotheses(
    parents: Sequence[Tensor],
    step_tokens: Sequence[Tensor],
    step_attns: Sequence[Tensor],
    scores: Tensor,
    lengths: Tensor,
    length_penalty: float,
    B: int,
    K: int,
    n_best: int,
    eos_id: int,
    step_lps: Sequence[Tensor] = (),
) -> SearchResult:
    """Beam search's result from its T steps: ``parents[t]`` (B*K,) the parent row of each beam of step t,
    ``step_tokens[t]`` (B*K,) its token, ``step_attns[t]`` (B*K, ...) its attention (or no steps' attention),
    ``step_lps[t]`` (B*K,) its token's log-probability (or none kept); ``scores`` and ``lengths`` (B*K,) of the final
    beams. Each sentence's best (and n-best) hypotheses by ``score / length**length_penalty``, backtracked through the
    parent pointers."""
    offsets = torch.arange(B, device=scores.device) * K  # (B,) the first row of each sentence
    norm = scores / lengths.clamp(min=1).float().pow(length_penalty)
    ranked = norm.view(B, K).argsort(dim=-1, descending=True)  # (B, K) best first
    results = []
    for rank in range(n_best):
        final = offsets + ranked[:, rank]  # (B,) final row of each sentence's hypothesis of this rank
        row, tokens, attns, lps = final, [], [], []
        for t in range(len(step_tokens) - 1, -1, -1):  # backtrack through the parent pointers
            tokens.append(step_tokens[t][row])
            if step_attns:
                attns.append(step_attns[t][row])
            if step_lps:
                lps.append(step_lps[t][row])
            row = parents[t][row]
        tokens.reverse()
        attns.reverse()
        lps.reverse()
        results.append(_result(tokens, lengths[final], norm[final], attns, eos_id, lps))
    top = results[0]
    if n_best > 1:
        lists, ended = [r.token_lists() for r in results], [r.ended().tolist() for r in results]
        scores = [r.scores.tolist() for r in results]
        # a hypothesis of score -inf is no hypothesis: at step 0 only beam 0 is live, so a beam wider than the finite
        # candidates kept -inf rows (copies of another, banned tokens), which JSON cannot even hold
        top.nbest = [[(lists[k][b], scores[k][b], ended[k][b]) for k in range(n_best)
                      if k == 0 or math.isfinite(scores[k][b])] for b in range(B)]  # fmt: skip
    return top


def _step_live(
    model: Any, prev: Tensor, state: Any, live: Tensor, widen: bool = True
) -> tuple[Tensor, Tensor | None, Any]:
    """One model step on the rows ``live`` (A,) of the search's N rows (the rows the state holds). Returns (N, V)
    log-probabilities (``widen`` False: the live rows' (A, V) alone) and (N, ...) attention with zeros in the other
    rows, and the model's new state."""
    n = prev.numel()
    if live.numel() == n:
        return model.step(prev, state)
    log_probs, attn, state = model.step(prev[live], state)  # (A, V), (A, ...)
    if widen:
        log_probs = log_probs.new_zeros(n, log_probs.size(-1)).index_copy_(0, live, log_probs)
    if attn is not None:
        attn = attn.new_zeros(n, *attn.shape[1:]).index_copy_(0, live, attn)
    return log_probs, attn, state


def _next_state(model: Any, state: Any, rows: Tensor, live: Tensor, ended: Tensor | None, K: int):
    """Beam search's state for the next step: each new beam's row is its parent's (``rows`` (B*K,), in the search's
    row numbers), for the sources still searching. ``live`` (A*K,): the rows the state holds now, in order; ``ended``
    (B,): the sources whose K beams have all ended (None: keep every source). Returns (state, its rows)."""
    position = torch.full_like(rows, -1)
    position[live] = torch.arange(live.numel(), device=live.device)  # search row -> row of the state
    keep = live if ended is None else (~ended).repeat_interleave(K).nonzero().squeeze(1)  # (A'*K,)
    index = position[rows[keep]]  # (A'*K,) the parent of each kept row, as a row of the state
    if keep.numel() == live.numel():  # nobody left: the usual per-step reorder within sources
        return _select_state(model, state, index), live
    # Sources left: every entry drops their rows, the ones kept one row per source too (there, source i of the state
    # is row i; the kept sources stay in order, so query row r still reads source row r // K).
    sources = position[keep[::K]] // K  # (A',) each kept source's row in the per-source entries
    per_source = set(getattr(model, "one_row_per_source_state", ()))
    if isinstance(state, dict) and per_source:
        state = {k: select_rows(v, sources if k in per_source else index) for k, v in state.items()}
    else:
        state = select_rows(state, index)
    return state, keep


def _history(tokens: list[Tensor], rows: int, device: torch.device) -> Tensor:
    """The tokens generated so far as (rows, t)."""
    return torch.stack(tokens, dim=1) if tokens else torch.zeros(rows, 0, dtype=torch.long, device=device)


def _expand(mask: Tensor, like: Tensor) -> Tensor:
    """A (N,) or () mask viewed to broadcast over ``like`` (N, ...)."""
    return mask.view(*mask.shape, *([1] * (like.dim() - mask.dim())))


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


def _result(
    tokens: list[Tensor], lengths: Tensor, scores: Tensor, attns: list[Tensor], eos_id: int, lps: Sequence[Tensor] = ()
) -> SearchResult:
    """A search's result from its steps' (B,) tokens, (B, ...) attention and (B,) log-probabilities (none: not kept)."""
    toks = torch.stack(tokens, dim=1)  # (B, T)
    attention = torch.stack(attns, dim=1) if attns else None  # (B, T, ...)
    log_probs = torch.stack(list(lps), dim=1) if lps else None  # (B, T)
    return SearchResult(toks, lengths, scores, attention, eos_id, log_probs=log_probs)


@contextmanager
def evaluating(net: torch.nn.Module) -> Iterator[None]:
    """The network in eval mode (no dropout; hard attention deterministic) for the block, its own mode restored
    after: how a search or a reading runs a network that may be in training."""
    was = net.training
    net.eval()
    try:
        yield
    finally:
        net.train(was)


def padded_rows(rows: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """A sequence a row, each padded past its end with ``pad_id``: the (B, T) ids :func:`read_sequence` reads."""
    longest = max((len(r) for r in rows), default=0)
    return torch.tensor([[*r, *[pad_id] * (longest - len(r))] for r in rows], dtype=torch.long)


@torch.no_grad()
def read_sequence(
    model: Any, state: Any, batch_size: int, ids: Sequence[int] | Tensor, bos_id: int
) -> tuple[Tensor, Tensor | None]:
    """Teacher-force one given sequence ``ids`` (after bos; end it with eos to read the end too) for every row of the
    state, or a sequence a row (``ids`` a (B, T) tensor, each row padded past its own end with any id: what a row
    reads past its end is never looked at): the same steps a search takes, so reading a search's own output gives back
    its attention and its log-probability. Returns per row the log-probability of each id given the ids before it
    (B, T) and each step's attention (B, T, ...) (None if the model returns none); a padded row's values past its end
    are meaningless."""
    device = _state_device(state)
    rows = ids.to(device) if isinstance(ids, Tensor) else None  # (B, T): each row its own sequence
    steps = rows.size(1) if rows is not None else len(ids)
    prev = torch.full((batch_size,), bos_id, dtype=torch.long, device=device)
    log_probs, attns = [], []
    for t in range(steps):
        tok = rows[:, t] if rows is not None else torch.full((batch_size,), ids[t], dtype=torch.long, device=device)
        step_log_probs, attn, state = model.step(prev, state)  # (B, V), (B, ...) or None
        log_probs.append(step_log_probs.gather(1, tok[:, None])[:, 0])
        if attn is not None:
            attns.append(attn)
        prev = tok
    if not log_probs:
        return torch.zeros(batch_size, 0, device=device), None
    return torch.stack(log_probs, dim=1), torch.stack(attns, dim=1) if attns else None


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
    *,
    sampling: Sampling | None = None,
    n_best: int = 1,
    no_repeat_ngram: int = 0,
    banned: Sequence[int] = (),
    drop_ended: bool = True,
    row_max_len: Tensor | None = None,
    keys: Tensor | None = None,
    end_step: bool = False,
) -> SearchResult:
    """Greedy search for ``beam_size`` 1 (drawing tokens with ``sampling``), batched beam search above (``n_best``
    hypotheses per sentence); ``no_repeat_ngram`` and ``banned`` (token ids never produced) for all. Sampling draws
    one hypothesis: it takes no beam. ``drop_ended`` False: step every row to the end (for comparison).
    ``row_max_len`` (B,): each sentence's own cap, at most ``max_len``. ``keys`` (B,): each row's key of a seeded
    sampling's draws (:func:`greedy_search`). ``end_step``: ``max_len`` counts the tokens before the end (a user's
    words or tokens), the search one step more, for the end alone (:func:`end_choice`); ``row_max_len`` counts steps.
    """
    if sampling is not None and (beam_size > 1 or n_best > 1):
        raise ValueError(
            "sampling draws one output (a caption, a translation) per input: use it with beam size 1 and n_best 1"
        )
    if beam_size <= 1:
        if n_best > 1:
            raise ValueError(f"n_best {n_best} needs a beam at least as wide (beam_size >= n_best)")
        found = greedy_search(model, state, batch_size, bos_id, eos_id, max_len, pad_id, sampling=sampling,
                              no_repeat_ngram=no_repeat_ngram, banned=banned, drop_ended=drop_ended,
                              row_max_len=row_max_len, keys=keys, end_step=end_step)  # fmt: skip
        return length_normalised(found, length_penalty)
    return beam_search(model, state, batch_size, bos_id, eos_id, max_len, beam_size, length_penalty, pad_id,
                       n_best=n_best, no_repeat_ngram=no_repeat_ngram, banned=banned,
                       drop_ended=drop_ended, row_max_len=row_max_len, end_step=end_step)  # fmt: skip


def length_normalised(result: SearchResult, length_penalty: float) -> SearchResult:
    """A greedy or sampled result's scores divided by length**length_penalty, as a beam's are (its choice does not
    depend on the penalty, its score does: the same caption scored -2.84 at beam 1 and -0.36 at beam 2 with penalty
    1)."""
    if length_penalty:
        result.scores = result.scores / result.lengths.clamp(min=1).to(result.scores.dtype).pow(length_penalty)
    return result


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
        **options: Any,
    ) -> SearchResult:
        """src (B, S), src_lens (B,) -> the search result for the whole batch (options: see :func:`search`)."""
        state = self.encode(src, src_lens)
        B, pad = src.size(0), self.cfg.pad_id
        return search(self, state, B, bos_id, eos_id, max_len, beam_size, length_penalty, pad, **options)
