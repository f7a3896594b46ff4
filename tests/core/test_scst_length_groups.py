"""SCST's cheaper scoring (text_attn.core.self_critical): the samples are teacher-forced in groups of similar length,
which must be the cheapest split and give the same log-probabilities and gradients as scoring every row over the
longest length; and unseeded sampling lets ended rows leave the batch without changing what is drawn in law."""

from __future__ import annotations

import itertools

import pytest
import torch

from text_attn.core.decoding import Sampling, greedy_search
from text_attn.core.self_critical import grouped_token_log_probs, length_groups, token_log_probs


def _brute_force(lengths: list[int], k: int) -> int:
    """The least Σ n_g T_g over every split of the sorted distinct lengths into at most k contiguous runs."""
    vals = sorted(set(v for v in lengths if v > 0))
    best = None
    for g in range(1, min(k, len(vals)) + 1):
        for cuts in itertools.combinations(range(1, len(vals)), g - 1):
            bounds = [0, *cuts, len(vals)]
            cost = 0
            for a, b in itertools.pairwise(bounds):
                group = [v for v in lengths if vals[a] <= v <= vals[b - 1]]
                cost += len(group) * vals[b - 1]
            best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_length_groups_split_the_rows_at_the_least_cost(k):
    gen = torch.Generator().manual_seed(k)
    for _ in range(20):
        lengths = torch.randint(0, 9, (int(torch.randint(1, 30, (1,), generator=gen)),), generator=gen)
        groups = length_groups(lengths, k)
        rows = torch.cat([r for r, _ in groups]) if groups else torch.zeros(0, dtype=torch.long)
        # every row of positive length exactly once; none of length 0 (nothing to score)
        assert sorted(rows.tolist()) == (lengths > 0).nonzero().squeeze(1).tolist()
        assert len(groups) <= k
        for r, steps in groups:
            assert int(lengths[r].max()) == steps  # padded to its longest row, no further
        if groups:
            assert sum(len(r) * s for r, s in groups) == _brute_force(lengths.tolist(), k)


def test_length_groups_by_hand():
    lengths = torch.tensor([10, 2, 2, 10, 3, 20])
    # one group: 6 rows x 20 = 120; two: {2,2,3} x 3 + {10,10,20} x 20 = 69 (not {2,2,3,10,10} x 10 + 20 = 70);
    # three: {2,2,3} x 3 + {10,10} x 10 + {20} x 20 = 49
    assert [(r.tolist(), s) for r, s in length_groups(lengths, 1)] == [([0, 1, 2, 3, 4, 5], 20)]
    assert [(r.tolist(), s) for r, s in length_groups(lengths, 2)] == [([1, 2, 4], 3), ([0, 3, 5], 20)]
    assert [(r.tolist(), s) for r, s in length_groups(lengths, 3)] == [([1, 2, 4], 3), ([0, 3], 10), ([5], 20)]
    assert length_groups(torch.zeros(3, dtype=torch.long)) == []


def test_grouped_scoring_equals_all_rows_at_once_in_values_and_gradients():
    torch.manual_seed(0)
    N, T, V, E = 7, 6, 11, 5
    emb = torch.nn.Embedding(V, E)
    rnn = torch.nn.GRU(E, E, batch_first=True)
    out = torch.nn.Linear(E, V)
    row_bias = torch.randn(N, V, requires_grad=True)  # something per row: the row index must reach score

    def score(inputs, rows):  # (n, T') -> (n, T', V): a causal model, so padding after a row cannot reach its tokens
        return out(rnn(emb(inputs))[0]) + row_bias[rows].unsqueeze(1)

    inputs, targets = torch.randint(0, V, (N, T)), torch.randint(0, V, (N, T))
    lengths = torch.tensor([6, 1, 3, 3, 5, 2, 6])
    mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)
    params = [*emb.parameters(), *rnn.parameters(), *out.parameters(), row_bias]

    full = token_log_probs(score(inputs, torch.arange(N)), targets) * mask
    g_full = torch.autograd.grad(full.sum(), params)
    grouped = grouped_token_log_probs(score, inputs, targets, mask, max_groups=3)
    g_grouped = torch.autograd.grad(grouped.sum(), params)
    torch.testing.assert_close(grouped, full)
    assert torch.all(grouped[~mask] == 0)
    for a, b in zip(g_grouped, g_full, strict=True):
        torch.testing.assert_close(a, b)


class _Geometric:
    """A step model that ends (eos, id 2) with probability 1/4 at every step, else says word 3; counts rows stepped."""

    def __init__(self):
        self.rows_stepped = 0
        self.table = torch.log(torch.tensor([0.0, 0.0, 0.25, 0.75]))

    def step(self, tokens, state):
        self.rows_stepped += tokens.numel()
        return self.table.expand(tokens.numel(), -1), None, state


def test_unseeded_sampling_drops_ended_rows_and_draws_the_same_law():
    torch.manual_seed(0)
    n, cap = 20000, 30
    model = _Geometric()
    drawn = greedy_search(model, torch.zeros(n, 1), n, 1, 2, cap, sampling=Sampling())
    # ended rows leave once a quarter of the live ones have ended: at most 4/3 of the steps the rows really take
    # (their lengths' sum), far fewer than every row to the end (n x the longest)
    assert int(drawn.lengths.sum()) <= model.rows_stepped <= int(drawn.lengths.sum()) * 4 / 3
    assert model.rows_stepped < n * int(drawn.lengths.max()) / 4
    # lengths are geometric with p = 1/4: mean 4, P(length 1) = 1/4
    assert abs(drawn.lengths.float().mean().item() - 4.0) < 0.1
    assert abs((drawn.lengths == 1).float().mean().item() - 0.25) < 0.015
    ended = drawn.lengths < cap  # the rest (0.75^30 of them) reached the cap
    assert bool((drawn.tokens[torch.arange(n), drawn.lengths - 1] == 2)[ended].all())  # each ends on its eos
    # a seeded Sampling drops them too (a row's draws are its key's, whoever is stepped beside it), the same draws
    seeded, every_row = _Geometric(), _Geometric()
    kept = greedy_search(seeded, torch.zeros(400, 1), 400, 1, 2, cap, sampling=Sampling(seed=1))
    full = greedy_search(every_row, torch.zeros(400, 1), 400, 1, 2, cap, sampling=Sampling(seed=1), drop_ended=False)
    assert torch.equal(kept.tokens, full.tokens) and seeded.rows_stepped < every_row.rows_stepped / 2
