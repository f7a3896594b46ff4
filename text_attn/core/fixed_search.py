"""Greedy and beam search at fixed shapes, whose steps a GPU can replay as one captured CUDA graph.

The eager search (:mod:`text_attn.core.decoding`) drops the sources whose beams have all ended and stops as soon as
every caption has ended: less work on a CPU, but tensor shapes that change and a device -> host read at every step,
and on a GPU each step is a few dozen small kernel launches (the H200 ran ``caption`` launch-bound). Here:

- every row is stepped to the end: a row that ended extends with pad at no cost (beam) or is masked (greedy);
- a step once every caption has ended, or past ``max_len``, changes nothing (its writes are undone by ``where``),
  so the host needs to look at the finished flags only once every ``chunk`` steps;
- n-gram blocking reads a fixed (N, max_len + 1) history, banned tokens a fixed index, the step counter is a
  device tensor: no step reads a value on the host.

The result is the eager search's with ``drop_ended=False`` (every row stepped: the same products of the same shapes):
tokens, lengths, scores and attention, n-best lists included (tests/core/test_fixed_search.py). Sampling is not
offered here: it stays eager.

On CUDA (``capture=True``) one chunk of steps is captured per shape (batch, beam, max_len, the state's shapes and the
options) as a ``torch.cuda.CUDAGraph`` over static buffers and replayed for every batch of that shape; elsewhere the
same steps run eagerly, which is what the CPU tests check (and, on the "meta" device, that no step reads a value on
the host). The captured path has never run on a GPU here: it is off by default (``caption --cuda-graphs``,
docs/speed.md).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.utils._pytree import tree_flatten, tree_unflatten

from text_attn.core.decoding import (
    SearchResult,
    _expand,
    _result,
    _select_state,
    _state_device,
    final_hypotheses,
    length_normalised,
)
from text_attn.core.search_choice import beam_choice, end_choice

CHUNK = 4  # steps between two looks at the finished flags (and captured in one graph): ~5 looks a caption batch
MAX_GRAPHS = 4  # captured shapes kept per model (each holds its own memory pool)


class ChangingState(ValueError):
    """The model's search state does not keep its shapes from step to step (a growing cache): search it eagerly."""


def ban_repeated_ngrams_fixed(log_probs: Tensor, history: Tensor, t: Tensor, n: int) -> Tensor:
    """:func:`text_attn.core.search_choice.ban_repeated_ngrams` on a fixed history: ``history`` (N, W) holds each row's
    tokens in its first ``t`` columns (``t`` a 0-d device tensor; later columns are anything), log_probs (N, V).
    Bans every token that would repeat an n-gram of the first t tokens, reading nothing on the host."""
    N, W = history.shape
    columns = torch.arange(W, device=history.device)  # (W,)
    if n == 1:  # every token already produced
        written = (columns < t).to(log_probs.dtype).expand(N, W)  # (N, W)
        banned = torch.zeros(log_probs.shape, device=log_probs.device).scatter_add_(1, history.clamp(min=0), written)
        return log_probs.masked_fill(banned > 0, float("-inf"))
    if W < n:  # no (n-1)-gram followed by a token fits in the history
        return log_probs
    windows = history.unfold(1, n - 1, 1)[:, :-1]  # (N, W-n+1, n-1): window j = columns j..j+n-2, followed by j+n-1
    following = history[:, n - 1 :]  # (N, W-n+1) the token after each window
    # the last n-1 tokens, columns t-n+1 .. t-1 (clamped: when t < n-1 nothing is banned anyway)
    last = history.index_select(1, (t - (n - 1) + torch.arange(n - 1, device=history.device)).clamp(min=0))
    seen = columns[: W - n + 1] + (n - 1) < t  # (W-n+1,) windows whose following token is written
    hits = (windows == last.unsqueeze(1)).all(dim=-1) & seen & (t >= n - 1)  # (N, W-n+1)
    banned = torch.zeros(log_probs.shape, device=log_probs.device)
    banned.scatter_add_(1, following.clamp(min=0), hits.to(banned.dtype))
    return log_probs.masked_fill(banned > 0, float("-inf"))


