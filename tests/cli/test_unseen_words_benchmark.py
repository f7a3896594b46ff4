"""``benchmarks/unseen_words.py``: a translate --scores file split by its sentences' rarest word's count in the model's
training text. The counts read back from the model file's word profile against those of the training lines
themselves, each group's scores against sacrebleu's on its sentences, and bad input as one line."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers.multi30k import DE, EN
from helpers.tiny_translator import tiny_subword_model_file
from sacrebleu.metrics import CHRF

from text_attn.translation.references_cli import scores
from text_attn.translation.source_check import words_of
from text_attn.translation.translator import Translator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import unseen_words  # noqa: E402
from _runs import run_main  # noqa: E402


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("m"))


def test_the_counts_read_back_from_the_profile_are_the_training_lines_counts(model_file):
    counts = unseen_words.training_counts(Translator.load(model_file).source_check)
    assert counts == Counter(w for line in DE[:6] for w in words_of(line))  # write_corpus's 6 training lines
    assert unseen_words.rarest(counts, "Ein Mann im Regenwald.") == 0 and unseen_words.rarest(counts, "42.") is None
    assert unseen_words.rarest(counts, DE[0]) == min(counts[w] for w in words_of(DE[0]))


def test_each_group_is_scored_on_its_own_sentences(model_file, tmp_path, capsys):
    sources = [DE[0], f"{DE[1]} Regenwald", DE[2], f"{DE[3]} Eisfischerhütte"]
    hyps = ["A man rides a bike.", "Two dogs play.", "A woman reads a book in the park.", "Children eat."]
    path = tmp_path / "s.json"
    pairs = [(n, s, h, EN[n - 1]) for n, (s, h) in enumerate(zip(sources, hyps, strict=True), 1)]
    path.write_text(json.dumps(scores(pairs)))
    out = tmp_path / "rows.json"
    assert unseen_words.main([str(path), "--model", str(model_file), "--json", str(out)]) == 0
    rows = {r["group"]: r for r in json.loads(out.read_text())["rows"]}
    never = [1, 3]  # the two with a word no training line has
    expected = CHRF().corpus_score([hyps[i] for i in never], [[EN[i] for i in never]]).score
    assert rows["never"]["sentences"] == 2 and rows["never"]["share"] == 0.5
    assert rows["never"]["chrf"] == pytest.approx(expected)
    assert sum(r["sentences"] for r in rows.values()) == 4
    assert "| never | 2 | 50.0% |" in capsys.readouterr().out


def test_bad_input_is_one_line(model_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["unseen_words.py"])
    (tmp_path / "c.json").write_text(json.dumps({"per_photo": [{"image": "a.jpg"}]}))
    for argv, said in (
        ([str(tmp_path / "none.json")], "none.json: no such file"),
        ([str(tmp_path / "c.json")], "c.json: not a translate --scores file"),
    ):
        assert run_main(lambda argv=argv: unseen_words.main([*argv, "--model", str(model_file)])) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("unseen_words.py: error:") and said in err and "\n" not in err
