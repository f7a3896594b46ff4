"""text_attn.core.sigterm.interrupts_held: Ctrl-C and SIGTERM held while a batch's outputs are written together, then
raised as their handlers raise them (KeyboardInterrupt, Terminated); nothing held where none came."""

from __future__ import annotations

import os
import signal

import pytest

from text_attn.core.sigterm import Terminated, interrupts_held, sigterm_interrupts


def test_a_ctrl_c_inside_the_block_is_raised_after_it():
    written = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)  # delivered here: held
            written.append("lines")
            written.append("records")  # the block's writes all happen
    assert written == ["lines", "records"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's handler back


def test_a_sigterm_inside_the_block_ends_the_run_as_sigterm_interrupts_says():
    written = []
    with sigterm_interrupts():
        with pytest.raises(Terminated):
            with interrupts_held():
                os.kill(os.getpid(), signal.SIGTERM)
                written.append("page")
    assert written == ["page"]


def test_nothing_is_raised_without_a_signal_and_the_handlers_come_back():
    before = signal.getsignal(signal.SIGINT)
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGINT) is before
