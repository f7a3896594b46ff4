"""Search at fixed shapes (text_attn.core.fixed_search) against the eager search stepping every row to the end, and
its steps free of host reads (run on the "meta" device, where reading a value raises)."""

import pytest
import torch
from torch import nn

from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder
from text_attn.core.decoding import ban_repeated_ngrams, search
from text_attn.core.fixed_search import ChangingState, _Search, ban_repeated_ngrams_fixed, fixed_search

BOS, EOS, PAD = 1, 2, 0


class RandomGRU(nn.Module):
    """A random recurrent scorer; source b may end only at step ends[b] (then must), or freely when ends[b] < 0.
    ``ends`` is kept one row per source (query row r reads source r // K, as the caption decoder's keys)."""

    one_row_per_source_state = ("ends",)

    def __init__(self, vocab=11, hidden=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, vocab)

    def step(self, tokens, state):
        h = self.cell(self.emb(tokens), state["h"])
        log_probs = torch.log_softmax(self.out(h) * 3.0, -1)  # sharp: captions end at different lengths
        ends, t = state["ends"], state["t"]  # (B,), (N,)
        forced = ends.repeat_interleave(tokens.numel() // ends.numel())  # (N,)
        eos = torch.where(forced == t, 50.0, -50.0)
        log_probs = torch.where((forced >= 0).unsqueeze(1) & (torch.arange(log_probs.size(1)) == EOS), eos[:, None],
                                log_probs)  # fmt: skip
        return torch.log_softmax(log_probs, -1), torch.softmax(h[:, :5], -1), {"h": h, "ends": ends, "t": t + 1}


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
    m = RandomGRU()
    ends = torch.tensor([2, 6, 1, -1, 4, -1])
    for max_len, chunk, lp, banned in [(12, 4, 0.0, ()), (7, 3, 1.0, (3, 5)), (3, 1, 0.5, (PAD,)), (1, 4, 0.0, ())]:
        state = _state(6, ends)
        kw = dict(beam_size=beam, length_penalty=lp, no_repeat_ngram=ngram, banned=banned, n_best=min(beam, 2))
        eager = search(m, state, 6, BOS, EOS, max_len, pad_id=PAD, drop_ended=False, **kw)
        fixed = fixed_search(m, state, 6, BOS, EOS, max_len, pad_id=PAD, chunk=chunk, **kw)
        _same(fixed, eager)
        # and the eager search that drops the ended rows (the default) gives the same captions here
        assert search(m, state, 6, BOS, EOS, max_len, pad_id=PAD, **kw).token_lists() == fixed.token_lists()
    assert fixed.tokens.size(1) == 1


def test_stops_when_every_row_has_ended_and_at_max_len():
    torch.manual_seed(0)
    m = RandomGRU()
    r = fixed_search(m, _state(3, torch.tensor([2, 4, 1])), 3, BOS, EOS, 20, beam_size=2, chunk=4)
    assert r.lengths.tolist() == [3, 5, 2] and r.tokens.size(1) == 5  # steps after the last end changed nothing
    r = fixed_search(m, _state(3, torch.tensor([9, 9, 9])), 3, BOS, EOS, 5, beam_size=2, chunk=4)
    assert r.lengths.tolist() == [5, 5, 5] and r.tokens.size(1) == 5  # cut at max_len, not at the chunk's end


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_the_caption_decoder_searches_the_same(attention):
    torch.manual_seed(1)
    cfg = DecoderConfig(vocab_size=30, feature_dim=12, embed_dim=8, hidden_dim=16, attn_dim=10, attention=attention)
    dec = ShowAttendTellDecoder(cfg).eval()
    feats = torch.randn(4, 9, 12)
    for beam, ngram in [(1, 0), (3, 3), (5, 2)]:
        kw = dict(beam_size=beam, no_repeat_ngram=ngram, banned=(PAD, BOS, 3), n_best=min(beam, 2))
        eager = search(dec, dec.init_state(feats), 4, BOS, EOS, 15, pad_id=PAD, drop_ended=False, **kw)
        fixed = fixed_search(dec, dec.init_state(feats), 4, BOS, EOS, 15, pad_id=PAD, **kw)
        _same(fixed, eager)


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


@pytest.mark.parametrize("beam", [1, 3])
def test_steps_read_nothing_on_the_host(beam):
    # On the meta device a tensor has no values: any host read (.item(), bool(), nonzero, a data-dependent shape)
    # raises. The steps a CUDA graph would capture run there without one, on the decoder's GPU code path (the CPU's
    # fused attention score is for device "cpu" only).
    cfg = DecoderConfig(vocab_size=30, feature_dim=12, embed_dim=8, hidden_dim=16, attn_dim=10)
    dec = ShowAttendTellDecoder(cfg).eval().to("meta")
    B, N = 4, 4 * beam
    state = dec.init_state(torch.empty(B, 9, 12, device="meta"))
    if beam > 1:
        state = {**state, "h": state["h"].repeat_interleave(beam, 0), "c": state["c"].repeat_interleave(beam, 0)}
    like = {"state": state, "attn": torch.empty(N, 9, device="meta"), "scores": torch.empty(N, device="meta")}
    s = _Search(dec, B, beam, 10, EOS, PAD, 3, (PAD, BOS), like)
    s.load({"state": state, "attn": torch.empty(11, N, 9, device="meta"), "scores": torch.empty(N, device="meta"),
            "prev": torch.empty(N, dtype=torch.long, device="meta"), "finished": torch.empty(N, dtype=torch.bool,
            device="meta"), "lengths": torch.empty(N, dtype=torch.long, device="meta"), "t": torch.empty((),
            dtype=torch.long, device="meta"), "tokens": torch.empty(11, N, dtype=torch.long, device="meta"),
            "parents": torch.empty(11, N, dtype=torch.long, device="meta"), "history": torch.empty(N, 11,
            dtype=torch.long, device="meta")})  # fmt: skip
    s.chunk(3)
    with pytest.raises(Exception, match="meta"):
        bool(s.finished.all())  # the check itself: a host read fails here


def test_a_state_that_grows_is_refused():
    class Growing(RandomGRU):
        def step(self, tokens, state):
            lp, attn, new = super().step(tokens, state)
            return lp, attn, {**new, "cache": torch.cat([state["cache"], new["h"][:, :1]], 1)}

    m = Growing()
    with pytest.raises(ChangingState, match="changes shape"):
        fixed_search(m, {**_state(2), "cache": torch.zeros(2, 1)}, 2, BOS, EOS, 6, beam_size=2)
