"""``benchmarks/multi30k_variants.py`` on a tiny Multi30k-shaped corpus written by the test: two Bahdanau variants
(GRU, LSTM) trained for two epochs each as subprocesses, their val curves read from the logs into the table and the
JSON; run again for fewer epochs, the runs are reused and their curves cut to those epochs; unknown variants are
refused with the list of known ones. Slow (four short fits as subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.multi30k import write_corpus

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "multi30k_variants.py"
pytestmark = pytest.mark.slow
TINY = ["--data.subword_vocab", "300", "--model.network.embed_dim", "16", "--model.network.enc_hidden", "16"]
TINY += ["--model.network.dec_hidden", "32", "--model.network.attn_dim", "16", "--data.batch_size", "16"]


def test_two_variants_train_and_their_val_curves_are_tabled(tmp_path):
    corpus = write_corpus(tmp_path / "m30k", {"train": 64, "val": 8, "test_2016_flickr": 4})
    report = tmp_path / "variants.json"
    cmd = [sys.executable, str(SCRIPT), "--data-root", str(corpus), "--family", "bahdanau"]
    cmd += ["--variants", "shipped,lstm", "--epochs", "2", "--out", str(tmp_path / "runs"), "--json", str(report)]
    cmd += ["--", *TINY]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("| ")]
    assert lines[0] == "| variant | epoch 1 | epoch 2 | best | epochs | steps | minutes an epoch |"
    assert lines[1].startswith("| GRU, embed 256") and lines[2].startswith("| LSTM instead of GRU")
    assert len(lines) == 3 and all(ln.split(" | ")[-3] == "2" for ln in lines[1:])  # two epochs each
    data = json.loads(report.read_text())
    assert data["family"] == "bahdanau" and set(data["curves"]) == {"shipped", "lstm"}
    assert all(len(curve) == 2 for curve in data["curves"].values())
    lstm_config = next((tmp_path / "runs" / "lstm").rglob("config.yaml")).read_text()
    assert "rnn: lstm" in lstm_config and "embed_dim: 16" in lstm_config  # the variant's and the extra options
    cells = {ln.split(" | ")[0]: ln.split(" | ")[1] for ln in lines[1:]}  # variant -> its epoch-1 BLEU

    again = subprocess.run([*cmd[: cmd.index("--epochs") + 1], "1", *cmd[cmd.index("--epochs") + 2 :]],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("not trained again") == 2 and "done in" not in again.stdout
    rows = [ln for ln in again.stdout.splitlines() if ln.startswith("| ")]
    assert rows[0] == "| variant | epoch 1 | best | epochs | steps | minutes an epoch |"
    assert all(ln.split(" | ")[1] == cells[ln.split(" | ")[0]] for ln in rows[1:])  # the same epoch-1 values
    assert all(ln.split(" | ")[-3] == "1" and float(ln.split(" | ")[-1].rstrip(" |")) >= 0 for ln in rows[1:])


def test_an_unknown_variant_names_the_known_ones(tmp_path):
    cmd = [sys.executable, str(SCRIPT), "--data-root", str(tmp_path), "--family", "bahdanau", "--variants", "xl"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "choose from shipped, lstm" in done.stderr
