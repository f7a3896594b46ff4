"""The faithfulness measure (text_attn.core.faithfulness) on toy probes whose answers are known by hand."""

import json
import math

import pytest
import torch

from text_attn.core.faithfulness import (
    Probe,
    Summary,
    WordResult,
    deletion_masks,
    intervene,
    kendall_tau,
    kendall_taus,
    measure_word,
    normalised_area,
    summarize,
)
from text_attn.core.word_kinds import word_kind


class Counted:
    """A probe's function that records the shape of every batch it is called with (masks, or alpha rows)."""

    def __init__(self, fn, dtype=torch.bool):
        self.fn, self.dtype, self.calls = fn, dtype, []

    def __call__(self, batch):
        assert batch.dtype == self.dtype
        self.calls.append(tuple(batch.shape))
        return self.fn(batch)


def one_unit_probe(n=5, unit=3, attention=None):
    """The word depends on one unit only: p = 0.9 while it is kept, 0.1 once it is removed."""
    prob = Counted(lambda removed: torch.where(removed[:, unit], 0.1, 0.9).double())  # (K,)
    if attention is None:
        attention = torch.tensor([0.02, 0.02, 0.02, 0.9, 0.04])
    return Probe(n, prob, attention)


def additive_probe(weights, **scores):
    """p = the kept units' share of the weights (they sum to 1, so p_full = 1 and leave-one-out = the weights)."""
    w = torch.tensor(weights, dtype=torch.float64)
    return Probe(len(weights), Counted(lambda removed: (w * ~removed).sum(-1)), w.clone(), dict(scores))


