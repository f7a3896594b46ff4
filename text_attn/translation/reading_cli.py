"""``translate --given`` / ``--given-file``: translations someone wrote, read by the model instead of written
(Translator.read_texts): the options checked before the model loads, each input's readings ranked, and their output
lines ``N<TAB>score<TAB>translation<TAB>probabilities``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from text_attn.core.errors import fail, given_text
from text_attn.core.safe_files import inert
from text_attn.core.search_options import search_flags_given
from text_attn.translation.paragraphs import file_paragraphs, file_unit


def check_given(args: argparse.Namespace) -> None:
    """--given / --given-file: one of them, texts with something in them, no option of the search that writes the
    model's own translation, nor --demo. --given-file's lines are read here (``args.given_lines``)."""
    args.given_lines = None
    if not (args.given or args.given_file):
        if args.probs_per:
            fail("translate", "--probs-per says how a translation given is scored: it needs --given or --given-file")
        return
    if args.given and args.given_file:
        fail("translate", "give --given (read for every input) or --given-file (a line an input), not both")
    for text in args.given or ():
        if not text.strip():
            fail("translate", f"{given_text('--given', text)}: an empty translation; give its text")
    flag = "--given" if args.given else "--given-file"
    refused = search_flags_given(args) + (["--max-len"] if args.max_len is not None else [])
    refused += ["--demo"] if args.demo else []
    if refused:
        fail("translate", f"{flag} reads the translations given; {refused[0]} is for the translations the model "
             "writes: drop one")  # fmt: skip
    if args.given_file:
        from text_attn.translation.corpora import read_lines
        from text_attn.translation.pairs import TaskError

        try:
            args.given_lines = read_lines(args.given_file)
            if getattr(args, "paragraphs", False):  # a paragraph an input, as the inputs are read
                args.given_lines = file_paragraphs(args.given_lines)
        except TaskError as err:
            fail("translate", f"--given-file: {err}")


def given_notes(translator, args: argparse.Namespace) -> None:
    """One note a --given translation holding tokens the model does not know (read as <unk>); one that cannot be
    read at all (no tokens, more than a learned position table holds) ends the command in one line: every input
    reads it."""
    for text in args.given or ():
        tokens, unknown = translator.target_tokens(text)
        if not tokens:
            fail("translate", f"--given {text!r}: no tokens to read")
        if too_long := translator.length_error(given=len(tokens)):
            fail("translate", f"--given {inert(repr(text))}: {too_long}")
        if unknown:
            names = ", ".join(repr(inert(t)) for t in unknown)
            print(f"translate: note: --given {inert(repr(text))}: the model does not know {names}: read as <unk>",
                  file=sys.stderr)  # fmt: skip


def line_error(args: argparse.Namespace, n: int, translator=None) -> str | None:
    """Why input ``n`` has no translation to read in --given-file (None: it has one, or no --given-file): none, an
    empty line, or (``translator`` given) one longer than its learned position table holds."""
    lines = args.given_lines
    if lines is None:
        return None
    if n > len(lines):
        return f"--given-file {args.given_file} has no {file_unit(args)} {n}"
    if not lines[n - 1].strip():
        return f"{file_unit(args)} {n} of --given-file {args.given_file} is empty"
    if translator is None or translator.position_limit is None:  # any length is read
        return None
    too_long = translator.length_error(given=len(translator.target_tokens(lines[n - 1])[0]))
    return f"{file_unit(args)} {n} of --given-file {args.given_file}: {too_long}" if too_long else None


def read_given(translator, args: argparse.Namespace, good: list[tuple[int, list[list[str]]]], progress: dict) -> list:
    """The inputs ``good`` ((number, its sentences' tokens)) each with its readings, best score first (ties: in the
    order given): every --given text read for all of them, or each input's own line of --given-file; an input of
    several sentences read sentence by sentence where the text has as many (Translator.read_split). Lines holding
    tokens the model does not know are counted in ``progress["given_unknown"]`` (the first one's number kept)."""
    split = any(len(pieces) > 1 for _, pieces in good)
    if args.given_lines is None:
        if split:
            readings = [translator.read_split([p for _, p in good], [text] * len(good)) for text in args.given]
        else:  # the sentences encoded once for every text
            readings = translator.read_texts([p[0] for _, p in good], args.given)  # K lists of B
        return [sorted((r[b] for r in readings), key=lambda t: -t.score) for b in range(len(good))]
    lines = [args.given_lines[n - 1] for n, _ in good]
    for (n, _), line in zip(good, lines, strict=True):
        unknown = translator.target_tokens(line)[1]
        if unknown:
            progress["given_unknown"] = progress.get("given_unknown", 0) + 1
            progress.setdefault("given_unknown_first", (n, unknown))  # its number and tokens, named in the note
    if split:
        return [[reading] for reading in translator.read_split([p for _, p in good], lines)]
    return [[reading] for reading in translator.read_each([p[0] for _, p in good], lines)]  # in one batch


def given_lines(number: int, readings: list[Any], per_piece: bool = False) -> str:
    """One input's lines of output: ``N<TAB>score<TAB>translation<TAB>`` each space-separated word's probability (or
    each token's: ``per_piece``), then the end's (4 significant digits), best first."""
    lines = []
    for tr in readings:
        probs = " ".join(f"{p:.4g}" for p in [*(tr.probs if per_piece else tr.word_probs), tr.end_prob])
        lines.append(f"{number}\t{tr.score:.4f}\t{inert(tr.text)}\t{probs}\n")
    return "".join(lines)


def closing_notes(args: argparse.Namespace, progress: dict, seen: int) -> None:
    """--given-file: the lines with tokens the model does not know, and lines beyond the inputs (not read)."""
    if progress.get("given_unknown"):
        n, unknown = progress["given_unknown_first"]
        names = ", ".join(repr(inert(t)) for t in unknown)
        unit = file_unit(args)
        print(f"translate: note: {progress['given_unknown']} {unit}(s) of --given-file {args.given_file} hold tokens "
              f"the model does not know, read as <unk> (the first: {unit} {n}, {names})", file=sys.stderr)  # fmt: skip
    if args.given_lines is not None and len(args.given_lines) > seen:
        print(f"translate: note: --given-file {args.given_file} has {len(args.given_lines)} {file_unit(args)}s for "
              f"{seen} input(s): the rest were not read", file=sys.stderr)  # fmt: skip
