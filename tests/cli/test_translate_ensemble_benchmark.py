"""``benchmarks/translate_ensemble.py`` on a tiny Multi30k-shaped corpus: each member alone, then the ensemble, per
split; an ensemble of a model with its own copy scores as the model alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.multi30k import write_corpus
from helpers.scripts import load_script
from helpers.tiny_translator import tiny_subword_model_file

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "translate_ensemble.py"
sys.path.insert(0, str(SCRIPT.parent))  # its helpers (_multi30k, _runs), as running it from benchmarks/ finds them


def test_a_model_and_its_copy_score_as_the_model_alone(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c")
    a, b = tiny_subword_model_file(tmp_path / "a"), tiny_subword_model_file(tmp_path / "b")  # the same seed
    out = tmp_path / "ens.json"
    code = load_script(SCRIPT).main(["--data-root", str(corpus), "--models", f"{a},{b}", "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["split"], r["model"]) for r in rows] == [
        ("val", str(a)), ("val", str(b)), ("val", f"{a} + {b}"),
        ("test_2016_flickr", str(a)), ("test_2016_flickr", str(b)), ("test_2016_flickr", f"{a} + {b}"),
    ]  # fmt: skip
    for split in ("val", "test_2016_flickr"):
        scores = {(r["sacrebleu"], r["chrf"], r["bleu_tok"]) for r in rows if r["split"] == split}
        assert len(scores) == 1, rows
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| val | {a} + {b} |")]
    assert printed and "| beam 1, length penalty 0 |" in printed[0]


def test_a_model_that_cannot_load_is_one_line(tmp_path, capsys):
    """Refused as the options are read, naming --models (it was loaded after the first model's translations)."""
    corpus = write_corpus(tmp_path / "c")
    with pytest.raises(SystemExit) as exc:
        load_script(SCRIPT).main(["--data-root", str(corpus), "--models", f"transformer,{tmp_path / 'nothing.pt'}"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert exc.value.code == 2 and "argument --models" in last and f"{tmp_path / 'nothing.pt'}: no such model" in last
