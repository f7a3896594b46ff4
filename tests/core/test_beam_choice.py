"""Beam search's two-stage choice (each row's K best tokens, then the K best of the K*K candidates) against the
choice over every row's whole distribution it replaced (search_choice.beam_choice_whole): the same beams, scores and
tokens, banned ids and ended rows included; and whole searches, both ways, on a random recurrent model."""

import pytest
import torch

from tests.helpers.step_models import BOS, EOS, PAD, RandomGRU
from text_attn.core.decoding import beam_search
from text_attn.core.search_choice import ban_repeated_ngrams, ban_tokens, beam_choice, beam_choice_whole, row_best


def _step_inputs(B, K, V, seed):
    g = torch.Generator().manual_seed(seed)
    log_probs = torch.log_softmax(torch.randn(B * K, V, generator=g) * 3, -1)  # continuous: no exact ties
    scores = -torch.rand(B * K, generator=g) * 5
    scores.view(B, K)[0, 1:] = float("-inf")  # source 0 at its first step: only beam 0 live
    finished = torch.rand(B * K, generator=g) < 0.3
    lengths = torch.randint(1, 9, (B * K,), generator=g)
    offsets = (torch.arange(B) * K).unsqueeze(1)
    return log_probs, scores, finished, lengths, offsets


@pytest.mark.parametrize("B,K,V", [(3, 4, 50), (2, 5, 3), (4, 1, 20), (1, 6, 6)])
def test_the_two_stage_choice_is_the_whole_vocabularys(B, K, V):
    compared = 0
    for seed in range(5):
        args = _step_inputs(B, K, V, seed)
        fast, whole = beam_choice(*args, K, PAD), beam_choice_whole(*args, K, PAD)
        # a beam of score -inf is no hypothesis (fewer finite candidates than beams): which row or token fills it is
        # an order of exact ties, different by construction; every finite beam must be the same
        real = whole[2].isfinite()
        assert torch.equal(fast[2].isfinite(), real)
        compared += int(real.sum())
        for name, a, b in zip(["rows", "tokens", "scores", "finished", "lengths"], fast, whole, strict=True):
            assert torch.equal(a[real], b[real]), (name, seed, a, b)
    assert compared >= 5 * B * K // 2  # most beams are real ones: the check is not vacuous


def test_an_ended_row_continues_with_pad_alone_at_no_cost():
    log_probs = torch.log_softmax(torch.randn(4, 9), -1)
    scores = torch.tensor([-1.0, -0.5, -2.0, -3.0])
    finished = torch.tensor([False, True, False, False])
    rows, tok, new, fin, lengths = beam_choice(log_probs, scores, finished, torch.full((4,), 3), torch.tensor([[0]]),
                                               4, PAD)  # fmt: skip
    kept = (rows == 1).nonzero().squeeze(1)
    assert kept.numel() == 1  # the ended beam is kept once (its score -0.5 is the best there is), never extended
    assert tok[kept].item() == PAD and new[kept].item() == -0.5 and fin[kept].item() and lengths[kept].item() == 3


def test_row_best_never_offers_a_banned_token_and_keeps_the_order_of_the_rest():
    log_probs = torch.log_softmax(torch.randn(6, 30), -1)
    banned = (0, 1, 7)
    lp, tok = row_best(log_probs, 5, banned)
    want_lp, want_tok = ban_tokens(log_probs, banned).topk(5, dim=-1)
    assert torch.equal(lp, want_lp) and torch.equal(tok, want_tok)
    # fewer tokens left than asked for: -inf for the missing ones, as the banned copy's top-k gives
    lp, tok = row_best(log_probs[:, :4], 3, banned)
    assert torch.isinf(lp[:, 2]).all() and torch.isfinite(lp[:, :2]).all()
    assert not torch.isin(tok[:, :2], torch.tensor(banned)).any()


@pytest.mark.parametrize("n", [1, 2, 3])
def test_row_best_never_offers_a_token_that_repeats_an_ngram(n):
    g = torch.Generator().manual_seed(n)
    log_probs = torch.log_softmax(torch.randn(8, 12, generator=g) * 4, -1)
    history = torch.randint(0, 4, (8, 9), generator=g)  # few distinct tokens: many repeats to ban
    banned = (1,)
    lp, tok = row_best(log_probs, 4, banned, history, n)
    want_lp, want_tok = ban_repeated_ngrams(ban_tokens(log_probs, banned), history, n).topk(4, dim=-1)
    finite = want_lp.isfinite()
    assert torch.equal(lp, want_lp) and torch.equal(tok[finite], want_tok[finite])
    assert not torch.equal(tok, log_probs.topk(4, dim=-1).indices)  # the bans changed some row's best: not vacuous


@pytest.mark.parametrize("K,banned,ngram", [(4, (), 0), (5, (3, 4), 0), (3, (5,), 2), (4, (), 3), (12, (), 0)])
def test_a_whole_search_gives_the_same_hypotheses_both_ways(K, banned, ngram):
    torch.manual_seed(0)
    model = RandomGRU(vocab=11)
    h = torch.randn(7, 16)  # 7 sources of different first states: they end at different steps (the batch shrinks)
    runs = [
        beam_search(
            model,
            {"h": h},
            7,
            BOS,
            EOS,
            12,
            K,
            banned=banned,
            no_repeat_ngram=ngram,
            n_best=2,
            end_step=True,
            whole_vocabulary=whole,
        )
        for whole in (False, True)
    ]
    fast, slow = runs
    assert torch.equal(fast.tokens, slow.tokens) and torch.equal(fast.lengths, slow.lengths)
    assert torch.equal(fast.scores, slow.scores) and torch.equal(fast.log_probs, slow.log_probs)
    assert torch.equal(fast.attention, slow.attention)
    assert fast.nbest == slow.nbest
    assert not torch.isin(fast.tokens, torch.tensor(banned, dtype=torch.long)).any()
