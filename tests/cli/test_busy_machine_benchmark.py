"""benchmarks/busy_machine.py: caption and translate timed alone and beside a busy process under each thread setting,
with what the default chose; its refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.scripts import run_benchmark, run_main

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "busy_machine.py"


def test_bad_sizes_are_refused_in_one_line(capsys):
    code, _, err = run_main(SCRIPT, capsys, "--repeats", "0")
    assert code == 2 and "--repeats and --photos must be at least 1, --busy 0 or more" in err


@pytest.mark.slow
def test_every_command_setting_and_load_is_timed(tmp_path):
    printed, report = run_benchmark(SCRIPT, tmp_path / "busy.json", "--photos", 2, "--repeats", 1, "--busy", 1)
    cores = report["cores"]
    settings = {"default", f"--threads {cores}"} | ({f"--threads {cores - 1}"} if cores > 1 else set())
    rows = report["rows"]
    assert {(r["command"].split()[0], r["busy"], r["setting"]) for r in rows} == {
        (c, b, s) for c in ("caption", "translate") for b in (0, 1) for s in settings
    }
    assert all(r["seconds"] > 0 for r in rows)
    assert all(r["vs_default"] == 1.0 for r in rows if r["setting"] == "default")
    if cores > 1:  # a process spinning beside the runs is seen: the default leaves its core out
        assert all(r["chosen"] <= cores - 1 for r in rows if r["busy"] == 1)
    table = [line for line in printed.splitlines() if line.startswith(("| caption", "| translate"))]
    assert len(table) == len(rows)
