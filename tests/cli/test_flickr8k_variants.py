"""``benchmarks/flickr8k_variants.py`` on a 4-photo copy of Flickr8k's layout written by the test: two variants with
different encoders (the shipped Lite2 and Lite0) and one that changes only the decoder, one epoch each as
subprocesses; their greedy val CIDEr read from the logs into the table and the JSON; the encoders' features cached
once in the shared folder (the decoder-only variant adds no file); run again, nothing is trained. The fits are slow
(three short fits as subprocesses); the refusal of an unknown variant is not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.flickr8k import write_original

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "flickr8k_variants.py"
TINY = ["--data.min_freq", "1", "--data.batch_size", "2", "--model.decoder.embed_dim", "16"]
TINY += ["--model.decoder.hidden_dim", "16", "--model.decoder.attn_dim", "16"]


@pytest.mark.slow
def test_variants_share_one_feature_cache_and_their_val_curves_are_tabled(tmp_path):
    data = write_original(tmp_path / "flickr8k", copies=True)
    out, report = tmp_path / "runs", tmp_path / "variants.json"
    cmd = [sys.executable, str(SCRIPT), "--data-root", str(data), "--variants", "shipped,lite0_224,ds0"]
    cmd += ["--epochs", "1", "--out", str(out), "--json", str(report), "--", *TINY]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("| ")]
    assert lines[0] == "| variant | epoch 1 | best | epochs | steps | minutes an epoch |"
    assert [ln.split(" | ")[0] for ln in lines[1:]] == [
        "| EfficientNet-Lite2 at 260 px, 9 x 9 regions (shipped)",
        "| Lite0 at 224 px, 7 x 7",
        "| no doubly stochastic penalty (ds_lambda 0)",
    ]  # fmt: skip
    assert all(ln.split(" | ")[-3] == "1" and 0 <= float(ln.split(" | ")[1]) for ln in lines[1:])
    data_json = json.loads(report.read_text())
    assert data_json["family"] == "flickr8k" and [len(c) for c in data_json["curves"].values()] == [1, 1, 1]
    # two encoders: a train file and a val file each, in the one shared folder; ds0 reused the shipped encoder's
    cached = sorted(p.name.split("-")[0] for p in (out / "feature_cache").iterdir())
    assert cached == ["train", "train", "val", "val"]
    lite0 = next((out / "lite0_224").rglob("config.yaml")).read_text()
    assert "backbone: efficientnet_lite0" in lite0 and "grid: 7" in lite0 and "hidden_dim: 16" in lite0
    assert "ds_lambda: 0.0" in next((out / "ds0").rglob("config.yaml")).read_text()

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("not trained again") == 3 and "done in" not in again.stdout
    assert [ln for ln in again.stdout.splitlines() if ln.startswith("| ")][1:] == lines[1:]  # the same curves


def test_an_unknown_variant_names_the_known_ones(tmp_path):
    cmd = [sys.executable, str(SCRIPT), "--data-root", str(tmp_path), "--variants", "lite9"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "choose from shipped, lite0_224, lite1_240" in done.stderr
