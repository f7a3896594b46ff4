"""What users of generate() expect, for every family: n-gram blocking, seeded sampling (temperature, top-k, top-p),
n-best lists with scores. (The caption / translate flags that expose them: tests/cli/test_search_flags.py.)"""

from __future__ import annotations

import pytest
import torch
from helpers.step_models import RandomGRU

from text_attn.core.decoding import (
    Sampling,
    _mix,
    _signed,
    ban_repeated_ngrams,
    beam_search,
    copy_keys,
    counter_uniform,
    greedy_search,
    search,
    select_rows,
    text_key,
)


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
    # a Sampling carries no stream from one search to the next: a row's draws are its key's (by default its position)
    run = Sampling(seed=7)
    first, second = (greedy_search(model, state, 50, 1, 2, 10, sampling=run) for _ in range(2))
    assert torch.equal(first.tokens, a.tokens) and torch.equal(second.tokens, a.tokens)
    other_keys = greedy_search(model, state, 50, 1, 2, 10, sampling=run, keys=torch.arange(50, 100))
    assert not torch.equal(other_keys.tokens, a.tokens)
    greedy = greedy_search(model, state, 50, 1, 2, 10)
    for narrow in (Sampling(top_k=1, seed=3), Sampling(top_p=1e-6, seed=3), Sampling(temperature=1e-4, seed=3)):
        assert torch.equal(greedy_search(model, state, 50, 1, 2, 10, sampling=narrow).tokens, greedy.tokens)
    # the score is the model's log-probability of what was drawn
    lp = model.table
    first = a.tokens[:, 0]
    torch.testing.assert_close(a.scores[a.lengths == 1], lp[1, first][a.lengths == 1])


def test_counter_uniform_is_a_function_of_seed_key_and_step_in_0_1_and_uniform():
    # the hash is splitmix64's finaliser on int64 (wrapping products, masked shifts): its first output from state 0
    assert _mix(torch.tensor([_signed(0x9E3779B97F4A7C15)])).item() == _signed(0xE220A8397B1DCDAF)
    n = 100_000
    keys = torch.arange(n) * 7919 - n  # negative keys and keys of all sizes are keys too
    u = counter_uniform(5, keys, 3)  # (n,) float64
    assert u.dtype == torch.float64 and float(u.min()) >= 0 and float(u.max()) < 1
    assert torch.equal(u, counter_uniform(5, keys, 3))  # deterministic
    assert torch.equal(u[1000:2000], counter_uniform(5, keys[1000:2000], 3))  # a row's draw is its own, alone
    for other in (counter_uniform(5, keys + 1, 3), counter_uniform(5, keys, 4), counter_uniform(6, keys, 3)):
        assert int((other == u).sum()) == 0  # 53-bit draws: a collision among 100k pairs has odds ~1e-11
    # uniform: the mean within 5 standard errors (sd 1/sqrt(12 n) = 0.00091), each of 20 bins' counts within 5 of
    # its binomial standard deviations (sqrt(n / 20 * 19 / 20) = 69) of n / 20
    assert abs(float(u.mean()) - 0.5) < 5 / (12 * n) ** 0.5
    counts = torch.histc(u, bins=20, min=0, max=1)
    assert float((counts - n / 20).abs().max()) < 5 * (n / 20 * 19 / 20) ** 0.5
    # in the cdf's dtype, from as many of the hash's bits as its significand holds: below 1, never rounded up to it
    # (a float64 draw in [1 - 2**-12, 1) rounds to float16's 1.0; about 24 of these 100k would)
    single, half = counter_uniform(5, keys, 3, torch.float32), counter_uniform(5, keys, 3, torch.float16)
    assert single.dtype == torch.float32 and float(single.max()) < 1
    assert float(half.max()) == 1 - 2**-11  # the largest float16 below 1 is reached, 1 never
    torch.testing.assert_close(single.double(), u, atol=2**-24, rtol=0)  # the same draw, fewer bits
    # a photo's name -> a stable 63-bit key (not Python's per-process salted hash): pinned, since a --resume of an
    # older run's file draws its remaining photos with it
    names = [text_key(f"photos/{i}.jpg") for i in range(1000)]
    assert len(set(names)) == 1000 and all(0 <= k < 2**63 for k in names)
    assert text_key("photos/0.jpg") == 1842128486890560052


