"""Text and standard streams as the operating system hands them to a command, made the same whatever the locale.

- **Text typed as arguments** (a German sentence, ``--given CAPTION``): Python decodes argv with the locale's
  encoding, so under ``LC_ALL=C`` the UTF-8 bytes of "Mädchen" arrived as lone surrogates and were refused as "not
  valid UTF-8". :func:`utf8_text` reads them as UTF-8 where they are.
- **File names in records** (``caption --jsonl``'s "image"): :func:`utf8_name` gives a name's bytes read as UTF-8
  whatever the locale, a byte that is not UTF-8 kept as the lone surrogate U+DC80 + byte (Python's surrogateescape),
  so a record written under one locale is found again (``--resume``) under another; :func:`os_name` turns such a name
  back into the form this process's file functions take.
- **Bytes that were not UTF-8** (stdin, argv, ``os.fsdecode``: lone surrogates): :func:`lone_surrogate` finds the
  first, which the commands refuse as "not valid UTF-8 text" and the Python API names (text_attn.core.api_args).
- **Standard streams started closed** (``>&-``, ``2>&-``): :func:`standard_streams`.
- **An input file named ``-``** (``--references -``, ``--given-file -``): stdin, read once (:func:`stdin_bytes`).
"""

from __future__ import annotations

import errno
import io
import os
import sys


def utf8_text(text: str) -> str:
    """``text`` (an argument, as Python decoded it with the locale's encoding) read as UTF-8 where its bytes are
    UTF-8; else as it was (bytes that are not UTF-8 stay lone surrogates, which the caller refuses)."""
    try:
        return os.fsencode(text).decode("utf-8")
    except UnicodeError:  # not UTF-8 bytes, or text the locale's encoding cannot hold: already decoded
        return text


def lone_surrogate(text: str) -> int | None:
    """The index of ``text``'s first lone surrogate (a byte that was not UTF-8, as stdin, argv and ``os.fsdecode`` keep
    it; half of a UTF-16 pair), or None where all of it is text UTF-8 can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return err.start
    return None


def utf8_name(name: str) -> str:
    """A file name (as this process's file functions give it) as its bytes read as UTF-8, each byte that is not UTF-8
    as the lone surrogate U+DC80 + byte: the same text under every locale, and ``name.encode("utf-8",
    "surrogateescape")`` gives the bytes back."""
    try:
        return os.fsencode(name).decode("utf-8", "surrogateescape")
    except UnicodeError:  # a name no file can have here (read from a file, not from the system): kept
        return name


def os_name(name: str) -> str:
    """The inverse of :func:`utf8_name`: a name kept as UTF-8 text (a record's) in the form this process's file
    functions take (under ``LC_ALL=C``, "Mädchen.jpg" is "M\\udcc3\\udca4dchen.jpg" to them)."""
    try:
        return os.fsdecode(name.encode("utf-8", "surrogateescape"))
    except UnicodeError:
        return name


class ClosedStdout(io.TextIOBase):
    """Stdout of a command started with it closed (``caption ... >&-``). A command's output (its captions,
    translations, records: written through its descriptor, text_attn.core.errors.emit, or refused up front where it
    would go here, :func:`stdout_is_closed`) fails as one to a pipe whose reader left does: one line, exit code 2. What
    else is printed (a progress bar, "wrote model.pt") is dropped, as it would be on the null device: a run whose
    output goes to files succeeds (a print that raised here ended text-train fit before its model file was written)."""

    encoding = "utf-8"
    errors = "strict"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "stdout is closed")

    def isatty(self) -> bool:
        return False


def _unusable(fd: int) -> bool:
    """Whether standard descriptor ``fd`` is closed, or open the wrong way round: a stream started closed whose
    number a shell wrapper took for its script (pyenv's shims: ``caption 2>&-`` met a stderr open for reading)."""
    try:
        import fcntl
    except ImportError:  # no fcntl (Windows): closed or not
        try:
            os.fstat(fd)
        except OSError:
            return True
        return False
    try:
        mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError:
        return True
    return mode == (os.O_WRONLY if fd == 0 else os.O_RDONLY)


def standard_streams() -> None:
    """Make up for standard streams the command was started without (Python then sets ``sys.stdout`` etc. to None,
    or to a stream on a descriptor it cannot write, and the first print was a traceback, exit code 1). Such a
    descriptor gets the null device, so that no file opened later takes its number (a library writing to
    descriptor 2 would write into it); stdin reads as empty, stderr's lines are dropped (the exit code stays the
    run's), stdout is :class:`ClosedStdout`."""
    lost = []
    for fd in (0, 1, 2):
        if _unusable(fd):
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            lost.append(fd)
    if 0 in lost or sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
    if 2 in lost or sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    if 1 in lost or sys.stdout is None:
        sys.stdout = ClosedStdout()


def stdout_is_closed() -> bool:
    """Whether this command was started with stdout closed (:func:`standard_streams` put :class:`ClosedStdout` there),
    seen through the wrapper text_attn.core.safe_files puts around it."""
    stream = sys.stdout
    return isinstance(getattr(stream, "_stream", stream), ClosedStdout)


_read_stdin: list = []  # [the stream, its bytes] once read: a second reader gets the same bytes


def stdin_bytes() -> bytes:
    """All of stdin's bytes, read once: an input file given as ``-`` is stdin, as ``-`` for the sentences or the
    photos' names is (a file named "-" is ``./-``). Kept with the stream read (a test's replaced stdin is read anew)."""
    stream = sys.stdin
    if not _read_stdin or _read_stdin[0] is not stream:
        buffer = getattr(stream, "buffer", None)  # a test's io.StringIO has none: its text, as UTF-8
        data = buffer.read() if buffer is not None else stream.read().encode("utf-8", "surrogateescape")
        _read_stdin[:] = [stream, data]
    return _read_stdin[1]
