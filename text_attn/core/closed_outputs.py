"""A training run's stdout and stderr carry only news of the run: a reader that goes away must not end it.

A reader that went away (``fit | tee log`` stopped by Ctrl-C, a ``tee`` killed with its terminal under nohup, ``fit |
head``) made the next write raise BrokenPipeError inside Lightning's loop, which ended the run with a traceback and no
last.ckpt. :func:`survive_closed_outputs` (``text_attn.core.lightning_cli``): once one is closed, what is written to
it is dropped and the run goes on (Ctrl-C still stops it the usual way). Torch-free: the trainers' light CLI module
imports it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from text_attn.core.errors import flush_quietly, to_devnull


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # replaced by an object without it, or closed
        return False


class _DropWhenClosed:
    """A text stream that passes everything on to ``stream`` until its reader has gone (EPIPE); then its file
    descriptor is pointed at /dev/null, so that what follows (Lightning's bar, a print, the interpreter's last flush
    at exit) is dropped without an error. Everything else is the stream's own."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def _closed(self) -> None:
        to_devnull(self._stream)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._closed()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def survive_closed_outputs() -> Callable[[], None]:
    """Wrap sys.stdout and sys.stderr (see the module's docstring); returns the call that puts them back."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (s if s is None or isinstance(s, _DropWhenClosed) else _DropWhenClosed(s) for s in saved)

    def restore() -> None:
        # what is still buffered is flushed through the wrappers: a reader gone since is met here, not by the
        # interpreter's last flush at exit (exit code 120 and "Exception ignored ... BrokenPipeError" after a fit
        # whose model was written)
        flush_quietly(sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = saved

    return restore
