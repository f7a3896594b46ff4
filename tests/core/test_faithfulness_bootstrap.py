"""text_attn.core.faithfulness_bootstrap: faithfulness means and the gap closed as ratios of per-input sums (equal to
the tables' means), whole inputs drawn, verdicts in the metrics' own directions, and inputs told apart by their
recorded items or, in older files, by their end words."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from text_attn.core import faithfulness_bootstrap as fb
from text_attn.core.paired_bootstrap import Difference

DOCS = Path(__file__).resolve().parents[2] / "docs"


def word(item, deletion, random=0.9, loo=0.5, tau=0.1, kind="content", name="w", tv=None):
    rankings = {
        "attention": {"deletion_area": deletion, "deletion_least_area": 1.0, "tau": tau},
        "random": {"deletion_area": random, "deletion_least_area": 0.8, "tau": 0.0},
        "leave_one_out": {"deletion_area": loo, "deletion_least_area": 1.2, "tau": 1.0},
    }
    out = {"word": name, "kind": kind, "rankings": rankings, "item": item}
    if tv is not None:
        out["interventions"] = {"uniform": {"tv": tv, "changed": False}}
    return out


def test_items_are_recorded_or_told_by_the_end_words():
    words = [{"word": w} for w in ["a", "dog", "<eos>", "two", "men", "<eos>", "<eos>"]]
    assert fb.word_items(words) == [0, 0, 0, 1, 1, 1, 2]
    recorded = [{"word": "x", "item": i} for i in (7, 7, 3, 3, 9)]  # numbered in order of first appearance
    assert fb.word_items(recorded) == [0, 0, 1, 1, 2]
    with pytest.raises(fb.ItemsError, match="last word is not <eos>"):
        fb.word_items([{"word": "a"}, {"word": "<eos>"}, {"word": "b"}])
    with pytest.raises(fb.ItemsError, match="some words have an item"):
        fb.word_items([{"word": "a", "item": 0}, {"word": "<eos>"}])


def test_the_whole_sets_numbers_are_the_tables_means_skipping_nan():
    words = [word(0, 0.6, tau=None), word(0, 0.8), word(1, 0.7, tau=0.4)]
    measures = fb.measures_of(words)
    # leave-one-out's tau against itself is left out
    expected = ["attention gap_closed", "attention deletion_area", "attention deletion_least_area", "attention tau",
                "random deletion_area", "random deletion_least_area", "random tau", "leave_one_out deletion_area",
                "leave_one_out deletion_least_area"]  # fmt: skip
    assert [m.label for m in measures] == expected
    whole = fb.mean_stats(words, fb.word_items(words), 2, measures).corpus()
    assert whole["attention deletion_area"] == pytest.approx(0.7)
    assert whole["attention tau"] == pytest.approx(0.25)  # the null (NaN) tau skipped: (0.1 + 0.4) / 2
    # the gap closed is (random - attention) / (random - leave-one-out) of the mean areas: (0.9 - 0.7) / 0.4
    assert whole["attention gap_closed"] == pytest.approx(0.5)


def test_the_shipped_records_give_the_docs_shares_of_the_gap():
    """docs/faithfulness.md quotes 68% for the GRU before guided alignment and 51% for the content words of the
    captioner over the fine-tuned encoder: the same numbers from the words (no items recorded then: end words)."""
    gru = [t for t in json.loads((DOCS / "faithfulness.json").read_text())["families"] if "GRU" in t["name"]][0]
    words = gru["words"]
    assert max(fb.word_items(words)) + 1 == 30
    gap = fb.Measure("attention", fb.GAP)
    assert fb.mean_stats(words, fb.word_items(words), 30, [gap]).corpus()[gap.label] == pytest.approx(0.678, abs=5e-4)
    tables = json.loads((DOCS / "faithfulness_captioner_finetuned_48.json").read_text())["families"]
    every = tables[0]["words"]
    words = [w for w in every if w["kind"] == "content"]
    items = [i for i, w in zip(fb.word_items(every), every, strict=True) if w["kind"] == "content"]
    assert fb.mean_stats(words, items, 48, [gap]).corpus()[gap.label] == pytest.approx(0.511, abs=5e-4)


def test_whole_inputs_are_drawn_not_words():
    """Two inputs, all of one's words at 0 and all of the other's at 1: a draw's mean is 0, 0.5 or 1 (half the draws
    take one input twice), so the 95% interval is [0, 1] however many words there are; drawn word by word it would be
    a narrow band around 0.5."""
    words = [word(0, 0.0) for _ in range(50)] + [word(1, 1.0) for _ in range(50)]
    flat = [word(0, 0.5) for _ in range(100)]
    (measure, diff), *_ = fb.compare_runs(words, [dict(w, item=i // 50) for i, w in enumerate(flat)],
                                          [fb.Measure("attention", "deletion_area")], resamples=1000)  # fmt: skip
    assert diff.a == pytest.approx(0.5) and diff.a_range == (0.0, 1.0) and diff.b_range == (0.5, 0.5)
    assert (diff.low, diff.high) == (-0.5, 0.5) and measure.verdict(diff) == "within noise"


def test_a_clear_difference_gets_its_direction_right_for_each_metric():
    rng = np.random.default_rng(0)
    better = [word(i // 5, 0.5 + 0.05 * rng.standard_normal(), tau=0.6, tv=0.5) for i in range(100)]
    worse = [word(i // 5, 0.8 + 0.05 * rng.standard_normal(), tau=0.1, tv=0.2) for i in range(100)]
    held = fb.measures_of(better)
    verdicts = {m.label: m.verdict(d) for m, d in fb.compare_runs(better, worse, held, resamples=300)}
    assert verdicts["attention deletion_area"] == "A more faithful"  # lower is better: A's 0.5 against 0.8
    assert verdicts["attention gap_closed"] == "A more faithful" and verdicts["attention tau"] == "A more faithful"
    assert verdicts["uniform tv"] == "A higher"  # neither better nor worse: how much the word needs its attention
    assert verdicts["random deletion_area"] == "within noise"  # the same 0.9 on both sides
    reverse = {m.label: m.verdict(d) for m, d in fb.compare_runs(worse, better, held, resamples=300)}
    assert reverse["attention deletion_area"] == "B more faithful" and reverse["uniform tv"] == "B higher"


def test_rankings_of_the_same_words_are_paired_and_runs_need_the_same_inputs():
    words = [word(i // 4, 0.6 + 0.01 * i) for i in range(40)]
    pairs = fb.compare_rankings(words, "attention", "random")
    assert [m.label for m, _ in pairs] == ["attention gap_closed", "attention deletion_area",
                                           "attention deletion_least_area", "attention tau"]  # fmt: skip
    (_, gap), (_, d), *_ = pairs
    mean = np.mean([0.6 + 0.01 * i for i in range(40)])
    assert d.b == pytest.approx(0.9) and d.a == pytest.approx(mean) and pairs[1][0].verdict(d) == "A more faithful"
    # random's own share of the gap is 0: the row is attention's, (0.9 - mean) / (0.9 - 0.5), with its interval
    assert gap.b == 0 and gap.a == pytest.approx((0.9 - mean) / 0.4) and gap.a_range[0] < gap.a < gap.a_range[1]
    against_loo = fb.compare_rankings(words, "attention", "leave_one_out")
    assert [m.metric for m, _ in against_loo] == ["deletion_area", "deletion_least_area"]
    with pytest.raises(fb.ItemsError, match="A measured 10 inputs, B 3"):
        fb.compare_runs(words, words[:12], fb.measures_of(words))
    nan = Difference("x", math.nan, math.nan, math.nan, math.nan, 0.0)
    assert fb.Measure("attention", "tau").verdict(nan) == "undefined"
