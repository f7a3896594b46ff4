"""A benchmarks/ script's main() run in this process, as ``python SCRIPT ARGS`` would run it, without the ~3 s an
interpreter needs to import torch again: for the checks of what a script refuses."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_script(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_main(path: Path, capsys, *args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``python path args``: main's return value, or its SystemExit's (a message
    given to SystemExit goes to stderr with code 1, as the interpreter does)."""
    capsys.readouterr()
    try:
        code = load_script(path).main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    printed = capsys.readouterr()
    err = printed.err
    if isinstance(code, str):
        code, err = 1, err + code + "\n"
    return code or 0, printed.out, err


def run_benchmark(path: Path, json_out: Path, *args, timeout: float = 600) -> tuple[str, dict]:
    """``python path args --json json_out`` in its own interpreter, as a user runs it (a slow test's whole run):
    (what it printed, the report it wrote); fails the test with its stderr when it exits non-zero."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(path), *map(str, args), "--json", str(json_out)], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(json_out.read_text())
