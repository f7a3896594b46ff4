"""``benchmarks/source_check.py`` on a tiny Multi30k-shaped corpus: --write gives a model file without a source check
one made from the corpus's train and val source lines (its weights untouched), and the table counts the flagged
lines of each language and split."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from helpers.multi30k import DE, write_corpus
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.translation.source_check import source_check
from text_attn.translation.translator import Translator

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "source_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("source_check_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_write_gives_a_model_its_check_and_the_table_counts_flagged_lines(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c", langs=("de", "en", "fr"))
    model = tiny_subword_model_file(tmp_path / "m")
    Translator.load(model).save(model, half=True)  # float16, as the bundled model is stored
    data = torch.load(model, weights_only=True)
    del data["source_check"]  # a model file from before the check
    torch.save(data, model)
    script = _script()
    with pytest.raises(SystemExit, match="has no source check"):
        script.main(["--data-root", str(corpus), "--model", str(model)])
    args = ["--data-root", str(corpus), "--model", str(model), "--langs", "de,en,fr", "--splits", "val"]
    assert script.main([*args, "--write", "--src-lang", "de"]) == 0
    out = capsys.readouterr().out
    assert f"wrote the check (6 train and 2 val lines of de) into {model}" in out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    rows = rows[: rows.index("| line | language part | word part (surprisal) | flagged |")]  # then the outside lines
    # the corpus's val lines are its first two sentences in each language: German passes, the others are flagged
    assert rows[0] == "| language | val |"
    assert rows[1:] == ["| de | 0 of 2 (0.0%) |", "| en | 2 of 2 (100.0%) |", "| fr | 2 of 2 (100.0%) |"]
    written = Translator.load(model)
    assert written.source_check == source_check(DE, DE[:2], "de")
    after = torch.load(model, weights_only=True)["state_dict"]
    assert all(torch.equal(after[k], v) and after[k].dtype == v.dtype for k, v in data["state_dict"].items())
    assert any(v.dtype == torch.float16 for v in after.values())  # still half
    assert script.main([*args, "--write", "--src-lang", "de"]) == 0  # again: said to replace the check
    assert f"replaced its check with one (6 train and 2 val lines of de) into {model}" in capsys.readouterr().out


def test_a_missing_corpus_file_is_one_line(tmp_path):
    corpus = write_corpus(tmp_path / "c")  # de and en only
    model = tiny_subword_model_file(tmp_path / "m")
    with pytest.raises(SystemExit, match=r"^source check: error: .*found neither val\.fr nor val\.fr\.gz$"):
        _script().main(["--data-root", str(corpus), "--model", str(model), "--langs", "fr", "--splits", "val"])
