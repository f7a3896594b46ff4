"""benchmarks/rerank_captions.py: the ranking by hand (lambda 0 is the search's order; larger lambdas favour the
candidates the background photos find unlikely); slow, on the real data (skipped with its reason when ../shared is
not there): a short run prints the table, and its lambda 0 row and search row are the same captions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "benchmarks"))

from rerank_captions import choose  # noqa: E402 - the benchmark's folder on the path first


def test_the_ranking_by_hand():
    # two candidates: "a dog runs" (3 words) likely here and anywhere, "a brown dog runs on sand" (6) likelier here only
    row = {"image": "p.jpg", "search": "a dog runs", "texts": ["a dog runs", "a brown dog runs on sand"],
           "words": [3, 6], "own": [-2.0, -3.5], "generic": [-6.0, -20.0]}  # fmt: skip
    assert choose([row], None, 1.5) == {"p.jpg": "a dog runs"}
    # lambda 0: -2 / 4**1.5 = -0.25 against -3.5 / 7**1.5 = -0.189: the longer one, as a length penalty 1.5 ranks
    assert choose([row], 0.0, 1.5) == {"p.jpg": "a brown dog runs on sand"}
    assert choose([row], 0.0, 0.0) == {"p.jpg": "a dog runs"}  # no penalty: the total decides
    # lambda 0.2, no penalty: -2 + 1.2 = -0.8 against -3.5 + 4 = 0.5
    assert choose([row], 0.2, 0.0) == {"p.jpg": "a brown dog runs on sand"}


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "flickr8k" / "Flickr8k_text").is_dir(), reason=f"real data not found at {DATA}")
def test_a_short_run_on_the_real_data(tmp_path):
    out = tmp_path / "rerank.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "rerank_captions.py"), "--flickr8k-root", str(DATA / "flickr8k"),
           "--limit", "8", "--background", "4", "--json", str(out), "--rows"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| val | search |" in done.stdout and "| test | lambda 1 (PMI) |" in done.stdout
    found = json.loads(out.read_text())
    assert found["val"]["search"] == found["val"]["lambda 0"]  # lambda 0 ranks as the search does
    assert found["moves"]["val"]["lambda 0"]["changed"] == 0.0
    assert len(found["rows"]["test"]) == 8 and all(len(r["texts"]) == len(r["own"]) for r in found["rows"]["test"])
