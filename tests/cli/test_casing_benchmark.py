"""``benchmarks/casing.py`` on a tiny Multi30k-shaped corpus: one row per way the German is typed, each translated as
typed and as ``translate`` reads it, with how many lines the casing changed and read back exactly as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers.multi30k import write_corpus
from helpers.scripts import load_script
from helpers.tiny_translator import tiny_subword_model_file

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "casing.py"


def _script():
    return load_script(SCRIPT)


def test_the_table_has_each_form_typed_and_recased(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c")
    model = tiny_subword_model_file(tmp_path / "m")
    script = _script()
    assert script.sentence_case("EIN MANN. 2 Hunde") == "Ein mann. 2 hunde"
    out = tmp_path / "casing.json"
    args = ["--data-root", str(corpus), "--split", "val", "--json", str(out)]
    assert script.main([*args, "--models", str(model)]) == 0
    rows = json.loads(out.read_text())["models"][str(model)]
    assert [r["form"] for r in rows] == ["as written", "lowercased", "in capitals", "sentence case"]
    written = rows[0]
    assert written["changed"] == written["read_back"] == 0 and written["typed"] == written["recased"]
    # val is the corpus's first two German lines; each form of them is read back as written, letter for letter
    assert all(r["changed"] == r["read_back"] == 2 for r in rows[1:])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| lowercased")]
    assert table == [f"| lowercased | {rows[1]['typed']:.2f} | {rows[1]['recased']:.2f} | 2 | 2 |"]
    data = torch.load(model, weights_only=True)
    del data["source_check"]["casing"]  # a model file from before the casing: measured as typed only
    torch.save(data, model)
    assert script.main([*args, "--models", str(model)]) == 0
    rows = json.loads(out.read_text())["models"][str(model)]
    assert all(r["recased"] is None and r["changed"] == 0 for r in rows)
    assert "| lowercased |" in capsys.readouterr().out


def test_a_missing_split_is_one_line(tmp_path, capsys):
    """Refused as the options are read, naming the option typed (it was found after the model loaded)."""
    corpus = write_corpus(tmp_path / "c")
    with pytest.raises(SystemExit) as exc:
        _script().main(["--data-root", str(corpus), "--split", "dev"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert exc.value.code == 2 and last.endswith(f"error: --data-root {corpus}: found neither dev.de nor dev.de.gz")
