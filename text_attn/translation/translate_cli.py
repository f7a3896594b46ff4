"""Command-line entry point ``translate``: sentences in, translations (and attention grids) out, through the
Translator inference object (no Lightning). ``--html FILE`` also writes one self-contained interactive page, a
section per sentence, as batches are done (text_attn/translation/alignment_page.py)."""

from __future__ import annotations

import argparse
import io
import itertools
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from text_attn.core import startup_gc
from text_attn.core.casing import changed_reading, shows_nothing
from text_attn.core.drawn_seed import say_seed, settle_seed
from text_attn.core.errors import (
    and_more,
    check_dash_inputs,
    close_quietly,
    dash_refused,
    emit,
    fail,
    missing,
    one_line,
    to_devnull,
)
from text_attn.core.fast_exit import leaving
from text_attn.core.os_text import lone_surrogate, utf8_text
from text_attn.core.run_record import record_run
from text_attn.core.safe_files import (
    OutputRefused,
    check_output,
    hold_outputs,
    inert,
    inert_output,
    open_stream,
    probe_writable,
    protecting,
    refuse_overlap,
    refuse_same_outputs,
    same_file,
)
from text_attn.core.search_options import (
    check_search_options,
    fill_decoding_defaults,
    n_best_ending,
    search_options,
)
from text_attn.core.sigterm import Terminated, interrupts_held, sigterm_interrupts
from text_attn.core.unread_options import flags_given
from text_attn.core.unsure import UNSURE
from text_attn.core.unsure_options import NAMED, count_unsure, resolve_unsure, unsure_note
from text_attn.core.vocab import addresses, lost_addresses
from text_attn.translation.batch_outputs import alignment_line, evidence_of_input, page_sections, record_lines
from text_attn.translation.bundled import (  # noqa: F401 - names others import
    ASSETS,
    BUNDLED_MODEL,
    caption_model_named,
    model_path,
)
from text_attn.translation.paragraphs import breaks_off, goes_on, paragraphs
from text_attn.translation.reading_cli import (
    check_given,
    closing_notes,
    given_lines,
    given_notes,
    line_error,
    read_given,
)
from text_attn.translation.records import unknown_words
from text_attn.translation.references_cli import check_references, keep, score_run
from text_attn.translation.sentences import item_marks, laid_out, line_breaks, marks_alone, put_marks
from text_attn.translation.source_check import LANGUAGES
from text_attn.translation.translate_parser import translate_parser
from text_attn.translation.translate_resume import (
    InputsRead,
    check_inputs,
    check_record,
    check_resume,
    continued,
    cut_back,
    run_file,
    run_settings,
    skip_done,
)
from text_attn.translation.translate_streams import (
    JsonList,
    StreamFailed,
    failing_as,
    line_bytes,
    stdin_lines,
    unknown_note,
    unseen_note,
)

# what --model-info reads (which file, where and how it loads); demo: its own line (sentences or --demo)
INFO_OPTIONS = ("model", "ensemble", "model_info", "device", "threads", "demo")

# translate --demo: German sentences of the kind Multi30k describes (written for this project, not from the corpus)
DEMO_SENTENCES = [
    "Ein Mann fährt mit seinem Fahrrad eine Straße entlang.",
    "Zwei kleine Kinder spielen im Sand am Strand.",
    "Eine Frau mit einem roten Hut sitzt auf einer Bank und liest eine Zeitung.",
    "Ein brauner Hund rennt durch das hohe Gras.",
]


def _count_named(progress: dict[str, Any], kind: str, named: tuple) -> None:
    """One more input of ``kind`` ("unknown", "unseen") for its closing note, which names the first NAMED (``named``:
    the input's number and its words) and counts the rest, as count_unsure does for the unsure words."""
    progress[kind] += 1
    if len(first := progress[f"{kind}_first"]) < NAMED:
        first.append(named)


def _written(args: argparse.Namespace, progress: dict[str, Any]) -> str:
    """How far an interrupted run came, in each file --resume continues: "8 input(s) in a.en and a.jsonl"; where
    Ctrl-C came between a batch's --output lines and its records, "12 input(s) in a.en, 8 in a.jsonl"."""
    # with --resume the inputs the file held already count: the line named this run's alone (576 in the file, "348")
    done, files = progress.get("done", 0) + getattr(args, "resume_from", 0), continued(args)
    held = {path: done + (progress.get("ahead", 0) if flag == "--output" else 0) for flag, path in files.items()}
    if len(set(held.values())) > 1:
        return ", ".join(f"{n} input(s) in {path}" if not k else f"{n} in {path}" for k, (path, n) in
                         enumerate(held.items()))  # fmt: skip
    count = next(iter(held.values()), done)
    return f"{count} input(s)" + (f" in {' and '.join(held)}" if held else "")


# --model-info of a word model from before 2026-12-02 (text_attn.core.vocab.marks_split_off)
NO_CASING = "this model file has no casing data (made before 2026-11-30)"  # Translator.casing_missing
SENTENCE_BYTES = 4 << 30  # a sentence whose search alone would hold more (Translator.search_bytes) is refused


