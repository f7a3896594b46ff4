"""Error text for users: every bad input is reported in one line."""

from __future__ import annotations


def one_line(err: BaseException, limit: int = 160) -> str:
    """An exception's message on one line (whitespace collapsed, at most ``limit`` characters; its type if empty)."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
