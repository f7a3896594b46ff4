"""The paired bootstrap (text_attn/core/paired_bootstrap.py) and the counts it resamples (score_stats.py): summed
over a whole corpus the counts give the reference scorers' own corpus scores, and the draws are paired, seeded and
as wide as a mean's standard error says."""

from __future__ import annotations

import numpy as np
import pytest

from text_attn.core import paired_bootstrap as pb
from text_attn.core.metrics import coco_scores, sacre_scores
from text_attn.core.paired_bootstrap import Difference, paired_bootstrap
from text_attn.core.score_stats import ItemStats, coco_item_stats, sacre_item_stats

REFS = {
    "a": ["a dog runs on the grass", "a brown dog is running", "the dog runs outside"],
    "b": ["two men play football", "men playing soccer on a field", "two people kick a ball"],
    "c": ["a girl in a red dress", "a little girl smiles", "a child in red"],
    "d": ["a man rides a bike down a hill", "a cyclist on a hill", "a person riding a bicycle"],
}
CAPS = {"a": "a dog runs on the grass", "b": "two men play soccer", "c": "a girl", "d": "a man on a bike on a road"}


def _mean_stats(values) -> ItemStats:
    """A score that is the mean of each item's value (as CIDEr-D's is)."""
    return ItemStats(("mean",), np.asarray(values, dtype=float)[:, None], lambda sums, n: sums / n)


def test_coco_counts_summed_give_coco_captions_own_corpus_scores():
    corpus, _ = coco_scores(REFS, CAPS, meteor=False)
    ids, stats = coco_item_stats(REFS, CAPS)
    assert ids == list(REFS)
    got = stats.corpus()
    for ours, theirs in (("BLEU-1", "Bleu_1"), ("BLEU-2", "Bleu_2"), ("BLEU-3", "Bleu_3"), ("BLEU-4", "Bleu_4"),
                         ("CIDEr-D", "CIDEr"), ("ROUGE-L", "ROUGE_L")):  # fmt: skip
        assert got[ours] == pytest.approx(100 * corpus[theirs], abs=1e-9), ours
    # a short caption ("a girl") puts the corpus under its references' length: the brevity penalty is in play
    assert stats.stats[:, 0].sum() < stats.stats[:, 1].sum()


def test_coco_counts_of_a_subset_score_as_the_subset_scored_alone():
    """BLEU's counts are additive: two of the photos' rows give coco-caption's BLEU of those two photos alone (CIDEr-D's
    weights are the whole set's, so only BLEU is compared)."""
    _, stats = coco_item_stats(REFS, CAPS)
    rows = stats.stats[[1, 3]].sum(0, keepdims=True)
    alone, _ = coco_scores({k: REFS[k] for k in "bd"}, {k: CAPS[k] for k in "bd"}, meteor=False)
    for n in range(4):
        assert stats.score(rows, 2)[0, n] == pytest.approx(100 * alone[f"Bleu_{n + 1}"], abs=1e-9)


@pytest.mark.parametrize(("tokenize", "lowercase"), [("13a", False), ("none", True)])
def test_sacre_counts_summed_give_sacrebleus_own_corpus_scores(tokenize, lowercase):
    refs = ["A dog runs on the grass.", "Two men play football.", "A girl in a red dress smiles.", "Café au lait."]
    hyps = [
        "A dog runs on grass.",
        "two men play soccer .",
        "A girl smiles.",
        "Cafe\u0301 au lait.",
    ]  # NFD é: scored NFC
    want = sacre_scores(refs, hyps, tokenize, lowercase)
    got = sacre_item_stats(refs, hyps, tokenize, lowercase).corpus()
    assert got["sacreBLEU"] == pytest.approx(want["sacrebleu"], abs=1e-9)
    assert got["chrF"] == pytest.approx(want["chrf"], abs=1e-9)


def test_a_system_against_itself_differs_by_nothing_in_every_draw():
    _, stats = coco_item_stats(REFS, CAPS)
    for d in paired_bootstrap(stats, stats, resamples=50):
        assert (d.delta, d.low, d.high, d.a_ahead, d.verdict) == (0.0, 0.0, 0.0, 0.0, "within noise")


def test_the_draws_are_paired_a_constant_gain_has_no_spread():
    """B's items vary widely, A's are each B's plus 1: every draw differs by exactly 1. Unpaired draws (A's and B's
    items drawn apart) would spread the difference by ~B's own standard error, here ~3."""
    b = np.random.default_rng(1).normal(50, 30, size=100)
    (d,) = paired_bootstrap(_mean_stats(b + 1), _mean_stats(b), resamples=200)
    assert d.delta == pytest.approx(1) and d.low == pytest.approx(1) and d.high == pytest.approx(1)
    assert d.a_ahead == 1.0 and d.verdict == "A ahead"
    (flip,) = paired_bootstrap(_mean_stats(b), _mean_stats(b + 1), resamples=200)
    assert flip.verdict == "B ahead" and flip.a_ahead == 0.0


def test_the_interval_is_as_wide_as_the_mean_differences_standard_error():
    """For a mean, the 95% interval of A - B is about +-1.96 standard errors of the items' differences."""
    rng = np.random.default_rng(2)
    b = rng.normal(0, 1, size=400)
    a = b + rng.normal(0.1, 2.0, size=400)  # differences: mean ~0.1, sd 2: standard error 0.1
    (d,) = paired_bootstrap(_mean_stats(a), _mean_stats(b), resamples=2000, seed=3)
    se = np.std(a - b) / np.sqrt(400)
    assert (d.high - d.low) / (2 * 1.96 * se) == pytest.approx(1, abs=0.1)
    assert d.low < d.delta < d.high


def test_the_same_seed_gives_the_same_table_and_chunks_change_nothing(monkeypatch):
    rng = np.random.default_rng(4)
    a, b = _mean_stats(rng.normal(size=30)), _mean_stats(rng.normal(size=30))
    first = paired_bootstrap(a, b, resamples=300, seed=7)
    assert paired_bootstrap(a, b, resamples=300, seed=7) == first
    assert paired_bootstrap(a, b, resamples=300, seed=8) != first
    monkeypatch.setattr(pb, "_CHUNK", 31)  # one draw of 30 items at a time
    assert paired_bootstrap(a, b, resamples=300, seed=7) == first


def test_a_share_of_draws_and_percentiles_as_counted_by_hand():
    """Three items, A - B per item 3, -1, 0; the draws drawn again by hand from the same seed."""
    a, b = _mean_stats([3.0, 0.0, 5.0]), _mean_stats([0.0, 1.0, 5.0])
    (d,) = paired_bootstrap(a, b, resamples=500, seed=11)
    rows = np.random.default_rng(11).integers(0, 3, size=(500, 3))
    diffs = np.array([3.0, -1.0, 0.0])[rows].mean(1)
    assert d.a_ahead == pytest.approx((diffs > 0).mean())
    assert (d.low, d.high) == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])))
    assert d.delta == pytest.approx(2 / 3)
    a_means = np.array([3.0, 0.0, 5.0])[rows].mean(1)  # A's own score in each draw
    assert d.a_range == pytest.approx(tuple(np.percentile(a_means, [2.5, 97.5])))


def test_systems_scored_differently_or_on_other_items_are_refused():
    a = _mean_stats([1.0, 2.0])
    with pytest.raises(ValueError, match="2 items, B 3"):
        paired_bootstrap(a, _mean_stats([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="scored by"):
        paired_bootstrap(a, ItemStats(("other",), a.stats, a.score))
    assert Difference("x", 1, 1, -0.5, 0.5, 0.4).verdict == "within noise"
