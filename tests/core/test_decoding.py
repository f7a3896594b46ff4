"""Greedy and beam search on hand-built scorers and a random recurrent model."""

import torch
from helpers.step_models import BOS, EOS, TRAP, EndsAt, RandomGRU, TableModel, table_state

from text_attn.core.decoding import Sampling, beam_search, greedy_search, select_rows


def test_beam_search_beats_greedy_where_greedy_is_wrong():
    model = TableModel(TRAP)
    g = greedy_search(model, table_state(1), 1, BOS, EOS, max_len=5)
    b = beam_search(model, table_state(1), 1, BOS, EOS, max_len=5, beam_size=3)
    assert g.token_lists() == [[3, 3]]
    assert b.token_lists() == [[4, 5]]
    assert torch.allclose(g.scores, torch.tensor([0.5 * 0.4 * 1.0]).log(), atol=1e-5)
    assert torch.allclose(b.scores, torch.tensor([0.4 * 0.9 * 1.0]).log(), atol=1e-5)
    assert b.scores.item() > g.scores.item()
    # the attention of each generated step comes back with the chosen hypothesis (here: the step index)
    assert b.attention[0, :, 0].tolist() == [1.0, 2.0, 3.0]


def test_beam_that_never_ends_returns_best_hypothesis():
    table = {(): {3: 0.6, 4: 0.4}}
    for n in range(1, 10):
        table[(3,) * n] = {3: 0.9, 4: 0.1}
        table[(4,) + (3,) * (n - 1)] = {3: 0.5, 4: 0.5}
    res = beam_search(TableModel(table), table_state(2), 2, BOS, EOS, max_len=4, beam_size=2)
    assert res.token_lists() == [[3, 3, 3, 3]] * 2
    assert res.lengths.tolist() == [4, 4]
    assert torch.isfinite(res.scores).all()


def test_length_penalty_prefers_longer_hypothesis():
    # [] has p=0.4 (1 token with eos); [3, 3] has p=0.6*0.6=0.36 over 3 tokens: raw prefers the short one,
    # the per-token average (-0.92 vs -0.34) the long one.
    table = {(): {EOS: 0.4, 3: 0.6}, (3,): {3: 0.6, EOS: 0.4}, (3, 3): {EOS: 1.0}}
    raw = beam_search(TableModel(table), table_state(1), 1, BOS, EOS, 6, beam_size=2)
    norm = beam_search(TableModel(table), table_state(1), 1, BOS, EOS, 6, beam_size=2, length_penalty=1.0)
    assert raw.token_lists() == [[]]
    assert norm.token_lists() == [[3, 3]]


def test_beam_size_one_equals_greedy():
    torch.manual_seed(0)
    m = RandomGRU()
    h0 = torch.randn(6, 16)
    g = greedy_search(m, {"h": h0}, 6, BOS, EOS, max_len=12)
    b = beam_search(m, {"h": h0}, 6, BOS, EOS, max_len=12, beam_size=1)
    assert g.token_lists() == b.token_lists()
    assert torch.allclose(g.scores, b.scores, atol=1e-5)
    assert torch.allclose(g.attention, b.attention[:, : g.attention.size(1)], atol=1e-6)


def test_batched_beam_equals_one_sentence_at_a_time():
    torch.manual_seed(1)
    m = RandomGRU()
    h0 = torch.randn(5, 16)
    batched = beam_search(m, {"h": h0}, 5, BOS, EOS, max_len=15, beam_size=4, length_penalty=0.7)
    for i in range(5):
        one = beam_search(m, {"h": h0[i : i + 1]}, 1, BOS, EOS, max_len=15, beam_size=4, length_penalty=0.7)
        assert one.token_lists()[0] == batched.token_lists()[i]
        assert torch.allclose(one.scores[0], batched.scores[i], atol=1e-5)
        n = one.attention.size(1)
        assert torch.allclose(one.attention[0], batched.attention[i, :n], atol=1e-6)


def test_each_sentences_own_cap_gives_what_it_gives_alone():
    """row_max_len: sentence i capped at its own length (translate's 2 x source + 10) is what a batch of its own
    with max_len = that cap gives, greedy and beam (it used to get its batch's longest cap instead). The caps are short
    enough that some sentences reach theirs without ending."""
    torch.manual_seed(3)
    m = RandomGRU()
    m.out.bias.data[EOS] = -4.0  # ending is rare: the caps bind
    h0 = torch.randn(5, 16)
    caps = torch.tensor([2, 9, 4, 12, 1])
    for beam in (1, 3):
        batched = (greedy_search(m, {"h": h0}, 5, BOS, EOS, max_len=12, row_max_len=caps) if beam == 1 else
                   beam_search(m, {"h": h0}, 5, BOS, EOS, max_len=12, beam_size=beam, row_max_len=caps))  # fmt: skip
        reached = 0
        for i, cap in enumerate(caps.tolist()):
            state = {"h": h0[i : i + 1]}
            one = (greedy_search(m, state, 1, BOS, EOS, max_len=cap) if beam == 1 else
                   beam_search(m, state, 1, BOS, EOS, max_len=cap, beam_size=beam))  # fmt: skip
            assert one.token_lists()[0] == batched.token_lists()[i], (beam, i)
            assert torch.allclose(one.scores[0], batched.scores[i], atol=1e-5)
            assert int(batched.lengths[i]) <= cap
            reached += int(batched.lengths[i]) == cap and batched.token_lists()[i][-1:] != [EOS]
        assert reached >= 2, reached  # the caps did bind


