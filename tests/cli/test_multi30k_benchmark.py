"""benchmarks/multi30k.py end to end on the real Multi30k (../shared/data/multi30k, never in the repository), --quick:
it trains the no-attention config for two minutes, scores test at beams 1 and 5, tunes the decoding on val, prints
BLEU by length on test and on val + test, draws the plot and writes the JSON; run again, it reuses the model file and
its scores (--retime times translate again, --rescore scores again). Slow; skipped with its reason when the data is
not there (CI has it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "multi30k"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (DATA / "train.de.gz").is_file(), reason=f"real Multi30k not found at {DATA}"),
]


def _bench(out: Path, *extra: str) -> str:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "multi30k.py"), "--data-root", str(DATA), "--out", str(out)]
    done = subprocess.run([*cmd, "--quick", "--models", "none", *extra], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_quick_benchmark_trains_scores_tunes_and_reuses(tmp_path):
    out = tmp_path / "bench"
    first = _bench(out, "--tune", "--json", str(tmp_path / "m.json"), "--plot", str(tmp_path / "len.png"))
    assert "[fit-none] done" in first and "[tune-none] done" in first
    assert "| none | 20.6 |" in first  # the tutorials' no-attention figure beside ours
    assert "BLEU (tok.) by source length, beam 5, val + test_2016_flickr" in first
    numbers = json.loads((tmp_path / "m.json").read_text())
    none = numbers["results"]["none"]
    assert {"1", "5", "tuned", "val_test_by_length"} <= set(none)
    # val + test: the first 200 of each split (quick), every sentence in one bucket
    assert sum(b["count"] for b in none["val_test_by_length"].values()) == 400
    assert sum(b["count"] for b in none["5"]["by_length"].values()) == 200
    assert numbers["trained_on"]["none"].endswith("CPU") or numbers["trained_on"]["none"] == "GPU"
    # the learning curve the fit logged, (epoch, step, val BLEU) after each validation; --plot's length buckets
    # once overwrote it
    curve = numbers["val_bleu_curves"]["none"]
    assert curve and all(len(point) == 3 and 0 <= point[2] <= 1 for point in curve), curve
    assert (tmp_path / "len.png").stat().st_size > 10_000
    # the model file carries the val choice, and its scores are kept beside it
    assert json.loads((out / "none" / "scores.json").read_text())["results"]["tuned"]["beam"] in (1, 3)

    # again: the model file and its scores are reused; --rescore translates again but does not tune again
    second = _bench(out, "--tune")
    assert "exists: not trained again" in second and "scores of these weights reused" in second
    assert "[fit-none]" not in second and "[translate-" not in second
    timed = _bench(out, "--tune", "--retime")  # scores reused, translate timed again
    assert "scores of these weights reused" in timed and "[translate-none-test-tuned]" in timed
    third = _bench(out, "--tune", "--rescore")
    assert "[translate-none-test-beam5]" in third and "not tuned again" in third
