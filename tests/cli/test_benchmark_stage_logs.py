"""A benchmark's training runs in a subprocess whose output goes to a log file: that log says how the fit goes (a line
after the first step, one a minute, one per validation), as any fit into a log does. The benchmarks gave every fit
``--trainer.enable_progress_bar false``, which turns the lines off too: a 29-minute fit logged nothing."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import console_script, run_stage  # noqa: E402


@pytest.mark.long
def test_a_stage_log_holds_the_fits_progress_lines(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the fit (a subprocess, started here) writes its model.pt and config.yaml here
    # the fixture's own `enable_progress_bar: false` set back to not given (null), as a shipped config leaves it
    cmd = [console_script("text-train"), "fit", "--config", str(FIX / "text" / "tiny_reorder.yaml"),
           "--trainer.enable_progress_bar", "null", "--trainer.max_steps", "2",
           "--trainer.limit_val_batches", "0"]  # fmt: skip
    run_stage("tiny fit", cmd, tmp_path)
    log = (tmp_path / "tiny fit.log").read_text()
    assert re.search(r"^text-train: step [12] of 2 \(epoch 0\)", log, re.M), log
    assert "\r" not in log  # no bar redrawn with carriage returns


def test_no_benchmark_turns_a_fits_lines_off():
    scripts = sorted((ROOT / "benchmarks").glob("*.py"))
    assert len(scripts) > 20  # the folder read (an empty glob checked nothing)
    for script in scripts:
        text = script.read_text()
        assert not re.search(r"enable_progress_bar\W+(false|False)", text), f"{script.name} turns the fit's lines off"
