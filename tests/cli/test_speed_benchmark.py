"""benchmarks/speed.py runs end to end (one repeat) and writes every row of its table; no timing is asserted."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "speed.py"


@pytest.mark.slow
def test_speed_benchmark_prints_and_writes_every_row(tmp_path):
    out = tmp_path / "speed.json"
    cmd = [sys.executable, str(SCRIPT), "--repeats", "1", "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["threads"] == 2 and result["repeats"] == 1
    rows = {r["what"]: r for r in result["rows"]}
    for what in ("matmul peak (fp32)", "training step, batch 32 x 20 words", "peak memory (max RSS)"):
        assert what in rows and what in done.stdout  # the printed table has the JSON's rows
    assert rows["compiled kernels (score, cross-entropy)"]["value"].startswith("compiled C")
    beams = [w for w in rows if w.startswith("caption, beam")]
    assert len(beams) == 6 and all(rows[w]["value"].endswith("images/s") for w in beams)
    folder = [w for w in rows if w.startswith("caption FOLDER of 192 photos")]
    assert len(folder) == 2 and all(rows[w]["rate"] > 0 for w in folder)  # the Flickr8k model on a folder, beam 1 / 3
    # The batched beam search finds exactly the captions of the one-image-at-a-time search.
    assert rows["batched speed-up (goal >= 5x)"]["value"].endswith("identical captions: True")
    # FlopCounterMode's count of the paper-size training step: a fixed number, whatever the machine.
    assert re.search(r"\((7[0-9]) GFLOP\)", rows["training step, batch 32 x 20 words"]["value"])
    ratio = rows["training speed-up over the reference (goal >= 6x)"]
    assert ratio["x"] > 0 and "each repeat:" in ratio["value"]
