"""How a stopped ``optimize`` ends: Ctrl-C or SIGTERM while LitData writes a split's chunks.

LitData's own Ctrl-C handler tells its workers to stop and ends the process with ``os._exit(0)``: a stopped
``optimize`` looked like a finished one to a script or a scheduler (exit 0, nothing said). It handles no SIGTERM: the
command ended at once and its worker went on writing into the folder after it. And a worker that read the stop then
joined its remover process forever, which no one told to end: both stayed, after the command. While
:func:`stops_said` is active, both signals stop the workers and their removers (:func:`_stop_workers`), print one line
and end the process with 128 + the signal's number (130, 143). A worker that was waiting for its next input when the
main process ended waits WORKER_WAIT_S at most (LitData's own wait: 300 s), then writes what it holds and ends. What
was written is kept: running the same command again continues from LitData's checkpoints (``use_checkpoint``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

WORKER_WAIT_S = 30  # LitData's DATA_OPTIMIZER_TIMEOUT while this module's stops are active (stops_said)


@contextlib.contextmanager
def stops_said(where: Path) -> Iterator[None]:
    """LitData's Ctrl-C handler replaced, and SIGTERM handled the same way, for one ``litdata.optimize`` call that
    writes ``where``; both as they were afterwards."""
    from litdata.processing import data_processor

    main = os.getpid()
    processor = data_processor.DataProcessor
    theirs = processor._signal_handler  # the method LitData registers for SIGINT as its run starts
    current: list[Any] = []  # the DataProcessor running (its workers), once its run has started

    def stop(self: Any, number: int, frame: Any) -> None:
        if os.getpid() != main:  # a worker (forked after the handler was set): it ends quietly, the main one speaks
            os._exit(128 + number)
        if self is not None:
            _stop_workers(self)
        prog = os.path.basename(sys.argv[0]) or "python"
        name = "Ctrl-C" if number == signal.SIGINT else signal.Signals(number).name
        with contextlib.suppress(Exception):  # a write this interrupted: reentrant
            sys.stdout.flush()
            print(f"\n{prog}: stopped ({name}) while writing {where}: the chunks written so far are kept; run the "
                  "same command again to continue", file=sys.stderr, flush=True)  # fmt: skip
        os._exit(128 + number)

    def on_term(number: int, frame: Any) -> None:
        stop(current[0] if current else None, number, frame)  # None: before LitData's run began, no worker yet

    original_run = processor.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        current[:] = [self]
        return original_run(self, *args, **kwargs)

    before_term = signal.getsignal(signal.SIGTERM)
    processor._signal_handler = stop
    processor.run = run
    signal.signal(signal.SIGTERM, on_term)
    # a worker left waiting for its next input (the main process gone, the inputs it had queued lost with it) ends
    # after this many seconds, not LitData's 300: while it runs it writes into the folder. Its inputs are queued from
    # memory by a thread as it starts, so a run that goes on never waits so long. A value of the user's is kept.
    timeout_set = "DATA_OPTIMIZER_TIMEOUT" not in os.environ
    if timeout_set:
        os.environ["DATA_OPTIMIZER_TIMEOUT"] = str(WORKER_WAIT_S)
    try:
        yield
    finally:
        processor._signal_handler = theirs
        processor.run = original_run
        signal.signal(signal.SIGTERM, before_term)
        if timeout_set:
            os.environ.pop("DATA_OPTIMIZER_TIMEOUT", None)


def _stop_workers(processor: Any) -> None:
    """What LitData's own handler does, a stop message to each worker (read after its sample), and what it leaves out:
    an end message to each worker's remover process, which a worker stopped so joins forever (LitData sends it only
    from the loop's other ends: the worker hung, with its remover, after the command had ended). Each queue is
    flushed before the process ends (a multiprocessing put is sent by a thread, which os._exit cuts off). The workers
    are not waited for: one that was waiting for its next input ends after WORKER_WAIT_S."""
    queues = list(getattr(processor, "stop_queues", None) or [])
    queues += [q for w in getattr(processor, "workers", None) or [] if (q := getattr(w, "remove_queue", None))]
    for queue in queues:
        with contextlib.suppress(Exception):
            queue.put(None)
    for queue in queues:
        with contextlib.suppress(Exception):
            queue.close()
            queue.join_thread()
