"""``benchmarks/unsure_cost.py``: translating against reading back, and the counts of words under the threshold, on a
tiny model: the counts are those of the translations read back, and bad input is one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.translation.translator import Translator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import unsure_cost  # noqa: E402


def test_the_counts_are_those_of_the_translations_read_back(tmp_path):
    translator = Translator.load(tiny_subword_model_file(tmp_path))
    row = unsure_cost.cost(translator, DE[:4], 0.5)
    out = translator.translate(DE[:4], probs=True)  # the same recorded decoding
    found = [tr.unsure(0.5) for tr in out]
    assert row["sentences"] == 4 and row["words"] == sum(len(tr.words) for tr in out)
    assert row["translations_unsure"] == sum(map(bool, found)) and row["words_unsure"] == sum(map(len, found))
    assert row["translate_ms"] > 0 and row["read_back_ms"] > 0
    assert row["ratio"] == pytest.approx(row["read_back_ms"] / row["translate_ms"])


@pytest.mark.parametrize(("argv", "named"), [(["--below", "2"], "--below"), (["--threads", "0"], "--threads")])
def test_bad_input_is_one_line(argv, named, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        unsure_cost.main(["--multi30k-root", str(tmp_path), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and "error: " in err[-1] and named in err[-1], err
