"""Each item's counts towards a corpus score, so that a corpus can be scored again on any multiset of its items
(a bootstrap resample: paired_bootstrap.py) by summing rows instead of scoring texts.

- `coco_item_stats`: coco-caption's BLEU-1..4 (per item: its length, its closest reference's length, the n-grams it
  holds and those clipped by the references), CIDEr-D and ROUGE-L (per item: its own score; a corpus's is their
  mean). CIDEr-D's n-gram weights come from the whole set's references and stay as they are on a resample (the
  usual approximation: a resample's duplicated photos would otherwise change the weights themselves).
- `sacre_item_stats`: sacreBLEU and chrF as the translate command scores them, from sacreBLEU's own per-sentence
  statistics.

Each returns an `ItemStats`: the counts, and the function that turns their sums into the corpus scores.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

# coco-caption's bleu_scorer: added to every count, so that an order without a match gives ~0, not a division error
_TINY, _SMALL = 1e-15, 1e-9


@dataclass(frozen=True)
class ItemStats:
    """A corpus's items as counts: ``score(sums, n)`` of ``stats[rows].sum(0)`` is the corpus score of those rows."""

    names: tuple[str, ...]  # the scores, in the order score() returns them
    stats: np.ndarray  # (N, K): item i's counts
    # sums (R, K) of R multisets of n items each -> (R, len(names)) their corpus scores (on 0-100)
    score: Callable[[np.ndarray, int], np.ndarray]

    def corpus(self) -> dict[str, float]:
        """The scores of all the items, once each."""
        values = self.score(self.stats.sum(0, keepdims=True), len(self.stats))[0]
        return {name: float(v) for name, v in zip(self.names, values, strict=True)}


def _coco_score(sums: np.ndarray, n: int) -> np.ndarray:
    """sums (R, 12): testlen, reflen, guess 1..4, correct 1..4, CIDEr-D, ROUGE-L -> (R, 6) on 0-100."""
    test, ref, guess, correct = sums[:, 0], sums[:, 1], sums[:, 2:6], sums[:, 6:10]
    # bleu_scorer.compute_score: BLEU-k is the k-th root of the product of orders 1..k's precisions
    log_p = np.cumsum(np.log((correct + _TINY) / (guess + _SMALL)), axis=1)  # (R, 4)
    bleu = np.exp(log_p / np.arange(1, 5))
    ratio = (test + _TINY) / (ref + _SMALL)
    brevity = np.where(ratio < 1, np.exp(1 - 1 / np.minimum(ratio, 1)), 1.0)  # min: no overflow warning where unused
    means = sums[:, 10:12] / n
    return 100 * np.concatenate([bleu * brevity[:, None], means], axis=1)


def coco_item_stats(
    references: dict[Hashable, list[str]], hypotheses: dict[Hashable, str], ptb: bool = False
) -> tuple[list[Hashable], ItemStats]:
    """coco-caption's BLEU-1..4, CIDEr-D and ROUGE-L of each item (arguments as metrics.coco_scores takes them; with
    ``ptb`` its PTB tokenizer, Java), as counts: the ids in row order, and their ItemStats. Summed over all the
    rows, the scores are coco_scores' own (tests/core/test_paired_bootstrap.py)."""
    from pycocoevalcap.bleu.bleu_scorer import cook_refs, cook_test
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    from text_attn.core.metrics import coco_prepared

    gts, res = coco_prepared(references, hypotheses, ptb)
    ids = list(gts)
    stats = np.zeros((len(ids), 12))
    for row, key in zip(stats, ids, strict=True):
        cooked = cook_test(res[key][0], cook_refs(gts[key]), eff="closest")  # coco's Bleu: the closest reference
        row[0], row[1] = cooked["testlen"], cooked["reflen"]
        row[2:6], row[6:10] = cooked["guess"], cooked["correct"]
    with contextlib.redirect_stdout(io.StringIO()):  # the scorers' own prints
        stats[:, 10] = Cider().compute_score(gts, res)[1]
        stats[:, 11] = Rouge().compute_score(gts, res)[1]
    names = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "CIDEr-D", "ROUGE-L")
    return ids, ItemStats(names, stats, _coco_score)


def sacre_item_stats(
    references: Sequence[str], hypotheses: Sequence[str], tokenize: str = "13a", lowercase: bool = False
) -> ItemStats:
    """sacreBLEU and chrF (as metrics.sacre_scores: one reference each, NFC) of each sentence, as sacreBLEU's own
    sufficient statistics; a resample is scored by sacreBLEU itself from their sums."""
    from text_attn.core.metrics import sacre_prepared

    bleu, chrf, refs, hyps = sacre_prepared(references, hypotheses, tokenize, lowercase, "sacre_item_stats")
    # the statistics sacreBLEU's own significance tests resample (sacrebleu/significance.py)
    parts = [np.asarray(m._extract_corpus_statistics(hyps, refs), dtype=np.float64) for m in (bleu, chrf)]
    width = parts[0].shape[1]

    def score(sums: np.ndarray, n: int) -> np.ndarray:
        # sacreBLEU's statistics are integer counts: rounded back so that its own arithmetic sees what it made
        as_counts = np.rint(sums).astype(np.int64).tolist()
        return np.array([[bleu._compute_score_from_stats(row[:width]).score,
                          chrf._compute_score_from_stats(row[width:]).score] for row in as_counts])  # fmt: skip

    return ItemStats(("sacreBLEU", "chrF"), np.concatenate(parts, axis=1), score)