def test_one_unit_word_deletion_drops_at_once_and_leave_one_out_finds_it():
    r = measure_word(one_unit_probe(), "dog", random_draws=2)
    att = r.rankings["attention"]
    assert att.deletion == pytest.approx([0.9, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert att.deletion_least == pytest.approx([0.9] * 5 + [0.1])  # unit 3 goes last
    assert att.insertion == pytest.approx([0.1] + [0.9] * 5)  # unit 3 comes back first
    # trapezoid over k / U with dx = 0.2, divided by p_full = 0.9: 0.2 * (0.45 + 4 * 0.1 + 0.05) / 0.9
    assert att.deletion_area == pytest.approx(0.2)
    assert att.deletion_least_area == pytest.approx(0.2 * (0.45 + 4 * 0.9 + 0.05) / 0.9)
    assert att.insertion_area == pytest.approx(0.2 * (0.05 + 4 * 0.9 + 0.45) / 0.9)
    assert r.p_full == pytest.approx(0.9) and r.p_empty == pytest.approx(0.1)
    assert r.leave_one_out == pytest.approx([0, 0, 0, 0.8, 0])
    loo = r.rankings["leave_one_out"]
    assert loo.deletion[1] == pytest.approx(0.1) and loo.tau == pytest.approx(1.0)
    # attention against leave-one-out: the 4 pairs with unit 3 agree; untied pairs: 7 in attention, 4 in loo
    assert att.tau == pytest.approx(4 / math.sqrt(7 * 4))
    # attention on the wrong unit: deletion removes unit 3 last, as least-first did above
    wrong = measure_word(one_unit_probe(attention=torch.tensor([0.9, 0.02, 0.02, 0.01, 0.05])), random_draws=0)
    assert wrong.rankings["attention"].deletion_area == pytest.approx(att.deletion_least_area)
    assert wrong.rankings["attention"].tau < 0


def test_random_ranking_expected_areas():
    # Unit 3 removed at step j, uniform over 1..U: E[area] = dx * (0.5 + (0.9 + 0.1) * (U - 1) / 2) = dx * U / 2 = 0.5
    # before dividing by p_full, for deletion, least-first and insertion alike; E[tau] = 0.
    r = measure_word(one_unit_probe(), random_draws=400, seed=1)
    rnd = r.rankings["random"]
    for area in (rnd.deletion_area, rnd.deletion_least_area, rnd.insertion_area):
        assert area == pytest.approx(0.5 / 0.9, abs=0.03)
    assert abs(rnd.tau) < 0.1
    # the mean deletion curve: P(unit 3 among the first k removed) = k / U
    assert rnd.deletion == pytest.approx([0.9 - 0.8 * k / 5 for k in range(6)], abs=0.05)
    again = measure_word(one_unit_probe(), random_draws=400, seed=1).rankings["random"]
    assert again.deletion == rnd.deletion  # seeded
    assert measure_word(one_unit_probe(), random_draws=400, seed=2).rankings["random"].deletion != rnd.deletion


def test_model_that_ignores_its_input_has_flat_curves():
    probe = Probe(4, Counted(lambda removed: torch.full((removed.shape[0],), 0.6)), torch.tensor([0.7, 0.1, 0.1, 0.1]))
    probe.scores = {"gradient": torch.tensor([0.0, 1.0, 2.0, 3.0])}
    r = measure_word(probe, "the", random_draws=3)
    assert set(r.rankings) == {"attention", "random", "leave_one_out", "gradient"}
    for ranking in r.rankings.values():
        for curve in (ranking.deletion, ranking.deletion_least, ranking.insertion):
            assert curve == pytest.approx([0.6] * 5)
        assert ranking.deletion_area == pytest.approx(1.0)
        assert ranking.deletion_least_area == pytest.approx(1.0) and ranking.insertion_area == pytest.approx(1.0)
        assert ranking.deletion == ranking.deletion_least
        assert math.isnan(ranking.tau)  # leave-one-out is all zeros: no reference order
    # a word the model would not say: areas undefined, not blown up
    zero = Probe(3, lambda removed: torch.zeros(removed.shape[0]), torch.ones(3) / 3)
    assert all(math.isnan(x.deletion_area) for x in measure_word(zero, random_draws=1).rankings.values())
    assert math.isnan(normalised_area(torch.tensor([1e-9, 0.0]), 1e-9))


def test_additive_probe_leave_one_out_is_the_weights_and_tau_is_exact():
    w = [0.1, 0.4, 0.2, 0.3]
    r = measure_word(additive_probe(w, reversed=-torch.tensor(w)), random_draws=0)
    assert r.leave_one_out == pytest.approx(w)
    att, rev = r.rankings["attention"], r.rankings["reversed"]
    assert att.tau == pytest.approx(1.0) and rev.tau == pytest.approx(-1.0)
    assert r.rankings["leave_one_out"].tau == pytest.approx(1.0)
    assert att.deletion == pytest.approx([1.0, 0.6, 0.3, 0.1, 0.0])  # 0.4, then 0.3, 0.2, 0.1 removed
    assert att.deletion_least == pytest.approx([1.0, 0.9, 0.7, 0.4, 0.0])
    assert att.insertion == pytest.approx([0.0, 0.4, 0.7, 0.9, 1.0])
    assert att.deletion_area == pytest.approx(0.25 * (0.5 + 0.6 + 0.3 + 0.1))
    assert att.deletion_least_area == pytest.approx(0.25 * (0.5 + 0.9 + 0.7 + 0.4))
    assert att.insertion_area == pytest.approx(att.deletion_least_area)
    # the reversed ranking removes the least relevant first
    assert rev.deletion == pytest.approx(att.deletion_least) and rev.deletion_area == pytest.approx(0.625)


def test_kendall_tau_b_with_ties_by_hand():
    x, y = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, 2.0, 2.0, 3.0])
    assert kendall_tau(x, y) == pytest.approx(5 / math.sqrt(6 * 5))  # 5 concordant, 1 pair tied in y
    assert kendall_tau(x, -x) == pytest.approx(-1.0)
    assert kendall_tau(x, x.flip(0)) == pytest.approx(-1.0)
    # ties on both sides: of the 6 pairs, units 0-1 tie in a and units 2-3 tie in b, the other 4 agree
    a, b = torch.tensor([1.0, 1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0, 3.0])
    assert kendall_tau(a, b) == pytest.approx(4 / math.sqrt(5 * 5))  # 4 concordant, 0 discordant
    assert math.isnan(kendall_tau(x, torch.ones(4)))
    with pytest.raises(ValueError, match="kendall_tau"):
        kendall_tau(x, torch.ones(3))
    # many rows at once: each row's tau as one call gives it, NaN where a row is flat
    torch.manual_seed(0)
    xs, ys = torch.rand(6, 7), torch.rand(6, 7)
    xs[2] = 1.0
    ys[3, :2] = ys[3, 2]  # ties
    many = kendall_taus(xs, ys)
    assert math.isnan(many[2]) and math.isnan(kendall_tau(xs[2], ys[2]))
    assert [m for k, m in enumerate(many) if k != 2] == pytest.approx(
        [kendall_tau(xs[k], ys[k]) for k in range(6) if k != 2], abs=1e-12
    )
    with pytest.raises(ValueError, match="kendall_taus"):
        kendall_taus(xs, ys[:, :3])


