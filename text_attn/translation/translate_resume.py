"""``translate --resume``: the ``--output`` file (plain lines) and the ``--jsonl`` file (records) that an interrupted
run of the same command wrote, continued. Line N of each is input N's (a failed input's empty line or error record
included), so a file's complete lines say how many inputs are done: those are skipped (stdin's read past), a last line
without its newline (the run stopped mid-write) is cut back and written again, and the rest is appended. Where both
files are continued and one holds more (the run stopped between writing the two), both go on after the fewer, the
longer cut back to them. A translation depends on its sentence alone (docs/text.md), so each file ends as one run
would have written it. The outputs written beside them start at input 1 and hold no such count of their own: they are
refused beside it.

What a file's lines were made with (the model file's content, the decoding options, ``--keep-case``,
``--sample-seed``; for the records, ``--unsure``, ``--evidence`` and ``--layer`` too) is kept beside it as
``FILE.run.json``, in the form ``caption --jsonl``'s run record has (captioning.commands.caption_run): a ``--resume``
with another model or decoding is refused, naming the setting (it wrote one model's greedy lines and another's beam
lines into one file, told apart by nothing). A file written without a record (an --output before 2026-12-02, a
--jsonl before 2026-12-04) is continued with one note, and its record covers only the lines from that run on.

The record also keeps a digest of the inputs the file's lines translate (:class:`InputsRead`, rewritten after each
batch is written): a ``--resume`` given other inputs than the run it continues (another file on stdin, the lines
edited) is refused, where it appended the translations of one text to another's, told apart by nothing. A record
from before 2026-12-06 has no digest: its inputs are not checked (its record has one from that run on)."""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from text_attn.core.errors import fail
from text_attn.core.file_digest import sha256_of
from text_attn.core.run_record import differences, read_record, run_file
from text_attn.core.safe_files import check_output
from text_attn.core.unsure import UNSURE
from text_attn.core.unsure_options import unsure_typed
from text_attn.translation.translate_streams import line_bytes

# what each output beside --output / --jsonl would be without the inputs an earlier run did (one line refuses it)
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
READ = 1 << 20  # bytes of a file read at a time to count its lines
# what a line of each continued file is called in the one-line refusals and notes
UNIT = {"--output": "line(s)", "--jsonl": "record(s)"}
# the day each file began to have its run record: one without it was written before (its lines cannot be checked)
RECORDED_SINCE = {"--output": "2026-12-02", "--jsonl": "2026-12-04"}
MARKS_SINCE = "2026-12-07"  # the records' digests of the first 1, 2, 4, ... inputs (InputsRead.state)
# the options that shape a line, as the command line names them (their values after the model's defaults are filled)
SHAPING = (("--beam-size", "beam_size"), ("--max-len", "max_len"), ("--length-penalty", "length_penalty"),
           ("--no-repeat-ngram", "no_repeat_ngram"), ("--n-best", "n_best"), ("--sample", "sample"),
           ("--temperature", "temperature"), ("--top-k", "top_k"), ("--top-p", "top_p"),
           ("--sample-seed", "sample_seed"), ("--keep-case", "keep_case"), ("--given", "given"),
           ("--given-file", "given_file"), ("--probs-per", "probs_per"))  # fmt: skip
# and what shapes a --jsonl record beside them: its probability fields and unsure words, its evidence, which
# Transformer layer's attention it holds
RECORD_SHAPING = (("--unsure", "unsure"), ("--evidence", "evidence"), ("--layer", "layer"))


def continued(args: argparse.Namespace) -> dict[str, str]:
    """The files --resume continues, by flag: --output FILE and --jsonl FILE (``-``, stdout, is none)."""
    named = {"--output": args.output, "--jsonl": getattr(args, "jsonl", None)}
    return {flag: path for flag, path in named.items() if path and path != "-"}