def _translate_stream(
    translator,
    args: argparse.Namespace,
    out,
    report=None,
    progress=None,
    align=None,
    plots=None,
    records=None,
    recorded=None,
) -> tuple[int, int, list]:
    """Read sentences (arguments, or stdin line by line), translate them a batch at a time, write each batch as it is
    done (to ``out``, a section per sentence to the --html ``report``, a line per input to the --alignments stream
    ``align``, its pictures to ``plots``, a plot_files.PlotWriter, a JSON record per input to the --jsonl stream
    ``records``: text_attn.translation.records; ``recorded``: each continued file's run record, rewritten once a batch
    is written with the digest of the inputs written). An input that cannot be translated gets its error line on
    stderr and an empty line in the output, so output line N stays input line N (not with --n-best, whose lines carry
    the input's number). Returns (failed inputs, inputs read, the (number, Translation) pairs kept for --demo);
    ``progress["done"]`` counts the inputs written so far (for Ctrl-C's message) and ``progress["cut"]`` the
    translations that reached --max-len (``progress["cut_first"]`` the first ten's numbers), ``progress["unlike"]``
    how many inputs written look unlike the model's training source text (Translator.unlike_source) and
    ``progress["unlike_first"]`` the first ten's numbers."""
    from tqdm.auto import tqdm

    # stdin: UTF-8 whatever the locale, gzipped or not; None where a pipe or terminal has sent all it has for now
    done = getattr(args, "resume_from", 0)  # --resume: the inputs an interrupted run wrote (translate_resume)
    if args.sentences:
        source = args.sentences[done:]
    else:
        source = getattr(args, "stdin_rest", None) or _stdin_inputs(translator, args)
    total = len(args.sentences) if args.sentences else None
    size = None if args.sentences else _input_size()  # a regular file on stdin: its bytes, the bar's total (an ETA)
    quiet = not sys.stderr.isatty() or (total is not None and total <= args.batch_size)
    # a plain file's lines are counted as they are taken: its offset runs a 64 KiB read ahead (100% on the bar while
    # a small file was still being translated); a gzipped one's offset, its compressed bytes, is all there is
    counted = size is not None and not args.paragraphs and not _gzipped_stdin()
    taken = getattr(args, "resume_bytes", 0)  # --resume: the bytes of the inputs skipped as done (skip_done)
    bar = tqdm(total=size or total, unit="B" if size else "sent", unit_scale=bool(size), desc="translating",
               initial=(min(taken, size) if counted else _bytes_read(size) or 0) if size else done, disable=quiet,
               file=sys.stderr)  # fmt: skip
    news = None if sys.stderr.isatty() else {"start": time.monotonic()}  # off a terminal: a line a minute
    options = search_options(args)
    progress = {} if progress is None else progress
    progress.update(done=0, cut=0, cut_first=[], unlike=0, unlike_first=[], recased=0, recased_first=[], uncased=0,
                    uncased_first=[], folded=0, folded_first=[], long=0, long_first=[], unknown=0, unknown_first=[],
                    address=0, address_first=[], unseen=0, unseen_first=[], wrapped=0, wrapped_first=[])  # fmt: skip
    failed, seen, kept, chunk = 0, 0, [], []  # chunk: (input number, its sentences' tokens; None: a failed input)
    unlike: list[int] = []  # the chunk's inputs that look unlike the training text: counted once written
    recased: list[int] = []  # the chunk's inputs read with the training text's capitals (Translator.read_as)
    uncased: list[int] = []  # the chunk's inputs without capitals that a model with no casing data read as typed
    folded: list[int] = []  # the chunk's inputs with quotes the model's source lacks, read as ASCII (TextCodec.folded)
    long: list[int] = []  # the chunk's inputs longer than any training source (Translator.longest_source)
    typed: dict[int, str] = {}  # the chunk's inputs that hold a web or e-mail address, to look for in their outputs
    marks: dict[int, list[str]] = {}  # the chunk's inputs' list item markers ("- ", "1. "), each sentence's (put_marks)
    breaks: dict[int, list[int]] = {}  # --keep-layout: the line breaks before each sentence of the chunk's inputs
    address: list[int] = []  # the chunk's inputs whose translation lacks an address of theirs as typed
    unseen: dict[int, list[str]] = {}  # the chunk's inputs' words the training text never has (Translator.unseen_words)
    wrapped: list[int] = []  # stdin's lines that broke off a sentence the next line goes on with (paragraphs.goes_on)
    above = None  # the line above, as typed (stdin without --paragraphs)
    sources: dict[int, str] = {}  # --references: the chunk's inputs as typed, for --scores
    errors: dict[int, str] = {}  # the chunk's failed inputs: what is wrong with each (--html shows them in place)
    # the chunk's blank lines of stdin: a blank line out (its place kept, as a failed input's), no error, no section;
    # and its lines of marks alone ("---", "* * *", "-"): written as typed (a model of sentences made them up: "A view
    # of the distance."). Input number -> what its output line is
    blank: dict[int, str] = {}
    typed_lines: dict[int, str] = {}  # --jsonl: the chunk's inputs as typed, failed ones too (a record's "source")

    def count(kind: str, numbers: list[int]) -> None:
        progress[kind] += len(numbers)
        progress[f"{kind}_first"] += numbers[: 10 - len(progress[f"{kind}_first"])]  # a note names no more than ten
        numbers.clear()

    def flush() -> None:
        good = [(n, t) for n, t in chunk if t is not None]  # tokenized once, when read
        toks = [t for _, t in good]
        if args.given or args.given_file:  # the translations given, read (each input's best first), not its own
            ranked = read_given(translator, args, good, progress)
            outs = [readings[0] for readings in ranked]
        else:
            # each input's draws (--sample-seed) keyed by its number: the same translation in any batch
            keyed = {"keys": [n for n, _ in good]} if args.sample else {}
            probs = args.unsure is not None  # --unsure: its words' probabilities, kept by the search
            outs = translator.translate_lines(
                toks, args.beam_size, args.length_penalty, args.max_len, **options, **keyed, probs=probs
            )
            outs = [put_marks(tr, marks.get(n)) for (n, _), tr in zip(good, outs, strict=True)]  # "- A dog"
        by_number = dict(zip((n for n, _ in good), outs, strict=True))
        readings_of = dict(zip((n for n, _ in good), ranked, strict=True)) if args.given or args.given_file else {}
        if args.given or args.given_file:  # lines numbered by input, as --n-best's
            per_piece = args.probs_per == "piece"
            written = "".join(
                given_lines(n, readings, per_piece) for (n, _), readings in zip(good, ranked, strict=True)
            )
        elif args.keep_layout:  # each paragraph's lines as its text's, a blank line between (a failed one: none)
            laid = [inert(laid_out(by_number[n], breaks.get(n)) if n in by_number else blank[n], lines=True) + "\n"
                    for n, _ in chunk if n in by_number or blank.get(n)]  # fmt: skip
            written = ("\n" if laid and progress.get("laid") else "") + "\n".join(laid)  # a blank line between
            progress["laid"] = progress.get("laid") or bool(laid)  # a paragraph written: the next one after a blank
        elif not args.n_best_given:  # a failed input's empty line keeps the lines aligned
            written = "".join(inert(by_number[n].text if n in by_number else blank.get(n, "")) + "\n"
                              for n, _ in chunk)  # fmt: skip
        else:
            written = ""
        for (n, _), tr in zip(good, outs, strict=True):
            unsure = tr.unsure(args.unsure) if args.unsure is not None else None  # its words under --unsure's p
            # --references: scored at the end (--unsure: with its words under the threshold, in --scores)
            found = None if unsure is None else {"unsure": [[w, round(p, 6)] for w, p in unsure]}
            keep(args, progress, n, sources.pop(n, ""), tr.text, found)
            if n in typed and lost_addresses(typed.pop(n), tr.text):  # a model that learned none garbles them
                address.append(n)
            if tr.unknown:  # one note at the end names the first ten (a line each flooded an out-of-domain corpus)
                _count_named(progress, "unknown", (n, unknown_words(translator, tr)))
            if unsure is not None:
                count_unsure(progress, f"input {n}", unsure)
            if words := unseen.get(n):  # as the unknown words: one note at the end names the first ten
                _count_named(progress, "unseen", (n, words))
            if tr.nbest is not None:  # n lines per input: number, score, translation, ended or cut; best first
                written += "".join(f"{n}\t{score:.4f}\t{inert(text)}\t{n_best_ending(cut)}\n"
                                   for text, score, cut in tr.nbest)  # fmt: skip
            elif args.n_best_given:  # --n-best 1: the list's one line (its score: the search's ranking score)
                written += f"{n}\t{tr.score:.4f}\t{inert(tr.text)}\t{n_best_ending(tr.truncated)}\n"
            if args.demo:
                kept.append((n, tr))
        # every output's part of the chunk made first (records, links, the page's sections: the evidence they take is
        # computed here), then written together with Ctrl-C held: a Ctrl-C while the records were made left --output
        # holding inputs the records, links and page did not
        record_text = None
        if records is not None:  # a record per input, a failed one's with its error, in input order
            record_text = record_lines(translator, args, progress, chunk, by_number, typed_lines, errors, readings_of,
                                       blank)  # fmt: skip
        align_lines = None
        if align is not None:  # a line per input, an empty one for a failed input: line N stays input N
            align_lines = "".join(alignment_line(translator, args, progress, n, by_number[n]) if n in by_number
                                  else "\n" for n, _ in chunk)  # fmt: skip
        flagged = set(unlike)  # this chunk's inputs unlike the training text (count empties the list)
        sections = page_sections(translator, args, progress, chunk, good, outs, by_number, blank, errors, flagged,
                                  unseen, readings_of) if report is not None else []  # fmt: skip
        with interrupts_held():
            with failing_as(f"--output {args.output}" if args.output else "stdout"):
                out.write(written)
                out.flush()
            progress["ahead"] = len(chunk)  # --output holds this chunk; the others may not yet (an error after it)
            if record_text is not None:
                with failing_as("stdout" if args.jsonl == "-" else f"--jsonl {args.jsonl}"):
                    records.write(record_text)
                    records.flush()
            if align_lines is not None:
                with failing_as(f"--alignments {args.alignments}"):
                    align.write(align_lines)
                    align.flush()
            for section in sections:
                with failing_as(f"--html {args.html}"):
                    report.add(section)
            progress["done"] += len(chunk)  # written: what the closing notes and Ctrl-C's line count
            progress["ahead"] = 0
            if recorded:  # the inputs' digest of FILE.run.json: now of every input written
                _keep_records(args, recorded)
        count("cut", [n for (n, _), tr in zip(good, outs, strict=True) if tr.truncated])
        count("unlike", unlike)
        count("recased", recased)
        count("uncased", uncased)
        count("folded", folded)
        count("long", long)
        count("address", address)
        count("wrapped", wrapped)
        typed.clear()  # a failed input's
        marks.clear()
        breaks.clear()
        if plots is not None:  # drawn as written: a Ctrl-C keeps the pictures of what was written
            several = len(args.sentences) > 1 if args.sentences else (seen > 1 or None)  # None: not known yet
            plots.add([(n, by_number[n]) for n, _ in good], several)
        progress["read"] = seen  # for the pictures still waiting after a Ctrl-C (PlotWriter.finish)
        errors.clear()
        progress["blank"] = progress.get("blank", 0) + sum(not kept for kept in blank.values())
        progress["marks"] = progress.get("marks", 0) + sum(bool(kept) for kept in blank.values())
        blank.clear()
        unseen.clear()
        read = min(taken, size) if counted else _bytes_read(size)
        bar.update(len(chunk) if read is None else read - bar.n)
        if news is not None:
            _news(news, progress["done"], None if read is None else read / size)
        chunk.clear()

    n = seen = done  # a resumed run's inputs keep their numbers: notes, errors and --sample-seed's draws
    inputs = getattr(args, "inputs_read", None) or InputsRead()  # --resume: the inputs skipped already in it
    for line in source:
        if line is None:  # a pipe or terminal with nothing more for now: what it sent is translated, not held back
            if chunk:
                flush()
            continue
        n = seen = n + 1
        if counted:
            taken += line_bytes(line)
        line = line.rstrip("\r")  # a CRLF file read on any system
        inputs.add(line)
        if not (args.sentences or args.paragraphs):  # text wrapped over lines, read a line at a time: said once
            if above is not None and goes_on(above, line):
                wrapped.append(n - 1)
            above = line
        elif args.sentences and not args.paragraphs and breaks_off(line):  # an argument wrapped over lines ("$(cat
            wrapped.append(n)  # a.txt)"): its line breaks end sentences too, unsaid ("... water. A street.")
        if records is not None:
            typed_lines[n] = line
        # a file's blank line (between paragraphs; a zero-width space or a byte-order mark alone): nothing to translate
        if not args.sentences and (shows_nothing(line) or marks_alone(line)):
            blank[n] = "" if shows_nothing(line) else " ".join(line.split())
            chunk.append((n, None))
            if len(chunk) == args.batch_size:
                flush()
            continue
        error, tokens = None, None
        if lone_surrogate(line) is not None:  # stdin bytes that are not UTF-8 arrive as lone surrogates
            error = "not valid UTF-8 text"
        else:
            read = translator.read_as(line)  # typed without capitals: with the training text's (Translator.tokenize)
            pieces = translator.sentence_tokens(line, split=not args.no_split)  # the line's sentences' tokens
            if not args.no_split and (found := item_marks(line)):  # its list items' markers, not translated
                marks[n] = found
            if args.keep_layout:
                breaks[n] = line_breaks(line)
            tokens = max(pieces, key=len, default=[])  # the checks below are each sentence's: the longest's
            need = translator.search_bytes(len(tokens), args.beam_size, args.max_len) if tokens else 0
            if not tokens:
                error = "empty sentence"
            elif missing_line := line_error(args, n, translator):  # --given-file has no translation for it to read
                error = missing_line
            elif need > SENTENCE_BYTES:  # a paragraph without line breaks, a file that is not text
                error = (f"{len(tokens):,} tokens: its search at beam {args.beam_size} would need about "
                         f"{need / 2**30:.0f} GiB; split it into sentences (one a line)")  # fmt: skip
            elif too_long := translator.length_error(len(tokens)):  # past a learned position table
                error = too_long
        if error is not None:
            print(f"translate: error: input {n}: {error}", file=sys.stderr)
            errors[n] = error
            failed += 1
            progress["failed"] = failed  # for --html's closing line, Ctrl-C or not
        else:
            if translator.unlike_source(line):
                unlike.append(n)
            elif words := translator.unseen_words(line):  # an input unlike the training text is said so already
                unseen[n] = words
            if len(tokens) > translator.longest_source():
                long.append(n)
            if addresses(line):
                typed[n] = line
            quoted = translator.codec.folded(line, "source")  # read_as folds them too: not a recasing
            if quoted != line:
                folded.append(n)
            if changed_reading(quoted, read) is not None:
                recased.append(n)
            elif not translator.keep_case and translator.casing_missing and _caseless(line):
                uncased.append(n)
            if getattr(args, "reference_lines", None) is not None:
                sources[n] = line
        chunk.append((n, None if error else pieces))
        if len(chunk) == args.batch_size:
            flush()
    if chunk:
        flush()
    bar.close()
    return failed, seen, kept


