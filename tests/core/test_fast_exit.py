"""text_attn.core.fast_exit: a console script leaves without the interpreter's teardown, and nothing else changes:
its exit code, its buffered output, the exit handlers registered, a SystemExit's message, a traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import atexit, sys
    from text_attn.core.fast_exit import run_and_leave

    def main():
        atexit.register(lambda: print("handler ran", file=sys.stderr))
        sys.stdout.write("buffered output, no newline")
        {body}

    run_and_leave(main)
""")


@pytest.mark.parametrize(
    ("body", "code", "err"),
    [
        ("return 3", 3, "handler ran\n"),
        ("return None", 0, "handler ran\n"),
        ("raise SystemExit(2)", 2, "handler ran\n"),
        ("raise SystemExit('caption: error: no')", 1, "caption: error: no\nhandler ran\n"),
    ],
)
def test_the_code_the_output_and_the_handlers_are_kept(body, code, err):
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(body=body)], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (code, "buffered output, no newline", err)


def test_an_unexpected_error_keeps_its_traceback():
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(body="1 / 0")], capture_output=True, text=True)
    assert done.returncode == 1 and "ZeroDivisionError" in done.stderr and "Traceback" in done.stderr
