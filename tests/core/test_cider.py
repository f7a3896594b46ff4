"""Our CIDEr-D (text_attn.core.cider) against pycocoevalcap's Cider, per candidate, on a fixture corpus: the same
definition, with document frequencies computed once from a corpus and reused for any batch."""

from __future__ import annotations

import random

import numpy as np
import pytest
from pycocoevalcap.cider.cider import Cider

from text_attn.core.cider import CiderD, cider_d, ngram_counts

WORDS = "a the man dog red ball on grass runs with sits small big cat two of".split()


def _sentence(rng: random.Random) -> list[str]:
    """3..12 words from a 4-word pool: plenty of repeated n-grams within and across sentences."""
    pool = rng.sample(WORDS, 4)
    return [rng.choice(pool) for _ in range(rng.randint(3, 12))]


def _corpus(n_images: int = 36, seed: int = 0) -> dict[int, list[list[str]]]:
    rng = random.Random(seed)
    corpus = {i: [_sentence(rng) for _ in range(5)] for i in range(n_images)}
    corpus[0][1] = ["a", "dog", "a", "dog", "a", "dog"]  # a reference with repeated bigrams
    return corpus


def _candidates(corpus: dict[int, list[list[str]]], seed: int) -> dict[int, list[str]]:
    """One candidate per image, of every awkward kind: empty, one word, equal to a reference, unseen words..."""
    rng = random.Random(seed)
    kinds = [
        lambda refs: [],
        lambda refs: [refs[0][0]],
        lambda refs: list(refs[2]),
        lambda refs: _sentence(rng),
        lambda refs: ["a"] * 7,
        lambda refs: [*refs[1][:3], "zebra", "zebra"],  # n-grams no corpus reference has
        lambda refs: refs[0] + refs[3],
    ]
    return {i: kinds[(i + seed) % len(kinds)](refs) for i, refs in corpus.items()}


def _coco(corpus: dict[int, list[list[str]]], cands: dict[int, list[str]]) -> np.ndarray:
    """pycocoevalcap's per-image CIDEr-D, df from exactly these references (strings, as coco_metrics gives them)."""
    gts = {k: [" ".join(r) for r in refs] for k, refs in corpus.items()}
    res = {k: [" ".join(cands[k])] for k in corpus}
    return np.asarray(Cider().compute_score(gts, res)[1])


def test_equals_pycocoevalcap_per_candidate():
    corpus = _corpus()
    cands = _candidates(corpus, seed=0)
    expect = _coco(corpus, cands)
    keys = list(corpus)
    ours = CiderD([corpus[k] for k in keys]).scores([cands[k] for k in keys], [corpus[k] for k in keys])
    assert ours.shape == (len(keys),)
    np.testing.assert_allclose(ours, expect, rtol=0, atol=1e-6)
    assert expect.max() > 1.0 and (expect == 0).any()  # the fixture spans real matches and total misses
    mean, per_image = cider_d(corpus, cands)  # pycocoevalcap's mode: df from the scored references
    np.testing.assert_allclose(per_image, expect, rtol=0, atol=1e-6)
    assert mean == pytest.approx(float(expect.mean()), abs=1e-9)


def test_several_candidates_per_image_share_the_cached_references():
    """SCST's batch: 5 samples + 1 greedy per image, all against the same references, in one call."""
    corpus = _corpus()
    keys = list(corpus)
    scorer = CiderD(corpus)
    runs = [_candidates(corpus, seed=s) for s in range(6)]
    cands = [run[k] for k in keys for run in runs]  # image-major: the 6 candidates of an image side by side
    refs = [corpus[k] for k in keys for _ in runs]  # the same list object repeated
    ours = scorer.scores(cands, refs).reshape(len(keys), len(runs))
    for j, run in enumerate(runs):
        np.testing.assert_allclose(ours[:, j], _coco(corpus, run), rtol=0, atol=1e-6)
    assert len(scorer._cache) == len(keys)  # one tf-idf set per image, reused across its candidates
    copies = [[list(r) for r in corpus[k]] for k in keys for _ in runs]  # equal content, new objects: cache hits
    np.testing.assert_array_equal(scorer.scores(cands, copies).reshape(len(keys), -1), ours)
    assert len(scorer._cache) == len(keys)
    by_key = scorer.scores_by_key(cands, [k for k in keys for _ in runs])
    np.testing.assert_array_equal(by_key.reshape(len(keys), -1), ours)
    repeated = scorer.scores([cands[1], cands[0], cands[1]], [refs[0]] * 3)  # a sample equal to the greedy caption
    np.testing.assert_array_equal(repeated, ours[0, [1, 0, 1]])


def test_document_frequencies_from_a_training_corpus_score_any_batch():
    """df from the whole corpus, once; a batch of a few images scores as pycocoevalcap does over the whole corpus
    (and NOT as pycocoevalcap over the batch alone, whose df would come from those few images)."""
    corpus = _corpus()
    cands = _candidates(corpus, seed=3)
    full = _coco(corpus, cands)
    scorer = CiderD([corpus[k] for k in corpus])
    batch = [5, 17, 2, 30]
    ours = scorer.scores([cands[k] for k in batch], [corpus[k] for k in batch])
    np.testing.assert_allclose(ours, full[batch], rtol=0, atol=1e-6)
    alone = _coco({k: corpus[k] for k in batch}, cands)
    assert np.abs(alone - ours).max() > 1e-3


def test_strings_and_token_lists_agree_and_bad_input():
    corpus = _corpus(8)
    cands = _candidates(corpus, seed=1)
    keys = list(corpus)
    scorer = CiderD([corpus[k] for k in keys])
    as_lists = scorer.scores([cands[k] for k in keys], [corpus[k] for k in keys])
    as_text = scorer.scores([" ".join(cands[k]) for k in keys], [[" ".join(r) for r in corpus[k]] for k in keys])
    np.testing.assert_array_equal(as_lists, as_text)
    assert ngram_counts(["a", "b", "a", "b"], 2) == {("a",): 2, ("b",): 2, ("a", "b"): 2, ("b", "a"): 1}
    with pytest.raises(ValueError, match="image 1 has no reference"):
        CiderD([[["a"]], []])
    with pytest.raises(ValueError, match="corpus is empty"):
        CiderD([])
    with pytest.raises(ValueError, match="2 candidates but 1 reference lists"):
        scorer.scores([["a"], ["b"]], [corpus[0]])
    with pytest.raises(ValueError, match="needs the corpus as a mapping"):
        scorer.scores_by_key([["a"]], [0])
