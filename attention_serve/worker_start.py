"""Where the model workers start from: a template process with torch and the model code imported, forked for each
worker, instead of a fresh interpreter per worker that imports them all again (LitServe's "spawn": ~2-3 s of CPU each).

The template is Python's forkserver with ``PRELOAD`` imported. It is started first thing (``start_worker_template``),
so its imports run beside the main process's own imports and model checks, and a worker, a replaced one too, then only
loads its model. The template runs no model, starts no CUDA and holds no threads of ours, so forking it is safe where
forking the main process (LitServe's threads, loaded models) would not be. No heavy imports here: it starts before
they run. ``ATTENTION_SERVE_TEMPLATE=0`` starts the workers as LitServe does (benchmarks/serve_start.py compares both).

Also here: how the server's helper processes outlive a SIGTERM sent to the whole process group (systemd's default
stop, ``kill -- -PGID``), as they outlive Ctrl-C's SIGINT, so that the main process can answer the requests in flight
before it ends them itself. The template, LitServe's manager and the model workers each keep running while the
process that started them lives; a worker also tells a SIGTERM sent to it alone (it ends, and is replaced) from the
group's (the main process marks its stop at once: :data:`DRAINING`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time

# what a worker imports before its model loads (apis.py and the models' code; torch is most of it). First: the module
# whose import makes the template outlive a SIGTERM sent to the process group (attention_serve/in_template.py)
PRELOAD = ["attention_serve.in_template", "torch", "numpy", "PIL.Image", "litserve", "attention_serve.apis",
           "captioning.model.captioner", "text_attn.translation.translator"]  # fmt: skip

# The server's stage, in shared memory (workers.WorkerBoard.stage), read by a worker's SIGTERM handler: serving; the
# main process stopping (it answers the requests in flight: a SIGTERM that reached a worker too is ignored); the main
# process ending the workers (their SIGTERM ends them)
RUNNING, DRAINING, ENDING = 0, 1, 2
STOP_SEEN = 1.0  # seconds a worker's SIGTERM waits for the main process's stop to begin (a group's) before it ends it


def die_of(signum: int) -> None:
    """End this process as the signal's default action does (its exit status then says which signal)."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # not reached: the default action ends the process first


def outliving(owner: int, held: list[int] | None = None):
    """A SIGTERM handler: in a child of process ``owner`` (while it lives) the signal is ignored, as SIGINT is: the
    owner ends the child itself when its own stop is done. Anywhere else (a worker forked from the template, a
    process whose owner has gone) it ends the process as before. In ``owner`` itself, with ``held``, the signal is
    noted there for the owner to act on once its child is started (workers.SupervisedServer._init_manager)."""

    def on_sigterm(signum, frame) -> None:
        if os.getpid() == owner and held is not None:
            held.append(signum)
        elif os.getppid() != owner:
            die_of(signum)

    return on_sigterm


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone; or another user's: ours has gone and its pid was taken
        return False
    try:  # a killed process its parent has not reaped yet (a zombie) has gone too: kill() still finds it
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):  # no /proc (macOS): kill() said
        return True