NEWS_EVERY_S = 60.0  # off a terminal, a line this often (as text-train's: text_attn/core/progress_lines.py)


def _stdin_inputs(translator, args: argparse.Namespace) -> Iterator[str | None]:
    """stdin's inputs: its lines (translate_streams.stdin_lines), or with --paragraphs its paragraphs, each joined
    into one line (text_attn.translation.paragraphs)."""
    lines = stdin_lines()
    return paragraphs(lines, translator.word_logp) if args.paragraphs else lines


def _first_input_read(translator, args: argparse.Namespace) -> Iterator[str | None]:
    """stdin's inputs (:func:`_stdin_inputs`), the first read already: stdin holding none (empty, or only blank lines
    with --paragraphs) or not text (binary data, UTF-16) is refused in one line before an output is opened, which
    emptied an --output FILE there (and said "--resume continues after the inputs done", of none)."""
    inputs = _stdin_inputs(translator, args)
    try:
        first = next(inputs, False)
        while first is None:  # a pipe with nothing yet: its first line waited for
            first = next(inputs, False)
    except OSError as err:
        _no_input(args, _stdin_refused(err))
    if first is False:
        _no_input(args, "no input: give sentences as arguments or on stdin" +
                  (" (stdin held only blank lines: no paragraph)" if args.paragraphs else ""))  # fmt: skip
    return itertools.chain([first], inputs)


def _stdin_refused(err: OSError) -> str:
    """The line of a stdin that cannot be read: what it is (a StreamFailed's own error: "[Errno None]" otherwise)."""
    return f"cannot read stdin: {one_line(err.err if isinstance(err, StreamFailed) else err)}"


def _no_input(args: argparse.Namespace, message: str) -> NoReturn:
    """The refusal of stdin's first read: --json's list of no records first (what a reader of stdout parses), then
    the one line."""
    if args.json:
        print("[]", flush=True)
    fail("translate", message)


def _typed() -> bool:
    """Whether stdin is a terminal: someone typing (a closed or odd stdin: no)."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _input_size() -> int | None:
    """The size in bytes of the regular file on stdin (None: a pipe, a terminal, an empty file): the progress bar's
    total, the bytes read so far its count (:func:`_bytes_read`)."""
    try:
        st = os.fstat(sys.stdin.fileno())
    except (OSError, ValueError, AttributeError):  # closed, or a stream without a file (a test's StringIO)
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) and st.st_size > 0 else None


def _gzipped_stdin() -> bool:
    """Whether the regular file on stdin starts with gzip's magic bytes (read where it lies: its offset unmoved)."""
    try:
        return os.pread(sys.stdin.fileno(), 2, 0) == b"\x1f\x8b"
    except (OSError, ValueError, AttributeError):
        return False


