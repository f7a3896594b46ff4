"""benchmarks/serve_idle.py: servers with and without --idle-wait in alternating rounds (idle CPU, a lone request,
1 and 16 clients); its refusals, and benchmarks/serve_threads.py's."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.scripts import run_benchmark, run_main

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "serve_idle.py"


def test_bad_counts_are_refused_in_one_line(capsys):
    code, _, err = run_main(SCRIPT, capsys, "--rounds", "0")
    assert code == 2 and "--rounds and --requests must be at least 1 and --idle positive" in err


@pytest.mark.slow
def test_both_arms_are_measured_in_alternating_order(tmp_path):
    printed, report = run_benchmark(SCRIPT, tmp_path / "idle.json", "--rounds", 2, "--requests", 4, "--idle", 3)
    runs = report["runs"]
    assert set(runs) == {"LitServe's loop", "--idle-wait"} and all(len(r) == 2 for r in runs.values())
    for got in (g for r in runs.values() for g in r):
        assert got["clients_1"] > 0 and got["clients_16"] > 0 and got["lone_ms"] > 0
        assert got["clients_1_errors"] == 0 and got["clients_16_errors"] == 0
    # the polling is what the flag removes: an idle LitServe worker spins, a waiting one does not
    assert max(g["idle_cpu_share"] for g in runs["--idle-wait"]) < 0.05
    assert min(g["idle_cpu_share"] for g in runs["LitServe's loop"]) > 0.05
    order = [line.split(" | ")[1] for line in printed.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert order == ["LitServe's loop", "--idle-wait", "--idle-wait", "LitServe's loop"]


THREADS = Path(__file__).resolve().parents[2] / "benchmarks" / "serve_threads.py"


def test_the_threads_benchmark_refuses_bad_counts_in_one_line(capsys):
    code, _, err = run_main(THREADS, capsys, "--photos", "0")
    assert code == 2 and "--rounds and --photos must be at least 1" in err
