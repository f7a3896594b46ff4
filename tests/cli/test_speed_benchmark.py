"""benchmarks/speed.py runs end to end (one repeat) and writes every row of its table; no timing is asserted."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "speed.py"
MULTI30K = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"  # real data: never in the repository


@pytest.mark.slow
def test_speed_benchmark_prints_and_writes_every_row(tmp_path):
    out = tmp_path / "speed.json"
    cmd = [sys.executable, str(SCRIPT), "--repeats", "1", "--json", str(out), "--multi30k-root", str(MULTI30K)]
    # as a user runs it (the suite turns ONNX Runtime off: conftest.py); its graphs and kernels in a fresh cache
    env = {**os.environ, "CAPTION_ONNX": "1", "TEXT_ATTN_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
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
    # where the folder's time goes; the search that drops ended images finds the captions of the one that does not
    assert rows["the folder's photos: encoder alone, batch 16"]["value"].endswith("images/s")
    # the frozen encoder in ONNX Runtime by default, against PyTorch's (CAPTION_ONNX=0), whole runs and alone
    assert rows["frozen encoder (beam 1 / 3 rows)"]["value"].startswith("ONNX Runtime ")
    assert rows["the same at beam 3, the encoder in PyTorch (CAPTION_ONNX=0)"]["value"].endswith("x the time)")
    assert rows["the same encoder in PyTorch (CAPTION_ONNX=0)"]["value"].endswith("x the time)")
    assert rows["the same search stepping every image to the end (ended images kept in the batch)"]["value"].endswith(
        "identical captions: True"
    )
    lite0 = rows["the folder's photos: EfficientNet-Lite0 at 224 px alone (not the bundled encoder), batch 16"]["value"]
    assert "images/s; with the beam 3 search above, about" in lite0
    # 12-megapixel photos: decoded at a reduced scale and in full, both timed
    assert rows["caption FOLDER of 25 phone photos (12 megapixels, JPEG), beam 3"]["value"].endswith("images/s")
    assert (
        "the same caption for"
        in rows["the same, every photo decoded in full (no reduced-scale JPEG decoding)"]["value"]
    )
    # the self-critical step of the bundled model, now and as before: both ran and gave their samples' lengths
    scst = [w for w in rows if w.startswith("SCST step")]
    assert len(scst) == 1 and "tokens a sample" in rows[scst[0]]["value"]
    assert rows["the same step with keys per sample, every sample to word 20, one scoring batch"]["value"].endswith(
        "x the time"
    )
    real = [w for w in rows if w.startswith("translate Multi30k val")]
    if (MULTI30K / "val.de.gz").is_file():  # the bundled translator on real sentences, both ways, the same output
        assert len(real) == 2 and all(rows[w]["value"].endswith("identical output: True") for w in real)
    else:
        assert len(real) == 1 and rows[real[0]]["value"].startswith("skipped: ")
    # The batched beam search finds exactly the captions of the one-image-at-a-time search.
    assert rows["batched speed-up (goal >= 5x)"]["value"].endswith("identical captions: True")
    # FlopCounterMode's count of the paper-size training step: a fixed number, whatever the machine.
    assert re.search(r"\((7[0-9]) GFLOP\)", rows["training step, batch 32 x 20 words"]["value"])
    ratio = rows["training speed-up over the reference (goal >= 6x)"]
    assert ratio["x"] > 0 and "each repeat:" in ratio["value"]
