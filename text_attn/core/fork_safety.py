"""A model's process forked (``multiprocessing``'s fork start method, Linux's default before Python 3.14; gunicorn's
``--preload``; ``os.fork``) computes in the child on one torch thread.

torch's CPU thread pool (OpenMP) does not survive a fork: once the parent has computed on more than one thread (loading
a model file is enough), a child whose next operation runs in parallel waits for ever, without a word (measured with
torch 2.14: ``Captioner.load()``, then a forked child's ``caption_images`` or a ``Translator``'s ``translate`` never
returned; ``torch.set_num_threads(2)`` in the child hung too; one thread computes, and gives the parent's captions and
translations). PyTorch's own DataLoader workers set one thread for this reason. So, once a Captioner or Translator
exists, a forked child is set to one thread as it starts. For a child with more threads, start it with the "spawn" or
"forkserver" method, whose child starts a fresh pool.
"""

from __future__ import annotations

import os
import sys

_registered = False


def _one_thread_in_child() -> None:
    torch = sys.modules.get("torch")  # the parent's import, inherited; not imported here
    if torch is not None:
        torch.set_num_threads(1)


def one_thread_after_fork() -> None:
    """Make every process forked from this one from now on start on one torch thread (once per process)."""
    global _registered
    if not _registered and hasattr(os, "register_at_fork"):  # POSIX
        os.register_at_fork(after_in_child=_one_thread_in_child)
        _registered = True
