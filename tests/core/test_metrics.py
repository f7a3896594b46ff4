"""Tests for text_attn.core.metrics: hand-computed BLEU, length buckets, and the coco-caption wrapper."""

from __future__ import annotations

import math
import subprocess

import pytest

from text_attn.core import metrics
from text_attn.core.metrics import (
    DEFAULT_BUCKETS,
    bleu_by_length,
    bucket_label,
    coco_metrics,
    corpus_bleu,
    java_available,
)


def toks(s: str) -> list[str]:
    return s.split()


# ----------------------------------------------------------------------------------------------
# corpus BLEU


def test_identical_corpus_scores_one():
    sents = ["the cat sat on the mat", "a dog runs in the park today"]
    scores = corpus_bleu([[toks(s)] for s in sents], [toks(s) for s in sents])
    assert set(scores) == {"bleu1", "bleu2", "bleu3", "bleu4"}
    for value in scores.values():
        assert value == pytest.approx(1.0)


def test_hand_computed_bleu():
    # ref "a b c d", hyp "a b c e": same length -> brevity penalty 1.
    # p1 = 3/4, p2 = 2/3 (ab, bc of ab bc ce), p3 = 1/2 (abc of abc bce), p4 = 0/1 -> method1: 0.1/1.
    scores = corpus_bleu([[toks("a b c d")]], [toks("a b c e")])
    assert scores["bleu1"] == pytest.approx(0.75)
    assert scores["bleu2"] == pytest.approx(math.sqrt(0.75 * 2 / 3))  # = sqrt(1/2)
    assert scores["bleu3"] == pytest.approx((0.75 * 2 / 3 * 0.5) ** (1 / 3))
    assert scores["bleu4"] == pytest.approx((0.75 * 2 / 3 * 0.5 * 0.1) ** (1 / 4))


def test_counts_are_pooled_over_the_corpus():
    # Sentence precisions 4/4 and 1/2 average to 0.75, but corpus BLEU pools counts: 5/6.
    refs = [[toks("a b c d")], [toks("x z")]]
    hyps = [toks("a b c d"), toks("x y")]
    assert corpus_bleu(refs, hyps)["bleu1"] == pytest.approx(5 / 6)


def test_brevity_penalty_and_closest_reference():
    # hyp length 3 vs ref length 6: BP = exp(1 - 6/3) = e^-1, all unigrams match.
    assert corpus_bleu([[toks("a b c d e f")]], [toks("a b c")])["bleu1"] == pytest.approx(math.exp(-1))
    # With a second reference of length 3, the closest reference length is used -> BP = 1.
    refs = [[toks("a b c d e f"), toks("a b c")]]
    assert corpus_bleu(refs, [toks("a b c")])["bleu1"] == pytest.approx(1.0)


def test_corpus_bleu_equals_sacrebleu_with_empty_and_short_outputs():
    """A failed translation is an empty line and short ones are common: nltk's corpus_bleu counted one n-gram of each
    order for a hypothesis with none, scoring the first corpus 34.14 (sacreBLEU: 44.93, BP = e^(1 - 9/5) with every
    n-gram matched) and the second 88.01 (100)."""
    import sacrebleu

    corpora = [
        (["one two three four five", ""], ["one two three four five", "alpha beta gamma delta"]),
        (["a b c d e f", "x y"], ["a b c d e f", "x y"]),
        (["the cat sat on the mat", "a dog", "", "the dog ran in the park and the cat sat"],
         ["the cat sat on a mat", "a dog runs", "nothing here", "the dog ran in a park while the cat sat"]),
    ]  # fmt: skip
    for hyps, refs in corpora:
        ours = corpus_bleu([[toks(r)] for r in refs], [toks(h) for h in hyps])["bleu4"]
        theirs = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", smooth_method="none").score / 100
        assert ours == pytest.approx(theirs, rel=1e-12), hyps
    assert corpus_bleu([[toks("a b")]], [[]]) == {f"bleu{n}": 0.0 for n in range(1, 5)}  # nothing written: 0
    # no word of any reference: 0 (smoothing gave 0.028); outputs all shorter than n: BLEU-n and above 0 (it rose
    # with n: 0.012, 0.017, 0.024, 0.028)
    assert corpus_bleu([[toks("a b c d")], [toks("e f")]], [toks("x y z"), toks("w v")])["bleu4"] == 0.0
    short = corpus_bleu([[toks("a b c")], [toks("d e")]], [toks("a b x"), toks("d q")])
    assert short["bleu1"] > short["bleu2"] > 0 and short["bleu3"] > 0 and short["bleu4"] == 0.0


