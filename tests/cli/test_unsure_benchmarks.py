"""``benchmarks/unsure_cost.py`` (translating with the probabilities kept against without and against reading back,
the counts of words under the threshold: on a tiny model, those of translate(probs=True)) and
``benchmarks/caption_unsure.py`` (the same costs for captions; caption words binned by their probability, each bin's
share in no reference: hand-counted); bad input is one line."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file
from sacrebleu.metrics import CHRF

from text_attn.translation.translator import Translator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import caption_unsure  # noqa: E402
import unsure_attention  # noqa: E402
import unsure_cost  # noqa: E402


def test_the_counts_are_those_of_the_translations_with_their_probabilities(tmp_path):
    translator = Translator.load(tiny_subword_model_file(tmp_path))
    refs = [f"reference {k}" for k in range(4)]
    row = unsure_cost.cost(translator, DE[:4], 0.5, refs)
    out = translator.translate(DE[:4], probs=True)  # the same recorded decoding
    found = [tr.unsure(0.5) for tr in out]
    assert row["sentences"] == 4 and row["words"] == sum(len(tr.words) for tr in out)
    assert row["translations_unsure"] == sum(map(bool, found)) and row["words_unsure"] == sum(map(len, found))
    assert row["translate_ms"] > 0 and row["read_back_ms"] > 0
    assert row["ratio"] == pytest.approx(row["read_back_ms"] / row["translate_ms"])
    assert row["kept_ratio"] == pytest.approx(row["with_probs_ms"] / row["translate_ms"])
    assert 0 <= row["largest_difference"] < 1e-5  # the kept probabilities are the read-back ones
    # with references: each group's corpus chrF, sacrebleu's on its own sentences
    for name, keep in (("chrf_unsure", True), ("chrf_sure", False)):
        pairs = [(tr.text, r) for tr, r, f in zip(out, refs, found, strict=True) if bool(f) == keep]
        want = CHRF().corpus_score([h for h, _ in pairs], [[r for _, r in pairs]]).score if pairs else None
        assert row[name] == (pytest.approx(want) if want is not None else None)


def test_the_caption_run_keeps_the_probabilities_a_reading_back_gives():
    import torch

    from captioning.model.captioner import Captioner
    from captioning.training.shapes import make_scene

    shapes = Captioner.load("shapes")
    images = [shapes.preprocess(make_scene(random.Random(k), size=shapes.preprocess.image_size).image)
              for k in range(3)]  # fmt: skip
    captions, took = caption_unsure.run(shapes, images)
    plain = shapes.caption_features(shapes.encode(torch.stack(images)), **shapes.decoding())
    assert [c.words for c in captions] == [c.words for c in plain]
    assert all(len(c.probs) == len(c.words) and c.end_prob is not None for c in captions)
    assert 0 <= took["differs"] < 1e-5 and min(took["encode"], took["plain"], took["kept"], took["read"]) > 0


def test_caption_words_are_binned_by_probability_against_all_five_references():
    captions = [["a", "dog", "runs", "fast"], ["a", "cat"]]
    probs = [[0.9, 0.03, 0.15, 0.07], [0.6, 0.3]]
    refs = [[["a", "dog", "running"], ["the", "Runs!"]], [["a", "kitten"]]]  # lowercased, punctuation stripped
    rows = caption_unsure.binned(captions, probs, refs)
    assert [(r["words"], r["not_in_reference"]) for r in rows] == [(1, 0), (1, 1), (1, 0), (1, 1), (2, 0)]
    assert [r["share"] for r in rows] == [0.0, 1.0, 0.0, 1.0, 0.0]


def test_attention_against_evidence_is_binned_by_probability_by_hand():
    nan = float("nan")
    rows = [(0.01, 0.5, True), (0.03, nan, False), (0.15, -0.2, False), (0.15, 0.4, True), (0.9, 1.0, True),
            (1.0, 0.0, False)]  # fmt: skip
    got = unsure_attention.bins(rows)
    assert [b["words"] for b in got] == [2, 0, 2, 0, 2] and [b["flat"] for b in got] == [1, 0, 0, 0, 0]
    assert [b["mean_tau"] for b in got] == [0.5, None, pytest.approx(0.1), None, 0.5]  # a flat row has no tau
    assert [b["same_top"] for b in got] == [0.5, None, 0.5, None, 0.5]


def test_the_attention_rows_are_the_evidence_of_each_word_with_its_kept_probability(tmp_path):
    translator = Translator.load(tiny_subword_model_file(tmp_path))
    rows = unsure_attention.translation_rows(translator, DE[:2])
    out = translator.translate(DE[:2], probs=True)
    assert [p for p, _, _ in rows] == [p for tr in out for p in tr.probs]
    assert all(-1 <= tau <= 1 for _, tau, _ in rows if tau == tau)


@pytest.mark.parametrize(
    ("bench", "root", "argv"),
    [
        (unsure_cost, "--multi30k-root", ["--below", "2"]),
        (unsure_cost, "--multi30k-root", ["--threads", "0"]),
        (caption_unsure, "--flickr8k-root", ["--below", "0"]),
        (caption_unsure, "--flickr8k-root", ["--photos", "0"]),
        (unsure_attention, "--multi30k-root", ["--sentences", "0"]),
    ],
)
def test_bad_input_is_one_line(bench, root, argv, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main([root, str(tmp_path), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and "error: " in err[-1] and argv[0] in err[-1], err
