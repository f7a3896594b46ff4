"""Ctrl-C in a console script's first fraction of a second, while it imports its command's module (before the entry
point's own handling begins): one line and exit code 130, never the 15-40 line traceback from inside an import it was.
The scripts are written as pip writes them (benchmarks/_runs.py), running this checkout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from text_attn.core import startup_gc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import entry_points, write_console_script  # noqa: E402

PHOTO = str(ROOT / "tests/fixtures/images/coffee.png")
SHAPES = str(ROOT / "captioning/assets/shapes_soft.pt")
COMMANDS = {"caption": [PHOTO], "translate": ["ein Hund"], "caption-export": [SHAPES, "{tmp}/out.pt"]}


def test_the_scripts_named_are_pyprojects():
    assert startup_gc.SCRIPTS == set(entry_points())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_ctrl_c_while_a_console_script_starts_is_one_line_and_exit_code_130(name, tmp_path):
    script = write_console_script(name, tmp_path)
    args = [a.format(tmp=tmp_path) for a in COMMANDS[name]]
    # Python's import-time report on stderr says when the project's first package is in (the handler is set as its
    # first statement; before it, Python itself is starting: ~25 ms idle, more on busy cores, nothing to set)
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    for delay in (0.0, 0.05, 0.1, 0.2):  # the imports of the command's module: ~0.05-0.45 s after, on 2 busy cores
        # SIGINT at its default in the child, as a terminal leaves it (a background test run inherits it ignored)
        proc = subprocess.Popen([str(script), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
        seen = []
        while (line := proc.stderr.readline()) and line.split("|")[-1].strip() != "text_attn":
            seen.append(line)
        assert line, "".join(seen[-20:])
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=120)[1]
        said = [line for line in err.splitlines() if not line.startswith("import time:")]
        assert "Traceback" not in err and proc.returncode == 130, (delay, proc.returncode, "\n".join(said[-40:]))
        assert said == [f"{name}: interrupted"], (delay, said)


def test_a_script_imported_as_a_workers_main_module_keeps_pythons_handler(tmp_path):
    """multiprocessing's workers import the main script again as __mp_main__ (with the parent's argv): there Ctrl-C
    stays Python's own KeyboardInterrupt, as in a test, a notebook or ``python -m``."""
    script = write_console_script("caption", tmp_path)
    code = (
        "import runpy, signal, sys; sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='__mp_main__'); "
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    )
    # SIGINT at its default in the child: a run started in the background (nohup, `&`) inherits it ignored, and Python
    # then leaves it ignored rather than installing its own handler
    done = subprocess.run([sys.executable, "-c", code, str(script)], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n", "")


def test_the_entry_point_gives_the_command_pythons_handler_back(monkeypatch):
    """From the entry point on, the commands' own KeyboardInterrupt handling (an interrupted run's line, its files
    closed) is what a Ctrl-C meets."""
    seen = []
    before = signal.signal(signal.SIGINT, startup_gc._interrupted_at_start)  # as quiet_start sets it
    try:
        monkeypatch.setattr(startup_gc, "hold", lambda: None)  # the test process's collector stays as it is
        startup_gc.holding(lambda: seen.append(signal.getsignal(signal.SIGINT)))()
    finally:
        signal.signal(signal.SIGINT, before)
    assert seen == [signal.default_int_handler]


def _lost_interrupt() -> None:
    """A KeyboardInterrupt raised in a weak reference's callback, as an import's module-lock cleanup meets a Ctrl-C;
    then plain steps of Python, where a pending signal is handled."""
    import weakref

    class Held:
        pass

    def callback(ref):
        raise KeyboardInterrupt

    held = Held()
    ref = weakref.ref(held, callback)
    del held  # the callback runs here; Python ignores what it raises
    assert ref() is None
    for _ in range(100):  # a second of ordinary steps, where an interrupt sent again is raised
        time.sleep(0.01)


def test_a_ctrl_c_python_would_ignore_in_a_callback_is_delivered_again(monkeypatch, capsys):
    """The 1-in-20 Ctrl-C of test_ctrl_c_while_a_console_script_starts: raised inside importlib's weakref callback,
    printed as "Exception ignored" and lost (exit code 0). With the console scripts' hook it reaches ordinary code."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))  # Python's own: report and go on
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _lost_interrupt()  # without the hook: lost
        assert seen == [KeyboardInterrupt]
        startup_gc.deliver_lost_interrupts()
        startup_gc.deliver_lost_interrupts()  # a second call wraps nothing again
        assert not hasattr(sys.unraisablehook.__closure__[0].cell_contents, "delivers_lost_interrupts")
        with pytest.raises(KeyboardInterrupt):
            _lost_interrupt()
        assert seen == [KeyboardInterrupt]  # not reported as ignored
        sys.unraisablehook(type("U", (), {"exc_type": ValueError})())  # anything else: to the hook before
        assert seen == [KeyboardInterrupt, ValueError]
    finally:
        signal.signal(signal.SIGINT, previous)
