"""Error text for users: every bad input is reported in one line."""

from __future__ import annotations

import sys


def one_line(err: BaseException, limit: int = 160) -> str:
    """An exception's message on one line (whitespace collapsed, at most ``limit`` characters; its type if empty)."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fail(prog: str, message: str, code: int = 2) -> None:
    """One line on stderr, ``prog: error: message``, then exit with ``code``."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(code)


class WriteError(RuntimeError):
    """An output could not be written (disk full, permission lost, folder gone): one line naming the file."""


def close_quietly(out) -> None:
    """Close an output whose write may have failed: the flush of its buffer then fails again, already reported."""
    try:
        out.close()
    except OSError:
        pass