def test_corpus_bleu_equals_nltks_where_every_output_has_four_words():
    """Where no order is missing from a hypothesis, the pooled counts are nltk's: random corpora, several references."""
    import random

    from nltk.translate.bleu_score import SmoothingFunction
    from nltk.translate.bleu_score import corpus_bleu as nltk_bleu

    rng = random.Random(0)
    words = "a b c d e f g h".split()
    for _ in range(20):
        refs = [[rng.choices(words, k=rng.randint(3, 12)) for _ in range(rng.randint(1, 3))] for _ in range(6)]
        hyps = [rng.choices(words, k=rng.randint(4, 12)) for _ in range(6)]
        weights = [tuple(1.0 / n for _ in range(n)) for n in range(1, 5)]
        theirs = nltk_bleu(refs, hyps, weights=weights, smoothing_function=SmoothingFunction(epsilon=0.1).method1)
        ours = corpus_bleu(refs, hyps)
        assert [ours[f"bleu{n}"] for n in range(1, 5)] == pytest.approx(theirs, rel=1e-12)


def test_corpus_bleu_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        corpus_bleu([], [])
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        corpus_bleu([[toks("a")], [toks("b")]], [toks("a")])
    from text_attn.core.metrics import sacre_scores, text_scores

    # named as the call the caller made ("sacre_scores: ..." of text_scores), and an empty corpus said so ("0
    # references but 0 hypotheses" named no fault)
    with pytest.raises(ValueError, match="^text_scores: 2 references but 1 hypotheses$"):
        text_scores(["a", "x"], ["a"])
    for scores in (text_scores, sacre_scores):
        with pytest.raises(ValueError, match=rf"^{scores.__name__}: empty corpus \(no references and no hypotheses\)$"):
            scores([], [])


# ----------------------------------------------------------------------------------------------
# BLEU by length


def test_bucket_label():
    assert bucket_label(5, 10) == "5-10"


def test_bleu_by_length_buckets_and_boundaries():
    # Each sentence has its own words; "good" hypotheses copy the reference, "bad" ones share nothing.
    lengths = [5, 9, 10, 19, 50, 60, 61, 4]
    good = [True, False, True, True, True, True, False, False]
    refs, hyps = [], []
    for i, ok in enumerate(good):
        ref = [f"w{i}_{j}" for j in range(6)]
        refs.append([ref])
        hyps.append(list(ref) if ok else [f"bad{i}_{j}" for j in range(6)])

    out = bleu_by_length(lengths, refs, hyps)
    assert list(out) == [bucket_label(lo, hi) for lo, hi in DEFAULT_BUCKETS]
    counts = {label: v["count"] for label, v in out.items()}
    # 10 opens "10-20" (half-open buckets); 60 closes the last bucket; 61 and 4 are ignored.
    assert counts == {"5-10": 2, "10-20": 2, "20-30": 0, "30-40": 0, "40-50": 0, "50-60": 2}
    assert out["10-20"]["bleu"] == pytest.approx(1.0)  # would drop if the bad 9 or 61 leaked in
    assert out["50-60"]["bleu"] == pytest.approx(1.0)
    # "5-10" holds one perfect and one wrong sentence: equal to corpus BLEU on exactly those two.
    assert out["5-10"]["bleu"] == pytest.approx(corpus_bleu(refs[:2], hyps[:2])["bleu4"])
    assert out["5-10"]["bleu"] < 1.0
    for label in ("20-30", "30-40", "40-50"):
        assert math.isnan(out[label]["bleu"])


def test_bleu_by_length_custom_buckets_and_n():
    refs = [[toks("a b c d")], [toks("a b c d")]]
    hyps = [toks("a b c e"), toks("a b c d")]
    out = bleu_by_length([3, 7], refs, hyps, buckets=[(0, 5), (5, 7)], n=1)
    assert out["0-5"] == {"bleu": pytest.approx(0.75), "count": 1}
    assert out["5-7"] == {"bleu": pytest.approx(1.0), "count": 1}  # last bucket includes 7
    with pytest.raises(ValueError, match="differ in length"):
        bleu_by_length([3], refs, hyps)


# ----------------------------------------------------------------------------------------------
# coco-caption metrics (METEOR off unless the test is about METEOR: its JVM is slow to start)

REFS = {
    "img1": ["a man rides a brown horse", "a person riding a horse on a beach"],
    "img2": ["two dogs play in the green grass", "dogs playing on the grass"],
    "img3": ["a red car parked on the street", "a car is parked by the road"],
}
GOOD = {"img1": "a man rides a brown horse", "img2": "two dogs play in the green grass"}
GOOD["img3"] = "a red car parked on the street"
BAD = {"img1": "a horse", "img2": "a cat sleeps on a sofa", "img3": "the street"}


def test_coco_identical_hypotheses(capsys):
    scores = coco_metrics(REFS, GOOD, meteor=False)
    assert list(scores) == ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "ROUGE_L", "CIDEr"]
    assert scores["Bleu_4"] == pytest.approx(1.0, abs=1e-6)
    assert scores["ROUGE_L"] == pytest.approx(1.0)
    assert scores["CIDEr"] > 0
    assert capsys.readouterr().out == ""  # pycocoevalcap's BLEU chatter is swallowed


def test_coco_worse_hypotheses_score_lower():
    good = coco_metrics(REFS, GOOD, meteor=False)
    bad = coco_metrics(REFS, BAD, meteor=False)
    for key in good:
        assert bad[key] < good[key], key


