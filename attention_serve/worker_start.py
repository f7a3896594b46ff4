"""Where the model workers start from: a template process with torch and the model code imported, forked for each
worker, instead of a fresh interpreter per worker that imports them all again (LitServe's "spawn": ~2-3 s of CPU each).

The template is Python's forkserver with ``PRELOAD`` imported. It is started first thing (``start_worker_template``),
so its imports run beside the main process's own imports and model checks, and a worker, a replaced one too, then only
loads its model. The template runs no model, starts no CUDA and holds no threads of ours, so forking it is safe where
forking the main process (LitServe's threads, loaded models) would not be. No heavy imports here: it starts before
they run. ``ATTENTION_SERVE_TEMPLATE=0`` starts the workers as LitServe does (benchmarks/serve_start.py compares both).
"""

from __future__ import annotations

import multiprocessing as mp
import os

# what a worker imports before its model loads (apis.py and the models' code; torch is most of it)
PRELOAD = ["torch", "numpy", "PIL.Image", "litserve", "attention_serve.apis", "captioning.model.captioner",
           "text_attn.translation.translator"]  # fmt: skip


def start_worker_template():
    """The multiprocessing context the model workers start from: a forkserver that imports ``PRELOAD`` now, in its own
    process, so each worker forked from it later starts with them imported. Where Python has no forkserver, "spawn"
    (LitServe's own), as with ``ATTENTION_SERVE_TEMPLATE=0``. The template keeps this process's environment as it is
    now: the workers get that."""
    if os.environ.get("ATTENTION_SERVE_TEMPLATE") == "0" or "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    from multiprocessing import forkserver

    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    forkserver.ensure_running()
    return ctx


class StartingFrom:
    """A stand-in for ``litserve.server``'s ``multiprocessing`` that hands out ``ctx`` where LitServe asks for the
    "spawn" context (it starts its inference workers with it, 0.2.19); everything else (the "fork" of its HTTP
    process, its manager) is the module's own."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    def get_context(self, method=None):
        return self.ctx if method == "spawn" else mp.get_context(method)

    def __getattr__(self, name: str):
        return getattr(mp, name)
