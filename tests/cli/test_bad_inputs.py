"""The bad-input corpus (tests/helpers/bad_inputs.py): over 60 bad inputs across caption, caption-train, caption-export,
translate, text-train and text-export, run through each command's entry point in one subprocess. Every one must end
with its exit code and one error line that names the input, never a traceback. The table of input -> exit code ->
message is printed (pytest -s shows it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path(__file__).parent.parent / "helpers" / "bad_inputs.py"


def _message(stderr: str, says: str) -> str:
    """The line that matters: the error or note naming the input (else the first error, else the last line)."""
    lines = [line for line in stderr.splitlines() if ": error: " in line or ": note: " in line]
    named = [line for line in lines if says and says in line]
    errors = [line for line in lines if ": error: " in line]
    return (named or errors or stderr.strip().splitlines() or [""])[0]


@pytest.mark.slow
def test_every_bad_input_is_one_line_and_its_exit_code(tmp_path):
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, str(DRIVER), str(tmp_path / "work"), str(out)], capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    cases = json.loads(out.read_text())
    assert len(cases) >= 40 and len({c["command"] for c in cases}) == 6
    rows, bad = [], []
    for c in cases:
        r = c["result"]
        message = _message(r["stderr"], c["says"])
        rows.append(f"| {c['command']} | {c['name']} | {r['code']} | {message[:150]} |")
        errors = [line for line in r["stderr"].splitlines() if ": error: " in line]
        ok = (
            r["traceback"] is None
            and "Traceback" not in r["stderr"]
            and r["code"] == c["code"]
            and c["says"] in message
            and (c["code"] != 2 or len(errors) == 1)  # a refused run: exactly one error line
            and "usage:" not in r["stderr"]  # the usage text only with --help
            and (c["code"] != 0 or not errors)
            and "\x1b" not in r["stdout"] + r["stderr"]  # text from files reaches the terminal inert (SECURITY.md)
        )
        if not ok:
            trace = f" TRACEBACK {r['traceback'][-600:]}" if r["traceback"] else ""
            bad.append(f"{c['command']} / {c['name']}: exit {r['code']} (want {c['code']}), says {message!r} "
                       f"(want {c['says']!r}){trace}")  # fmt: skip
    print("\n| command | bad input | exit code | message |\n|---|---|---|---|\n" + "\n".join(rows))
    assert not bad, "\n".join(bad)
    work = tmp_path / "work"  # what the security cases planted is as it was, and no planted code ran
    assert (work / "victim.txt").read_text() == "precious\n" and (work / "fifo").is_fifo()
    photo = DRIVER.parent.parent / "fixtures" / "images" / "coffee.png"
    assert (work / "photos" / "b.png").read_bytes() == photo.read_bytes()
    assert not (work / "code_ran").exists()
