"""text_attn.core.startup_gc: a console script starts with the collector's full passes held back; release() freezes
what is alive and gives the thresholds back; in-process use is untouched. (That every command that loads a model
releases it: tests/cli/test_startup_gc_commands.py.)"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap

from text_attn.core import startup_gc

# a fresh interpreter: 300,000 long-lived containers (what an import of torch is like), made with or without hold();
# the full passes that ran meanwhile are counted with gc.callbacks
MAKE = textwrap.dedent("""
    import gc, json, sys
    from text_attn.core import startup_gc

    full = []
    gc.callbacks.append(lambda phase, info: full.append(1) if phase == "stop" and info["generation"] == 2 else None)
    default, frozen_at_start = gc.get_threshold(), gc.get_freeze_count()  # 3.12.1 starts with 375 frozen
    if sys.argv[1] == "held":
        startup_gc.hold()
    held = startup_gc.held()
    kept = [[i] for i in range(300_000)]
    passes = len(full)
    startup_gc.release()
    print(json.dumps({"held": held, "passes": passes, "frozen": gc.get_freeze_count() - frozen_at_start,
                      "after": list(gc.get_threshold()), "default": list(default), "still": startup_gc.held()}))
""")


def _make(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", MAKE, mode], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_held_no_full_pass_runs_and_release_freezes_and_gives_the_thresholds_back():
    held = _make("held")
    assert held["held"] and held["passes"] == 0
    assert held["frozen"] >= 300_000 and held["after"] == held["default"] and not held["still"]


def test_not_held_the_same_objects_cost_full_passes_and_release_does_nothing():
    """The check above can fail: without hold() the same start runs full passes, and release() leaves all as it was."""
    plain = _make("plain")
    assert not plain["held"] and plain["passes"] >= 1
    assert plain["frozen"] == 0 and plain["after"] == plain["default"]


def test_hold_twice_keeps_the_first_thresholds():
    before = gc.get_threshold()
    try:
        startup_gc.hold()
        startup_gc.hold()
        assert gc.get_threshold() == startup_gc.HELD
    finally:
        startup_gc.release()
    assert gc.get_threshold() == before and not startup_gc.held()


LEAVING = textwrap.dedent("""
    import gc
    from text_attn.core import startup_gc
    from text_attn.core.fast_exit import leaving

    def main():
        print(startup_gc.held(), gc.get_threshold() == startup_gc.HELD)

    leaving(main)()
""")


def test_a_console_script_starts_held():
    done = subprocess.run([sys.executable, "-c", LEAVING], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.split()) == (0, ["True", "True"]), done.stderr


HOLDING = textwrap.dedent("""
    import gc
    from text_attn.core import startup_gc

    def main():
        print(startup_gc.held(), gc.get_threshold() == startup_gc.HELD)
        return 0

    print(startup_gc.held())
    raise SystemExit(startup_gc.holding(main)())
""")


def test_a_trainers_console_script_starts_held_and_main_alone_does_not():
    done = subprocess.run([sys.executable, "-c", HOLDING], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.split()) == (0, ["False", "True", "True"]), done.stderr


def test_a_path_the_system_refuses_is_one_line_wherever_it_is_met(capsys, monkeypatch):
    """A model, config or output name too long for the file system (or a link loop) raised where a command first
    opened it: a traceback. The console script's entry says it in one line, exit 2; other errors pass through."""
    import pytest

    from text_attn.core import startup_gc

    monkeypatch.setattr("sys.argv", ["caption"])
    name = "a" * 300 + ".pt"
    assert startup_gc.holding(lambda: open(name))() == 2
    assert capsys.readouterr().err == f"caption: error: {name}: a file name too long for the file system\n"
    with pytest.raises(FileNotFoundError):
        startup_gc.holding(lambda: open("no-such-file.pt"))()
    startup_gc.release()
