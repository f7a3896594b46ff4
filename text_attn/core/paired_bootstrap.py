"""Is A better than B, or is the difference the test set's luck? A paired bootstrap (Koehn 2004): the test set's
items drawn again with replacement, the same draw for both systems, each draw scored as a corpus; the difference's
2.5th and 97.5th percentiles over the draws are its 95% interval. An interval that holds 0 says the test set cannot
tell the two apart. It measures one source of noise, the choice of test items; another run of training (another
seed) is another: docs/results.md's seed studies measure that one.

Scores come from `score_stats.ItemStats` (each item's counts), so a draw costs a sum, not a scoring pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from text_attn.core.score_stats import ItemStats

# at most this many counts summed at once: (draws, items, counts) in one array
_CHUNK = 4_000_000


@dataclass(frozen=True)
class Difference:
    """One score of A against B, with its paired-bootstrap spread."""

    name: str
    a: float  # A's score on the whole set
    b: float
    low: float  # the 95% interval of A - B over the draws
    high: float
    a_ahead: float  # the share of draws in which A scores above B
    a_range: tuple[float, float] = (float("nan"), float("nan"))  # A's own score's 95% interval over the draws
    b_range: tuple[float, float] = (float("nan"), float("nan"))  # (against a fixed number: a paper's)

    @property
    def delta(self) -> float:
        return self.a - self.b

    @property
    def verdict(self) -> str:
        """In words: which is ahead, or that the set cannot tell."""
        if self.low > 0:
            return "A ahead"
        if self.high < 0:
            return "B ahead"
        return "within noise"


def draws(items: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, items): each draw's item indices, uniform with replacement; seeded, so a table repeats."""
    return np.random.default_rng(seed).integers(0, items, size=(resamples, items))


def resampled_scores(stats: ItemStats, rows: np.ndarray) -> np.ndarray:
    """(R, M): the corpus scores of each draw (rows (R, N) indices into stats)."""
    n, width = rows.shape[1], stats.stats.shape[1]
    step = max(1, _CHUNK // max(1, n * width))
    sums = np.concatenate([stats.stats[rows[i : i + step]].sum(1) for i in range(0, len(rows), step)])  # (R, K)
    return stats.score(sums, n)


def paired_bootstrap(a: ItemStats, b: ItemStats, resamples: int = 1000, seed: int = 0) -> list[Difference]:
    """Every score of A against B (the same items in the same order, scored the same way), over ``resamples`` draws."""
    if a.names != b.names:
        raise ValueError(f"paired_bootstrap: A is scored by {a.names}, B by {b.names}")
    if a.stats.shape[0] != b.stats.shape[0]:
        raise ValueError(f"paired_bootstrap: A has {a.stats.shape[0]} items, B {b.stats.shape[0]}")
    if resamples < 1:
        raise ValueError(f"paired_bootstrap: resamples must be at least 1, not {resamples}")
    rows = draws(a.stats.shape[0], resamples, seed)
    score_a, score_b = resampled_scores(a, rows), resampled_scores(b, rows)  # (R, M) each
    whole_a, whole_b = a.corpus(), b.corpus()
    out = []
    for m, name in enumerate(a.names):
        diff = score_a[:, m] - score_b[:, m]
        low, high = np.percentile(diff, [2.5, 97.5])
        a_range, b_range = (tuple(map(float, np.percentile(s[:, m], [2.5, 97.5]))) for s in (score_a, score_b))
        out.append(Difference(name, whole_a[name], whole_b[name], float(low), float(high),
                              float((diff > 0).mean()), a_range, b_range))  # fmt: skip
    return out
