"""A command's start without the garbage collector's full passes over its imports.

Importing torch (and Lightning, where a command needs it) makes hundreds of thousands of objects that live as long as
the process, and each full pass of Python's cyclic collector walks every one of them. Counted with ``gc.callbacks``
on 2 cores: ``caption PHOTO`` and ``translate SENTENCE`` each made 3 full passes while they started, 0.33-0.35 s in
all; ``text-train fit`` on a tiny config 7 (1.5 s: it imports Lightning too); held as below, none. Every console
script holds the collector back while it starts (:func:`hold`, from text_attn.core.fast_exit.leaving or
:func:`holding`); once the command has its imports and its model (:func:`release`: the commands after their model
loads, the trainers once LightningCLI has built its classes), what is alive is frozen (``gc.freeze``: later passes
skip it, and processes forked from this one, a data loader's workers, keep sharing those pages) and the collector runs
as before. A command that never released it (``report``) would still collect, only at much longer intervals.
In-process use (a test, a notebook) never holds it, and there :func:`release` does nothing.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from typing import Any

# (new objects per young pass, young passes per middle pass, middle passes per full pass): a young pass every million
# new objects (a start makes fewer: a young pass over survivors costs ~0.05 s per 100,000), a full one after 5,000
# young passes (CPython's default: 700, 10, 10)
HELD = (1_000_000, 50, 100)
_before: tuple[int, ...] | None = None  # the thresholds to give back; None: not held


def hold() -> None:
    """From now on until :func:`release`: the collector's passes at ``HELD``'s much longer intervals."""
    global _before
    if _before is None and gc.isenabled():
        _before = gc.get_threshold()
        gc.set_threshold(*HELD)


def release() -> None:
    """The imports are done: freeze what is alive now (later passes skip it) and give the collector its thresholds
    back. Does nothing unless :func:`hold` ran first."""
    global _before
    if _before is None:
        return
    gc.freeze()
    gc.set_threshold(*_before)
    _before = None


def held() -> bool:
    return _before is not None


# the console scripts ([project.scripts]; tests/cli/test_early_interrupt.py keeps the two lists equal)
SCRIPTS = frozenset({"text-train", "translate", "text-export", "caption-train", "caption", "caption-export",
                     "attention-serve"})  # fmt: skip


def quiet_start() -> None:
    """Ctrl-C while a console script imports its command's module, before the command's own handling begins (its
    entry point, :func:`holding`): one line and exit code 130, instead of a 15-40 line traceback from the middle of an
    import (0.2-0.45 s of every start). Called by the first package a console script imports (``text_attn``, and
    ``captioning`` through it), so it is set before the heavy imports; only in a console script's own process (run as
    the program by a script of :data:`SCRIPTS`' names: not in a test, a notebook, ``python -m``, nor a worker that
    multiprocessing starts, which imports the script again as ``__mp_main__``), on the main thread, and where Ctrl-C
    is Python's own (a background job's ignored SIGINT stays ignored). :func:`holding` gives Python's handler back, so
    every command still gets its KeyboardInterrupt."""
    import signal

    main = sys.modules.get("__main__")
    argv = getattr(sys, "argv", None) or [""]
    script = os.path.basename(getattr(main, "__file__", None) or "")
    own = getattr(main, "__name__", None) == "__main__" and getattr(main, "__spec__", None) is None
    if not (own and script in SCRIPTS and script == os.path.basename(argv[0])):
        return
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupted_at_start)
    except ValueError:  # not the main thread: nothing set
        pass


def _interrupted_at_start(number: int, frame: Any) -> None:
    try:
        print(f"{os.path.basename(sys.argv[0])}: interrupted", file=sys.stderr, flush=True)
    finally:
        os._exit(130)  # the command has begun nothing: no file of its is open


def _command_begins() -> None:
    """Python's own Ctrl-C handler back (KeyboardInterrupt, which every command handles) where :func:`quiet_start`
    set its own; and a Ctrl-C that Python would lose, delivered again (:func:`deliver_lost_interrupts`)."""
    import signal

    if signal.getsignal(signal.SIGINT) is _interrupted_at_start:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    deliver_lost_interrupts()


def deliver_lost_interrupts() -> None:
    """A KeyboardInterrupt raised inside a callback Python calls on its own (a weak reference's, a ``__del__``: an
    import's module-lock cleanup, ``_get_module_lock.<locals>.cb``) is not raised: Python prints "Exception ignored
    in", a traceback, and goes on; a Ctrl-C in a command's imports was lost that way now and then (the command ran to
    the end, exit code 0). Such an interrupt is sent again instead, quietly, 10 ms later from another thread: sent
    from the hook itself, Python's handler would raise it inside the hook, where it is ignored again; by then the main
    thread is back in ordinary code (or in another such callback, and this hook sends it once more). Anything else
    ignored goes to the hook before."""
    import threading

    previous = sys.unraisablehook
    if getattr(previous, "delivers_lost_interrupts", False):
        return

    def hook(unraisable: Any) -> None:
        if issubclass(unraisable.exc_type, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
            import _thread
            import signal

            resend = threading.Timer(0.01, _thread.interrupt_main, (signal.SIGINT,))  # nothing if SIGINT is ignored
            resend.daemon = True
            resend.start()
            return
        previous(unraisable)

    hook.delivers_lost_interrupts = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def holding(main: Callable[[], Any]) -> Callable[[], Any]:
    """The console script's entry point for ``main`` where the process ends as Python's do (the trainers: see
    text_attn.core.fast_exit.leaving for the others): :func:`hold`, then ``main()``. ``main`` itself stays callable
    in-process and never holds."""

    def script() -> Any:
        from text_attn.core.os_text import standard_streams

        standard_streams()  # started with stdout or stderr closed (>&-): as a broken pipe, not a traceback
        hold()
        prog = os.path.basename(sys.argv[0]) or "python"
        try:
            _command_begins()  # in the try: a Ctrl-C from here on is the line below
            return main()
        except KeyboardInterrupt:  # Ctrl-C before the command's own handling (its imports): one line, not a traceback
            print(f"{prog}: interrupted", file=sys.stderr)
            return 130
        except OSError as err:
            if (why := _name_refused(err)) is None:
                raise
            print(f"{prog}: error: {err.filename}: {why}", file=sys.stderr)  # a model, config or output path
            return 2

    script.__doc__ = f"The console script: {main.__name__}() on the command line."
    return script


def _name_refused(err: OSError) -> str | None:
    """What is wrong with a path the system refuses as a name (safe_files.name_refused), wherever a command met it
    before its own checks: one line, not a traceback. None for any other error (raised as before)."""
    from text_attn.core.safe_files import name_refused  # here: the start imports nothing of the project's

    return None if err.filename is None else name_refused(err)
