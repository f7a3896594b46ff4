"""benchmarks/gpu.py, the device check: its whole table on the CPU at small sizes (-m slow), and on a GPU where one
is at hand (skipped without CUDA: run it on the device machine). No test asserts a time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu.py"
ROWS = ("caption FOLDER (defaults", "caption FOLDER --batch-size 128", "caption FOLDER --devices 1",
        "caption SHARDS (8), tuned", "caption SHARDS (8) --devices 1", "the pipeline with the model replaced",
        "where the time goes, batch", "the model's ceiling",
        "captions equal to the CPU's", "training step, batch 32", "the same step, the reference decoder's algorithm",
        "training speed-up over the reference", "training samples/s at batch 32", "translate ",
        "text training step, Transformer", "text training step, GRU with Bahdanau", "attention-serve --accelerator",
        "profile, a captioning batch", "profile, a training step", "CUDA tests (")  # fmt: skip


def _check(device: str, tmp_path: Path, extra: list[str]) -> dict:
    """The whole check with --out: the table, gpu.json, the two profiles and the CUDA tests' output under one folder."""
    folder = tmp_path / "out"
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", device, *extra, "--out", str(folder)],
                          capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads((folder / "gpu.json").read_text())
    assert {"profile_caption.txt", "profile_train_step.txt", "cuda_tests.txt"} <= {p.name for p in folder.iterdir()}
    assert found["decoders"] in (1, 2) and f"with {found['decoders']} decoder" in found["device"] and found["complete"]
    whats = [r["what"] for r in found["rows"]]
    for start in ROWS:  # every row of the table, in the printed table too
        assert any(w.startswith(start) for w in whats), start
        assert any(line.startswith(f"| {start}") for line in done.stdout.splitlines()), start
    return {r["what"].split(":")[0]: r for r in found["rows"]}


def test_a_failed_part_is_one_row_and_the_others_still_run(tmp_path, monkeypatch):
    """A part that raises (or exits, as a failed caption run did) costs its own rows, not the device run: one row says
    why, the traceback goes to errors.txt, and what was measured is saved after every part."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    from gpu import run_parts

    def broken():
        raise RuntimeError("caption x failed:\n  CUDA error: out of memory")

    rows, saved = [], []
    parts = {
        "first": lambda: [{"what": "a", "value": 1}],
        "second": broken,
        "third": lambda: (_ for _ in ()).throw(SystemExit("pipeline: error")),
        "last": lambda: [{"what": "b"}],
    }
    failed = run_parts(parts, rows, lambda: saved.append(len(rows)), tmp_path / "errors.txt")
    assert failed == ["second", "third"] and saved == [1, 2, 3, 4]
    assert rows[1] == {
        "what": "second: failed",
        "value": "failed: RuntimeError: caption x failed: CUDA error: out of memory",
    }
    assert rows[2]["value"] == "failed: SystemExit: pipeline: error" and rows[3] == {"what": "b"}
    errors = (tmp_path / "errors.txt").read_text()
    assert "--- second" in errors and "--- third" in errors and errors.count("Traceback") == 2


@pytest.mark.slow
def test_the_device_check_prints_its_table_on_a_cpu(tmp_path):
    rows = _check("cpu", tmp_path, ["--quick"])
    same = rows["captions equal to the CPU's"]
    assert same["equal_demo"] and same["equal_share"] == 1.0 and same["attention_diff"] == 0.0  # the CPU against itself
    served = rows["attention-serve --accelerator cpu (both bundled models)"]
    assert served["caption_equal"] and served["start_s"] > 0 and served["restart_s"] > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the check runs on the device machine")
def test_the_device_check_on_a_gpu(tmp_path):
    rows = _check("cuda", tmp_path, ["--photos", "500", "--repeats", "5"])
    same = rows["captions equal to the CPU's"]
    assert same["equal_demo"] and same["equal_share"] >= 0.98 and same["attention_diff"] <= 0.01  # issue 65's bar
    captured = rows["captions with --cuda-graphs equal to the eager search's"]
    assert captured["equal_demo"] and captured["equal_share"] >= 0.98 and captured["attention_diff"] <= 0.01
    assert any(w.endswith("--cuda-graphs") for w in rows)  # and its speed rows
    decoded = rows["captions with --decode-on-device equal to the CPU's"]
    assert decoded["equal_demo"] and decoded["equal_share"] >= 0.98 and decoded["attention_diff"] <= 0.01
    served = rows.get("attention-serve --accelerator cuda (both bundled models)")
    if served is None:  # measured only where LitServe is installed; a server that failed to start fails the test
        assert rows["attention-serve --accelerator cuda"]["value"].startswith("not measured: No module named")
    else:
        assert served["caption_equal"]
