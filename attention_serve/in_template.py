"""Imported first by the model workers' template process (worker_start.PRELOAD) for one effect: the template outlives a
SIGTERM sent to the whole process group while the main process lives, as it outlives Ctrl-C (Python's forkserver
ignores SIGINT). Killed by it, every worker it started would read as ended while they run on, and the supervisor
would end them with the requests they hold (workers.end_if_running). The template still ends when the main process
does (its pipe from it closes; a SIGKILLed one's too: worker_start.end_with_parent); a worker forked from it ends on
SIGTERM as before until its own handler is set (worker_start.worker_sigterm)."""

from __future__ import annotations

import os
import signal

from attention_serve.worker_start import end_with_parent, outliving

signal.signal(signal.SIGTERM, outliving(os.getppid()))
end_with_parent(os.getppid())  # killed (SIGKILL), the main process leaves a pipe open in its HTTP process
