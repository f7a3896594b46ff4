"""benchmarks/paragraphs.py end to end on a tiny model and corpus: a row per sentences-a-line, the one-a-line row the
same both ways, lines of two cut into their sentences; a bad --per-line refused in one line. No score asserted (the
measured table is docs/text.md's, from the full command)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.multi30k import write_corpus
from helpers.tiny_translator import tiny_subword_model_file

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "paragraphs.py"


@pytest.mark.long
def test_each_row_joins_k_sentences_a_line(tmp_path):
    model = tiny_subword_model_file(tmp_path / "m")
    write_corpus(tmp_path, {"test_2016_flickr": 4}, gz=False)  # the first 4 of DE and EN
    out = tmp_path / "p.json"
    cmd = [sys.executable, str(SCRIPT), "--data-root", str(tmp_path), "--models", str(model), "--per-line", "1,2",
           "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    one, two = json.loads(out.read_text())["models"][str(model)]
    assert (one["lines"], one["cut_into"], one["same_translations"]) == (4, 4, 4)
    assert (two["lines"], two["cut_into"]) == (2, 4)  # each line of two is cut into its two sentences
    assert one["split"]["sacrebleu"] == one["whole"]["sacrebleu"]
    bad = subprocess.run([*cmd[:-2], "--per-line", "0"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].endswith("got '0'")
