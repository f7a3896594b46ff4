"""``--sample`` without ``--sample-seed`` (``caption``, ``translate``): a seed drawn for the run, said in a note and
recorded with its outputs, so that the draws can be made again. Until 2026-12-07 such a run drew from torch's global
generator and recorded nothing: a caption or translation someone liked could never be drawn again, and a resumed run
went on with other draws than the interrupted one would have made.

With a seed each input's draws are keyed by (seed, the input's key, the step) (``decoding.counter_uniform``), so the
seed alone repeats them, at any batch size and in a ``--resume``."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Iterable
from pathlib import Path

from text_attn.core.run_record import read_record, run_file

# the seed the first process drew, in the processes it starts (caption --devices N): one seed for the whole run
SEED_VARIABLE = "ATTN_SAMPLE_SEED"
DRAWN_BELOW = 2**32  # short enough to type back; within what --sample-seed takes (search_options.sample_seed)


def _recorded(outputs: Iterable[str | Path]) -> tuple[bool, int | None]:
    """(whether a run record of ``outputs`` is a --sample run's, the seed it records or None). A record that cannot
    be read is left to the resume's own check, which says why."""
    for output in outputs:
        try:
            options = (read_record(run_file(output)) or {}).get("options")
        except (OSError, ValueError):
            continue
        if isinstance(options, dict) and options.get("--sample") is True:
            seed = options.get("--sample-seed")
            return True, seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    return False, None


def settle_seed(args: argparse.Namespace, resumed: Iterable[str | Path] = (), alone: bool = True) -> str | None:
    """Set ``args.sample_seed`` where ``--sample`` is given without one, and return the note that says it (None:
    nothing to say). ``resumed``: the output files a ``--resume`` continues (their run records); ``alone``: whether
    this process may draw for the whole run (False where another launcher starts each process: each would draw its
    own seed, so none is drawn and the draws are fresh, as before; False too in the processes a caption run starts,
    which take its seed from ``SEED_VARIABLE``)."""
    if not args.sample or args.sample_seed is not None:
        return None
    inherited = os.environ.get(SEED_VARIABLE)
    # a process the first one started (never the first, alone: a variable left in its environment is no run's seed)
    if not alone and inherited is not None and inherited.isdigit():
        args.sample_seed = int(inherited)
        return None
    sampled, seed = _recorded(resumed)
    if sampled and seed is None:  # a run of an older version, which drew without a seed: fresh draws, as it made
        return None
    if seed is not None:
        args.sample_seed = seed
        return f"--resume goes on with the run's --sample-seed {seed} (its records were drawn with it)"
    if not alone:
        return None
    args.sample_seed = secrets.randbelow(DRAWN_BELOW)
    return f"--sample drew with seed {args.sample_seed}: --sample-seed {args.sample_seed} draws the same again"


def say_seed(prog: str, args: argparse.Namespace) -> None:
    """The note :func:`settle_seed` returned, on stderr, once (``args.seed_note`` cleared): where a ``--resume`` is
    checked, after that check (a refused resume said the seed first, then named it as what differed)."""
    note, args.seed_note = getattr(args, "seed_note", None), None
    if note:
        print(f"{prog}: note: {note}", file=sys.stderr)
