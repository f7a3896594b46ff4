"""Imported last by the model workers' template process (worker_start.PRELOAD): Ctrl-C's handler back as Python sets
it, for the workers the template forks (they take the handlers it has when its imports end). in_template.py ignored
SIGINT for the imports: a Ctrl-C in the server's first seconds printed the template's 30-line KeyboardInterrupt
traceback from inside torch's import."""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.default_int_handler)
