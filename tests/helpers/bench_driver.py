"""Benchmark scripts run as `python SCRIPT ARGS` runs them (runpy as __main__, their own name in argv[0], benchmarks/
first on sys.path), all the cases in turn in one interpreter: each a fresh one cost ~1.5 s (torch imported again).
A case whose ARGS are ["HELP"] prints the options its parser gives no description, instead of running."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

DRIVER = """
import argparse, json, runpy, sys, traceback
bench, cases = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, bench)
parse = argparse.ArgumentParser.parse_known_args


def undescribed(self, args=None, namespace=None):
    print("UNDESCRIBED", [a.option_strings[-1] if a.option_strings else a.dest for a in self._actions if not a.help])
    raise SystemExit(0)


for script, args in cases:
    argparse.ArgumentParser.parse_known_args = undescribed if args == ["HELP"] else parse
    sys.argv = [f"{bench}/{script}", *args]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
        code = 1
    print("EXIT", code, flush=True)
    print("---", file=sys.stderr, flush=True)
"""


def run_cases(cases: dict[str, tuple[str, list[str]]], cwd: Path | None = None, timeout: float = 300):
    """Each case (script, args) run in turn: its (exit code, stdout, stderr) by its name."""
    done = subprocess.run([sys.executable, "-c", DRIVER, str(BENCH), json.dumps(list(cases.values()))],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)  # fmt: skip
    codes = [int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("EXIT ")]
    assert len(codes) == len(cases), done.stdout[-2000:] + done.stderr[-2000:]
    outs, errs = done.stdout.split("EXIT "), done.stderr.split("---\n")
    return {name: (codes[i], outs[i], errs[i]) for i, name in enumerate(cases)}
