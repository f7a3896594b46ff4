"""``translate --resume``: an ``--output`` file that an interrupted run of the same command wrote, continued. Output
line N is input N's translation (a failed input's empty line included), so the file's complete lines say how many
inputs are done: those are skipped (stdin's read past), a last line without its newline (the run stopped mid-write)
is cut back and written again, and the rest is appended. A translation depends on its sentence alone (docs/text.md),
so the file ends as one run would have written it. The outputs written beside ``--output`` start at input 1 and hold
no such count of their own: they are refused beside it.

What FILE's lines were made with (the model file's content, the decoding options, ``--keep-case``, ``--sample-seed``)
is kept beside it as ``FILE.run.json``, in the form ``caption --jsonl``'s run record has (captioning.commands.
caption_run): a ``--resume`` with another model or decoding is refused, naming the setting (it wrote one model's
greedy lines and another's beam lines into one file, told apart by nothing). A FILE written without a record (before
2026-12-02) is continued with one note, and its record covers only the lines from that run on."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from text_attn.core.errors import fail
from text_attn.core.file_digest import sha256_of
from text_attn.core.run_record import differences, read_record, run_file
from text_attn.core.safe_files import write_text

# what each output beside --output would be without the inputs an earlier run did (one line refuses it)
BESIDE = {
    "html": ("--html", "a page of this run's sentences alone"),
    "plot": ("--plot", "grids numbered from this run's first sentence"),
    "alignments": ("--alignments", "a file of its own, a line an input"),
    "jsonl": ("--jsonl", "a file of its own, a record an input"),
    "references": ("--references", "the scores of this run's sentences alone"),
    "n_best": ("--n-best", "lines numbered by input, several an input"),
    "given": ("--given", "readings numbered by input"),
    "given_file": ("--given-file", "readings numbered by input"),
    "demo": ("--demo", "its own sentences"),
}
READ = 1 << 20  # bytes of --output read at a time to count its lines
# the options that shape a line, as the command line names them (their values after the model's defaults are filled)
SHAPING = (("--beam-size", "beam_size"), ("--max-len", "max_len"), ("--length-penalty", "length_penalty"),
           ("--no-repeat-ngram", "no_repeat_ngram"), ("--n-best", "n_best"), ("--sample", "sample"),
           ("--temperature", "temperature"), ("--top-k", "top_k"), ("--top-p", "top_p"),
           ("--sample-seed", "sample_seed"), ("--keep-case", "keep_case"), ("--given", "given"),
           ("--given-file", "given_file"), ("--probs-per", "probs_per"))  # fmt: skip


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


def run_settings(args: argparse.Namespace, model_file: Path, recases: bool) -> dict[str, Any]:
    """The record of this run (JSON-ready), after fill_decoding_defaults. A --sample run without --sample-seed draws
    afresh each run: no seed is recorded (none would match). ``recases``: whether the model reads a line typed
    without capitals with its training text's (Translator.casing); where it does not, --keep-case changes nothing and
    is not recorded. OSError where the model file cannot be read."""
    options = {flag: getattr(args, name, None) for flag, name in SHAPING}
    options["--n-best"] = args.n_best if getattr(args, "n_best_given", False) else None  # a list's lines, even of 1
    if not args.sample:
        for flag in ("--temperature", "--top-k", "--top-p", "--sample-seed"):
            options.pop(flag)
    elif options["--sample-seed"] is None:
        options.pop("--sample-seed")
    if not recases:
        options.pop("--keep-case")
    return {"model": str(model_file), "model_sha256": sha256_of(model_file), "options": options}


def check_record(args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """With --resume, before --output is touched: one line refusing a FILE whose lines FILE.run.json records as made
    with another model or options. FILE's lines with no record (or beyond what the record covers): one note, and
    ``settings`` marked as covering only the lines this run adds (``lines_before``, ``"checked": false``), as
    caption's records are (captioning.commands.caption_run)."""
    held, path = args.resume_from, run_file(args.output)
    if not args.resume or not held:  # no line to mix: a fresh start
        return
    try:
        old = read_record(path)
    except ValueError as err:  # a torn or hand-edited record
        fail("translate", f"--resume: {err}")
    except OSError as err:
        fail("translate", f"--resume: {path} is not a run record ({err})")
    before = old.get("lines_before") if old is not None and old.get("checked") is False else None
    before = before if isinstance(before, int) else None
    if old is None or before is not None and held <= before:  # a record that covers none of them: as if none
        settings.update(lines_before=held, checked=False)
        print(f"translate: note: --resume: {args.output} has no run record for its {held} line(s) (written before "
              "2026-12-02): they cannot be checked against this model and options; "
              f"{path.name} covers the lines from this run on", file=sys.stderr)  # fmt: skip
        return
    if before is not None:  # the record covers what came after FILE's first lines: it carries that on
        settings.update(lines_before=before, checked=False)
    if said := differences(old, settings):
        which = f"lines after its first {before} (which no run record covers)" if before is not None else "lines"
        fail("translate", f"--resume: {args.output}'s {which} were made with {'; '.join(said)}: resume with the "
             f"same model and options, or give another --output FILE (to mix them anyway, remove {path})")  # fmt: skip


def record_run(output: str | Path, settings: dict[str, Any]) -> None:
    """FILE.run.json written (replaced atomically) for this run."""
    write_text(run_file(output), json.dumps(settings, indent=1) + "\n")