def test_seeded_sampling_with_keys_draws_each_row_as_alone_in_any_batch_or_order():
    torch.manual_seed(0)
    model = Table(torch.randn(12, 12) * 0.3)  # flat: every row has many likely next tokens
    keys = torch.tensor([11, 3, 99, 7, 2**62, -5, 0, 12345])
    run = Sampling(seed=5, temperature=1.5)

    def drawn(rows, **options):  # key -> its token list
        found = greedy_search(model, torch.zeros(len(rows), 1), len(rows), 1, 2, 12, sampling=run, keys=keys[rows],
                              **options)  # fmt: skip
        return dict(zip(keys[rows].tolist(), found.token_lists(), strict=True))

    batch = drawn(torch.arange(8))
    assert len({tuple(ids) for ids in batch.values()}) == 8  # the rows draw apart
    assert drawn(torch.arange(8).flip(0)) == batch  # in another order
    assert drawn(torch.arange(8), drop_ended=False) == batch  # ended rows stepped or dropped
    for r in range(8):  # alone, and in a batch of three
        assert drawn(torch.tensor([r])) == {keys[r].item(): batch[keys[r].item()]}
        three = torch.tensor([r, (r + 3) % 8, (r + 5) % 8])
        assert drawn(three) == {k: batch[k] for k in keys[three].tolist()}
    # n copies of one input: each copy its own draws, the same wherever the input sits
    copies = copy_keys(keys[:2], 3)  # (6,)
    assert copies.shape == (6,) and len(set(copies.tolist())) == 6
    assert torch.equal(copy_keys(keys[1:2], 3), copies[3:])


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
    # NaN passed "temperature <= 0" and drew "wir wir wir ..." (the CLI refused it; Python did not)
    for bad in ({"temperature": float("nan")}, {"temperature": float("inf")}, {"top_p": float("nan")},
                {"top_k": 2.5}, {"top_k": True}, {"temperature": "2"}):  # fmt: skip
        with pytest.raises(ValueError, match="sampling needs a finite temperature"):
            Sampling(**bad, seed=1)


def test_n_best_lists_the_final_beams_best_first():
    torch.manual_seed(1)
    model = Table(torch.randn(10, 10))
    res = beam_search(model, torch.zeros(3, 1), 3, 1, 2, 6, beam_size=4, n_best=3)
    assert len(res.nbest) == 3 and all(len(alts) == 3 for alts in res.nbest)
    for b, alts in enumerate(res.nbest):
        assert alts[0][0] == res.token_lists()[b] and alts[0][1] == pytest.approx(float(res.scores[b]))
        scores = [s for _, s, _ in alts]
        assert scores == sorted(scores, reverse=True) and len({tuple(i) for i, _, _ in alts}) == 3
    # each alternative's score is its own log-probability (penalty 0): its ids, then eos unless it ran to max_len
    lp = model.table
    for alts in res.nbest:
        for ids, score, ended in alts:
            assert ended == (len(ids) < 6)  # each says whether it ended or max_len cut it off
            path = [1, *ids] + ([2] if ended else [])
            assert score == pytest.approx(sum(float(lp[a, b]) for a, b in zip(path, path[1:], strict=False)), abs=1e-5)
    with pytest.raises(ValueError, match="n_best"):
        beam_search(model, torch.zeros(3, 1), 3, 1, 2, 6, beam_size=2, n_best=3)
    with pytest.raises(ValueError, match="sampling"):
        search(model, torch.zeros(3, 1), 3, 1, 2, 6, beam_size=2, sampling=Sampling())
