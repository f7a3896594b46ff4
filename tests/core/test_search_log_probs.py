"""Each generated token's log-probability, kept by the search (SearchResult.log_probs): what reading the output back
gives (read_sequence), for greedy, sampled and beam search under every option, 0 past the end, and hand-computed on a
table scorer."""

import math

import pytest
import torch
from helpers.step_models import BOS, EOS, TRAP, EndsAt, RandomGRU, TableModel, table_state

from text_attn.core.decoding import Sampling, beam_search, greedy_search, read_sequence, search


def test_the_chosen_tokens_log_probabilities_on_a_table_scorer_by_hand():
    g = greedy_search(TableModel(TRAP), table_state(1), 1, BOS, EOS, max_len=5)
    b = beam_search(TableModel(TRAP), table_state(1), 1, BOS, EOS, max_len=5, beam_size=3)
    # greedy: 3 (0.5), 3 (0.4), the end (1.0); the beam: 4 (0.4), 5 (0.9), the end (1.0): backtracked through the
    # beams' parents, not the rows' last step
    assert g.log_probs.exp()[0].tolist() == pytest.approx([0.5, 0.4, 1.0], abs=1e-6)
    assert b.log_probs.exp()[0].tolist() == pytest.approx([0.4, 0.9, 1.0], abs=1e-6)


def _read_back(model, state, result):
    """The search's outputs teacher-forced (read_sequence): per row each token's log-probability, zeros past its
    length."""
    read, _ = read_sequence(model, state, result.tokens.size(0), result.tokens, BOS)  # (B, T)
    past = torch.arange(read.size(1)) >= result.lengths.unsqueeze(1)  # (B, T)
    return read.masked_fill(past, 0.0)


CASES = {
    "greedy": dict(beam_size=1),
    "greedy, each row to the end": dict(beam_size=1, drop_ended=False),
    "greedy, penalty 1, no repeated bigram": dict(beam_size=1, length_penalty=1.0, no_repeat_ngram=2),
    "sampled, seeded, tempered, top-k": dict(sampling=Sampling(temperature=1.7, top_k=4, seed=5)),
    "beam 3": dict(beam_size=3),
    "beam 3, penalty 1, n-best 2": dict(beam_size=3, length_penalty=1.0, n_best=2),
    "beam 4, banned, no repeated bigram": dict(beam_size=4, banned=(3, 4), no_repeat_ngram=2),
    "beam 3, each row to the end": dict(beam_size=3, drop_ended=False),
    "beam 3, the end step at 4": dict(beam_size=3, max_len=4, end_step=True),
    "greedy, the end step at 4": dict(beam_size=1, max_len=4, end_step=True),
    "beam 2, each row's own cap": dict(beam_size=2, row_max_len=torch.tensor([3, 9, 2, 5, 7])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_kept_log_probabilities_are_what_reading_the_output_back_gives(case):
    torch.manual_seed(4)
    options = {"max_len": 10, **CASES[case]}
    h0 = torch.randn(5, 16)
    for model, extra in [(RandomGRU(), {}), (EndsAt(), {"ends": torch.tensor([2, 6, 1, 4, 8]), "t": 0})]:
        state = {"h": h0, **extra}  # EndsAt: its sources leave the batch as they end
        res = search(model, state, 5, BOS, EOS, pad_id=0, **options)
        assert res.log_probs.shape == res.tokens.shape
        torch.testing.assert_close(res.log_probs, _read_back(model, state, res), atol=1e-5, rtol=0)
        # their sum is the score the search chose by (before its length penalty)
        penalty = res.lengths.clamp(min=1).float().pow(options.get("length_penalty", 0.0))
        torch.testing.assert_close(res.log_probs.sum(1), res.scores * penalty, atol=1e-4, rtol=0)
        assert res.cpu().log_probs is not None


def test_a_sampled_token_s_log_probability_is_the_model_s_not_the_tempered_draw_s():
    torch.manual_seed(0)
    model, h0 = RandomGRU(), torch.randn(4, 16)
    hot = search(model, {"h": h0}, 4, BOS, EOS, 8, sampling=Sampling(temperature=3.0, seed=1))
    torch.testing.assert_close(hot.log_probs, _read_back(model, {"h": h0}, hot), atol=1e-5, rtol=0)
    tempered = torch.log_softmax(model.step(torch.full((4,), BOS), {"h": h0})[0] / 3.0, -1)
    first = hot.tokens[:, 0]
    assert not torch.allclose(hot.log_probs[:, 0], tempered.gather(1, first[:, None])[:, 0], atol=1e-3)
    assert all(math.isfinite(v) for v in hot.log_probs.flatten().tolist())