def end_with_parent(parent: int, signum: int = signal.SIGTERM) -> None:
    """On Linux, this process gets ``signum`` when its parent ``parent`` ends (PR_SET_PDEATHSIG); its SIGTERM handler
    then ends it. Without it a SIGKILLed main process (kill -9, the out-of-memory killer) left every helper running,
    still answering on the port, and a restart failed "Address already in use": the HTTP process holds the
    template's and the resource tracker's pipes open, so neither ended. The signal comes when the parent THREAD that
    started this process ends: each is started from the main process's main thread (the template, LitServe's manager
    and HTTP process) or from the template's only thread (the workers); where not (a worker relaunched from the
    supervisor's thread with the "spawn" start method), its handler ignores it while the parent lives."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signum), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl (musl without it, a sandbox)
        return
    if os.getppid() != parent:  # it ended before the line above: nothing would send the signal
        die_of(signum)


def outlive_parent() -> None:
    """Set a helper process's SIGTERM handler (its initializer calls this): the signal is ignored while the process
    that started it lives (multiprocessing.parent_process's pid, whatever the start method; a forkserver's child is
    not that process's child), and ends it as before once that process has gone. By pid, not by parent_process's
    pipe: a process the server forks later (LitServe's HTTP process) holds that pipe open after the server died."""
    parent = mp.parent_process()
    owner = parent.pid if parent is not None else None

    def on_sigterm(signum, frame) -> None:
        if owner is None or not _running(owner):
            die_of(signum)

    signal.signal(signal.SIGTERM, on_sigterm)


def outliving_manager():
    """``multiprocessing.Manager()`` (the default context's SyncManager) that outlives a SIGTERM sent to the whole group
    while this process lives. Forked, it inherits the handler workers.SupervisedServer._init_manager sets around its
    start (as before); started by spawn (macOS) or from a forkserver (Python 3.14 on Linux) it inherits none of this
    process's (a forkserver's child gets the template's, which ends it: its parent is not this process), so its
    initializer sets :func:`outlive_parent`'s. SIGINT it ignores already (multiprocessing's manager does)."""
    from multiprocessing.managers import SyncManager

    ctx = mp.get_context()
    manager = SyncManager(ctx=ctx)
    method = ctx.get_start_method()
    manager.start(initializer=_manager_init, initargs=(os.getpid(), method != "fork", method != "forkserver"))
    return manager


def _manager_init(owner: int, outlive: bool, watch: bool) -> None:
    """In LitServe's manager: :func:`outlive_parent`'s handler where it was not inherited; and where ``owner`` (the
    main process) started it (not a forkserver), :func:`end_with_parent`."""
    if outlive:
        outlive_parent()
    if watch:
        end_with_parent(owner)


def worker_sigterm(stage) -> None:
    """A model worker's SIGTERM (installed by apis._ModelAPI.setup; ``stage``: the server's, see :data:`RUNNING`).
    Sent to the whole group, it reaches the main process too, which marks its stop at once (DRAINING): the worker then
    runs on, answering what it holds, until the main process ends it (ENDING). Sent to this worker alone (an operator,
    a container runtime), the main process is not stopping: after :data:`STOP_SEEN` s the worker ends, and the
    supervisor replaces it, as before. A worker whose parent (the template, or the main process with "spawn") has
    gone ends at once when the main process has gone too (:func:`end_with_parent` sends the signal); while the main
    process lives, its supervisor ends it (workers.end_if_running: the template was killed)."""
    parent = os.getppid()
    main = mp.parent_process()
    owner = main.pid if main is not None else parent

    def on_sigterm(signum, frame) -> None:
        if os.getppid() != parent and owner != parent and _running(owner):
            return
        deadline = time.monotonic() + STOP_SEEN
        while stage.value == RUNNING and time.monotonic() < deadline and os.getppid() == parent:
            time.sleep(0.01)
        if stage.value == DRAINING and os.getppid() == parent:
            return
        die_of(signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    end_with_parent(parent)
    if not _running(owner):  # the template outlived the main process for a moment: nothing else ends this worker
        die_of(signal.SIGTERM)


# multiprocessing's Unix sockets (the template's, LitServe's manager's) live at TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX:
# 32 bytes after TMPDIR, within AF_UNIX's 107
SOCKET_TAIL = 32
SOCKET_PATH_MAX = 107


def short_socket_folder() -> str | None:
    """Where TMPDIR is too long for the Unix sockets the server's processes talk over (a scheduler's per-job folder;
    the start ended in a traceback, ``AF_UNIX path too long``), multiprocessing's folder for them is made in /tmp
    instead, as multiprocessing makes it (``pymp-*``, 0700, removed at exit); TMPDIR itself is left as it is. The line
    to say so, None where nothing changed. Refused (ValueError) where /tmp cannot stand in."""
    import shutil
    import tempfile
    from multiprocessing import process, util

    folder = tempfile.gettempdir()
    if len(os.fsencode(folder)) + SOCKET_TAIL <= SOCKET_PATH_MAX or process.current_process()._config.get("tempdir"):
        return None  # short enough, or multiprocessing's folder made already (its sockets work, or failed already)
    if not (os.path.isdir("/tmp") and os.access("/tmp", os.W_OK | os.X_OK)):
        raise ValueError(f"TMPDIR {folder} is too long for the Unix sockets the server's processes talk over (at most "
                         f"{SOCKET_PATH_MAX - SOCKET_TAIL} bytes): set TMPDIR to a shorter folder")  # fmt: skip
    sockets = tempfile.mkdtemp(prefix="pymp-", dir="/tmp")
    # removed at exit, after the rest of multiprocessing's finalizers, as util.get_temp_dir() has its own removed
    util.Finalize(None, shutil.rmtree, args=(sockets, True), exitpriority=-100)
    process.current_process()._config["tempdir"] = sockets  # where util.get_temp_dir() looks first
    return (f"TMPDIR {folder} is too long for the Unix sockets the server's processes talk over (at most "
            f"{SOCKET_PATH_MAX - SOCKET_TAIL} bytes): they are made in {sockets}")  # fmt: skip


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
    "spawn" context (it starts its inference workers with it, 0.2.19), and its manager as :func:`outliving_manager`
    (the default context's, as ``Manager()``); everything else (the "fork" of its HTTP process) is the module's own."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    def get_context(self, method=None):
        return self.ctx if method == "spawn" else mp.get_context(method)

    def Manager(self):  # noqa: N802 - multiprocessing's name
        return outliving_manager()

    def __getattr__(self, name: str):
        return getattr(mp, name)
