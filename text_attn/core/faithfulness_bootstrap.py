"""Is one faithfulness number above another, or is it the luck of the inputs measured? The words of one caption or
translation are not independent draws (they share a photo, a sentence, a decoder state), so a bootstrap draws whole
inputs (a cluster bootstrap): each draw takes the run's photos, scenes or sentences again with replacement, and a mean
is the mean over the words of the inputs drawn, as the tables' means are over all words (NaN skipped). The same draw
serves both sides of a comparison (text_attn/core/paired_bootstrap.py): two runs over the same inputs, or two rankings
of the same words.

A word's input is its ``item`` (benchmarks/faithfulness.py records it). A file written before items were recorded
gives them by its end words: every caption and translation measured ends with its own end word (``<eos>``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from text_attn.core.paired_bootstrap import Difference, paired_bootstrap
from text_attn.core.score_stats import ItemStats

END_WORD = "<eos>"
RANKING_METRICS = ("deletion_area", "deletion_least_area", "tau")
# the share of the gap from a random order's deletion area to leave-one-out's that a ranking closes (faithfulness.md)
GAP = "gap_closed"
# which way is more faithful: the tables' own headers (an intervention's total variation is neither: how much the
# attention moves the next word)
LOWER_BETTER = frozenset({"deletion_area"})
NEITHER = frozenset({"tv"})


class ItemsError(ValueError):
    """Words whose inputs cannot be told apart, or two runs over different numbers of inputs."""


@dataclass(frozen=True)
class Measure:
    """One number of a faithfulness table: a ranking's metric (``attention``, ``deletion_area``) or an
    intervention's total variation (``uniform``, ``tv``)."""

    source: str  # a ranking or an intervention, by its name in the JSON
    metric: str  # deletion_area, deletion_least_area, tau, or tv

    @property
    def label(self) -> str:
        return f"{self.source} {self.metric}"

    def value(self, word: dict) -> float:
        """The word's number (NaN where the word lacks it or it is null: strict JSON's NaN)."""
        block = word.get("interventions" if self.metric == "tv" else "rankings") or {}
        got = (block.get(self.source) or {}).get(self.metric)
        return math.nan if got is None else float(got)

    def part(self, word: dict) -> tuple[float, float]:
        """The word's share of the measure as a ratio of sums, (numerator, denominator): a mean's (value, 1); the gap
        closed's (random's deletion area - this ranking's, random's - leave-one-out's), so that a set of words' gap
        closed is the tables' share (random - ranking) / (random - leave-one-out) of their mean areas. NaNs where
        the word lacks a number."""
        if self.metric != GAP:
            return self.value(word), 1.0
        ours, rand, loo = (Measure(s, "deletion_area").value(word) for s in (self.source, "random", "leave_one_out"))
        return rand - ours, rand - loo

    def verdict(self, diff: Difference) -> str:
        """A - B's interval in words: which side is more faithful, or that the inputs cannot tell."""
        if not (math.isfinite(diff.low) and math.isfinite(diff.high)):
            return "undefined"  # a draw without a finite value (a measure no word of a kind has)
        if diff.low <= 0 <= diff.high:
            return "within noise"
        higher = "A" if diff.low > 0 else "B"
        if self.metric in NEITHER:
            return f"{higher} higher"
        lower = "B" if higher == "A" else "A"
        return f"{lower if self.metric in LOWER_BETTER else higher} more faithful"


def word_items(words: Sequence[dict]) -> list[int]:
    """Each word's input number, 0 to N - 1 in order of first appearance: its ``item``, or in a file without them,
    the count of end words before it. ItemsError where neither tells the inputs apart."""
    given = [w.get("item") for w in words]
    if words and all(i is not None for i in given):
        order = {i: k for k, i in enumerate(dict.fromkeys(given))}
        return [order[i] for i in given]
    if any(i is not None for i in given):
        raise ItemsError("some words have an item and some do not")
    if words and words[-1].get("word") != END_WORD:
        raise ItemsError(f"no items recorded, and the last word is not {END_WORD}: the inputs cannot be told apart")
    items, n = [], 0
    for w in words:
        items.append(n)
        n += w.get("word") == END_WORD
    return items


