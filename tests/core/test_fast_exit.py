"""text_attn.core.fast_exit: a console script leaves without the interpreter's teardown, and nothing else changes:
its exit code, its buffered output, the exit handlers registered, a SystemExit's message, a traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from helpers.toml_reader import toml_reader

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


TORN_DOWN = textwrap.dedent("""
    import sys
    from {module} import {func}

    class Mark:  # freed, and so heard from, only if the interpreter is torn down
        def __del__(self):
            print("torn down", file=sys.stderr)

    mark = Mark()
    sys.argv = ["{name}", "--help"]
    sys.exit({func}())
""")
# The training commands keep Python's own shutdown: a second is nothing against a run, and Lightning's loggers and
# launcher are left to end as they expect.
LEAVING = ["caption", "translate", "text-export", "caption-export", "attention-serve"]


def _scripts() -> dict[str, str]:
    from pathlib import Path

    tomllib = toml_reader()
    with (Path(__file__).resolve().parents[2] / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["scripts"]


def _run(module: str, func: str, name: str) -> subprocess.CompletedProcess:
    code = TORN_DOWN.format(module=module, func=func, name=name)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", LEAVING)
def test_the_console_scripts_that_load_models_leave_without_the_teardown(name):
    done = _run(*_scripts()[name].split(":"), name)
    assert done.returncode == 0 and f"usage: {name}" in done.stdout, done.stderr
    assert "torn down" not in done.stderr, done.stderr


def test_a_command_that_returns_is_torn_down_and_heard_from():
    """The check above can fail: the same script around a function that returns is torn down (the mark speaks)."""
    done = _run("text_attn.translation.translate_cli", "translate_main", "translate")
    assert done.returncode == 0 and "usage: translate" in done.stdout and "torn down" in done.stderr, done.stderr
