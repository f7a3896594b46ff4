"""Search at fixed shapes (text_attn.core.fixed_search) against the eager search stepping every row to the end. The
caption decoder's search and its steps free of host reads: tests/captioning/test_caption_cuda_graphs.py."""

import pytest
import torch
from helpers.step_models import RandomGRU

from text_attn.core.decoding import ban_repeated_ngrams, search
from text_attn.core.fixed_search import ChangingState, ban_repeated_ngrams_fixed, fixed_search

BOS, EOS, PAD = 1, 2, 0


class EndsAt(RandomGRU):
    """RandomGRU whose source b may end only at step ends[b] (then must), or freely when ends[b] < 0. ``ends`` is kept
    one row per source (query row r reads source r // K, as the caption decoder's keys); ``t`` (N,) counts the steps."""

    one_row_per_source_state = ("ends",)

    def step(self, tokens, state):
        log_probs, attn, new = super().step(tokens, state)
        ends, t = state["ends"], state["t"]  # (B,), (N,)
        forced = ends.repeat_interleave(tokens.numel() // ends.numel())  # (N,)
        eos = torch.where(forced == t, 50.0, -50.0)
        log_probs = torch.where((forced >= 0).unsqueeze(1) & (torch.arange(log_probs.size(1)) == EOS), eos[:, None],
                                log_probs)  # fmt: skip
        return torch.log_softmax(log_probs, -1), attn, {**new, "ends": ends, "t": t + 1}


def _state(B, ends=None):
    return {"h": torch.randn(B, 16), "ends": torch.full((B,), -1) if ends is None else ends,
            "t": torch.zeros(B, dtype=torch.long)}  # fmt: skip


def _same(a, b):
    assert torch.equal(a.tokens, b.tokens), (a.tokens, b.tokens)
    assert torch.equal(a.lengths, b.lengths)
    torch.testing.assert_close(a.scores, b.scores, rtol=0, atol=0)
    torch.testing.assert_close(a.attention, b.attention, rtol=0, atol=0)
    assert a.nbest == b.nbest


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("ngram", [0, 1, 2, 3])
def test_equals_the_eager_search_stepping_every_row(beam, ngram):
    torch.manual_seed(beam * 10 + ngram)
    m = EndsAt()
    ends = torch.tensor([2, 6, 1, -1, 4, -1])
    # end_step: max_len tokens and the end (caption's and translate's --max-len), its last step at fixed shapes too
    for max_len, chunk, lp, banned, end in [(12, 4, 0.0, (), False), (7, 3, 1.0, (3, 5), True),
                                            (3, 1, 0.5, (PAD,), True), (1, 4, 0.0, (), False)]:  # fmt: skip
        state = _state(6, ends)
        kw = dict(beam_size=beam, length_penalty=lp, no_repeat_ngram=ngram, banned=banned, n_best=min(beam, 2),
                  end_step=end)  # fmt: skip
        eager = search(m, state, 6, BOS, EOS, max_len, pad_id=PAD, drop_ended=False, **kw)
        fixed = fixed_search(m, state, 6, BOS, EOS, max_len, pad_id=PAD, chunk=chunk, **kw)
        _same(fixed, eager)
        # and the eager search that drops the ended rows (the default) gives the same captions here
        assert search(m, state, 6, BOS, EOS, max_len, pad_id=PAD, **kw).token_lists() == fixed.token_lists()
    assert fixed.tokens.size(1) == 1


def test_stops_when_every_row_has_ended_and_at_max_len():
    torch.manual_seed(0)
    m = EndsAt()
    r = fixed_search(m, _state(3, torch.tensor([2, 4, 1])), 3, BOS, EOS, 20, beam_size=2, chunk=4)
    assert r.lengths.tolist() == [3, 5, 2] and r.tokens.size(1) == 5  # steps after the last end changed nothing
    r = fixed_search(m, _state(3, torch.tensor([9, 9, 9])), 3, BOS, EOS, 5, beam_size=2, chunk=4)
    assert r.lengths.tolist() == [5, 5, 5] and r.tokens.size(1) == 5  # cut at max_len, not at the chunk's end


def test_history_bans_as_the_eager_one():
    torch.manual_seed(2)
    for n in (1, 2, 3, 4):
        for t in range(0, 9):
            hist = torch.randint(0, 4, (5, t))  # few tokens: many repeats
            lp = torch.randn(5, 6)
            fixed = torch.full((5, 10), -1)
            fixed[:, :t] = hist
            fixed[:, t:] = torch.randint(0, 6, (5, 10 - t)) if t % 2 else -1  # later columns hold anything
            want = ban_repeated_ngrams(lp, hist, n)
            got = ban_repeated_ngrams_fixed(lp, fixed, torch.tensor(t), n)
            assert torch.equal(got, want), (n, t)


def test_a_state_that_grows_is_refused():
    class Growing(EndsAt):
        def step(self, tokens, state):
            lp, attn, new = super().step(tokens, state)
            return lp, attn, {**new, "cache": torch.cat([state["cache"], new["h"][:, :1]], 1)}

    m = Growing()
    with pytest.raises(ChangingState, match="changes shape"):
        fixed_search(m, {**_state(2), "cache": torch.zeros(2, 1)}, 2, BOS, EOS, 6, beam_size=2)
