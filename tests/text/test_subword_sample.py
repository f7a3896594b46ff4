"""A subword model of a corpus past MOST_SENTENCES is learned from a sample drawn with the data's seed: the same pieces
in every process (SentencePiece's own draw, input_sentence_size, differed from process to process and could not be
seeded, so the processes of a DDP run learned other pieces and read each id as another piece)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from text_attn.translation import subwords
from text_attn.translation.subwords import learned_from

LEARN = """
import hashlib, random, sys
from text_attn.translation import subwords
subwords.MOST_SENTENCES = 1000
r = random.Random(0)
words = ["".join(r.choice("abcdefghij") for _ in range(r.randint(2, 8))) for _ in range(3000)]
texts = [" ".join(r.choice(words) for _ in range(10)) for _ in range(5000)]
model = subwords.Subwords.train(texts, 300, seed=int(sys.argv[1]))
print(hashlib.sha256(model.proto).hexdigest())
"""


def _learned(seed: int) -> str:
    done = subprocess.run([sys.executable, "-c", LEARN, str(seed)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.long
def test_two_processes_learn_the_same_pieces_from_a_corpus_past_the_limit():
    first, second, other = _learned(0), _learned(0), _learned(1)
    assert first == second  # two processes of a run (SentencePiece's own sample: other pieces in each)
    assert other != first  # another data.seed, another sample


def test_the_sample_is_seeded_and_keeps_the_corpus_order(monkeypatch):
    monkeypatch.setattr(subwords, "MOST_SENTENCES", 10)
    texts = [f"line {i}" for i in range(40)]
    sample = learned_from(texts, seed=3)
    assert len(sample) == 10 and len(set(sample)) == 10 and set(sample) <= set(texts)
    assert sample == sorted(sample, key=texts.index) == learned_from(iter(texts), seed=3)
    assert learned_from(texts, seed=4) != sample
    assert learned_from(texts[:10], seed=3) == texts[:10]  # at the limit: all of them, as they were


def test_a_data_module_past_the_limit_says_what_its_model_learned_from(tmp_path, monkeypatch, capsys):
    from helpers.multi30k import write_corpus

    from text_attn.translation.data import TranslationDataModule

    monkeypatch.setattr(subwords, "MOST_SENTENCES", 200)  # SentencePiece takes no limit under 101
    root = write_corpus(tmp_path / "c", {"train": 150, "val": 2, "test_2016_flickr": 2})  # 300 sentences
    dm = TranslationDataModule(task="pair", root=str(root), src_lang="de", tgt_lang="en", tokenizer="subword",
                               subword_vocab=300, seed=5)  # fmt: skip
    dm.setup("fit")
    assert "the subword model is learned from 200 of the 300 training sentences (both sides' lines), drawn with " \
        "data.seed 5" in capsys.readouterr().err  # fmt: skip
    monkeypatch.setattr(subwords, "MOST_SENTENCES", 300)  # all of them: nothing to say
    TranslationDataModule(task="pair", root=str(root), src_lang="de", tgt_lang="en", tokenizer="subword",
                          subword_vocab=300, seed=5).setup("fit")  # fmt: skip
    assert "learned from" not in capsys.readouterr().err
