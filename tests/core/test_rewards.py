"""The self-critical reward (text_attn.core.rewards): smoothed sentence BLEU equals nltk's ``sentence_bleu`` with the
same smoothing, on words and on ids, with one or several references, in the corner cases too (empty or very short
hypotheses, no match at all, hypotheses longer than the reference)."""

from __future__ import annotations

import random
import warnings

import pytest
from nltk.translate.bleu_score import SmoothingFunction
from nltk.translate.bleu_score import sentence_bleu as nltk_sentence_bleu

from text_attn.core.rewards import bleu_rewards, sentence_bleu

NLTK = {"add-one": SmoothingFunction().method2, "epsilon": SmoothingFunction().method1}


def _nltk(refs, hyp, smoothing: str) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nltk warns about zero counts on the corner cases
        return nltk_sentence_bleu(refs, hyp, smoothing_function=NLTK[smoothing])


def _random_cases(n: int, seed: int = 0):
    """Small vocabularies and short sentences: many partial n-gram matches, repeats to clip, empty hypotheses."""
    rng = random.Random(seed)
    for _ in range(n):
        vocab = rng.choice([3, 6, 20])
        refs = [[rng.randrange(vocab) for _ in range(rng.randrange(1, 14))] for _ in range(rng.choice([1, 1, 2, 3]))]
        if rng.random() < 0.3:  # a hypothesis close to a reference: one word changed or dropped
            hyp = list(refs[0])
            hyp[rng.randrange(len(hyp))] = rng.randrange(vocab)
            hyp = hyp[: rng.randrange(len(hyp) + 1)] if rng.random() < 0.3 else hyp
        else:
            hyp = [rng.randrange(vocab) for _ in range(rng.randrange(0, 14))]
        yield refs, hyp


@pytest.mark.parametrize("smoothing", ["add-one", "epsilon"])
def test_sentence_bleu_equals_nltk(smoothing):
    for refs, hyp in _random_cases(600):
        assert sentence_bleu(refs, hyp, smoothing=smoothing) == pytest.approx(_nltk(refs, hyp, smoothing), abs=1e-12)


@pytest.mark.parametrize("smoothing", ["add-one", "epsilon"])
def test_words_and_corner_cases(smoothing):
    ref = "the cat sat on the mat".split()
    cases = [
        ref,  # identical: 1
        "the cat sat on a mat".split(),
        "the the the the".split(),  # clipped unigrams
        "cat".split(),  # shorter than every n-gram order above 1
        "a dog".split(),  # no unigram matches: 0
        [],  # empty: 0
        "the cat sat on the mat and the dog sat on the log".split(),  # longer than the reference: no brevity penalty
    ]
    for hyp in cases:
        assert sentence_bleu([ref], hyp, smoothing=smoothing) == pytest.approx(_nltk([ref], hyp, smoothing), abs=1e-12)
    assert sentence_bleu([ref], ref, smoothing=smoothing) == pytest.approx(1.0)
    assert sentence_bleu([ref], [], smoothing=smoothing) == 0.0


def test_bleu_rewards_scores_k_samples_per_reference():
    refs = [[1, 2, 3, 4, 5], [7, 8, 9, 6]]
    hyps = [[1, 2, 3, 4, 5], [1, 2, 9], [5, 4], [7, 8, 9, 6], [9], [7, 8, 9, 9]]  # three samples each
    got = bleu_rewards(refs, hyps, samples_per_reference=3)
    want = [sentence_bleu([refs[i // 3]], h) for i, h in enumerate(hyps)]
    assert got == pytest.approx(want) and got[0] == pytest.approx(1.0) and got[3] == pytest.approx(1.0)


def test_bad_arguments_are_one_clear_error():
    with pytest.raises(ValueError, match="6 hypotheses for 2 references x 2 samples each"):
        bleu_rewards([[1], [2]], [[1]] * 6, samples_per_reference=2)
    with pytest.raises(ValueError, match="unknown BLEU smoothing 'none'"):
        sentence_bleu([[1]], [1], smoothing="none")
    with pytest.raises(ValueError, match="at least one reference"):
        sentence_bleu([], [1])


def test_unigram_fmean_by_hand():
    from text_attn.core.rewards import unigram_fmean

    ref = "a dog runs on the grass".split()
    # every word, in order: P = R = 1, one chunk of 6: 1 - 0.5 (1/6)^3
    assert unigram_fmean([ref], ref) == pytest.approx(1 - 0.5 / 216)
    # "a dog on grass": 4 matches at reference positions 0 1 3 5 -> chunks [0 1] [3] [5] = 3; P = 1, R = 4/6
    p, r = 1.0, 4 / 6
    by_hand = 10 * p * r / (r + 9 * p) * (1 - 0.5 * (3 / 4) ** 3)
    assert unigram_fmean([ref], "a dog on grass".split()) == pytest.approx(by_hand)
    # recall weighs nine times precision: leaving words out costs more than adding wrong ones
    short, padded = "a dog".split(), "a dog runs on the grass near a big red house".split()
    assert unigram_fmean([ref], padded) > unigram_fmean([ref], short)
    # each reference word matches once ("a a" has one match with a one-"a" reference); the best reference counts
    assert unigram_fmean([ref], ["a", "a"]) == pytest.approx(10 * 0.5 * (1 / 6) / (1 / 6 + 9 * 0.5) * (1 - 0.5))
    assert unigram_fmean([["cat"], ref], ref) == unigram_fmean([ref], ref)
    assert unigram_fmean([ref], []) == 0.0 and unigram_fmean([ref], ["cat"]) == 0.0