def check_resume(args: argparse.Namespace) -> None:
    """--resume's refusals before the model loads, each one line: no --output or --jsonl file, an output beside
    them, a file holding more lines than the sentences given as arguments, one of the two files missing while the
    other holds lines. Sets ``args.resume_from`` (the inputs done), ``args.resume_keep`` (per flag, the bytes of its
    file those inputs' lines take), ``args.resume_held`` (the refusal's words for the file that says how many) and
    ``args.resume_note`` (where one file is ahead: the note said once the resume is not refused, else None)."""
    args.resume_from, args.resume_keep, args.resume_held, args.resume_note = 0, {}, "", None
    args.inputs_read = InputsRead()
    if not args.resume:
        return
    files = continued(args)
    if not files:
        fail("translate", "--resume continues the --output FILE (and --jsonl FILE) an interrupted run wrote: give "
             "--output FILE or --jsonl FILE")  # fmt: skip
    for name, (flag, what) in BESIDE.items():
        if getattr(args, name, None):
            fail("translate", f"--resume continues {_named(files)}; {flag} would hold {what}: drop one")
    for flag, path in files.items():  # a link or a FIFO, refused now: before the other file is counted or cut back
        try:
            check_output(path)
        except OSError as err:
            fail("translate", f"cannot write {flag} {path}: {err}")
    found = {flag: done_lines(path) for flag, path in files.items()}
    held = {flag: lines for flag, (lines, _) in found.items()}
    if len(files) == 2:
        absent = [flag for flag, (_, keep) in found.items() if keep is None]  # no file there yet
        if len(absent) == 1 and max(held.values()):
            there = next(flag for flag in files if flag not in absent)
            fail("translate", f"--resume: {there} {files[there]} holds {held[there]} {UNIT[there]} but "
                 f"{absent[0]} {files[absent[0]]} does not exist: the run that wrote one did not write the other; "
                 f"resume without {absent[0]}, or start afresh without --resume")  # fmt: skip
    fewest = min(files, key=lambda flag: held[flag])  # --output first where they hold as many
    args.resume_from = held[fewest]
    args.resume_held = f"{fewest} {files[fewest]} holds {held[fewest]} {UNIT[fewest]}"
    # the bytes of the inputs done: the count's own where a file holds no more, else a second read to that line
    args.resume_keep = {flag: found[flag][1] if held[flag] == args.resume_from else
                        done_lines(path, most=args.resume_from)[1] for flag, path in files.items()}  # fmt: skip
    if args.sentences and args.resume_from > len(args.sentences):
        _too_many(args, len(args.sentences))
    # the digests the records hold are checked against the inputs skipped (the arguments now, stdin in skip_done)
    args.inputs_read = InputsRead({count for path in files.values() if (count := _digested(path)) is not None})
    for sentence in (args.sentences or [])[: args.resume_from]:
        args.inputs_read.add(sentence)
    if len(set(held.values())) > 1:  # the run stopped between writing the two: the longer one's extra lines again
        longer = next(flag for flag in files if held[flag] > args.resume_from)
        args.resume_note = (f"--resume: {longer} {files[longer]} holds {held[longer]} {UNIT[longer]}, "
                            f"{args.resume_held}: both go on after input {args.resume_from}, {files[longer]}'s "
                            f"later {UNIT[longer]} written again")  # fmt: skip


def _named(files: dict[str, str]) -> str:
    return " and ".join(f"{flag} {path}" for flag, path in files.items())


def skip_done(args: argparse.Namespace, lines: Iterator[str | None]) -> Iterator[str | None]:
    """stdin's ``lines`` (translate_streams.stdin_lines) read past the inputs the continued files already hold;
    refused in one line where stdin ends first. Returns the same iterator, at the first input to translate."""
    left = args.resume_from
    args.resume_bytes = 0  # what they took of stdin: where the progress bar of a plain file starts
    while left:
        line = next(lines, False)
        if line is False:
            _too_many(args, args.resume_from - left)
        if line is not None:  # None: nothing more for now, not a line
            args.inputs_read.add(line)
            args.resume_bytes += line_bytes(line)
            left -= 1
    return lines


def cut_back(out, args: argparse.Namespace, flag: str) -> None:
    """The file of ``flag`` (``out``, opened to append) cut back to the lines of the inputs done: a line the stopped
    run was writing (or one past the other file's) is written again whole."""
    if (keep := args.resume_keep.get(flag)) is not None:
        out.truncate(keep)