def test_sources_that_ended_leave_the_batch_with_the_same_result():
    # beam search and greedy against the same searches stepping every row to the end (drop_ended=False)
    torch.manual_seed(3)
    rows = []

    class Counted(EndsAt):
        def step(self, tokens, state):
            rows.append(tokens.numel())
            return super().step(tokens, state)

    m = Counted()
    h0 = torch.randn(5, 16)
    ends = torch.tensor([2, 6, 1, 4, 6])
    for lp, ngram in [(0.0, 0), (1.0, 2)]:
        kw = dict(max_len=10, beam_size=3, length_penalty=lp, no_repeat_ngram=ngram, n_best=2)
        b = beam_search(m, {"h": h0, "ends": ends, "t": 0}, 5, BOS, EOS, drop_ended=False, **kw)
        assert rows == [5] + [15] * 6
        rows.clear()
        a = beam_search(m, {"h": h0, "ends": ends, "t": 0}, 5, BOS, EOS, **kw)
        assert a.lengths.tolist() == [3, 7, 2, 5, 7]  # each source ended at its step (eos included)
        assert torch.equal(a.tokens, b.tokens) and a.nbest == b.nbest
        torch.testing.assert_close(a.scores, b.scores)
        torch.testing.assert_close(a.attention, b.attention)
        # once per source, then K rows a live source: sources 2, 0, 3 leave after their ends (steps 1, 2, 4)
        assert rows == [5, 15, 12, 9, 9, 6, 6]
        rows.clear()
    # greedy's choice reads the live rows alone: the n-gram ban reads their history, a seeded draw their keys
    for kw in [{}, dict(no_repeat_ngram=2, banned=[6, 10]), dict(sampling=Sampling(seed=4, temperature=2.0))]:
        b = greedy_search(m, {"h": h0, "ends": ends, "t": 0}, 5, BOS, EOS, max_len=10, drop_ended=False, **kw)
        rows.clear()
        a = greedy_search(m, {"h": h0, "ends": ends, "t": 0}, 5, BOS, EOS, max_len=10, **kw)
        assert a.lengths.tolist() == [3, 7, 2, 5, 7]
        assert torch.equal(a.tokens, b.tokens)
        torch.testing.assert_close(a.scores, b.scores)
        torch.testing.assert_close(a.attention, b.attention)
        # greedy too, once a quarter of the live rows have ended: source 2 alone (1 of 5) waits for source 0 (2 of
        # 5), then source 3 (1 of 3) leaves at once
        assert rows == [5, 5, 5, 3, 3, 2, 2]
        rows.clear()
        drawn = set(a.tokens.flatten().tolist())
        assert not drawn & {6, 10} if kw.get("banned") else drawn >= {6, 10}  # the ban binds (unbanned: both drawn)


def test_beam_score_is_the_true_sequence_log_prob():
    torch.manual_seed(2)
    m = RandomGRU()
    h0 = torch.randn(3, 16)
    res = beam_search(m, {"h": h0}, 3, BOS, EOS, max_len=10, beam_size=3)
    for i, toks in enumerate(res.tokens.tolist()):
        toks = toks[: res.lengths[i]]
        h, prev, total = h0[i : i + 1], torch.tensor([BOS]), 0.0
        for t in toks:
            lp, _, st = m.step(prev, {"h": h})
            total += lp[0, t].item()
            h, prev = st["h"], torch.tensor([t])
        assert abs(total - res.scores[i].item()) < 1e-4


def test_select_rows_handles_nested_states():
    st = {"a": (torch.arange(3), [torch.arange(6).view(3, 2)]), "n": 5}
    out = select_rows(st, torch.tensor([2, 0]))
    assert out["a"][0].tolist() == [2, 0] and out["a"][1][0].tolist() == [[4, 5], [0, 1]]
    assert out["n"] == 5


def test_a_greedy_score_is_normalised_by_length_as_a_beams_is():
    # the same hypothesis at beam 1 and at beam 1 of beam_search, penalty 0.7: the same score
    from text_attn.core.decoding import search

    torch.manual_seed(3)
    m = RandomGRU()
    h0 = torch.randn(4, 16)
    raw = search(m, {"h": h0}, 4, BOS, EOS, max_len=12, beam_size=1)
    greedy = search(m, {"h": h0}, 4, BOS, EOS, max_len=12, beam_size=1, length_penalty=0.7)
    beam = beam_search(m, {"h": h0}, 4, BOS, EOS, max_len=12, beam_size=1, length_penalty=0.7)
    assert greedy.token_lists() == raw.token_lists() == beam.token_lists()  # the choice does not depend on it
    assert torch.allclose(greedy.scores, raw.scores / raw.lengths.float().pow(0.7), atol=1e-5)
    assert torch.allclose(greedy.scores, beam.scores, atol=1e-5)
