"""How a stopped ``optimize`` ends: Ctrl-C or SIGTERM while LitData writes a split's chunks.

LitData's own Ctrl-C handler tells its workers to stop and ends the process with ``os._exit(0)``: a stopped
``optimize`` looked like a finished one to a script or a scheduler (exit 0, nothing said). It handles no SIGTERM: the
command ended at once and its worker went on writing into the folder after it. While :func:`stops_said` is active,
both signals stop the workers as LitData's handler does (a stop message each, which they read between samples),
print one line and end the process with 128 + the signal's number (130, 143). What was written is
kept: running the same command again continues from LitData's checkpoints (``use_checkpoint``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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
    try:
        yield
    finally:
        processor._signal_handler = theirs
        processor.run = original_run
        signal.signal(signal.SIGTERM, before_term)


def _stop_workers(processor: Any) -> None:
    """What LitData's own handler does: a stop message to each worker, which it reads after its sample. They are not
    waited for, nor ended: a worker waits on the main process for its next input, and one ended leaves its own
    uploader process behind; on its own it writes what it holds and ends."""
    for queue in getattr(processor, "stop_queues", None) or []:
        with contextlib.suppress(Exception):
            queue.put(None)
    for worker in getattr(processor, "workers", None) or []:
        with contextlib.suppress(Exception):
            worker.join(0)
