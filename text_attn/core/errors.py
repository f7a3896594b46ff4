"""Error text for users: every bad input is reported in one line."""

from __future__ import annotations

import argparse
import errno
import io
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from text_attn.core.safe_files import ends_in_slash, inert


def and_more(first: Sequence[object], count: int) -> str:
    """The things a message is about: ``first`` (the first of them, named in order) and how many more of ``count``
    there are: "1, 4 and 7 more", "a.jpg, b.jpg"."""
    return ", ".join(map(str, first)) + (f" and {count - len(first)} more" if count > len(first) else "")


def one_line(err: BaseException, limit: int = 160) -> str:
    """An exception's message on one line (whitespace collapsed, at most ``limit`` characters; its type if empty)."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def missing(path: object, what: str = "no such file", typed: object = None) -> str:
    """``path: what`` for a file that is not there. Where the user typed (``typed``, else ``path``) a URL, say that
    instead: nothing is downloaded at run time, and ``Path`` would have shown ``https:/host/x`` with one slash."""
    typed = path if typed is None else typed
    if isinstance(typed, str) and _URL.match(typed):
        return f"{typed}: a URL: only local files are read; download it first"
    if typed == "" or path == "":  # it read ": no such file"
        return f"an empty file name: {what}"
    return f"{path}: {what}"


# Set in the other processes of a run started together (captioning.commands.process_start) until they reach their loop:
# what every process refuses alike, the first one says.
QUIET_ERRORS = "ATTN_QUIET_ERRORS"


def fail(prog: str, message: str, code: int = 2) -> None:
    """One line on stderr, ``prog: error: message``, then exit with ``code``."""
    text = inert(" ".join(str(message).split()))  # file names, a file's text: no control character reaches a terminal
    if os.environ.get(QUIET_ERRORS) != "1":
        print(f"{prog}: error: {text}", file=sys.stderr)
    raise SystemExit(code)


class WriteError(RuntimeError):
    """An output could not be written (disk full, permission lost, folder gone): one line naming the file."""


def given_text(flag: str, text: str) -> str:
    """A text typed for ``flag`` as a message shows it: quoted, or, where it is blank, what it is made of (one line's
    message folds a run of spaces into one: "--given ' '" for three)."""
    if text.strip() or not text:
        return f"{flag} {text!r}"
    return f"{flag} holds {len(text)} {'space(s)' if set(text) == {' '} else 'blank character(s)'} only"


def close_quietly(out) -> None:
    """Close an output whose write may have failed: the flush of its buffer then fails again, already reported."""
    try:
        out.close()
    except OSError:
        pass


def emit(prog: str, text: str) -> None:
    """``text`` and a newline on stdout, flushed. A stdout that cannot be written (its reader gone, as in
    ``| head -1``; a full disk) ends the command with one line and exit code 2 (:func:`stdout_failed`).

    Where stdout is a file descriptor the bytes go to it directly, until all are written: Python's buffered stdout
    took a short write (a pipe whose reader left after 64 KiB of one large ``caption --json`` list) as the whole and
    dropped the rest without an error, exit code 0."""
    line = inert(text, lines=True) + "\n"
    # a character the encoding cannot hold (PYTHONIOENCODING=ascii, LC_ALL=C): its escape, not a traceback
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    encoded = line.encode(encoding, "backslashreplace")
    try:
        sys.stdout.flush()
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # a test's capture: no descriptor
        fd = None
    try:
        if fd is None:
            from text_attn.core.os_text import stdout_is_closed

            if stdout_is_closed():  # started with stdout closed: a command's output is not dropped as its prints are
                raise OSError(errno.EBADF, "stdout is closed")
            sys.stdout.write(encoded.decode(encoding))
            sys.stdout.flush()
            return
        data = memoryview(encoded)
        while data:
            data = data[os.write(fd, data) :]  # a short write: the rest again (a gone reader: EPIPE)
    except OSError as err:
        stdout_failed(prog, err)


def stdout_failed(prog: str, err: OSError) -> None:
    """Stdout could not be written: point it at the null device (the interpreter's last flush would fail again, with
    a traceback-like "Exception ignored" message), then one line and exit 2."""
    to_devnull(sys.stdout)
    fail(prog, f"cannot write stdout: {one_line(err)}")


def to_devnull(stream) -> None:
    """Point ``stream``'s file descriptor at the null device: what is written to it later, and the interpreter's last
    flush, are dropped without an error. A stream with no file behind it (a test's capture) is left as it is."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    finally:
        os.close(devnull)


def flush_quietly(*streams) -> None:
    """Flush each stream, dropping what a closed pipe (``| head``) or a closed stream refuses."""
    for stream in streams:
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def check_dash_inputs(prog: str, given_file: str | None, references: str | None, holds: str | None,
                      instead: str = "") -> None:  # fmt: skip
    """``-`` for --given-file or --references reads stdin (text_attn.core.os_text.stdin_bytes): refused in one line
    for both at once (stdin is read once) and where stdin ``holds`` the command's own inputs (None: it does not);
    ``instead``: what else the user may do, after the pipe."""
    dashes = [flag for flag, value in (("--given-file", given_file), ("--references", references)) if value == "-"]
    if len(dashes) == 2:
        fail(prog, "--given-file - and --references -: stdin is read once; give one of them a file")
    if dashes and holds is not None:
        flag = dashes[0]
        fail(prog, f"{flag} -: stdin holds {holds}; give {flag} a file (a pipe: {flag} <(command)){instead}")


def dash_refused(flag: str, what: str) -> str:
    """The line for ``-`` given to an output that only a file (or folder) can be: ``-`` is stdin or stdout, never a
    file named "-" (which ``./-`` names). ``what``: what the option writes ("a page", "a folder of PNGs")."""
    kind = "folder" if "folder" in what else "file"
    return f"{flag} -: {flag} writes {what}, not stdout; use ./- for a {kind} named -"


def finite_float(text: str) -> float:
    """argparse's ``float`` without nan and inf: ``float("nan")`` passed every range check written as ``x < 0`` (a
    --length-penalty nan gave NaN scores, invalid JSON; a --temperature nan, garbage words)."""
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def at_least(minimum: int) -> Callable[[str], int]:
    """argparse type of a count that must be at least ``minimum`` (``at_least(0)``: a count where 0 means none, a
    soak or a fault row left out): a negative one, or 0 where it means nothing, was taken and failed far from the
    option, or silently did nothing."""

    def count(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    count.__name__ = "integer"  # argparse's line for "abc": "invalid integer value: 'abc'"
    return count


def positive_int(text: str) -> int:
    """argparse type of a count that must be at least 1 (scenes, photos, iterations): 0 or a negative one was taken,
    then failed far from the option (an empty list to concatenate) or silently did nothing. :func:`at_least` (1),
    under its own name (argparse's "invalid positive_int value")."""
    return at_least(1)(text)


def new_file(text: str) -> Path:
    """argparse type of an output file: refused when it is a folder or its folder does not exist, when the options
    are read, not when it is written after the work (a benchmark's hour of measuring lost to a mistyped folder)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name")
    if ends_in_slash(text):  # Path drops the slash: a file of that name was written, or replaced
        raise argparse.ArgumentTypeError(f"{text} ends in a slash, a folder's name: give a file path")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: the folder {path.parent} does not exist")
    return path


def unrecognized(extras: Sequence[str], options: Sequence[str]) -> str:
    """argparse's "unrecognized arguments" message, each unknown option followed by the option it is likely a
    misspelling or a shortening of: ``unrecognized arguments: --json (did you mean --jsonl?)``."""
    import difflib

    said = []
    for token in extras:
        name = token.split("=", 1)[0]
        if name.startswith("-") and len(name) > 1:
            longer = sorted(o for o in options if o.startswith(name) and o.startswith("--"))
            # a dotted name (a training command's --model.lrr) is compared leaf to leaf within its block: the shared
            # "--model." made any two of the block's options look alike
            parent, _, leaf = name.rpartition(".")
            leaves = {o.rpartition(".")[2]: o for o in options if o.startswith("--") and o.rpartition(".")[0] == parent}
            guess = longer or [leaves[near] for near in difflib.get_close_matches(leaf, list(leaves), n=1)]
            if guess:
                token += f" (did you mean {' or '.join(guess[:3])}?)"
        said.append(token)
    return "unrecognized arguments: " + " ".join(said)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, except that what it refuses (an unknown option, a value of the wrong type) is one line,
    ``prog: error: ...``, and exit code 2: the usage text only with --help, as every command of the toolkit does.
    Every ``type=float`` option is a :func:`finite_float`. An option is taken as typed, never completed from its
    first letters: ``translate --json "Ein Kind lacht."`` was ``--jsonl`` writing a file named after the sentence;
    an unknown option is refused naming the one it likely meant."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.register("type", float, finite_float)  # argparse looks a type up here before calling it

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # as argparse's own, with a guess at what each unknown option meant
            self.error(unrecognized(extras, list(self._option_string_actions)))
        return parsed

    def error(self, message: str) -> None:  # type: ignore[override]
        fail(self.prog, f"{message} (see {self.prog} --help)")