def test_cider_is_corpus_dependent():
    # One image: every n-gram occurs in all (one) reference documents -> IDF log(1/1) = 0 -> CIDEr 0.
    one = coco_metrics({"x": REFS["img1"]}, {"x": GOOD["img1"]}, meteor=False)
    assert one["CIDEr"] == pytest.approx(0.0)
    assert one["ROUGE_L"] == pytest.approx(1.0)


def test_coco_scores_equal_hand_computed_bleu_and_rouge():
    """Corpus BLEU-1..3 and ROUGE-L worked out by hand (the tests above checked only identical = 1 and worse =
    lower, which keys swapped or a wrong mean would pass): 6 hypothesis words against references of 7, every n-gram
    matched, so BLEU-n is the brevity penalty exp(1 - 7/6); ROUGE-L (beta 1.2) of "a dog runs" against "a dog runs
    fast" is 2.44 P R / (R + 1.44 P) with P = 1, R = 3/4, and 1 for the other, averaged over the two."""
    refs = {"a": ["a dog runs fast"], "b": ["two cats sleep"]}
    hyps = {"a": "a dog runs", "b": "two cats sleep"}
    corpus, per = metrics.coco_scores(refs, hyps, meteor=False)
    brevity = math.exp(1 - 7 / 6)
    for n in (1, 2, 3):
        assert corpus[f"Bleu_{n}"] == pytest.approx(brevity, abs=1e-6), n
    rouge_a = 2.44 * 0.75 / (0.75 + 1.44)
    assert corpus["ROUGE_L"] == pytest.approx((rouge_a + 1.0) / 2, abs=1e-6)
    assert corpus["Bleu_4"] < 0.05 and set(per) == {"a", "b"}  # no 4-gram in either: coco's tiny smoothing alone


def test_coco_rejects_mismatched_ids():
    with pytest.raises(ValueError, match="1 missing"):
        coco_metrics(REFS, {"img1": "a horse", "img2": "dogs"}, meteor=False)
    with pytest.raises(ValueError, match="1 extra"):
        coco_metrics(REFS, {**GOOD, "img9": "x"}, meteor=False)
    with pytest.raises(ValueError, match="empty"):
        coco_metrics({}, {}, meteor=False)


def test_no_java_skips_meteor_with_one_notice(monkeypatch, capsys):
    monkeypatch.setattr(metrics, "java_available", lambda: False)
    monkeypatch.setattr(metrics, "_notices_shown", set())
    first = coco_metrics(REFS, GOOD)
    second = coco_metrics(REFS, GOOD)
    assert "METEOR" not in first and "METEOR" not in second
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "METEOR" in err  # one line, once per process
    with pytest.raises(RuntimeError, match="Java"):
        coco_metrics(REFS, GOOD, meteor=True)


def test_meteor_failure_degrades_to_a_notice(monkeypatch, capsys):
    def broken(gts, res):
        raise OSError("jvm crashed")

    monkeypatch.setattr(metrics, "java_available", lambda: True)
    monkeypatch.setattr(metrics, "_meteor_score", broken)
    monkeypatch.setattr(metrics, "_notices_shown", set())
    scores = coco_metrics(REFS, GOOD)
    assert "METEOR" not in scores and scores["ROUGE_L"] == pytest.approx(1.0)
    err = capsys.readouterr().err
    assert "METEOR failed" in err and "jvm crashed" in err


def test_java_available_false_without_java(monkeypatch):
    monkeypatch.setattr(metrics.shutil, "which", lambda name: None)
    java_available.cache_clear()
    try:
        assert java_available() is False
    finally:
        java_available.cache_clear()  # do not leave the faked answer cached for other tests


@pytest.mark.slow
@pytest.mark.skipif(not java_available(), reason="METEOR needs Java")
def test_meteor_with_java_and_process_is_closed(monkeypatch, capsys):
    # The only test that starts METEOR's JVM (several seconds).
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def spy(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(metrics.subprocess, "Popen", spy)
    scores = coco_metrics(REFS, GOOD)
    assert list(scores) == ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"]
    assert scores["METEOR"] == pytest.approx(1.0, abs=1e-6)
    jvms = [p for p in started if "-jar" in p.args]  # not a `java -version` probe
    assert len(jvms) == 1 and jvms[0].poll() is not None  # the METEOR JVM has been shut down
    assert capsys.readouterr().out == ""


def test_text_scores_read_both_sides_in_nfc():
    """A reference file typed with its accents apart (NFD) scored identical Czech at sacreBLEU 25.0, chrF 31.9."""
    import unicodedata

    from text_attn.core.metrics import text_scores

    refs = ["Muž řídí červené kolo na ulici.", "Dvě ženy sedí na lavičce v parku."]
    decomposed = [unicodedata.normalize("NFD", r) for r in refs]
    assert decomposed != refs
    for scores in (text_scores(decomposed, refs), text_scores(refs, decomposed)):
        assert scores["sacrebleu"] == pytest.approx(100) and scores["chrf"] == pytest.approx(100)
        assert scores["bleu_tok"] == pytest.approx(100)
