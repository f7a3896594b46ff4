"""benchmarks/beam_search.py on a model file of the user's (``--translator``): a Luong model's row, every way writing
the same words (its memory kept one row per sentence now, a row per beam the way before); no time asserted (the
measured table is docs/speed.md's, from the full command)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from text_attn.core.vocab import Vocabulary
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.translator import Translator

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "beam_search.py"
SENTENCES = ["ein hund läuft", "zwei kinder spielen im park", "eine frau", "ein mann fährt ein rotes fahrrad"]


@pytest.mark.long
def test_a_luong_model_files_row_has_every_way_and_the_same_words(tmp_path):
    vocab = Vocabulary.build([s.split() for s in SENTENCES])
    torch.manual_seed(0)
    net = Seq2Seq(Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), attention="luong-general",
                                embed_dim=8, enc_hidden=8, dec_hidden=16, pad_id=vocab.pad_id))  # fmt: skip
    model = Translator(net.eval(), vocab, vocab, "word", True).save(tmp_path / "luong.pt")
    (tmp_path / "test_2016_flickr.de").write_text("\n".join(SENTENCES) + "\n")
    out = tmp_path / "b.json"
    cmd = [sys.executable, str(SCRIPT), "--multi30k-root", str(tmp_path), "--translator", str(model), "--no-bundled",
           "--rounds", "1", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["what"] == "translate, luong.pt (luong-general), Multi30k test, batch 64"
    assert row["inputs"] == len(SENTENCES)
    for way in ("whole_vocabulary", "memory_per_beam", "both"):
        assert row[way]["differing"] == 0, way
    assert "| translate, luong.pt (luong-general)" in done.stdout and "| yes |" in done.stdout
