"""SIGTERM (``kill``, a scheduler's time limit) as Ctrl-C: the commands that write files as they go (``translate``,
``caption``) close them with what they hold, say how far they came, and exit with code 143; by default the process
ended at once, silent, its lock files left."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a scheduler's time limit): the run ends as Ctrl-C ends it, with exit code 143."""


@contextlib.contextmanager
def sigterm_interrupts(active: Callable[[], bool] | None = None) -> Iterator[None]:
    """While the block runs, the first SIGTERM raises :class:`Terminated` where the run is (later ones are ignored
    while it winds up), so the outputs are closed with what they hold and the lock files removed, as after Ctrl-C;
    by default the process ended at once, silent, its lock file left. A handler set by someone else is kept (not
    safe_files' removal of temporary outputs: it is the default's stand-in, given back after the block).
    ``active``: only while it says so (a SIGTERM after is ignored); and only while this handler is the process's
    own: one set within the block that calls it too (Lightning's signal connector, as its loop starts: it stops the
    loop at a step) acts alone."""
    number = getattr(signal, "SIGTERM", None)
    if number is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(number)
    # the default, or safe_files' removal of a temporary output, which stands in for it while an output is written: a
    # caption --html page is written through one the whole run, and a SIGTERM threw the page away ("not written")
    # where Ctrl-C wrote the images captioned as a partial page
    if before is not signal.SIG_DFL and not getattr(before, "stands_for_default", False):
        yield
        return
    fired = []

    def terminate(signum, frame) -> None:
        if active is not None and (not active() or signal.getsignal(number) is not terminate):
            return
        if not fired:
            fired.append(signum)
            raise Terminated

    signal.signal(number, terminate)
    try:
        yield
    finally:
        if signal.getsignal(number) is terminate:
            signal.signal(number, before)


@contextlib.contextmanager
def interrupts_held(patience: float = 1.0) -> Iterator[None]:
    """Ctrl-C and SIGTERM held while the block runs (a batch's outputs written together), then raised as their
    handlers raise them (KeyboardInterrupt, Terminated): a Ctrl-C between a batch's --output lines and its records left
    files that held different inputs. The block must be short (writes, not work). A second signal, or one that comes
    once the block has run ``patience`` seconds, acts at once, as without the hold; a held one acts ``patience``
    seconds after it came if the block still runs (a write blocked on a reader that stopped reading: held, it hung the
    command; SIGALRM's timer, where nobody else uses it); an exception the block raises (a failed write's exit) is not
    replaced by a held signal. Off the main thread: the block as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    numbers = [n for n in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if n is not None]
    before = {n: signal.getsignal(n) for n in numbers}
    got: list[tuple[int, object]] = []
    start = time.monotonic()

    def restore() -> None:
        if timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            if signal.getsignal(signal.SIGALRM) is due:
                signal.signal(signal.SIGALRM, signal.SIG_DFL)  # what it was (none of Python's)
        for n in numbers:
            if signal.getsignal(n) is hold:
                signal.signal(n, before[n])

    def hold(signum, frame) -> None:
        if got or time.monotonic() - start > patience:
            restore()
            before[signum](signum, frame)  # type: ignore[operator]
            return
        got.append((signum, frame))
        if timer:  # a write that blocks after it (a reader that stopped reading) gets it within `patience`
            signal.setitimer(signal.ITIMER_REAL, max(patience, 0.001))

    def due(signum, frame) -> None:  # the patience over while the block still runs: the held signal now
        if got:
            held, frame = got.pop(0)
            restore()
            before[held](held, frame)  # type: ignore[operator]

    # SIGALRM's timer, where it exists and nobody else handles it
    timer = hasattr(signal, "setitimer") and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)
    if timer:
        signal.signal(signal.SIGALRM, due)
    for n in numbers:
        if callable(before[n]):  # a handler of Python's (Ctrl-C's KeyboardInterrupt, sigterm_interrupts'): held
            signal.signal(n, hold)
    try:
        yield
    except BaseException:
        restore()
        raise
    restore()
    if got:  # the first one, as its handler takes it
        signum, frame = got[0]
        before[signum](signum, frame)  # type: ignore[operator]
