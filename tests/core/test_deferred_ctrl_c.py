"""The fit's deferred Ctrl-C (text_attn.core.training.defer_ctrl_c) in a process forked while it is set (a DataLoader
worker of the validation or the next epoch): a terminal's Ctrl-C reaches every process of the group, and each worker
printed the "stopping ..." line again and kept a stop of its own; only the fit's process acts and says it."""

from __future__ import annotations

import os
import signal
import threading
from types import SimpleNamespace

import pytest

from text_attn.core import training


@pytest.fixture
def deferred():
    if threading.current_thread() is not threading.main_thread() or not hasattr(os, "fork"):
        pytest.skip("signals reach the main thread only; fork is POSIX")
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    last = SimpleNamespace(save_last=True)
    progress = SimpleNamespace(batch_progress=SimpleNamespace(current=SimpleNamespace(ready=3)))  # step 3 of 10
    trainer = SimpleNamespace(world_size=1, checkpoint_callbacks=[last], validating=False, num_training_batches=10,
                              fit_loop=SimpleNamespace(epoch_loop=progress))  # fmt: skip
    module = SimpleNamespace(_stop_asked=None, trainer=trainer)
    training.defer_ctrl_c(module, "text-train")
    yield module
    training.undefer_ctrl_c()
    signal.signal(signal.SIGINT, before)


def test_a_forked_worker_neither_says_nor_keeps_a_stop(deferred, capfd):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: Ctrl-C reaches it too
        os.close(read)
        os.kill(os.getpid(), signal.SIGINT)
        os.write(write, str(deferred._stop_asked).encode())
        os._exit(0)
    os.close(write)
    seen = os.read(read, 64).decode()
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0 and seen == "None"  # it went on, no stop of its own
    assert "Ctrl-C" not in capfd.readouterr().err  # and said nothing
    os.kill(os.getpid(), signal.SIGINT)  # the fit's own process: the stop, said once
    assert deferred._stop_asked == "SIGINT"
    assert capfd.readouterr().err.count("text-train: Ctrl-C: stopping after this training step") == 1
