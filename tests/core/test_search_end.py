"""Where a search stops: ``end_step`` (a max_len that counts words or tokens, the end not counted, as caption's and
translate's --max-len say) and n-best lists that hold only hypotheses the search found, each saying whether it ended.
(The commands that expose them: tests/cli/test_search_ends.py.)"""

import math

import pytest
import torch
from helpers.step_models import RandomGRU

from text_attn.core.decoding import Sampling, beam_search, greedy_search, search
from text_attn.core.fixed_search import fixed_search

BOS, EOS, PAD = 1, 2, 0


class Chain:
    """bos -> 3 -> 4 -> eos, each at p = 0.9 (the rest spread over the other tokens): an output of exactly two tokens.
    Its state is a fixed (B, 1) tensor, so the fixed-shape search takes it too."""

    def __init__(self, V: int = 6):
        table = torch.full((V, V), 0.1 / (V - 1))
        for prev, nxt in ((BOS, 3), (3, 4), (4, EOS), (EOS, EOS), (5, EOS), (PAD, EOS)):
            table[prev, nxt] = 0.9
        self.table = table.log()

    def step(self, tokens, state):
        return self.table[tokens], None, state


SEARCHES = {
    "greedy": lambda m, **kw: greedy_search(m, torch.zeros(2, 1), 2, BOS, EOS, pad_id=PAD, **kw),
    "beam": lambda m, **kw: beam_search(m, torch.zeros(2, 1), 2, BOS, EOS, beam_size=3, pad_id=PAD, **kw),
    "fixed greedy": lambda m, **kw: fixed_search(m, torch.zeros(2, 1), 2, BOS, EOS, pad_id=PAD, **kw),
    "fixed beam": lambda m, **kw: fixed_search(m, torch.zeros(2, 1), 2, BOS, EOS, beam_size=3, pad_id=PAD, **kw),
}


@pytest.mark.parametrize("name", SEARCHES)
def test_an_output_of_exactly_max_len_tokens_ends_with_the_end_step(name):
    m, run = Chain(), SEARCHES[name]
    cut = run(m, max_len=2)  # max_len counting steps, the end among them: two tokens and no room to end
    assert cut.token_lists() == [[3, 4]] * 2 and cut.ended().tolist() == [False, False]
    done = run(m, max_len=2, end_step=True)  # two tokens, then the end
    assert done.token_lists() == [[3, 4]] * 2 and done.ended().tolist() == [True, True]
    assert done.lengths.tolist() == [3, 3]
    torch.testing.assert_close(done.scores, torch.full((2,), 3 * math.log(0.9)))
    short = run(m, max_len=1, end_step=True)  # one token, then 4 is likelier than the end: cut off after one token
    assert short.token_lists() == [[3]] * 2 and short.ended().tolist() == [False, False]
    torch.testing.assert_close(short.scores, torch.full((2,), math.log(0.9)))  # nothing added for the cut


@pytest.mark.parametrize("sampled", [False, True])
def test_the_end_step_ends_a_row_or_cuts_it_as_a_search_without_it(sampled):
    """Every row with end_step is the row without it (cut off at max_len, the same score), or that row and its end
    where the end is its choice there (its log-prob added): nothing else changes. Beam 1 and the fixed-shape search
    agree."""
    torch.manual_seed(1)
    m = RandomGRU()
    m.out.bias.data[EOS] += 0.3  # some rows end before the cap, some at its end step, some run past it
    h0 = torch.randn(48, 16)
    kw = {"sampling": Sampling(seed=3)} if sampled else {}
    without = search(m, {"h": h0}, 48, BOS, EOS, 5, **kw)
    within = search(m, {"h": h0}, 48, BOS, EOS, 5, end_step=True, **kw)
    kinds = set()
    for b in range(48):
        n = int(without.lengths[b])
        if without.ended()[b] or not within.ended()[b]:  # ended before the cap, or cut off at it: the same
            assert within.token_lists()[b] == without.token_lists()[b] and int(within.lengths[b]) == n
            torch.testing.assert_close(within.scores[b], without.scores[b])
            kinds.add("same" if without.ended()[b] else "cut")
        else:  # its end at the end step: the same tokens, then eos
            assert within.tokens[b, : n + 1].tolist() == [*without.tokens[b, :n].tolist(), EOS]
            assert within.scores[b] < without.scores[b]
            kinds.add("ended at the end step")
    assert kinds == {"same", "cut", "ended at the end step"}, kinds
    if not sampled:
        beam1 = beam_search(m, {"h": h0}, 48, BOS, EOS, 5, beam_size=1, end_step=True)
        assert beam1.token_lists() == within.token_lists() and beam1.ended().tolist() == within.ended().tolist()
        fixed = fixed_search(m, {"h": h0}, 48, BOS, EOS, 5, end_step=True)
        assert fixed.token_lists() == within.token_lists() and torch.equal(fixed.lengths, within.lengths)
        torch.testing.assert_close(fixed.scores, within.scores)


def test_n_best_holds_only_hypotheses_the_search_found():
    """A beam wider than the finite candidates (at step 0 only beam 0 is live; <pad> and <bos> banned) kept rows of
    score -inf: copies of another hypothesis, banned tokens, and -Infinity in caption's JSON. The list holds the
    found ones, each with whether it ended."""
    m = Chain()
    for run in (beam_search, fixed_search):
        res = run(m, torch.zeros(1, 1), 1, BOS, EOS, 1, beam_size=6, pad_id=PAD, n_best=6, banned=(PAD, BOS),
                  end_step=True)  # fmt: skip
        (alts,) = res.nbest
        assert all(math.isfinite(score) for _, score, _ in alts)
        assert sorted(tuple(ids) for ids, _, _ in alts) == [(), (3,), (4,), (5,)]  # eos, 3, 4, 5: no copy, no ban
        assert {tuple(ids): ended for ids, _, ended in alts} == {(): True, (3,): False, (4,): True, (5,): True}
