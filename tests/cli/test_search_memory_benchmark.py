"""benchmarks/search_memory.py runs end to end on a short paragraph and writes both rows; no size or time asserted
(the measured table is docs/speed.md's, from the full command)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "search_memory.py"
MULTI30K = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"  # real data: never in the repository


@pytest.mark.slow
def test_it_measures_both_ways_of_one_paragraph(tmp_path):
    if not (MULTI30K / "test_2016_flickr.de.gz").is_file():
        pytest.skip(f"Multi30k is not at {MULTI30K}")
    out = tmp_path / "m.json"
    cmd = [sys.executable, str(SCRIPT), "--multi30k-root", str(MULTI30K), "--words", "120", "--max-len", "200",
           "--repeats", "1", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    rows = {r["way"]: r for r in result["rows"]}
    assert set(rows) == {"trimmed", "not trimmed"} and result["max_len"] == 200
    # the same search both ways: the same source tokens, estimate and output (this short paragraph's translation
    # ends before step 128, so neither way trims here: the full command's run is what measures the trim)
    assert rows["trimmed"]["tokens"] == rows["not trimmed"]["tokens"] > 120
    assert rows["trimmed"]["output_words"] == rows["not trimmed"]["output_words"] > 0
    assert rows["trimmed"]["estimate_gib"] == rows["not trimmed"]["estimate_gib"] > 0
    assert "| trimmed |" in done.stdout and "| not trimmed |" in done.stdout
