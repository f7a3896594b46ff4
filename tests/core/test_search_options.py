"""What users of generate() expect, for every family: n-gram blocking, seeded sampling (temperature, top-k, top-p),
n-best lists with scores. (The caption / translate flags that expose them: tests/cli/test_search_flags.py.)"""

from __future__ import annotations

import pytest
import torch
from helpers.step_models import RandomGRU

from text_attn.core.decoding import Sampling, ban_repeated_ngrams, beam_search, greedy_search, search, select_rows


class Table:
    """A step model whose next-token log-probabilities depend only on the previous token: table (V, V)."""

    def __init__(self, table: torch.Tensor):
        self.table = table.log_softmax(dim=-1)

    def step(self, tokens, state):
        return self.table[tokens], None, state


def _loop_table(V: int = 6) -> torch.Tensor:
    """From any token the likeliest next one is 4, then 5, then back to 4: greedy says 4 5 4 5 4 5 ..."""
    t = torch.zeros(V, V)
    t[:, 4] = 3.0
    t[4, 5], t[4, 4] = 3.0, 0.0
    t[5, 4] = 3.0
    t[:, 2] = -10.0  # eos: so unlikely that every hypothesis runs to max_len
    return t


def test_banned_ngrams_by_hand():
    lp = torch.zeros(1, 6)
    hist = torch.tensor([[1, 2, 3, 1, 2]])
    assert torch.isinf(ban_repeated_ngrams(lp, hist, 3)[0]).nonzero().flatten().tolist() == [3]  # "1 2" -> 3
    assert torch.isinf(ban_repeated_ngrams(lp, hist, 2)[0]).nonzero().flatten().tolist() == [3]  # "2" -> 3
    assert torch.isinf(ban_repeated_ngrams(lp, hist, 1)[0]).nonzero().flatten().tolist() == [1, 2, 3]
    two = torch.tensor([[4, 5, 4, 1, 4]])  # "4" was followed by 5 and by 1: both banned
    assert torch.isinf(ban_repeated_ngrams(lp, two, 2)[0]).nonzero().flatten().tolist() == [1, 5]
    assert torch.equal(ban_repeated_ngrams(lp, hist[:, :1], 3), lp)  # too short to repeat anything


@pytest.mark.parametrize("beam", [1, 3])
def test_no_repeat_ngram_in_greedy_and_beam(beam):
    model = Table(_loop_table())
    plain = search(model, torch.zeros(2, 1), 2, 1, 2, 8, beam_size=beam)
    assert plain.tokens[0, :4].tolist() == [4, 5, 4, 5]  # the loop
    blocked = search(model, torch.zeros(2, 1), 2, 1, 2, 8, beam_size=beam, no_repeat_ngram=2)
    for ids in blocked.token_lists():
        pairs = list(zip(ids, ids[1:], strict=False))
        assert len(pairs) == len(set(pairs)), ids  # no bigram twice


class OwnBan:
    """A model that bans its own repeated n-grams from the prefix it keeps in its state (reordered with the beams by
    its own select_state): what the search's no_repeat_ngram must give."""

    def __init__(self, model, n: int):
        self.model, self.n = model, n

    def step(self, tokens, state):
        history = torch.cat([state["history"], tokens.unsqueeze(1)], 1) if state["started"] else state["history"]
        log_probs, attn, inner = self.model.step(tokens, state["inner"])
        banned = ban_repeated_ngrams(log_probs, history, self.n)
        return banned, attn, {"inner": inner, "history": history, "started": True}

    def select_state(self, state, index):
        return {
            "inner": select_rows(state["inner"], index),
            "history": state["history"][index],
            "started": state["started"],
        }


@pytest.mark.parametrize("beam", [1, 4])
def test_no_repeat_ngram_bans_what_each_hypothesis_itself_wrote(beam):
    # beams reorder at every step: a hypothesis's history must follow its own parents, not its row's previous beam
    torch.manual_seed(5)
    model = RandomGRU(vocab=6)
    model.out.bias.data[2] = -6.0  # eos rare: long hypotheses, many repeats to ban
    h0 = torch.randn(4, 16)
    searched = search(model, {"h": h0}, 4, 1, 2, 12, beam_size=beam, no_repeat_ngram=2)
    own = {"inner": {"h": h0}, "history": torch.zeros(4, 0, dtype=torch.long), "started": False}
    reference = search(OwnBan(model, 2), own, 4, 1, 2, 12, beam_size=beam)
    assert searched.token_lists() == reference.token_lists()
    torch.testing.assert_close(searched.scores, reference.scores)
    for ids in searched.token_lists():
        pairs = list(zip(ids, ids[1:], strict=False))
        assert len(pairs) == len(set(pairs)) and len(ids) > 6, ids


