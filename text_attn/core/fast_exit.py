"""A command that leaves as soon as its work is done: without tearing the interpreter down.

With torch and Lightning loaded, Python's own shutdown (every module's objects freed, one by one) takes 0.5-0.9 s on
2 cores (``python -c "import pytorch_lightning"``: 3.5 s, 2.6 s leaving this way), after the last output is
written: a second of every short command, and, with ``caption --devices 2``, once more while the first process waits
for the other's exit. Here the registered exit handlers run (multiprocessing's, which join the loader's workers;
tempfile's; logging's), the standard streams are flushed, and the process ends with ``os._exit``. Only the console
scripts leave so: a function called in-process (a test, a notebook) returns as before.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from text_attn.core import startup_gc
from text_attn.core.errors import flush_quietly


def run_and_leave(main: Callable[[], Any]) -> NoReturn:
    """Run ``main()`` and end the process with its exit code (its return value, or its SystemExit's: a message is
    printed on stderr and gives 1, as Python does). Any other exception propagates as usual (its traceback)."""
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # Ctrl-C where the command has no handler of its own (its imports, a model's load)
        print(f"{os.path.basename(sys.argv[0]) or 'python'}: interrupted", file=sys.stderr)
        code = 130
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    code = 0 if code is None else int(code)
    atexit._run_exitfuncs()
    flush_quietly(sys.stdout, sys.stderr)  # a closed pipe (caption ... | head): what could be written was
    os._exit(code)


def leaving(main: Callable[[], Any]) -> Callable[[], NoReturn]:
    """The console script's entry point for ``main`` (``[project.scripts]`` names it): :func:`run_and_leave` of it,
    with the garbage collector's full passes held back until the command releases them once its model is loaded
    (text_attn.core.startup_gc). ``main`` itself stays callable in-process (a test, a notebook) and returns as
    before."""

    script = startup_gc.holding(lambda: run_and_leave(main))  # released by the command once its model is in
    script.__doc__ = f"The console script: {main.__name__}() on the command line, then the process leaves."
    return script
