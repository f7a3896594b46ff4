"""``translate --resume``: an ``--output`` file that an interrupted run of the same command wrote, continued. Output
line N is input N's translation (a failed input's empty line included), so the file's complete lines say how many
inputs are done: those are skipped (stdin's read past), a last line without its newline (the run stopped mid-write)
is cut back and written again, and the rest is appended. A translation depends on its sentence alone (docs/text.md),
so the file ends as one run would have written it. The outputs written beside ``--output`` start at input 1 and hold
no such count of their own: they are refused beside it."""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Iterator

from text_attn.core.errors import fail

# what each output beside --output would be without the inputs an earlier run did (one line refuses it)
BESIDE = {
    "html": ("--html", "a page of this run's sentences alone"),
    "plot": ("--plot", "grids numbered from this run's first sentence"),
    "alignments": ("--alignments", "a file of its own, a line an input"),
    "references": ("--references", "the scores of this run's sentences alone"),
    "n_best": ("--n-best", "lines numbered by input, several an input"),
    "given": ("--given", "readings numbered by input"),
    "given_file": ("--given-file", "readings numbered by input"),
    "demo": ("--demo", "its own sentences"),
}
READ = 1 << 20  # bytes of --output read at a time to count its lines


def check_resume(args: argparse.Namespace) -> None:
    """--resume's refusals before the model loads, each one line: no --output file, an output beside it, an --output
    holding more lines than the sentences given as arguments. Sets ``args.resume_from`` (the inputs done) and
    ``args.resume_keep`` (the bytes of --output their lines take)."""
    args.resume_from, args.resume_keep = 0, None
    if not args.resume:
        return
    if not args.output:
        fail("translate", "--resume continues the --output FILE an interrupted run wrote: give --output FILE")
    for name, (flag, what) in BESIDE.items():
        if getattr(args, name, None):
            fail("translate", f"--resume continues --output {args.output}; {flag} would hold {what}: drop one")
    args.resume_from, args.resume_keep = done_lines(args.output)
    if args.sentences and args.resume_from > len(args.sentences):
        _too_many(args, len(args.sentences))


def skip_done(args: argparse.Namespace, lines: Iterator[str | None]) -> Iterator[str | None]:
    """stdin's ``lines`` (translate_streams.stdin_lines) read past the inputs --output already holds; refused in one
    line where stdin ends first. Returns the same iterator, at the first input to translate."""
    left = args.resume_from
    while left:
        line = next(lines, False)
        if line is False:
            _too_many(args, args.resume_from - left)
        left -= line is not None  # None: nothing more for now, not a line
    return lines


def cut_back(out, args: argparse.Namespace) -> None:
    """--output (``out``, opened to append) cut back to its complete lines: a line the stopped run was writing is
    written again whole."""
    if args.resume_keep is not None:
        out.truncate(args.resume_keep)


def done_lines(path: str) -> tuple[int, int | None]:
    """The complete lines of ``path`` (each ended by a newline) and the bytes they take; (0, None) where it is no
    regular file (none yet: nothing done; a link or a FIFO: open_stream refuses it, naming it)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return 0, None
        f = open(path, "rb")  # noqa: SIM115 - read in pieces below
    except OSError:
        return 0, None
    lines, keep, at = 0, 0, 0
    with f:
        while piece := f.read(READ):
            if (count := piece.count(b"\n")) > 0:
                lines, keep = lines + count, at + piece.rindex(b"\n") + 1
            at += len(piece)
    return lines, keep


def _too_many(args: argparse.Namespace, inputs: int) -> None:
    fail("translate", f"--resume: --output {args.output} holds {args.resume_from} line(s), more than the {inputs} "
         "input(s): it is not a run of these inputs")  # fmt: skip