class _Search:
    """The buffers of one search shape (N = B*K rows, W = max_len + 1 columns) and its step, which reads and writes
    only them: what a CUDA graph captures."""

    # what a step carries besides the model's state: each a buffer shaped as the search's start value of that name
    CARRIED = ("prev", "scores", "finished", "lengths", "t", "tokens", "parents", "attn", "history")

    def __init__(self, model: Any, B: int, K: int, max_len: int, eos_id: int, pad_id: int, ngram: int,
                 banned: Sequence[int], start: dict[str, Any], end_at: int | None = None) -> None:  # fmt: skip
        # max_len: the steps; end_at: the end step's t (the search's end_step: the end alone or cut off), or None
        self.model, self.B, self.K, self.max_len, self.end_at = model, B, K, max_len, end_at
        self.eos_id, self.pad_id, self.ngram = eos_id, pad_id, ngram
        device = start["scores"].device
        self.banned = torch.tensor(sorted(set(banned)), dtype=torch.long, device=device) if banned else None
        self.rows0 = torch.arange(B * K, device=device)  # (N,) each row its own parent (greedy search)
        self.offsets = (torch.arange(B, device=device) * K).unsqueeze(1)  # (B, 1) first row of each source
        # the static buffers, filled by load() for each batch
        leaves, self.spec = tree_flatten(start["state"])
        if not all(isinstance(x, Tensor) for x in leaves):
            raise ChangingState("the search state holds values that are not tensors (a graph would bake them in)")
        self.layout = [(x.shape, x.dtype) for x in leaves]  # not the tensors: a kept search holds no batch's state
        self.state_leaves = [torch.empty_like(x) for x in leaves]
        # prev, scores, finished, lengths (N,); t () the steps taken (the next step's column); tokens and parents
        # (W, N) each step's, W = max_len + 1; attn (W, N, ...) or None; history (N, W) for n-gram blocking only
        for name in self.CARRIED:
            value = None if name == "history" and not ngram else start[name]
            setattr(self, name, None if value is None else torch.empty_like(value))
        self.graph: Any = None

    def load(self, values: dict[str, Any]) -> None:
        """Copy one batch's start (after its first step) into the static buffers."""
        leaves, spec = tree_flatten(values["state"])
        if spec != self.spec or [(x.shape, x.dtype) for x in leaves] != self.layout:
            raise ChangingState("the search state's layout differs from the captured one")
        for buf, x in zip(self.state_leaves, leaves, strict=True):
            buf.copy_(x)
        for name in self.CARRIED:
            if getattr(self, name) is not None:
                getattr(self, name).copy_(values[name])

    def state(self) -> Any:
        return tree_unflatten(self.state_leaves, self.spec)

    def step(self) -> None:
        """One search step on the buffers, in place; nothing read on the host. Once every row has ended (or t has
        reached max_len) the step changes nothing but its own column t (written again by the next real step)."""
        t, finished = self.t, self.finished
        done = finished.all() | (t >= self.max_len)  # () bool, on the device
        state = self.state()
        log_probs, attn, new_state = self.model.step(self.prev, state)  # (N, V), (N, ...)
        tok, rows, scores, lengths, fin, attn = self.update(log_probs, attn)
        new_state = _select_state(self.model, new_state, rows) if self.K > 1 else new_state
        leaves, spec = tree_flatten(new_state)
        if spec != self.spec:
            raise ChangingState("the model's search state changes its layout from step to step")
        for buf, old, new in zip(self.state_leaves, tree_flatten(state)[0], leaves, strict=True):
            if new is old:  # a constant of the source (its regions and their keys)
                continue
            if new.shape != buf.shape:
                raise ChangingState(f"the model's search state changes shape from step to step: {tuple(buf.shape)} "
                                    f"-> {tuple(new.shape)} (a growing cache)")  # fmt: skip
            buf.copy_(torch.where(_expand(done, new), buf, new))
        self.write(done, tok, rows, scores, lengths, fin, attn)

    def update(self, log_probs: Tensor, attn: Tensor | None):
        """The search's choice from this step's (N, V) log-probabilities: (token, parent row, score, length,
        finished, attention) of each new row, as the eager search computes them."""
        finished, t, K = self.finished, self.t, self.K
        if self.banned is not None:
            log_probs = log_probs.index_fill(1, self.banned, float("-inf"))
        if self.ngram:
            log_probs = ban_repeated_ngrams_fixed(log_probs, self.history, t, self.ngram)
        best, choice = log_probs.max(dim=-1)  # (N,)
        if K == 1:  # greedy: the arg-max; an ended row's token is pad and adds nothing
            tok = choice.masked_fill(finished, self.pad_id)
            scores = self.scores + best.masked_fill(finished, 0.0)
            lengths = self.lengths + (~finished).long()
            rows, fin = self.rows0, finished
        else:  # the eager beam search's choice (an ended beam continues with pad, at no cost)
            rows, tok, scores, fin, lengths = beam_choice(log_probs, self.scores, finished, self.lengths, self.offsets,
                                                          K, self.pad_id)  # fmt: skip
        if self.end_at is not None:  # at the end step, each row ends or is cut off in its place, as the eager one
            at_end = t == self.end_at  # () bool, on the device
            end_tok, added, stepped = end_choice(choice, best, finished, self.eos_id, self.pad_id)
            rows, tok = torch.where(at_end, self.rows0, rows), torch.where(at_end, end_tok, tok)
            scores = torch.where(at_end, self.scores + added, scores)
            lengths = torch.where(at_end, self.lengths + stepped.long(), lengths)
            fin = torch.where(at_end, ~stepped, fin)  # for the attention's mask; every row has ended after it
        if attn is not None:
            attn = attn if K == 1 else attn[rows]
            attn = attn.masked_fill(_expand(fin, attn), 0.0)
        return tok, rows, scores, lengths, fin | (tok == self.eos_id), attn

    def write(self, done: Tensor, tok: Tensor, rows: Tensor, scores: Tensor, lengths: Tensor, fin: Tensor,
              attn: Tensor | None) -> None:  # fmt: skip
        """Record step t's choice in column t and carry it (unless ``done``: then only column t is written)."""
        column = self.t.view(1)
        self.tokens.index_copy_(0, column, tok.unsqueeze(0))
        self.parents.index_copy_(0, column, rows.unsqueeze(0))
        if self.attn is not None and attn is not None:
            self.attn.index_copy_(0, column, attn.unsqueeze(0))
        if self.history is not None:
            history = self.history[rows].index_copy(1, column, tok.unsqueeze(1))
            self.history.copy_(torch.where(done, self.history, history))
        self.prev.copy_(torch.where(done, self.prev, tok))
        self.scores.copy_(torch.where(done, self.scores, scores))
        self.lengths.copy_(torch.where(done, self.lengths, lengths))
        self.finished.copy_(torch.where(done, self.finished, fin))
        self.t.add_((~done).long())

    def chunk(self, steps: int) -> None:
        for _ in range(steps):
            self.step()

    def capture(self, steps: int) -> None:
        """Capture ``steps`` steps as one CUDA graph over the buffers (after a warm-up whose effect is undone)."""
        buffers = [b for b in self._buffers() if b is not None]
        saved = [b.clone() for b in buffers]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # lazy initialisations (cuBLAS handles, workspaces) happen outside the capture
            self.chunk(steps)
        torch.cuda.current_stream().wait_stream(side)
        for b, s in zip(buffers, saved, strict=True):
            b.copy_(s)
        graph = torch.cuda.CUDAGraph()
        # thread_local: the loader's pin-memory thread may call into CUDA while this thread captures
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self.chunk(steps)
        self.graph = graph

    def _buffers(self) -> list[Tensor | None]:
        return [*self.state_leaves, *(getattr(self, name) for name in self.CARRIED)]


