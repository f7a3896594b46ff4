"""``caption --devices N`` on one machine: the other N - 1 processes started at once, before anything is imported.

Lightning's launcher starts them when the predict loop begins, after the first process has imported torch and
Lightning and loaded the model; each of them then imports and loads again, in series behind it (on 2 cores:
``--devices 2`` started in 1.6-2.1x Lightning's import). Here they start first, so every process imports and loads
at the same time. They are started as Lightning's launcher starts them (the same command line, with ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` / ``MASTER_PORT`` set), and Lightning, finding ``LOCAL_RANK`` set, starts none of its
own. Nothing here imports torch.

Not used when something else starts the processes (torchrun, SLURM, ``LOCAL_RANK`` already set) or with
``--num-nodes`` above 1 (each machine's run is started by its own launcher, docs/scale.md).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

from text_attn.core.errors import QUIET_ERRORS

# set by a launcher or scheduler that starts the processes itself: Lightning's environments read these
LAUNCHED = ("LOCAL_RANK", "SLURM_NTASKS", "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_SIZE", "JSM_NAMESPACE_SIZE")
GRACE_S = 30.0  # after the first process fails, how long the others have to end on their own
FIRST_PID = "ATTN_FIRST_PID"  # in a process started here: the first process's id (first_gone_quietly)
GONE_WAIT_S = 1.0  # how long a started process's error waits for the signal its first process's end sends
WATCH_S = 5.0  # after another process fails, how long the first has to fail alike (it then says why) before it ends


def should_start(devices: int | None, num_nodes: int) -> bool:
    """Whether this run starts its other processes itself. ``CAPTION_EARLY_START=0``: Lightning's launcher does, when
    the loop begins (benchmarks/starts.py compares the two)."""
    if devices is None or devices < 2 or num_nodes != 1 or os.environ.get("CAPTION_EARLY_START") == "0":
        return False
    return not any(k in os.environ for k in LAUNCHED)


def hands_on_stdin(devices: int, num_nodes: int) -> bool:
    """Whether every process of this run gets the first one's stdin: it starts them (:func:`should_start`), or it is
    one of those it started (their errors are quiet until the loop). Another launcher's processes have their own."""
    return should_start(devices, num_nodes) or os.environ.get(QUIET_ERRORS) == "1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _command(argv: list[str]) -> list[str]:
    """This program again, as Lightning's launcher runs it: a script by its path, a module with -m."""
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    if spec is None:
        return [sys.executable, os.path.abspath(sys.argv[0]), *argv]
    return [sys.executable, "-m", spec.name, *argv]


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def start_others(devices: int, argv: list[str], stdin: str | None = None) -> Others:
    """Start local ranks 1..devices-1 running ``argv`` and make this process rank 0 (its environment). ``stdin``: the
    text the first process read from its stdin (paths, ``caption -``), given to each of the others as theirs. The
    environment is given back as it was when the run ends (:meth:`Others.finish`): in a process that runs caption
    again (a notebook), a later run read LOCAL_RANK as another launcher's and drew no --sample seed."""
    before = {k: os.environ.get(k) for k in RANK_VARIABLES}
    os.environ.update(
        MASTER_ADDR=os.environ.get("MASTER_ADDR", "127.0.0.1"),
        MASTER_PORT=os.environ.get("MASTER_PORT", str(_free_port())),
        NODE_RANK="0",
        LOCAL_RANK="0",
        WORLD_SIZE=str(devices),
    )
    procs = []
    listed = None
    if stdin is not None:  # a file, not a pipe: nothing here waits for the others to read it
        with tempfile.NamedTemporaryFile("wb", delete=False, prefix="caption-stdin-") as out:
            out.write(os.fsencode(stdin))  # the bytes it read: each process decodes them as the first did
        listed = out.name
    ends = {"preexec_fn": _end_with_parent} if sys.platform.startswith("linux") else {}
    try:
        for rank in range(1, devices):
            env = {**os.environ, "LOCAL_RANK": str(rank), QUIET_ERRORS: "1", FIRST_PID: str(os.getpid())}
            if listed is None:
                procs.append(subprocess.Popen(_command(argv), env=env, **ends))
                continue
            with open(listed, "rb") as own:  # opened once a process: each reads it from its start
                procs.append(subprocess.Popen(_command(argv), env=env, stdin=own, **ends))
    finally:
        if listed is not None:
            try:
                os.unlink(listed)  # the processes keep their open descriptors
            except PermissionError:  # Windows: a file open elsewhere cannot go yet; at exit, the others done by then
                atexit.register(_remove, listed)
    return Others(procs, before)


RANK_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")  # set by start_others


def _end_with_parent() -> None:
    """In a started process, before it runs (Linux): SIGTERM when the first process ends. Killed with SIGKILL, the
    first could not end them: the others, their parent gone, captioned their whole share (hours, at scale) and then
    printed a traceback from the barrier on the terminal of a command that had returned."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1  # <linux/prctl.h>
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)


@contextlib.contextmanager
def first_gone_quietly():
    """Around a started process's run: an error there because its first process was killed (the connection to it
    reset, mid-collective) waits for the signal that end sends (:func:`_end_with_parent`), which ends this process
    without a word. The error came first, and a traceback of a dozen lines reached the terminal of a command that
    had returned. Other errors are raised as they were, a second later."""
    try:
        yield
    except Exception:
        first = os.environ.get(FIRST_PID)
        if first and sys.platform.startswith("linux"):
            time.sleep(GONE_WAIT_S)  # the signal ends this process here where the first is gone
            if os.getppid() != int(first):  # gone, and no signal came (its delivery failed): quietly, all the same
                os._exit(143)
        raise


def loop_started() -> None:
    """From the loop on, this process's own errors are its own to say (the first process may not meet them)."""
    os.environ.pop(QUIET_ERRORS, None)


class Others:
    """The processes started here, watched: one that fails while the first runs on (it would wait for them at its
    first collective call) ends the run, after WATCH_S, in one line, as Lightning's launcher's observer does."""

    def __init__(self, procs: list[subprocess.Popen], environment: dict[str, str | None] | None = None):
        self.procs, self.done = procs, threading.Event()
        self.environment = environment or {}  # the rank variables as they were before the run
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while not self.done.wait(0.5):
            failed = [(r, p.returncode) for r, p in enumerate(self.procs, 1) if p.poll() not in (None, 0)]
            if failed and not self.done.wait(WATCH_S):
                rank, code = failed[0]
                n = len(self.procs) + 1
                print(f"caption: error: process {rank} of {n} ended with exit code {code} (its line above says why "
                      "where it met an error of its own; else a run with --devices 1 does)",
                      file=sys.stderr)  # fmt: skip
                self._end(0.0)
                os._exit(code)

    def _end(self, grace: float) -> None:
        deadline = time.monotonic() + grace
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def finish(self, code: int) -> int:
        """Wait for the other processes (when this one failed, GRACE_S for them to fail alike, then they are
        ended). The exit code: this process's, or the first other one's that failed."""
        self.done.set()
        self._end(GRACE_S if code else 3600 * 24)
        for name, value in self.environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        failed = [p.returncode for p in self.procs if p.returncode]
        return code or (failed[0] if failed else 0)