def test_seeded_sampling_repeats_and_its_limits_reduce_to_greedy():
    torch.manual_seed(0)
    model = Table(torch.randn(12, 12))
    state = torch.zeros(50, 1)
    a = greedy_search(model, state, 50, 1, 2, 10, sampling=Sampling(seed=7))
    b = greedy_search(model, state, 50, 1, 2, 10, sampling=Sampling(seed=7))
    c = greedy_search(model, state, 50, 1, 2, 10, sampling=Sampling(seed=8))
    assert torch.equal(a.tokens, b.tokens) and not torch.equal(a.tokens, c.tokens)
    # one Sampling continues its stream over successive searches (a collection's batches): no batch repeats another
    run = Sampling(seed=7)
    first, second = (greedy_search(model, state, 50, 1, 2, 10, sampling=run) for _ in range(2))
    assert torch.equal(first.tokens, a.tokens) and not torch.equal(second.tokens, a.tokens)
    greedy = greedy_search(model, state, 50, 1, 2, 10)
    for narrow in (Sampling(top_k=1, seed=3), Sampling(top_p=1e-6, seed=3), Sampling(temperature=1e-4, seed=3)):
        assert torch.equal(greedy_search(model, state, 50, 1, 2, 10, sampling=narrow).tokens, greedy.tokens)
    # the score is the model's log-probability of what was drawn
    lp = model.table
    first = a.tokens[:, 0]
    torch.testing.assert_close(a.scores[a.lengths == 1], lp[1, first][a.lengths == 1])


def test_sampling_follows_the_model_distribution_within_top_k_and_top_p():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    lp = probs.log().expand(20000, 4)
    gen = torch.Generator().manual_seed(0)
    freq = torch.bincount(Sampling().draw(lp, gen), minlength=4).float() / 20000
    torch.testing.assert_close(freq, probs, atol=0.015, rtol=0)
    top2 = torch.bincount(Sampling(top_k=2).draw(lp, gen), minlength=4).float() / 20000
    torch.testing.assert_close(top2, torch.tensor([0.625, 0.375, 0, 0]), atol=0.015, rtol=0)
    nucleus = torch.bincount(Sampling(top_p=0.7).draw(lp, gen), minlength=4).float() / 20000  # 0.5 + 0.3 >= 0.7
    torch.testing.assert_close(nucleus, torch.tensor([0.625, 0.375, 0, 0]), atol=0.015, rtol=0)
    with pytest.raises(ValueError):
        Sampling(temperature=0)


def test_n_best_lists_the_final_beams_best_first():
    torch.manual_seed(1)
    model = Table(torch.randn(10, 10))
    res = beam_search(model, torch.zeros(3, 1), 3, 1, 2, 6, beam_size=4, n_best=3)
    assert len(res.nbest) == 3 and all(len(alts) == 3 for alts in res.nbest)
    for b, alts in enumerate(res.nbest):
        assert alts[0][0] == res.token_lists()[b] and alts[0][1] == pytest.approx(float(res.scores[b]))
        scores = [s for _, s in alts]
        assert scores == sorted(scores, reverse=True) and len({tuple(i) for i, _ in alts}) == 3
    # each alternative's score is its own log-probability (penalty 0): its ids, then eos unless it ran to max_len
    lp = model.table
    for alts in res.nbest:
        for ids, score in alts:
            path = [1, *ids] + ([2] if len(ids) < 6 else [])
            assert score == pytest.approx(sum(float(lp[a, b]) for a, b in zip(path, path[1:], strict=False)), abs=1e-5)
    with pytest.raises(ValueError, match="n_best"):
        beam_search(model, torch.zeros(3, 1), 3, 1, 2, 6, beam_size=2, n_best=3)
    with pytest.raises(ValueError, match="sampling"):
        search(model, torch.zeros(3, 1), 3, 1, 2, 6, beam_size=2, sampling=Sampling())