def _tau_b_by_pairs(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b from its definition, pair by pair (scipy.stats.kendalltau's statistic; scipy is not a
    dependency): (concordant - discordant) / sqrt((pairs - ties in x) (pairs - ties in y))."""
    n = len(x)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    sign = [(x[i] - x[j]) * (y[i] - y[j]) for i, j in pairs]
    concordant, discordant = sum(s > 0 for s in sign), sum(s < 0 for s in sign)
    ties_x, ties_y = sum(x[i] == x[j] for i, j in pairs), sum(y[i] == y[j] for i, j in pairs)
    return (concordant - discordant) / math.sqrt((len(pairs) - ties_x) * (len(pairs) - ties_y))


def test_kendall_tau_b_matches_its_definition_with_ties():
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        x, y = torch.randint(0, 4, (12,), generator=g).double(), torch.randint(0, 5, (12,), generator=g).double()
        assert kendall_tau(x, y) == pytest.approx(_tau_b_by_pairs(x.tolist(), y.tolist()), abs=1e-12)


def test_attention_interventions_against_hand_computed_distance():
    ln2, ln3 = math.log(2), math.log(3)
    W = torch.tensor([[3 * ln2, 0, 0], [0, 3 * ln3, 0], [0, 0, 0]], dtype=torch.float64)  # (U, V)
    calls = []

    def next_word_probs(alpha):  # (K, U) -> (K, V)
        calls.append(tuple(alpha.shape))
        return torch.softmax(alpha @ W, -1)

    alpha = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)  # logits (ln 8, 0, 0): p = (0.8, 0.1, 0.1)
    got = intervene(
        next_word_probs, alpha, other_alpha=torch.tensor([0.0, 1.0, 0.0]), permutation=torch.tensor([0, 2, 1])
    )
    assert calls == [(4, 3)]  # own, uniform, permuted, other: one call
    # uniform: logits (ln 2, ln 3, 0), p = (2, 3, 1) / 6
    assert got["uniform"].tv == pytest.approx(0.5 * (abs(0.8 - 2 / 6) + abs(0.1 - 3 / 6) + abs(0.1 - 1 / 6)))
    assert got["uniform"].changed
    # other: logits (0, ln 27, 0), p = (1, 27, 1) / 29
    assert got["other"].tv == pytest.approx(0.5 * (abs(0.8 - 1 / 29) + abs(0.1 - 27 / 29) + abs(0.1 - 1 / 29)))
    assert got["other"].changed
    # swapping units 1 and 2, both weighted 0, leaves alpha as it was
    assert got["permuted"].tv == pytest.approx(0.0) and not got["permuted"].changed
    # a seeded permutation is never the identity (several of these seeds draw it first): on three distinct weights
    # any other order moves the distribution
    peaked = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    assert all(intervene(next_word_probs, peaked, seed=seed)["permuted"].tv > 1e-6 for seed in range(30))
    first, second = intervene(next_word_probs, peaked, seed=5), intervene(next_word_probs, peaked, seed=5)
    assert first == second and "other" not in first
    # own: the baseline row (own alpha forced) against the model's own distribution, given apart
    model = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    got = intervene(next_word_probs, alpha, own_probs=model)
    assert list(got)[0] == "own" and got["own"].tv == pytest.approx(0.5 * (0.3 + 0.2 + 0.1)) and not got["own"].changed
    got = intervene(next_word_probs, alpha, own_probs=torch.tensor([0.1, 0.8, 0.1]))
    assert got["own"].changed and got["own"].tv == pytest.approx(0.7)
    assert got["uniform"] == intervene(next_word_probs, alpha)["uniform"]  # the other rows are unchanged by it
    with pytest.raises(ValueError, match="own_probs: \\(3,\\) probabilities needed, got \\(2,\\)"):
        intervene(next_word_probs, alpha, own_probs=torch.ones(2) / 2)


def test_each_curve_is_one_batched_call():
    probe = one_unit_probe()
    probe.scores = {"gradient": torch.arange(5.0)}
    probe.next_word_probs = Counted(lambda alpha: torch.softmax(alpha, -1), dtype=torch.float32)
    r = measure_word(probe, random_draws=3, other_alpha=torch.ones(5) / 5)
    # leave-one-out, then deletion and least-first for attention, leave-one-out, gradient and 3 random draws;
    # insertion reuses least-first
    assert probe.prob.calls == [(6, 5)] * (1 + 2 * (3 + 3))
    assert probe.next_word_probs.calls == [(4, 5)] and set(r.interventions) == {"uniform", "permuted", "other"}
    masks = deletion_masks(torch.tensor([3, 0, 4, 1, 2]))  # (U + 1, U), row k removes the first k of the order
    assert masks.sum(1).tolist() == list(range(6)) and masks[1].nonzero().flatten().tolist() == [3]
    assert masks[2].nonzero().flatten().tolist() == [0, 3]


def test_bad_probes_get_one_clear_line():
    with pytest.raises(ValueError, match="probe.prob"):
        measure_word(Probe(3, lambda removed: torch.ones(2), torch.ones(3) / 3))
    with pytest.raises(ValueError, match="attention has 2 weights for 3 units"):
        measure_word(Probe(3, lambda removed: torch.ones(removed.shape[0]), torch.ones(2) / 2))
    with pytest.raises(ValueError, match="probe.scores\\['random'\\]"):
        measure_word(Probe(3, lambda r: torch.ones(r.shape[0]), torch.ones(3) / 3, {"random": torch.ones(3)}))


def test_word_kinds():
    for word in ("the", "The", "a", "of", "is", "▁with", "<eos>", "<unk>", ".", ",", "isn't", "'s", "their"):
        assert word_kind(word) == "function", word
    for word in ("dog", "running", "red", "▁Hund", "two", "3", "frisbee@@"):
        assert word_kind(word) == "content", word


def test_a_subword_piece_is_of_its_whole_words_kind():
    """The "on" of "▁Bo st on" is Boston's, not the preposition (5 of the Transformer's 434 words were counted so)."""
    from text_attn.core.word_kinds import piece_kinds

    assert piece_kinds(["▁Bo", "st", "on", "▁in", "▁the", "▁park", ".", "<eos>"]) == [
        "content", "content", "content", "function", "function", "content", "function", "function"]  # fmt: skip
    assert piece_kinds(["bo@@", "st@@", "on", "in", "at"]) == ["content"] * 3 + ["function"] * 2  # BPE
    assert piece_kinds(["▁is", "n", "'t", "▁at", "<unk>", "on"]) == ["function"] * 6  # isn't; after <unk>: its own
    words = ["a", "man", "on", "the", "street"]
    assert piece_kinds(words) == [word_kind(w) for w in words]  # whole words: each its own
    assert piece_kinds([]) == []


def test_a_contraction_split_at_its_apostrophe_is_one_word():
    """The bundled translators' pieces have no "'s" or "n't": "isn't" is written "▁is n ' t" and "man's" "▁man ' s".
    The apostrophe inside a word joins it, so the pieces take the whole word's kind: isn't (n't) and it's (its head,
    a pronoun) are function words, man's (a noun's) a content word; "s" and "t" are never words of their own. A quote
    mark between words stays apart."""
    from text_attn.core.word_kinds import piece_kinds

    assert piece_kinds(["▁It", "▁is", "n", "'", "t", "▁red"]) == ["function"] * 5 + ["content"]
    assert piece_kinds(["▁it", "'", "s", "▁a", "▁man", "'", "s", "▁hat"]) == ["function"] * 4 + ["content"] * 4
    assert piece_kinds(["▁they", "’", "re", "▁don", "'", "t"]) == ["function"] * 6  # the typographic one too
    assert piece_kinds(["▁a", "▁'", "dog", "'", "▁on"]) == ["function", "function", "content", "function", "function"]
    for word in ("it's", "they're", "isn’t", "'s", "’s"):
        assert word_kind(word) == "function", word
    for word in ("man's", "children’s", "o'clock"):
        assert word_kind(word) == "content", word


def test_summary_splits_by_kind_and_round_trips_json():
    dog = measure_word(one_unit_probe(), "dog", random_draws=2)
    the = measure_word(additive_probe([0.1, 0.4, 0.2, 0.3]), "the", random_draws=2)
    flat = measure_word(Probe(2, lambda r: torch.full((r.shape[0],), 0.5), torch.tensor([0.5, 0.5])), "on")
    assert (dog.kind, the.kind, flat.kind) == ("content", "function", "function")
    summary = summarize([dog, the, flat])
    rows = {(r.method, r.kind): r for r in summary.rankings}
    assert [r.method for r in summary.rankings][::3] == ["attention", "random", "leave_one_out"]
    assert rows["attention", "content"].n_words == 1
    assert rows["attention", "content"].deletion_area == pytest.approx(dog.rankings["attention"].deletion_area)
    fn = rows["attention", "function"]
    assert fn.n_words == 2 and fn.n_tau == 1 and fn.n_area == 2  # the flat word has no tau
    assert fn.tau == pytest.approx(1.0)
    assert fn.deletion_area == pytest.approx((the.rankings["attention"].deletion_area + 1.0) / 2)
    everything = rows["attention", "all"]
    assert everything.n_words == 3
    expected = (dog.rankings["attention"].deletion_area + the.rankings["attention"].deletion_area + 1.0) / 3
    assert everything.deletion_area == pytest.approx(expected)
    # strict JSON (NaN written as null) and back
    text = json.dumps(flat.to_dict(), allow_nan=False)
    back = WordResult.from_dict(json.loads(text))
    assert math.isnan(back.rankings["attention"].tau) and back.to_dict() == flat.to_dict()
    assert WordResult.from_dict(json.loads(json.dumps(dog.to_dict()))) == dog
    again = Summary.from_dict(json.loads(json.dumps(summary.to_dict(), allow_nan=False)))
    assert again.to_dict() == summary.to_dict()
    table = summary.format()
    assert "leave_one_out" in table and "content" in table


def test_evidence_is_kept_to_six_decimals_in_records_and_answers():
    """Six decimals in caption's records and the server's answers alike (the server kept 4); below them float32 noise
    is 0, not a share of a drawn map."""
    from text_attn.core.faithfulness import rounded_evidence

    rows = torch.tensor([[0.00123456789, -0.0000123456789, 3e-9, 0.5]], dtype=torch.float64)
    assert rounded_evidence(rows) == [[0.001235, -0.000012, 0.0, 0.5]]
    assert rounded_evidence(torch.zeros(0, 3)) == []
