"""text_attn.core.sigterm.interrupts_held: Ctrl-C and SIGTERM held while a batch's outputs are written together, then
raised as their handlers raise them (KeyboardInterrupt, Terminated); a second signal, or one after the block's
patience, acts at once (a write blocked on a reader that stopped reading hung the command); an exception of the block
is not replaced; nothing held where none came."""

from __future__ import annotations

import os
import signal

import pytest

from text_attn.core.sigterm import Terminated, interrupts_held, sigterm_interrupts


@pytest.fixture
def python_handlers():
    """Python's Ctrl-C handler and the default SIGTERM, whatever the test runner's worker set, put back after."""
    saved = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for n, handler in saved.items():
        signal.signal(n, handler)


def test_a_ctrl_c_inside_the_block_is_raised_after_it(python_handlers):
    written = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)  # delivered here: held
            written.append("lines")
            written.append("records")  # the block's writes all happen
    assert written == ["lines", "records"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's handler back


def test_a_sigterm_inside_the_block_ends_the_run_as_sigterm_interrupts_says(python_handlers):
    written = []
    with sigterm_interrupts():
        with pytest.raises(Terminated):
            with interrupts_held():
                os.kill(os.getpid(), signal.SIGTERM)
                written.append("page")
    assert written == ["page"]


def test_a_second_ctrl_c_acts_at_once(python_handlers):
    written = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            written.append("held")
            os.kill(os.getpid(), signal.SIGINT)  # a user pressing it again: now
            written.append("never")
    assert written == ["held"]


def test_a_ctrl_c_after_the_patience_acts_at_once(python_handlers):
    """A write blocked on a full pipe never ends the block: the first Ctrl-C then must not wait for it."""
    written = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held(patience=0.0):
            os.kill(os.getpid(), signal.SIGINT)
            written.append("never")
    assert written == []


def test_an_exception_of_the_block_is_not_replaced_by_a_held_signal(python_handlers):
    with pytest.raises(SystemExit) as exc:  # a failed write's one-line exit (code 2), a Ctrl-C held meanwhile
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            raise SystemExit(2)
    assert exc.value.code == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_signal_stays_ignored_and_nothing_is_raised_without_one(python_handlers):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)  # ignored before the block: ignored in it
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_held_ctrl_c_acts_once_its_patience_is_over_while_the_block_still_runs(python_handlers):
    """One Ctrl-C (a scheduler's one SIGTERM) at the block's start, then a write that blocks (a reader that stopped
    reading): it was held as long as the block blocked; it acts within the patience now."""
    import time

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held(patience=0.2):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the blocked write
    assert time.monotonic() - start < 2
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL  # the timer's handler given back
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
