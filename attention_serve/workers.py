"""Model workers that die are replaced, and everyone learns of it at once.

LitServe (0.2.19) runs each model in worker processes and, with ``restart_workers=True``, relaunches a dead one from a
monitor thread in the main process. Used alone it falls short (measured: a SIGKILLed worker's requests waited for
``--timeout``): the monitor answers the dead worker's requests from the main process's copy of the response buffer,
but the HTTP process, forked before, holds the real one, so nothing is answered; worker ids restart at 0 for each model,
so it would answer the other model's requests too; it looks every 2 s; and a worker that dies at every load is
relaunched forever. So :class:`SupervisedServer` keeps LitServe's own relaunch (``launch_single_inference_worker``) and
its worker loop, and replaces only the monitor: it looks every 0.1 s, writes each worker's state to a
:class:`WorkerBoard` in shared memory that the HTTP process reads (front.py answers the requests in flight on a dead
worker with 503, new ones while it loads too, and /health says so), logs one line per event, and gives up after
``max_restarts`` deaths of one model within ``RESTART_WINDOW`` seconds, stopping the server with a non-zero exit.

The workers start from worker_start.py's template (forked with torch imported), not as fresh interpreters.

At the start, the server waits for every worker to load its model, and one that ends first stops the start
(:class:`StartFailed`): LitServe's own wait returned once any worker was ready and waited for ever on a worker that
ended without reporting (ours end in one line when their model cannot load, apis._ModelAPI.setup). Its helper
processes outlive a SIGTERM sent to the whole process group (worker_start.py): the main process answers the requests
in flight, then ends them (:data:`worker_start.ENDING`).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import litserve as ls
import litserve.server
from litserve.utils import WorkerSetupStatus

from attention_serve.abandoned import Abandoned
from attention_serve.cores import CoreShare
from attention_serve.worker_start import DRAINING, ENDING, RUNNING, StartingFrom, end_with_parent, outliving

RESTART_WINDOW = 60.0  # seconds: more than max_restarts deaths of one model within it is a crash loop
LOOK_EVERY = 0.1  # seconds between the supervisor's looks at the workers
WHAT = {"/caption": "caption", "/translate": "translation"}  # the model's name in the log lines and answers
PROC_STAT = Path("/proc/self/stat")  # Linux's; where it is missing, ps says when a process started (start_time)


def log(line: str) -> None:
    print(f"attention-serve: {line}", file=sys.stderr, flush=True)


LISTEN_BACKLOG = 2048  # uvicorn's default backlog


def listening(sock: socket.socket) -> bool:
    """Whether ``sock`` takes connections (listen() was called on it, here or in a process it was handed to). Where the
    system cannot say (no SO_ACCEPTCONN), True."""
    option = getattr(socket, "SO_ACCEPTCONN", None)
    try:
        return option is None or bool(sock.getsockopt(socket.SOL_SOCKET, option))
    except OSError:
        return False


def holds(pid: int, sock: socket.socket) -> bool | None:
    """Whether process ``pid`` still has ``sock`` open (its /proc fd table: Linux's); False once it has ended, None
    where the system cannot say."""
    try:
        target = f"socket:[{os.fstat(sock.fileno()).st_ino}]"
        entries = list(os.scandir(f"/proc/{pid}/fd"))
    except FileNotFoundError:
        return False if Path("/proc/self/fd").is_dir() else None
    except OSError:  # a closed socket here, or a /proc we may not read
        return None
    for entry in entries:
        with contextlib.suppress(OSError):  # a descriptor closed while listed
            if os.readlink(entry.path) == target:
                return True
    return False


def start_time(pid: int) -> int | str | None:
    """When process ``pid`` started: clock ticks since boot (/proc/PID/stat's 22nd field), or where there is no /proc
    (macOS, the BSDs) ps's start time, to the second; None where unknown (it has ended). Without it an orphaned worker
    was never ended there (end_if_running)."""
    if not PROC_STAT.exists():
        return _ps_start_time(pid)
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _ps_start_time(pid: int) -> str | None:
    try:
        done = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def end_if_running(pid: int, started: int | None) -> bool:
    """Kill worker ``pid`` if it is still the process that started at ``started``; whether it was running.

    A worker forked from the template (worker_start.py) is known to have ended from the template, which reaps it. If
    the template itself is killed (the out-of-memory killer may choose it), every worker it started reads as ended
    (exit code 255) but runs on, orphaned, taking requests. It is ended before its replacement starts: never two
    workers in one slot."""
    if started is None or start_time(pid) != started:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def how_it_ended(exitcode: int | None) -> str:
    """A dead process's exit code in words: ``killed by SIGKILL`` for a signal (a negative code), else the code."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


@dataclass(frozen=True)
class Slot:
    """One worker process of one model: ``index`` in LitServe's list of workers (and the id its worker loop sends
    with every request it takes, see ``apis._ModelAPI.setup``), its API path and LitServe's own worker id."""

    index: int
    route: str  # "/caption" or "/translate"
    worker_id: int  # LitServe's per-model worker number (its setup-status key is "caption_0")

    @property
    def model(self) -> str:
        return WHAT[self.route]

    @property
    def key(self) -> str:
        """Its entry in LitServe's setup status ("ready" once its model is loaded)."""
        return f"{self.route[1:]}_{self.worker_id}"


class StartFailed(Exception):
    """A model worker ended (or reported an error) before it was ready: the server cannot start. The message says which
    and how; the worker's own line (apis._ModelAPI.setup) says why."""


class PortTaken(OSError):
    """The server's socket could not listen once its models were ready: another process started listening on the
    port after the start's check (two servers started together: the loser waited forever, never listening)."""


class WorkerBoard:
    """Each worker's state in shared memory, written by the supervisor (main process), read by the HTTP process
    (created before LitServe forks it). Per slot: ``generation`` (deaths so far: a change means the requests it held
    are lost), ``ready`` (1 when it can answer) and ``restarts`` (replacements that came up)."""

    def __init__(self, slots: list[Slot]) -> None:
        self.slots = slots
        n = len(slots)
        self.generation = mp.RawArray("i", n)
        self.ready = mp.RawArray("b", n)
        self.restarts = mp.RawArray("i", n)
        self.pid = mp.RawArray("i", n)  # the worker process that answers (0: none yet)
        self.stage = mp.RawValue("b", RUNNING)  # the server's stage (worker_start.RUNNING): the workers read it too
        self.abandoned = Abandoned()  # requests whose client went away: the workers pass over them (abandoned.py)

    def routes(self) -> list[str]:
        return list(dict.fromkeys(s.route for s in self.slots))

    def down(self) -> list[str]:
        """The models (their routes) with no worker that can answer now."""
        return [r for r in self.routes() if not any(self.ready[s.index] for s in self.slots if s.route == r)]

    def state(self, pids: bool) -> dict[str, dict]:
        """Per model (its route without the slash): ``ready``, ``restarts`` and, with ``pids``, the worker pids that
        answer (/info shows them, behind the API key; /health does not)."""
        down = self.down()
        state = {}
        for r in self.routes():
            mine = [s.index for s in self.slots if s.route == r]
            state[r[1:]] = {"ready": r not in down, "restarts": sum(self.restarts[i] for i in mine)}
            if pids:
                state[r[1:]]["pids"] = [self.pid[i] for i in mine if self.ready[i]]
        return state


class SupervisedServer(ls.LitServer):
    """A LitServer whose worker monitor replaces dead workers as the module doc says. ``max_restarts``: deaths of
    one model's workers within ``RESTART_WINDOW`` seconds before the server gives up (``gave_up`` then says why)."""

    def __init__(self, *args, max_restarts: int = 5, worker_context=None, **kwargs) -> None:
        super().__init__(*args, restart_workers=True, **kwargs)
        if worker_context is not None:  # LitServe starts its workers with mp.get_context("spawn") (0.2.19)
            litserve.server.mp = StartingFrom(worker_context)
        self.max_restarts = max_restarts
        self.gave_up: str | None = None
        self.stopping = False
        self.on_serving = None  # called (no arguments) once the port takes connections: the CLI's "serving" line
        self.supervising = threading.Lock()  # held while a worker is relaunched: a stop waits for it
        self.owner = os.getpid()  # the main process: an HTTP process ends with it (lifespan)
        slots, index = [], 0
        for api in self.litapi_connector:
            api.slot_base = index  # a worker's slot index: slot_base + LitServe's worker id (apis._ModelAPI.setup)
            for worker_id in range(len(self._inference_workers_config_for_api(api.api_path))):
                slots.append(Slot(index, api.api_path, worker_id))
                index += 1
        self.board = WorkerBoard(slots)
        share = CoreShare(len(slots), os.cpu_count() or 1)  # one for every worker: they lend each other cores
        for api in self.litapi_connector:
            api.stage = self.board.stage  # handed to each worker with its API: its SIGTERM handler reads it
            api.abandoned = self.board.abandoned  # written by the HTTP process, read by the worker loops
            if api.threads is None:
                api.cores = share
        # slot index -> its worker's pid and start time, from when it was first seen running (end_if_running)
        self.started: dict[int, tuple[int, int | None]] = {}
        self.http: list = []  # LitServe's HTTP processes, once started (_start_worker_monitoring)
        self.sockets: list[socket.socket] = []  # the port's listening sockets, bound by LitServe (_start_server)

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        """LitServe's lifespan, then this HTTP process's response queue woken: LitServe reads it in a thread that
        waits up to 1 s on the queue (its MPQueueTransport), and the event loop's close waits for that thread, so
        every stop took a second longer (measured: the HTTP process ended 0.96 s after SIGTERM). The reader skips a
        None it reads. An HTTP process (forked from the main thread) is killed when the main process ends, SIGKILLed
        too (worker_start.end_with_parent): uvicorn's SIGTERM waited for requests whose answers can no longer come."""
        if os.getpid() != self.owner:  # not a uvicorn thread of the main process
            end_with_parent(self.owner, signal.SIGKILL)
        async with super().lifespan(app):
            yield
        queues = getattr(self._transport, "_queues", None)  # absent with another transport (ZeroMQ): nothing waits
        if queues is not None:
            with contextlib.suppress(Exception):  # a queue already closed: there is no reader to wake
                queues[app.response_queue_id].put(None, block=False)

    def stop_supervising(self) -> None:
        """No more relaunches (a stop has begun); waits for one in progress to finish, so none is left behind. The
        workers' SIGTERM handler reads the stage: one sent to the whole group is now ignored (worker_start.py)."""
        self.board.stage.value = DRAINING
        with self.supervising:
            self.stopping = True

    def stop_listening(self, http: list, deadline: float) -> None:
        """The port closed for good once the stopping HTTP processes ``http`` have closed their copies of it: uvicorn
        stops accepting at SIGTERM, but this process and LitServe's manager (forked after the port was bound) hold the
        socket too, so the kernel went on taking connections nobody accepted: each hung until the exit, then was
        reset (/health too: a load balancer waited instead of seeing the server go). shutdown() ends the listening
        for every holder: a new connection is refused at once. Not before uvicorn's own close (an accept woken by it
        in the HTTP process would be an error in its log), nor where /proc cannot say when that is (the old
        behaviour)."""
        while time.monotonic() < deadline:
            held = [holds(p.pid, s) for p in http if p.pid is not None for s in self.sockets]
            if None in held:
                return
            if not any(held):
                break
            time.sleep(0.01)
        else:
            return  # an HTTP process that never closed it (busy): left to the exit, as before
        for sock in self.sockets:
            with contextlib.suppress(OSError):  # not listening any more (closed, or never listened)
                sock.shutdown(socket.SHUT_RDWR)

    def _init_manager(self, num_api_servers: int):
        """LitServe's manager process (its queues, the workers' status), forked now with a SIGTERM handler that ignores
        the signal while this process lives (worker_start.outliving): killed by a SIGTERM sent to the whole group, it
        took every queue with it and every request in flight got a plain-text 500. Started by spawn or forkserver
        instead (the default start method on macOS, on Linux from Python 3.14), it inherits no handler of this
        process's: its initializer sets the same (worker_start.outliving_manager, given LitServe by StartingFrom). It
        still ends with the server (LitServe's shutdown asks it to). A SIGTERM that reaches this process meanwhile is
        handled once it is up."""
        held: list[int] = []
        previous = signal.signal(signal.SIGTERM, outliving(os.getpid(), held))
        try:
            return super()._init_manager(num_api_servers)
        finally:
            signal.signal(signal.SIGTERM, previous)
            if held:
                os.kill(os.getpid(), signal.SIGTERM)

    def verify_worker_status(self) -> None:
        """Wait until every worker has loaded its model (see the module doc). A worker that ends first, or reports an
        error, ends the start: every worker is ended, LitServe's manager too, and :class:`StartFailed` says which
        worker and how it ended. A stop (Ctrl-C, SIGTERM) while waiting ends them the same way."""
        try:
            if not self.board.slots:
                raise StartFailed("no model worker to start: no device to run the models on")
            while True:
                status = dict(self.workers_setup_status)  # one round trip to LitServe's manager
                loading = False
                for slot in self.board.slots:
                    proc = self.inference_workers[slot.index]
                    if status.get(slot.key) == WorkerSetupStatus.READY:
                        continue
                    if status.get(slot.key) == WorkerSetupStatus.ERROR or not proc.is_alive():
                        proc.join(1)  # its exit code, for the line
                        raise StartFailed(f"the {slot.model} model's worker ended before its model was loaded "
                                          f"({how_it_ended(proc.exitcode)})")  # fmt: skip
                    loading = True
                if not loading:
                    return
                time.sleep(LOOK_EVERY / 2)
        except BaseException:
            self._end_start()
            raise

    def _end_start(self) -> None:
        """A start that failed or was stopped: the workers killed (none holds a request yet), LitServe's manager
        shut down. The template and resource tracker end with this process."""
        for proc in self.inference_workers:
            if proc.is_alive():
                proc.kill()
        for proc in self.inference_workers:
            proc.join(5)
        with contextlib.suppress(Exception):  # already gone: nothing to shut down
            self.transport_config.manager.shutdown()

    def _start_server(self, port, num_uvicorn_servers, log_level, sockets, uvicorn_worker_type, **kwargs):
        """LitServe's HTTP process, started; then ``on_serving`` is called once it takes connections on ``sockets``
        (bound here earlier; they listen once the HTTP process's startup is done, ~1 s later). They listen here first:
        a port another process took while the models loaded is PortTaken now, not a server that never listens."""
        for sock in sockets or []:
            try:
                sock.listen(LISTEN_BACKLOG)  # the HTTP process's listen() repeats it (same backlog)
            except OSError as err:
                raise PortTaken(err.errno, err.strerror) from err
        self.sockets = list(sockets or [])
        http = super()._start_server(port, num_uvicorn_servers, log_level, sockets, uvicorn_worker_type, **kwargs)
        if self.on_serving is not None:
            threading.Thread(target=self._announce, args=(sockets or [], list(http.values())), daemon=True,
                             name="attention-serve-announce").start()  # fmt: skip
        return http

    def _announce(self, sockets: list[socket.socket], http: list) -> None:
        while not all(listening(s) for s in sockets):
            if self.stopping or not all(p.is_alive() for p in http):
                return  # stopped before it served: nothing to announce
            time.sleep(0.02)
        if not self.stopping:
            self.on_serving()

    def _perform_graceful_shutdown(self, manager, uvicorn_workers, shutdown_reason: str = "normal") -> None:
        """LitServe's shutdown; the workers' SIGTERM, which it sends them, ends them from now on (worker_start.py)."""
        self.board.stage.value = ENDING
        super()._perform_graceful_shutdown(manager, uvicorn_workers, shutdown_reason)

    def _start_worker_monitoring(self, manager, uvicorn_workers) -> None:
        self.http = list(uvicorn_workers.values()) if isinstance(uvicorn_workers, dict) else list(uvicorn_workers)
        threading.Thread(target=self._supervise, daemon=True, name="attention-serve-supervisor").start()

    def _supervise(self) -> None:
        try:
            self._supervise_until_stopped()
        except (OSError, EOFError) as err:  # LitServe's manager is gone (a stop's shutdown, or killed)
            if not self.stopping and not self.gave_up:  # killed: nothing can be served (its queues are gone)
                self.gave_up = f"LitServe's manager process is gone ({type(err).__name__}): no request can be answered"
                log(self.gave_up)

    def _http_gone(self) -> bool:
        """Whether an HTTP process ended while serving (killed, the OOM killer's pick: ~490 MB): the port stayed open
        in this process and the manager, every connection hung, /health too, nothing logged, for ever (review). The
        server gives up: one line, and the command exits 1 for its supervisor (systemd, Kubernetes) to restart it."""
        gone = next((p for p in self.http if not p.is_alive()), None)
        if gone is None or self.stopping:
            return False
        self.gave_up = f"LitServe's HTTP process (pid {gone.pid}) stopped ({how_it_ended(gone.exitcode)}): no request "
        self.gave_up += "can be taken; stopping"
        log(self.gave_up)
        return True

    def _supervise_until_stopped(self) -> None:
        deaths: dict[str, deque[float]] = {r: deque() for r in self.board.routes()}
        died_at: dict[int, float] = {}
        while not self.stopping and not self._shutdown_event.is_set():
            if self._http_gone():
                self._shutdown_event.set()  # run() then stops everything, and the command exits 1
                return
            for slot in self.board.slots:
                proc = self.inference_workers[slot.index]
                if proc.is_alive():
                    if self.started.get(slot.index, (None,))[0] != proc.pid:  # a new worker: the process to end later
                        self.started[slot.index] = (proc.pid, start_time(proc.pid))
                    if not self.board.ready[slot.index] and self.workers_setup_status.get(slot.key) == "ready":
                        self.board.pid[slot.index] = proc.pid
                        self.board.ready[slot.index] = 1
                        if slot.index in died_at:
                            self.board.restarts[slot.index] += 1
                            log(f"the {slot.model} model's worker is back (pid {proc.pid}, "
                                f"{time.monotonic() - died_at.pop(slot.index):.1f} s after it stopped)")  # fmt: skip
                    continue
                self._replace(slot, proc, deaths[slot.route], died_at)
                if self.gave_up:
                    self._shutdown_event.set()  # run() then stops everything, and the command exits 1
                    return
            time.sleep(LOOK_EVERY)
        self._last_look()

    def _last_look(self) -> None:
        """As a stop begins: a worker that died since the last look (a SIGTERM within a look of its death) has its
        requests answered now, "worker stopped; retry" (they waited the whole --grace), and its death said."""
        for slot in self.board.slots:
            proc = self.inference_workers[slot.index]
            if proc.is_alive() or not self.board.ready[slot.index]:
                continue
            self._down(slot)
            log(f"the {slot.model} model's worker (pid {proc.pid}) stopped ({how_it_ended(proc.exitcode)}) as the "
                "server stops")  # fmt: skip

    def _down(self, slot: Slot) -> None:
        """``slot``'s worker is gone: not ready, and its generation moved, so the HTTP process answers what it held
        with 503."""
        self.board.ready[slot.index] = 0
        self.board.generation[slot.index] += 1

    def _replace(self, slot: Slot, proc, deaths: deque[float], died_at: dict[int, float]) -> None:
        now = time.monotonic()
        self._down(slot)
        how = how_it_ended(proc.exitcode)
        pid, started = self.started.pop(slot.index, (proc.pid, None))
        if end_if_running(pid, started):
            how = "its template process ended, so it was ended too"
        deaths.append(now)
        while deaths and now - deaths[0] > RESTART_WINDOW:
            deaths.popleft()
        if len(deaths) > self.max_restarts:
            self.gave_up = (
                f"the {slot.model} model's worker stopped {len(deaths)} time{'s' if len(deaths) != 1 else ''} within "
                f"{RESTART_WINDOW:g} s "
                f"(last: {how}); giving up (--max-restarts {self.max_restarts})"
            )
            log(self.gave_up)
            return
        with self.supervising:
            if self.stopping:
                return
            log(f"the {slot.model} model's worker (pid {proc.pid}) stopped ({how}); starting a new one")
            died_at.setdefault(slot.index, now)
            api = next(a for a in self.litapi_connector if a.api_path == slot.route)
            self.inference_workers[slot.index] = self.launch_single_inference_worker(api, slot.worker_id)