@torch.no_grad()
def fixed_search(
    model: Any,
    state: Any,
    batch_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int,
    beam_size: int = 1,
    length_penalty: float = 0.0,
    pad_id: int = 0,
    *,
    n_best: int = 1,
    no_repeat_ngram: int = 0,
    banned: Sequence[int] = (),
    capture: bool = False,
    chunk: int = CHUNK,
    end_step: bool = False,
) -> SearchResult:
    """Greedy (``beam_size`` 1) or beam search at fixed shapes: the same result as
    ``text_attn.core.decoding.search(..., drop_ended=False)`` (``end_step`` as there: ``max_len`` tokens, then the
    end alone). ``capture``: on CUDA, run each chunk of steps as a captured CUDA graph (kept per shape on the model);
    elsewhere it changes nothing. The model's state must keep its shapes from step to step (:class:`ChangingState`
    otherwise)."""
    B, K = batch_size, max(beam_size, 1)
    if not 1 <= n_best <= K:
        raise ValueError(f"n_best must be between 1 and the beam size {K}, got {n_best}")
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")
    device = _state_device(state)
    end_at = max_len if end_step else None  # the end step's t
    max_len += end_step  # the steps from here on
    N, W = B * K, max_len + 1
    # The first step runs eagerly once per source, as in the eager search (beam: then expanded to the K beams).
    log_probs, attn, state = model.step(torch.full((B,), bos_id, dtype=torch.long, device=device), state)
    scores = torch.zeros(B, K, device=device)
    if K > 1:
        expand = torch.arange(B, device=device).repeat_interleave(K)  # (N,) row b*K + k is beam k of source b
        log_probs, attn = log_probs[expand], None if attn is None else attn[expand]
        state = _select_state(model, state, expand, within_sources=False)
        scores[:, 1:] = float("-inf")  # only beam 0 is live: the K copies must not fill the beam with duplicates
    start = {
        "state": state, "scores": scores.view(-1),
        "attn": None if attn is None else attn.new_zeros(W, *attn.shape),
        "prev": torch.full((N,), bos_id, dtype=torch.long, device=device),
        "finished": torch.zeros(N, dtype=torch.bool, device=device),
        "lengths": torch.zeros(N, dtype=torch.long, device=device),
        "t": torch.zeros((), dtype=torch.long, device=device),
        "tokens": torch.full((W, N), pad_id, dtype=torch.long, device=device),
        "parents": torch.arange(N, device=device).expand(W, N),
        "history": torch.full((N, W), -1, dtype=torch.long, device=device),
    }  # fmt: skip
    use_graph = capture and device.type == "cuda"
    search = _searcher(model, use_graph, B, K, max_len, eos_id, pad_id, no_repeat_ngram, banned, chunk, start, end_at)
    search.load(start)
    # Step 0 from the first step's log-probabilities (eager). Its parents are beam 0 of each source, whose K rows of
    # the state are equal copies: the state needs no reordering after it.
    search.write(torch.zeros((), dtype=torch.bool, device=device), *search.update(log_probs, attn))
    if use_graph and search.graph is None:  # captured on real values: a warm-up on garbage could index out of range
        search.capture(chunk)
    # then chunks of steps until every row has ended
    for _ in range(-(-max_len // chunk)):
        if search.graph is not None:
            search.graph.replay()
        else:
            search.chunk(chunk)
        if bool(search.finished.all()) or int(search.t) >= max_len:  # the one host read of a chunk
            break
    T = int(search.t)
    tokens, attns = search.tokens[:T].clone(), [] if search.attn is None else search.attn[:T].clone().unbind(0)
    scores, lengths = search.scores.clone(), search.lengths.clone()
    if K == 1:
        return length_normalised(_result(list(tokens.unbind(0)), lengths, scores, list(attns), eos_id), length_penalty)
    parents = search.parents[:T].clone()
    return final_hypotheses(parents.unbind(0), tokens.unbind(0), attns, scores, lengths, length_penalty, B, K,
                            n_best, eos_id)  # fmt: skip


def _searcher(model: Any, use_graph: bool, B: int, K: int, max_len: int, eos_id: int, pad_id: int, ngram: int,
              banned: Sequence[int], chunk: int, start: dict[str, Any],
              end_at: int | None = None) -> _Search:  # fmt: skip
    """A new :class:`_Search`, or with ``use_graph`` the one captured for this shape (captured on first use)."""
    make: Callable[[], _Search] = lambda: _Search(model, B, K, max_len, eos_id, pad_id, ngram, banned, start, end_at)  # noqa: E731
    if not use_graph:
        return make()
    leaves = tree_flatten(start["state"])[0]
    key = (B, K, max_len, end_at, eos_id, pad_id, ngram, tuple(sorted(set(banned))), chunk, model.training,
           getattr(model, "search_mode", lambda: None)(), start["scores"].device, start["scores"].dtype,
           None if start["attn"] is None else tuple(start["attn"].shape),
           tuple((tuple(x.shape), x.dtype) for x in leaves))  # fmt: skip
    cache: OrderedDict = model.__dict__.setdefault("_search_graphs", OrderedDict())
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    search = make()  # captured by the caller once it holds a batch's start
    cache[key] = search
    while len(cache) > MAX_GRAPHS:
        cache.popitem(last=False)
    return search