def done_lines(path: str, most: int | None = None) -> tuple[int, int | None]:
    """The complete lines of ``path`` (each ended by a newline; at most ``most``) and the bytes they take; (0, None)
    where it is no regular file (none yet: nothing done; a link or a FIFO: open_stream refuses it, naming it)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return 0, None
        f = open(path, "rb")  # noqa: SIM115 - read in pieces below
    except OSError:
        return 0, None
    lines, keep, at = 0, 0, 0
    with f:
        while piece := f.read(READ):
            count = piece.count(b"\n")
            if most is not None and lines + count >= most:  # the piece holds the last line wanted: where it ends
                end = -1
                for _ in range(most - lines):
                    end = piece.index(b"\n", end + 1)
                return most, at + end + 1
            if count:
                lines, keep = lines + count, at + piece.rindex(b"\n") + 1
            at += len(piece)
    return lines, keep


def _marked(count: int) -> bool:
    """Whether a run record keeps the digest of the first ``count`` inputs (a power of 2: InputsRead.state's marks)."""
    return count & (count - 1) == 0


class InputsRead:
    """A running SHA-256 of the inputs read, in order (each as the translation loop reads it, a CRLF file's CR
    dropped), and its value at the counts in ``wanted``: a record's digest of its file's first N inputs is checked
    against the first N inputs of the resumed run."""

    def __init__(self, wanted: set[int] | None = None) -> None:
        self.digest, self.count = hashlib.sha256(), 0
        self.wanted, self.at = wanted or set(), {0: hashlib.sha256().hexdigest()}

    def add(self, line: str) -> None:
        # as JSON: a line's end cannot run two inputs into one (lone surrogates of non-UTF-8 stdin escaped)
        self.digest.update(json.dumps(line.rstrip("\r")).encode("ascii") + b"\n")
        self.count += 1
        if self.count in self.wanted or _marked(self.count):  # and at every power of 2: the marks
            self.at[self.count] = self.digest.hexdigest()

    def state(self) -> dict[str, Any]:
        """What the run record keeps: the inputs read so far (all written when it is kept), their digest, and the
        digests of the first 1, 2, 4, ... of them (``marks``: a file cut back below the count is checked on at least
        half of what it holds; at most 64 of them)."""
        marks = {str(n): digest for n, digest in self.at.items() if 0 < n <= self.count and _marked(n)}
        return {"count": self.count, "sha256": self.digest.hexdigest(), "marks": marks}


def _digested(output: str) -> int | None:
    """How many inputs the run record beside ``output`` holds a digest of; None where it holds none (no record, one
    from before the digest, a torn one: check_record says so)."""
    try:
        inputs = (read_record(run_file(output)) or {}).get("inputs")
    except (OSError, ValueError):
        return None
    return inputs.get("count") if isinstance(inputs, dict) and isinstance(inputs.get("count"), int) else None


def _too_many(args: argparse.Namespace, inputs: int) -> None:
    fail("translate", f"--resume: {args.resume_held}, more than the {inputs} input(s): it is not a run of these "
         "inputs")  # fmt: skip


def run_settings(args: argparse.Namespace, model_file: Path, recases: bool, records: bool = False) -> dict[str, Any]:
    """The record of this run (JSON-ready), after fill_decoding_defaults; ``records``: of the --jsonl file (the
    options that shape a record too). A --sample run records its seed, given or drawn (text_attn/core/drawn_seed.py);
    one of an older version drew without a seed and records none. ``recases``: whether the model reads a line typed
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
    for flag, name in (("--no-split", "no_split"), ("--paragraphs", "paragraphs")):  # what makes an input, a line
        if getattr(args, name, False):  # recorded where given alone: a record from before them matches the default
            options[flag] = True
    if records:
        options |= {flag: getattr(args, name, None) for flag, name in RECORD_SHAPING}
    elif getattr(args, "keep_layout", False):  # its lines are not its inputs: check_record refuses to go on from them
        options["--keep-layout"] = True
    if getattr(args, "ensemble", None):  # each other model of the ensemble, by its bytes (a record before: none)
        from text_attn.translation.bundled import model_path

        options["--ensemble"] = [f"{model_path(m)} (SHA-256 {sha256_of(model_path(m))[:16]})" for m in args.ensemble]
    return {"model": str(model_file), "model_sha256": sha256_of(model_file), "options": options}


def check_record(args: argparse.Namespace, flag: str, settings: dict[str, Any]) -> InputsCheck | None:
    """With --resume, before the file of ``flag`` (--output, --jsonl) is touched: one line refusing a FILE whose
    lines FILE.run.json records as made with another model or options, or with --keep-layout. FILE's lines with no
    record (or beyond what the record covers): one note, and ``settings`` marked as covering only the lines this run
    adds (``lines_before``, ``"checked": false``), as caption's records are (captioning.commands.caption_run).
    Returns what :func:`check_inputs` checks once stdin's inputs done are read (None: nothing): a file holding more
    lines than stdin has inputs is refused by that count, after the options that tell why."""
    output = continued(args)[flag]
    held, path, unit = args.resume_from, run_file(output), UNIT[flag]
    noun = unit.removesuffix("(s)") + "s"  # "lines", "records"
    if not args.resume or not held:  # no line to mix: a fresh start
        return None
    try:
        old = read_record(path)
    except ValueError as err:  # a torn or hand-edited record
        fail("translate", f"--resume: {err}")
    except OSError as err:
        fail("translate", f"--resume: {path} is not a run record ({err})")
    if old is not None and isinstance(old.get("options"), dict) and old["options"].get("--keep-layout"):
        # a paragraph over as many lines as its text: its lines counted as inputs skipped the ones after them
        fail("translate", f"--resume: {output} was written with --keep-layout, an input's translation over as many "
             "lines as its text: the inputs it holds cannot be counted from its lines; translate again, or give "
             f"another {flag} FILE (--resume goes on from a run without --keep-layout, a line an input)")  # fmt: skip
    before = old.get("lines_before") if old is not None and old.get("checked") is False else None
    before = before if isinstance(before, int) else None
    if old is None and flag == "--jsonl":  # no record: its lines must at least be translate's records, in order
        _check_records(output, held)
    if old is None or before is not None and held <= before:  # a record that covers none of them: as if none
        settings.update(lines_before=held, checked=False)
        print(f"translate: note: --resume: {output} has no run record for its {held} {unit} (written before "
              f"{RECORDED_SINCE[flag]}): they cannot be checked against this model and options; "
              f"{path.name} covers the {noun} from this run on", file=sys.stderr)  # fmt: skip
        return None
    if before is not None:  # the record covers what came after FILE's first lines: it carries that on
        settings.update(lines_before=before, checked=False)
    if said := differences(old, settings, worded={"--unsure": unsure_typed(UNSURE)}):
        which = f"{noun} after its first {before} (which no run record covers)" if before is not None else noun
        fail("translate", f"--resume: {output}'s {which} were made with {'; '.join(said)}: resume with the "
             f"same model and options, or give another {flag} FILE (to mix them anyway, remove {path})")  # fmt: skip
    return InputsCheck(output, old.get("inputs"), path, flag)


def _check_records(output: str, held: int) -> None:
    """One line refusing a --jsonl FILE without a run record whose first ``held`` lines are not translate's records
    numbered 1, 2, ... (``{"input": N, ...}``): a text file or caption's records were counted as inputs done and the
    translations appended after them, exit 0."""
    with open(output, "rb") as f:
        for k, line in enumerate(itertools.islice(f, held), 1):
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict) or record.get("input") != k:
                fail("translate", f"--resume: --jsonl {output}'s line {k} is not translate's record of input {k} "
                     f'({{"input": {k}, ...}}): it is not a run of translate; give another --jsonl FILE')  # fmt: skip


class InputsCheck(NamedTuple):
    """What :func:`check_inputs` checks of one continued file: its name, its record's ``inputs``, the record's path,
    its flag."""

    output: str
    inputs: Any
    path: Path
    flag: str


def check_inputs(args: argparse.Namespace, check: InputsCheck) -> None:
    """One line refusing a resume whose first inputs are not the ones the record says ``output``'s lines translate
    (its digest of them, :class:`InputsRead`); a record without one (from before it): nothing checked. The record is
    rewritten after each batch is written, so its digest may be of a batch fewer inputs than ``output`` holds lines:
    those are checked. A file holding fewer lines than its record covers (cut back by hand, its last line cut off):
    the first 2**k inputs it holds, by the record's marks (one of before them: said, not checked)."""
    output, inputs, path, flag = check
    if not isinstance(inputs, dict) or not isinstance(count := inputs.get("count"), int) or count <= 0:
        return
    digest = inputs.get("sha256")
    if count > args.resume_from:  # another text's translations were appended to it unchecked, exit 0
        marks = inputs.get("marks") if isinstance(inputs.get("marks"), dict) else {}
        below = [int(k) for k in marks if k.isdigit() and 0 < int(k) <= args.resume_from]
        if not below:
            print(f"translate: note: --resume: {output} holds {args.resume_from} {UNIT[flag]}, fewer than the {count} "
                  f"its record covers, which keeps no digest of fewer (written before {MARKS_SINCE}): its inputs "
                  "cannot be checked", file=sys.stderr)  # fmt: skip
            return
        count = max(below)
        digest = marks[str(count)]
    given = "the sentences given" if args.sentences else "stdin"
    unit = UNIT[flag].removesuffix("(s)")
    if args.inputs_read.at.get(count) != digest:
        fail("translate", f"--resume: {output}'s first {count} {unit}(s) translate other inputs than the first {count} "
             f"of {given}: resume with the input the run read, or give another {flag} FILE (to go on anyway, remove "
             f"{path})")  # fmt: skip