def measures_of(words: Sequence[dict]) -> list[Measure]:
    """Every number the words hold, in the tables' order: each ranking's gap closed (where the words hold random and
    leave-one-out's) and metrics, then each intervention's tv. Leave-one-out's tau against itself (1) is left out."""
    rankings = dict.fromkeys(name for w in words for name in (w.get("rankings") or {}))
    interventions = dict.fromkeys(name for w in words for name in (w.get("interventions") or {}))
    gap = {"random", "leave_one_out"} <= set(rankings)
    out = []
    for r in rankings:
        if gap and r not in ("random", "leave_one_out"):
            out.append(Measure(r, GAP))
        out += [Measure(r, m) for m in RANKING_METRICS if (r, m) != ("leave_one_out", "tau")]
    return out + [Measure(i, "tv") for i in interventions]


def mean_stats(words: Sequence[dict], items: Sequence[int], n_items: int, measures: Sequence[Measure]) -> ItemStats:
    """Each input's sums of each measure's parts (Measure.part: a mean's values and count): the ItemStats whose score
    of a draw is the measure over the drawn inputs' words (NaN where a draw holds none)."""
    stats = np.zeros((n_items, 2 * len(measures)))  # (N, 2M): per measure, the numerators' sum then the denominators'
    for word, item in zip(words, items, strict=True):
        for m, measure in enumerate(measures):
            num, den = measure.part(word)
            if math.isfinite(num) and math.isfinite(den):
                stats[item, 2 * m] += num
                stats[item, 2 * m + 1] += den

    def score(sums: np.ndarray, n: int) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            # rounded: a tie summed in another order is still a tie (not -0.000, nor "A above in 15%")
            return np.round(sums[:, 0::2] / sums[:, 1::2], 12)  # (R, M)

    return ItemStats(tuple(m.label for m in measures), stats, score)


def _kind(words: Sequence[dict], items: Sequence[int], kind: str) -> tuple[list[dict], list[int]]:
    """The words of ``kind`` ("all", "content", "function") with their items (an input may then hold none)."""
    kept = [(w, i) for w, i in zip(words, items, strict=True) if kind == "all" or w.get("kind") == kind]
    return [w for w, _ in kept], [i for _, i in kept]


def compare_runs(a_words: Sequence[dict], b_words: Sequence[dict], measures: Sequence[Measure], kind: str = "all",
                 resamples: int = 1000, seed: int = 0) -> list[tuple[Measure, Difference]]:  # fmt: skip
    """Each measure of run A against run B over the same inputs in the same order (their words may differ: each model
    writes its own caption), drawn whole. ItemsError where the runs measured different numbers of inputs."""
    a_items, b_items = word_items(a_words), word_items(b_words)
    n_a, n_b = max(a_items, default=-1) + 1, max(b_items, default=-1) + 1
    if n_a != n_b:
        raise ItemsError(f"A measured {n_a} inputs, B {n_b}: a paired comparison needs the same ones")
    (aw, ai), (bw, bi) = _kind(a_words, a_items, kind), _kind(b_words, b_items, kind)
    diffs = paired_bootstrap(mean_stats(aw, ai, n_a, measures), mean_stats(bw, bi, n_b, measures), resamples, seed)
    return list(zip(measures, diffs, strict=True))


def compare_rankings(words: Sequence[dict], a: str, b: str, kind: str = "all", resamples: int = 1000,
                     seed: int = 0) -> list[tuple[Measure, Difference]]:  # fmt: skip
    """Ranking ``a`` against ranking ``b`` (attention against random) on the same words, each ranking metric, the
    inputs drawn whole; against random, first the share of the gap to leave-one-out that ``a`` closes."""
    items = word_items(words)
    n = max(items, default=-1) + 1
    w, i = _kind(words, items, kind)
    metrics = [m for m in RANKING_METRICS if "leave_one_out" not in (a, b) or m != "tau"]
    held = {name for w in words for name in (w.get("rankings") or {})}
    if b == "random" and a != "leave_one_out" and "leave_one_out" in held:
        metrics.insert(0, GAP)  # random's own gap closed is 0: the row is this ranking's share, with its interval
    ours, theirs = [Measure(a, m) for m in metrics], [Measure(b, m) for m in metrics]
    stats_a, stats_b = mean_stats(w, i, n, ours), mean_stats(w, i, n, theirs)
    stats_b = ItemStats(stats_a.names, stats_b.stats, stats_b.score)  # paired_bootstrap compares like with like
    return list(zip(ours, paired_bootstrap(stats_a, stats_b, resamples, seed), strict=True))
