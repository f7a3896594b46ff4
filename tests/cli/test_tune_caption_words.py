"""``benchmarks/tune_caption_decoding.py --unmatched``: BLEU-1's misses by word, counted as BLEU counts them (clipped
by the reference that holds the word most often), checked against hand counts and pycocoevalcap's BLEU-1."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from tune_caption_decoding import unmatched_words  # noqa: E402


def test_misses_are_clipped_by_the_reference_that_holds_a_word_most():
    refs = {"p1": ["a dog runs on the grass", "a brown dog on a lawn"], "p2": ["two men talk"]}
    caps = {"p1": "a dog a dog is on a red lawn", "p2": "two men are talking"}
    missed, uses = unmatched_words(refs, caps)
    # p1: "a" 3 times, at most 2 in one reference -> 1 missed; "dog" twice, at most once -> 1; "is", "red" missed;
    # "on", "lawn" matched. p2: "are", "talking" missed.
    assert uses == {"a": 3, "dog": 2, "is": 1, "on": 1, "red": 1, "lawn": 1, "two": 1, "men": 1, "are": 1,
                    "talking": 1}  # fmt: skip
    assert +missed == {"a": 1, "dog": 1, "is": 1, "red": 1, "are": 1, "talking": 1}


def test_one_minus_the_misses_is_bleu_1_before_its_brevity_penalty():
    bleu = pytest.importorskip("pycocoevalcap.bleu.bleu").Bleu
    refs = {"p1": ["a dog runs on the grass", "a brown dog on a lawn"], "p2": ["two men talk in a park now"]}
    caps = {"p1": "a dog a dog is on a red lawn", "p2": "two men are talking"}
    missed, uses = unmatched_words(refs, caps)
    precision = 1 - sum(missed.values()) / sum(uses.values())
    scores, _ = bleu(1).compute_score(refs, {k: [v] for k, v in caps.items()})
    # 9 + 4 hypothesis words against the closest references' 6 + 7: ratio 1, no brevity penalty
    assert scores[0] == pytest.approx(precision, abs=1e-6)


@pytest.mark.parametrize("args", [["--language", "de"], ["--multi30k", "m30k"]])
def test_multi30k_and_another_language_go_together(args, capsys):
    from tune_caption_decoding import main

    with pytest.raises(SystemExit) as exc:
        main(["--data-root", "f8k", *args])
    assert exc.value.code == 2 and "--multi30k goes with --language de, fr or cs" in capsys.readouterr().err