def _bytes_read(size: int | None) -> int | None:
    """How far into the regular file on stdin reading has come (its offset; the buffer read ahead counted: at most
    ``size``); None without one. A gzipped file's offset is its compressed bytes, as its size is."""
    if size is None:
        return None
    try:
        return min(os.lseek(sys.stdin.fileno(), 0, os.SEEK_CUR), size)
    except (OSError, ValueError):
        return None


def _news(state: dict[str, float], done: int, share: float | None) -> None:
    """Off a terminal (a log file, nohup): at most a line every NEWS_EVERY_S on stderr, the sentences written, their
    rate and how much of a regular input file was read (a bar there is one line of carriage returns; none said
    nothing for a whole run)."""
    now = time.monotonic()
    if now - state.get("said", state["start"]) < NEWS_EVERY_S:
        return
    state["said"] = now
    rate = done / max(now - state["start"], 1e-9)
    part = f", {share:.0%} of the input read" if share is not None else ""
    try:
        print(f"translate: {done:,} input(s) written, {rate:.1f} a second{part}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr gone: the translations go on without news
        pass


def _caseless(line: str) -> bool:
    """Whether ``line`` has letters with a case and no capital among them, or only capitals (more than one)."""
    cased = [c for c in line if c.islower() or c.isupper()]
    return bool(cased) and (not any(c.isupper() for c in cased) or len(cased) > 1 and all(c.isupper() for c in cased))


def _check_ensemble(args: argparse.Namespace) -> None:
    """--ensemble's models, before torch is imported: each there (a mistyped path said at once), and the options an
    ensemble cannot give refused."""
    for name in args.ensemble or []:
        member = model_path(name)
        if member.is_dir():
            fail("translate", f"--ensemble {member}: a folder, not a model file")
        if not member.is_file():
            fail("translate", f"--ensemble {missing(member, 'model file not found', name)}")
    if args.ensemble and (args.evidence or args.align_by == "evidence"):
        flag = "--evidence" if args.evidence else "--align-by evidence"
        fail("translate", f"{flag} measures what drives one model's words, not an ensemble's: drop --ensemble, or "
             "give one of its models as --model")  # fmt: skip


def model_info(translator, path: str | Path) -> list[str]:
    """``translate --model-info``: the network, the tokenizer and vocabularies, what it was trained on, its scores."""
    cfg = translator.net.cfg
    if translator.arch == "transformer":
        net = f"Transformer, d_model {cfg.d_model}, {cfg.enc_layers} + {cfg.dec_layers} layers, {cfg.num_heads} heads"
    else:
        net = f"{cfg.rnn.upper()} encoder-decoder, attention {cfg.attention}, decoder {cfg.dec_hidden}"
    codec = translator.codec
    tokens = {"subword": f"subword units (SentencePiece, {len(codec.subwords) if codec.subwords else 0} pieces)",
              "word": f"words{' (lowercased)' if codec.lower else ''}", "char": "characters"}[codec.mode]  # fmt: skip
    if codec.split_marks:
        from text_attn.core.vocab import SPLIT_MARKS_INFO

        tokens += f", {SPLIT_MARKS_INFO}"
    lines = [
        f"model:          {path}",
        f"network:        {net}",
        f"tokens:         {tokens}",
        f"vocabularies:   source {len(translator.src_vocab)}, target {len(translator.tgt_vocab)}",
    ]
    check = translator.source_check
    if check is not None:
        how = "language and words" if "words" in check else "language"
        lines.append(f"input check:    notes input unlike {translator.known()}, by its {how}")
    if translator.casing is not None:
        lines.append("input casing:   a line without capitals of its own is read with the training text's capitals "
                     "(--keep-case: as typed)")  # fmt: skip
    elif translator.casing_missing:
        lines.append(f"input casing:   none: {NO_CASING}; a line without capitals is read as typed")
    from text_attn.core.modelfile import info_lines

    return lines + info_lines(translator.info)


def word_alignment(translator, tr) -> list[str]:
    """Per output word, the source word it is linked to (alignments.links; of several, the one with the most
    attention, summed over its pieces and averaged over the output word's: alignments.word_attention) and that share;
    a word linked to none says so (its attention peaked on the source's end). An empty list without attention."""
    from text_attn.translation.alignments import links, word_attention

    found = word_attention(translator, tr)
    if found is None or not found[0]:
        return []
    src_words, out_words, weights = found
    linked: dict[int, list[int]] = {}
    for i, j in links(translator, tr):
        linked.setdefault(j, []).append(i)
    lines = []
    for j, word in enumerate(out_words):
        if j not in linked:
            lines.append(f"{word} <- (the end)")
            continue
        i = max(linked[j], key=lambda k: float(weights[j, k]))
        lines.append(f"{word} <- {src_words[i]} ({float(weights[j, i]):.0%})")
    return lines


def _print_notes(translator, args: argparse.Namespace, progress: dict[str, Any]) -> None:
    """The closing notes on the translations written: arguments that name files, cut off by the length cap, inputs
    unlike the training text, inputs read with the training text's capitals."""
    done = progress.get("done", 0)
    files = [(n, s) for n, s in enumerate(args.sentences[:done], 1) if not args.demo and os.path.isfile(s)]
    if files:  # `translate notes.txt` translated the name: the lines of a file come on stdin
        names = ", ".join(f"{n} ({inert(s)})" for n, s in files[:3]) + (" and more" if len(files) > 3 else "")
        which = f"inputs {names} name files" if len(files) > 1 else f"input {names} names a file"
        print(f"translate: note: {which}, translated as text; to translate a file's lines: translate < "
              f"{inert(files[0][1])}", file=sys.stderr)  # fmt: skip
    if progress.get("long"):
        print(f"translate: note: {_long_note(translator, args, progress)}", file=sys.stderr)
    if progress.get("cut"):
        cap = f"--max-len {args.max_len}" if args.max_len else "the length cap (2 x (source tokens + 1) + 10)"
        if progress.get("long") and not args.max_len:  # Translator.default_steps: a long input's cap is lower
            cap = cap[:-1] + f"; at most {translator.default_steps(10**6)} for a long input)"
        elif translator.position_limit is not None and not args.max_len:  # the learned position table's rows
            cap = cap[:-1] + f"; at most {translator.position_limit}, the positions the model learned)"
        count = progress["cut"]
        which = and_more(progress.get("cut_first", []), count)
        print(f"translate: note: {count} translation(s) reached {cap} and are cut off: input{'s' if count > 1 else ''} "
              f"{which}", file=sys.stderr)  # fmt: skip
    if note := unknown_note(progress):
        print(f"translate: note: {note}", file=sys.stderr)
    if note := unseen_note(progress, translator.known()):
        print(f"translate: note: {note}", file=sys.stderr)
    if args.unsure is not None and (note := unsure_note(progress, args.unsure, "translations")):
        print(f"translate: note: {note}", file=sys.stderr)
    if progress.get("unlike"):
        note = _source_note(translator, args, progress["unlike"], progress["unlike_first"])
        print(f"translate: note: {note}", file=sys.stderr)
    if progress.get("address"):
        count, shown = progress["address"], and_more(progress["address_first"], progress["address"])
        s = "s" if count > 1 else ""
        print(f"translate: note: input{s} {shown}: a web or e-mail address typed there is missing from the "
              f"translation{s} (the model learned from text without addresses and does not copy them): put it back "
              "by hand",
              file=sys.stderr)  # fmt: skip
    if translator.codec.split_marks and done:
        print("translate: note: this model's word tokens split at combining marks (trained before 2026-12-02): its "
              "inputs were read so, as it was trained; retrain it for today's tokens", file=sys.stderr)  # fmt: skip
    if progress.get("uncased"):
        count, shown = progress["uncased"], and_more(progress["uncased_first"], progress["uncased"])
        print(f"translate: note: {NO_CASING}: input{'s' if count > 1 else ''} {shown} translated as typed, without "
              "the capitals its training text writes; type them, or retrain the model (today's text-train fit keeps "
              "the casing data)", file=sys.stderr)  # fmt: skip
    if progress.get("folded"):
        count, shown = progress["folded"], and_more(progress["folded_first"], progress["folded"])
        print(f"translate: note: input{'s' if count > 1 else ''} {shown}: typographic quotes the model's source text "
              f"never wrote (’ ‘ “ ” ´) read as ' and \"", file=sys.stderr)  # fmt: skip
    if progress.get("wrapped"):
        count, shown = progress["wrapped"], and_more(progress["wrapped_first"], progress["wrapped"])
        s, its = ("s", "their") if count > 1 else ("", "its")
        print(f"translate: note: input{s} {shown} break{'' if s else 's'} off mid-sentence, the next line going on "
              f"with {its} rest (text wrapped over lines?): each line was translated as a sentence of its own; "
              "--paragraphs reads the lines up to a blank line as one input", file=sys.stderr)  # fmt: skip
    if progress.get("recased"):
        count, shown = progress["recased"], and_more(progress["recased_first"], progress["recased"])
        s, have, them = ("s", "have", "them") if count > 1 else ("", "has", "it")
        # as casing.py tells them ("The man rides a bike." too: it was said to be "typed lowercase or in capitals")
        print(f"translate: note: input{s} {shown} {have} no capital past the first letter, or nothing but capitals: "
              f"read with the capitals of {translator.known()}; --keep-case translates {them} as typed",
              file=sys.stderr)  # fmt: skip


def _long_note(translator, args: argparse.Namespace, progress: dict[str, Any]) -> str:
    """The one note on the inputs longer than any training source: a model that learned from sentences translates a
    paragraph (or sentences joined on one line) as one sentence, about the first; said, with the cap it got."""
    count = progress["long"]
    shown = and_more(progress["long_first"], count)
    longest = translator.longest_source()
    if translator.trained_lengths:
        than = f"longer than any sentence the model learned from (the longest: {longest} tokens)"
    else:
        than = f"longer than {longest} tokens, more than models learn from (this model file does not record its " \
            "training sentences' lengths)"  # fmt: skip
    their, them, each = ("their", "them", " each") if count > 1 else ("its", "it", "")
    capped = "" if args.max_len else f", {their} output capped at {translator.default_steps(10**6)} tokens"
    return (f"input{'s' if count > 1 else ''} {shown}: {than}: translated as one sentence{each}{capped}; split "
            f"{them} into sentences (one a line)")  # fmt: skip


def _source_note(translator, args: argparse.Namespace, count: int, first: list[int]) -> str:
    """The note for the ``count`` inputs that look unlike the model's training source text (``first``: the first
    ones' numbers, in order)."""
    shown = and_more(first, count)
    several = count > 1
    note = (f"input{'s' if several else ''} {shown} look{'' if several else 's'} unlike {translator.known()}: "
            f"{'their translations' if several else 'the translation'} may be wrong")  # fmt: skip
    if args.model is None:
        note += " (for other text, teach it pairs of yours: text-train fit --model.init_from transformer; docs/text.md)"
    return note


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, an output that is also an input, by the one mechanism every command uses
    (safe_files.refuse_overlap): the model file, and the file stdin is redirected from (writing it would empty the
    input before it is read); a --plot that names a folder; and an output file in a folder that does not exist (a
    mistyped folder is said before the model loads, not made)."""
    texts = [f for f in (args.given_file, args.references) if f]  # read whole before any output, but kept whole
    reads_stdin = ((not args.sentences or args.sentences == ["-"]) and not args.demo) or "-" in texts
    texts = [f for f in texts if f != "-"]
    jsonl = args.jsonl if args.jsonl != "-" else None  # '-': stdout
    named = [("--output", args.output), ("--html", args.html), ("--plot", args.plot),
             ("--alignments", args.alignments), ("--scores", args.scores), ("--jsonl", jsonl)]  # fmt: skip
    try:
        models = [model_path(args.model), *(model_path(m) for m in args.ensemble or [])]
        refuse_overlap({f"{flag} {v}": v for flag, v in named if v}, [*models, *texts], stdin=reads_stdin)
        refuse_same_outputs(named)  # two outputs in one file: one would overwrite the other
    except OSError as err:
        fail("translate", str(err))
    for flag, value in (("--output", args.output), ("--html", args.html), ("--alignments", args.alignments),
                        ("--jsonl", jsonl)):  # fmt: skip
        if value and not Path(value).parent.is_dir():
            fail("translate", f"cannot write {flag} {value}: the folder {Path(value).parent} does not exist")
    if args.plot:
        plot = Path(args.plot)
        for flag, value in named:  # the numbered and evidence PNGs --plot writes later: none may be another output
            if flag != "--plot" and value and _a_plot_file(plot, Path(value)):
                fail("translate", f"{flag} {value} has the name of a file --plot {args.plot} may write (one PNG a "
                     f"sentence, {plot.stem}-N.png, and {plot.stem}-evidence.png); give another name")  # fmt: skip
        if plot.is_dir():
            fail("translate", f"--plot {args.plot} is a folder; give a PNG file name, e.g. {plot / 'grid.png'}")
        if not plot.parent.is_dir():
            fail("translate", f"cannot write --plot {args.plot}: the folder {plot.parent} does not exist")
        try:  # its pictures are drawn as the work goes: a folder refusing them was said after the translations
            probe_writable(plot.parent)
        except OSError as err:
            fail("translate", f"cannot write --plot {args.plot}: {one_line(err)}")
        if plot.suffix.lower() not in ("", ".png"):
            fail("translate", f"--plot {args.plot}: the grids are PNG images; give a name ending in .png")


def _a_plot_file(plot: Path, other: Path) -> bool:
    """Whether ``other`` is one of the files ``--plot PLOT`` writes beside PLOT itself: PLOT-N.png for sentence N of
    several, PLOT-evidence.png / PLOT-N-evidence.png with --evidence (the plain name: refuse_same_outputs)."""
    import re

    if not same_file(plot.parent, other.parent):
        return False
    suffixes = "|".join(re.escape(x) for x in {".png", plot.suffix} if x)
    return re.fullmatch(rf"{re.escape(plot.stem)}(-\d+)?(-evidence)?({suffixes})", other.name) is not None and (
        other.name != plot.name
    )


@inert_output
def translate_main(argv: list[str] | None = None) -> int:
    from text_attn.core import cpu_load

    cpu_load.start()  # the cores' load is read again once the model is loaded (the default --threads)
    parser = translate_parser()
    args = parser.parse_args(argv)
    beside_info = flags_given(parser, args, INFO_OPTIONS) if args.model_info else []
    if beside_info:  # an output or a decoding it never made: said, not dropped (before any output is held)
        fail("translate", f"--model-info describes the model and exits: give it without {', '.join(beside_info)}")
    if args.json and args.jsonl:
        fail("translate", "--json prints the records as one JSON list on stdout; --jsonl FILE writes them a line each: "
             "give one of the two")  # fmt: skip
    if args.json:  # the --jsonl records on stdout (everything --jsonl - does), written as one list (JsonList)
        args.jsonl = "-"
    reads_stdin = (not args.sentences or args.sentences == ["-"]) and not args.demo and not args.model_info
    reads_stdin = reads_stdin or "-" in (args.given_file, args.references)  # --references -: stdin is an input too
    # SIGTERM ends the run as Ctrl-C does (the outputs closed whole, the locks removed), with exit code 143
    with sigterm_interrupts():
        try:
            try:  # before the model loads and anything is written; held to the end: two runs' lines interleaved
                held = hold_outputs(_held_outputs(args))
            except OutputRefused as err:
                fail("translate", str(err))
            # the model file and a file on stdin are inputs: no output (the numbered --plot files included) may
            # replace them
            with held, protecting([model_path(args.model)], stdin=reads_stdin):
                return _translate_main(args)
        except Terminated:  # outside the translating (the model loading, --plot's pictures): as Ctrl-C says it there
            print("translate: interrupted", file=sys.stderr)
            raise SystemExit(143) from None


def _close_page(report, args: argparse.Namespace, progress: dict[str, Any], stopped: str | None) -> bool:
    """The --html page ended and the ``wrote`` line said; ``stopped`` ("interrupted", "error"; None: the run ended):
    the page says first that it is partial. A page its own write failed was given up (its error says so): nothing
    is written; one that cannot be ended now (the disk that failed an output) is one line, its old page kept, and
    False returned (the run's exit code says it: it was 0, and a script took the page as written)."""
    lost = f", {progress['failed']} failed" if progress.get("failed") else ""
    if blanks := progress.get("blank"):  # no section of their own: the page's count is of the others
        lost += f", {blanks} blank line{'s' if blanks > 1 else ''} left out"
    if marks := progress.get("marks"):  # "---", "* * *": written as typed, no section either (uncounted, unsaid)
        lost += f", {marks} input{'s' if marks > 1 else ''} of marks alone left out (written as typed in the text)"
    why = "the run was interrupted" if stopped == "interrupted" else "the run stopped on an error"
    done = progress.get("done", 0)
    partial = f"{why} after {done} input(s); the inputs after them are not here" if stopped else None
    try:
        written = report.close(f"{report.sections} input(s){lost}", partial)
    except OSError as err:
        print(f"translate: error: cannot finish --html {args.html}: {one_line(err)}", file=sys.stderr)
        return False
    if written is not None:  # None: the page was given up (its error said so), nothing was written
        print(f"wrote {inert(written)}", file=sys.stderr)
    return True


def _outputs_intact(err: OSError) -> bool:
    """Whether a run stopped by ``err`` leaves its own outputs whole, to be finished as after Ctrl-C: stdin could not
    be read, or stdout's reader went away (``| head -1``), not an output file."""
    return isinstance(err, StreamFailed) and err.where in ("stdin", "stdout")


def _stream_failed(args: argparse.Namespace, err: OSError, done: int) -> None:
    """One line naming the stream that failed mid-run (stdout, the output file, stdin), exit code 2. A stdout whose
    reader went away ends as a closed pipe does in every command (errors.stdout_failed)."""
    if not isinstance(err, StreamFailed):  # an error no stream was named for: the outputs it may have come from
        outputs = (("--output", args.output), ("--html", args.html), ("--alignments", args.alignments))
        names = " / ".join(f"{flag} {value}" for flag, value in outputs if value) or "stdout"
        err = StreamFailed(names, err)
    files = continued(args)  # --output / --jsonl FILE: a full disk freed, --resume goes on (as caption says)
    resumes = "; --resume continues after them" if files else ""
    done += getattr(args, "resume_from", 0) if files else 0  # what the files hold, not this run's alone (review)
    kept = f" (stopped after {done} input(s){resumes})" if _outputs_intact(err) and done else ""
    if not kept and files:  # an output file failed (a full disk): the lines written are whole
        kept = f" ({' and '.join(files.values())}: --resume continues after the inputs done)"
    if err.where == "stdout":
        to_devnull(sys.stdout)  # the interpreter's last flush would fail again
    verb = "read" if err.where == "stdin" else "write"
    fail("translate", f"cannot {verb} {err.where}: {one_line(err.err)}{kept}")


def _held_outputs(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """The files no other run may write while this one does (safe_files.hold_outputs, which holds no ``-``: stdout
    for --output, refused later for the others)."""
    return [("--output", args.output), ("--html", args.html), ("--plot", args.plot),
            ("--alignments", args.alignments), ("--scores", args.scores), ("--jsonl", args.jsonl)]  # fmt: skip


def _translate_main(args: argparse.Namespace) -> int:
    # UTF-8 typed under another locale (LC_ALL=C): read as UTF-8, not refused as "not valid UTF-8 text"
    args.sentences = [utf8_text(s) for s in args.sentences]
    args.given = [utf8_text(t) for t in args.given] if args.given else args.given
    if args.output == "-":  # stdout, as '-' for the input is stdin
        if args.jsonl == "-":  # the records take stdout in place of the lines: the lines asked for were dropped
            other = "--json" if args.json else "--jsonl -"
            fail("translate", f"--output - and {other} both name stdout: give --output a file (stdout is its "
                 f"default: {other} alone prints the records)")  # fmt: skip
        args.output = None
    for flag, value, what in (("--html", args.html, "a page"), ("--plot", args.plot, "PNG images"),
                              ("--alignments", args.alignments, "a file beside the translations"),
                              ("--scores", args.scores, "a JSON file")):  # fmt: skip
        if value == "-":
            fail("translate", dash_refused(flag, what))
    if args.beam_size is not None and args.beam_size < 1:  # before loading the model: fail fast
        fail("translate", f"--beam-size must be at least 1, got {args.beam_size}")
    sizes = (("--batch-size", args.batch_size), ("--threads", args.threads), ("--max-len", args.max_len))
    for flag, value in sizes:
        if value is not None and value < 1:
            fail("translate", f"{flag} must be at least 1, got {value}")
    if args.model_info and (args.sentences or args.demo):
        fail("translate", "--model-info describes the model and exits: give it without sentences or --demo")
    if args.sentences == ["-"]:  # '-': stdin, as for caption
        args.sentences = []
    elif "-" in args.sentences:  # it was translated as the text "-", stdin unread
        fail("translate", "'-' reads the sentences from stdin: give it alone, or give the sentences as arguments")
    if args.layer is not None and not (args.plot or args.html or args.alignments or args.demo or args.json
                                       or args.jsonl):  # fmt: skip
        fail("translate", "--layer picks the attention --plot, --html, --alignments, --demo and the --json / --jsonl "
             "records show: give it with one of them")  # fmt: skip
    if args.align_by != "attention" and not args.alignments:
        fail("translate", f"--align-by {args.align_by} says how --alignments links words: give --alignments FILE")
    if args.keep_layout and not args.paragraphs:
        fail("translate", "--keep-layout lays out the translation of --paragraphs' paragraphs: give --paragraphs too "
             "(without it each line is an input and its translation a line)")  # fmt: skip
    if args.keep_layout and (args.resume or args.n_best or args.given or args.given_file):
        flag = next(f for f, on in (("--resume", args.resume), ("--n-best", args.n_best), ("--given", args.given),
                                    ("--given-file", args.given_file)) if on)  # fmt: skip
        fail("translate", f"--keep-layout writes a paragraph over several lines; {flag} counts output lines as "
             "inputs: drop one")  # fmt: skip
    if args.paragraphs and (args.no_split or args.demo):
        flag, does = ("--no-split", "would translate it whole") if args.no_split else ("--demo", "translates its own")
        fail("translate", f"--paragraphs translates a paragraph's sentences each on its own; {flag} {does}: drop one")
    holds = "the sentences to translate" if not args.sentences and not args.demo else None
    check_dash_inputs("translate", args.given_file, args.references, holds, ", or the sentences as arguments")
    _check_outputs(args)
    check_given(args)
    resolve_unsure(args, "translate", UNSURE)
    check_references(args)
    check_resume(args)
    args.seed_note = settle_seed(args, continued(args).values() if args.resume else ())  # --sample: one seed a run
    from text_attn.core.modelfile import path_problem

    model = model_path(args.model)
    if problem := path_problem(model, args.model):  # before torch is imported: a mistyped path is said at once
        if not model.exists() and caption_model_named(args.model):
            fail("translate", caption_model_named(args.model))
        if not model.exists() and args.model is None:
            fail("translate", f"the bundled model {model} is not installed; pass --model FILE (a model file written "
                 "by text-train fit or text-export)")  # fmt: skip
        fail("translate", problem)  # as load_model_file says it
    _check_ensemble(args)
    if args.threads:
        import torch

        from text_attn.core.cpu_load import more_threads_note

        if (note := more_threads_note(args.threads)) and args.device in ("cpu", "auto"):
            print(f"translate: note: {note}", file=sys.stderr)
        torch.set_num_threads(args.threads)
    from text_attn.core.modelfile import ModelFileError
    from text_attn.translation.translator import Translator

    try:
        translator = Translator.load(args.model)  # None: the bundled default; a name: that bundled model
        if args.ensemble:
            from text_attn.translation.ensemble import EnsembleTranslator

            members = [translator, *(Translator.load(m) for m in args.ensemble)]
            names = [f"--model {args.model or 'transformer'}", *(f"--ensemble {m}" for m in args.ensemble)]
            translator = EnsembleTranslator(members, names)
    except ModelFileError as exc:
        fail("translate", str(exc))
    except ValueError as exc:  # members that cannot share one search
        fail("translate", str(exc))
    startup_gc.release()  # the imports and the model are in: the collector as usual (text_attn.core.startup_gc)
    translator.keep_case = args.keep_case
    fill_decoding_defaults(args, translator.info, beam_size=1)
    if note := check_search_options("translate", args, words=len(translator.tgt_vocab)):
        print(f"translate: note: {note}", file=sys.stderr)
    # a --max-len no sentence's search fits in: said once for the option, not once a line as the line's length
    least = translator.search_bytes(1, args.beam_size, args.max_len) if args.max_len else 0
    if least > SENTENCE_BYTES:
        fail("translate", f"--max-len {args.max_len}: the search at beam {args.beam_size} would need about "
             f"{least / 2**30:.0f} GiB for even a one-word sentence; give a smaller one (default: 2 x (source "
             "tokens + 1) + 10)")  # fmt: skip
    if args.max_len and (error := translator.length_error(max_len=args.max_len)):
        fail("translate", f"--{error.replace('_', '-')}")
    if args.model_info:
        lines = model_info(translator, model_path(args.model))
        for name, member in zip(args.ensemble or [], getattr(translator, "members", [None])[1:], strict=True):
            lines += ["", f"--ensemble {name}: translates with the model above, each step the mean of their next-token "
                      "probabilities; the attention, notes and decoding are the model above's", ""]  # fmt: skip
            lines += model_info(member, model_path(name))
        emit("translate", "\n".join(lines))
        return 0
    given_notes(translator, args)
    if args.paragraphs:  # each argument a paragraph: its lines joined as stdin's are (text_attn.translation.paragraphs)
        args.sentences = [translator.read_paragraph(s) for s in args.sentences]
    if args.demo:
        if args.sentences:
            fail("translate", "--demo translates its own sentences: give sentences without --demo")
        args.sentences = list(DEMO_SENTENCES)
    if args.sample and (args.evidence or getattr(args, "align_by", None) == "evidence"):  # as caption refuses it
        flag = "--evidence" if args.evidence else "--align-by evidence"
        fail("translate", f"{flag} explains the model's own choice of words; --sample draws them at random: drop one")
    if args.demo and (args.n_best_given or args.plot):  # each was dropped silently
        flag = "--n-best" if args.n_best_given else "--plot"
        fail("translate", f"{flag} is for your sentences' translations; --demo prints one translation of each of its "
             "own with the words it looked at: give the sentences instead of --demo")  # fmt: skip
    if args.demo and args.jsonl:
        flag = "--json" if args.json else "--jsonl"
        fail("translate", f"--demo prints its own sentences with their alignments: give {flag} with sentences or "
             "stdin instead")  # fmt: skip
    if args.evidence and not (args.plot or args.html or args.jsonl):
        fail("translate", "--evidence is drawn beside the attention: give it with --plot PNG or --html FILE (or "
             "--json, --jsonl FILE: in each record)")  # fmt: skip
    # --plot too: it noted "no attention to plot" at the end and exited 0, no file written (a script went on)
    needs = (("--alignments", "align", args.alignments), ("--plot", "plot", args.plot),
             ("--evidence", "explain", args.evidence))  # fmt: skip
    for flag, verb, given in needs:
        if given:
            from text_attn.translation.explain import require_attention

            try:
                require_attention(translator.net)
            except ValueError as err:
                fail("translate", f"{flag}: {str(err).replace('to explain', f'to {verb}')}")
    if args.layer is not None and not hasattr(translator.net, "set_plot_layer"):
        fail("translate", "--layer picks a Transformer decoder layer; this model is an RNN (one attention)")
    if args.layer is not None:  # the Transformer: which layer's cross-attention to return (loaded: the penultimate)
        try:
            translator.net.set_plot_layer(args.layer)
        except ValueError as exc:
            fail("translate", str(exc))
    try:
        from text_attn.core.devices import resolve_device

        args.device = resolve_device(args.device)
        translator.to(args.device)  # an ensemble: each of its networks
    except (RuntimeError, AssertionError, ValueError) as err:  # unknown device name, no CUDA build, ...
        fail("translate", f"cannot use device {args.device!r}: {one_line(err)}")
    if not args.threads and args.device == "cpu":
        from text_attn.core.cpu_load import use_free_threads

        use_free_threads()  # one thread per core that other programs left free (text_attn/core/cpu_load.py)
    if (not args.output or args.jsonl == "-") and not args.demo:
        from text_attn.core.os_text import stdout_is_closed

        if stdout_is_closed():  # the translations would be dropped (its prints are): said before any is made
            fail("translate", "cannot write stdout: [Errno 9] stdout is closed (--output FILE writes them to a file)")
    settings = {}  # per file continued (--output, --jsonl): FILE.run.json, what its lines are made with
    try:
        for flag in continued(args):  # a --resume with another model or options is refused
            settings[flag] = run_settings(args, model_path(args.model), translator.casing is not None,
                                          records=flag == "--jsonl")  # fmt: skip
    except OSError as err:
        fail("translate", f"cannot read {err.filename}: {err.strerror or one_line(err)}")
    if not (args.sentences or args.resume or args.demo or _typed()):  # before an output is opened (so emptied, or
        args.stdin_rest = _first_input_read(translator, args)  # a page's temporary file made)
    report = None
    if args.html:
        from text_attn.translation.alignment_page import open_alignment_page

        named = args.model or f"bundled ({BUNDLED_MODEL.name})"  # no --model: the default (as caption --html says)
        named += "".join(f" + {m}" for m in args.ensemble or [])  # an ensemble: every model named
        try:
            report = open_alignment_page(args.html, translator, named)
        except OSError as err:
            fail("translate", f"cannot write --html {args.html}: {one_line(err)}")
    # before a file is touched: a refused resume changes none; the options first (they say why a file holds more
    # lines than stdin has inputs), then stdin read past the inputs done, then those inputs against the records
    checks = [check for flag, kept in settings.items() if (check := check_record(args, flag, kept))]
    if args.resume and not args.sentences:
        try:
            args.stdin_rest = skip_done(args, _stdin_inputs(translator, args))
        except OSError as err:
            fail("translate", _stdin_refused(err))
    for check in checks:
        check_inputs(args, check)
    for flag in settings:
        record = run_file(args.output if flag == "--output" else args.jsonl)
        try:  # nor a record that cannot be written (one refused after FILE was opened had emptied it)
            check_output(record)
        except OutputRefused as err:
            fail("translate", f"cannot write {record}: {err}")
    if getattr(args, "resume_note", None):  # one file ahead of the other: said once nothing refuses the resume
        print(f"translate: note: {args.resume_note}", file=sys.stderr)
    say_seed("translate", args)  # --sample's seed drawn for the run (or a resume's): once nothing refuses the options
    # a rerun without --resume starts a file afresh, as a shell's > would; said, as a forgotten --resume loses work
    # (caption's --jsonl says so too)
    files = (("--output", args.output), ("--jsonl", args.jsonl)) if not args.resume else ()
    replacing = [(flag, name) for flag, name in files if name and name != "-" and os.path.isfile(name)
                 and os.path.getsize(name)]  # fmt: skip
    try:
        out = open_stream(args.output, append=args.resume) if args.output else sys.stdout  # a link, FIFO: refused
        if args.demo and not args.output:
            out = io.StringIO()  # the demo prints each translation once, below, with its alignment
    except OSError as err:
        _refuse_opened(f"cannot write --output {args.output}: {one_line(err)}", report)
    for kept in settings.values():  # the inputs the file's lines translate: those skipped (none in a fresh run)
        kept["inputs"] = args.inputs_read.state()
    if "--output" in settings:
        try:
            record_run(args.output, settings["--output"])
        except OSError as err:
            _refuse_opened(f"cannot write {run_file(args.output)}: {one_line(err)}", out, report)
    align = None
    if args.alignments:
        try:
            align = open_stream(args.alignments)
        except OSError as err:
            _refuse_opened(f"cannot write --alignments {args.alignments}: {one_line(err)}", out, report)
    records = None
    if args.jsonl:  # '-': the records on stdout, in place of the plain lines unless --output has them
        try:
            records = sys.stdout if args.jsonl == "-" else open_stream(args.jsonl, append=args.resume)
            if args.json:
                records = JsonList(sys.stdout)  # closed (its "]" written) with the others, after Ctrl-C too
            if args.jsonl == "-" and not args.output:
                out = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (closed with the other outputs)
        except OSError as err:
            _refuse_opened(f"cannot write --jsonl {args.jsonl}: {one_line(err)}", out, report, align, records)
    if args.resume:  # both files open: only now is either cut back (one refused leaves the other whole)
        for flag, opened in (("--output", out), ("--jsonl", records)):
            cut_back(opened, args, flag)
    for flag, name in replacing:  # opened, so emptied: said now
        print(f"translate: {flag} {name} existed and is started afresh (--resume continues a file instead)",
              file=sys.stderr)  # fmt: skip
    if "--jsonl" in settings:
        try:
            record_run(args.jsonl, settings["--jsonl"])
        except OSError as err:
            _refuse_opened(f"cannot write {run_file(args.jsonl)}: {one_line(err)}", out, report, align, records)
    progress: dict[str, Any] = {}
    plots = _plot_writer(translator, args, progress)
    if args.paragraphs and not args.sentences and _typed():  # nothing is translated until a paragraph's blank line
        print("translate: --paragraphs: type a paragraph, then an empty line to translate it (Ctrl-D: the end)",
              file=sys.stderr)  # fmt: skip
    elif not args.sentences and _typed():  # the model loaded, waiting for a line: said, not a silent cursor
        language = LANGUAGES.get(translator.source_lang or "")  # None: a language the file does not name
        print(f"translate: type a sentence{f' in {language}' if language else ''} and press Enter to translate it "
              "(Ctrl-D: the end)", file=sys.stderr)  # fmt: skip
    interrupted, broken, complete, page_lost = 0, None, False, False
    try:
        failed, seen, results = _translate_stream(
            translator, args, out, report, progress, align, plots, records, settings
        )
        complete = True
    except KeyboardInterrupt as stop:  # Ctrl-C (130), SIGTERM (143): what was written stays whole, one line
        interrupted = 143 if isinstance(stop, Terminated) else 130
    except OSError as err:  # an output could not be written mid-run, or stdin read: what was written stays whole
        broken = err
    finally:
        if out is not sys.stdout:
            close_quietly(out)
        if align is not None:
            close_quietly(align)
        if records is not None and records is not sys.stdout:
            close_quietly(records)
        if report is not None:  # the page of the sentences written, whole; where the run stopped early, it says so
            page_lost = not _close_page(report, args, progress, None if complete else "interrupted" if interrupted
                                        else "error")  # fmt: skip
    _print_notes(translator, args, progress)  # after Ctrl-C too: about the translations that were written
    if plots is not None and (interrupted or broken is not None or seen):  # the pictures of what was written
        plots.finish(several=len(args.sentences) > 1 if args.sentences else progress.get("read", 0) > 1)
    if broken is not None:
        _stream_failed(args, broken, progress.get("done", 0))
    if not interrupted:
        closing_notes(args, progress, progress.get("done", 0))
    # Ctrl-C: the sentences written are scored (and --scores written), and the line says it is only those
    score_run(args, progress, progress.get("done", 0), translator.codec.lowercased, interrupted)
    if interrupted:
        print(f"translate: interrupted after {_written(args, progress)}", file=sys.stderr)
        raise SystemExit(interrupted)
    if not seen:
        fail("translate", "no input: give sentences as arguments or on stdin")
    if args.demo:
        for k, ((_, tr), source) in enumerate(zip(results, DEMO_SENTENCES, strict=True)):
            lines = [f"  {line}" for line in word_alignment(translator, tr)]
            emit("translate", "\n".join([f"{chr(10) if k else ''}{source}", tr.text, *lines]))
    if page_lost:
        raise SystemExit(2)
    return 1 if failed else 0


def _keep_records(args: argparse.Namespace, settings: dict[str, dict[str, Any]]) -> None:
    """Each continued file's FILE.run.json rewritten with the digest of the inputs written so far (a batch more)."""
    for flag, kept in settings.items():
        kept["inputs"] = args.inputs_read.state()
        output = args.output if flag == "--output" else args.jsonl
        with failing_as(str(run_file(output))):
            record_run(output, kept)


def _refuse_opened(message: str, *opened) -> NoReturn:
    """One line refusing an output that cannot be written, the outputs opened before it closed first (stdout stays
    open: the interpreter's own)."""
    for stream in opened:
        if stream is not None and stream is not sys.stdout:
            stream.close()
    fail("translate", message)


def _plot_writer(translator, args: argparse.Namespace, progress: dict[str, Any]):
    """--plot's pictures, drawn as each batch is written (plot_files.PlotWriter); None without --plot (--demo: none)."""
    if not args.plot or args.demo:
        return None
    from text_attn.translation.plot_files import PlotWriter

    evidence = (lambda n, tr: evidence_of_input(translator, tr, progress, n)) if args.evidence else None
    return PlotWriter(args.plot, translator.net, evidence)


# measured: 0.75 s of a 4.3 s ``translate SENTENCE`` is the teardown it skips
main = leaving(translate_main)
