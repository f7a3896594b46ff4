"""``caption``'s one-process loop: photos read and prepared by DataLoader workers, captioned a batch at a time
(captioning.commands.caption_batch), written to stdout, ``--json``, ``--jsonl`` (``--resume``) and ``--html`` as
batches finish; Ctrl-C leaves what is written whole. (``--devices``: captioning.commands.caption_scale.)"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from captioning.commands.caption_batch import (
    OverlayNames,
    _close_html,
    _closing_notes,
    _open_html,
    caption_batch,
    drawn_overlays,
    html_sections,
    overlay_tail,
    record_line,
    stdout_lines,
    tally,
)
from captioning.commands.caption_run import check_resume
from text_attn.core.cpu_load import cpu_ids
from text_attn.core.drawn_seed import say_seed
from text_attn.core.errors import close_quietly, emit, fail, one_line
from text_attn.core.run_record import record_run, run_file
from text_attn.core.safe_files import check_output, open_stream, probe_writable, release_held_on_exit
from text_attn.core.search_options import search_options
from text_attn.core.sigterm import Terminated, interrupts_held, sigterm_interrupts
from text_attn.core.unsure_options import count_unsure


def _caption_paths(captioner, args: argparse.Namespace, paths: list[str], empty: list[str]) -> int:
    from tqdm.auto import tqdm

    from captioning.commands.caption_limits import stopped_by  # now: with no file descriptor left it could not load
    from captioning.photos.collection import ResumeError, done_in, image_key, read_done
    from captioning.photos.photo_stream import NameIn, PhotoStream, photo_batches
    from captioning.photos.shards import is_shard

    if args.overlay:
        if Path(args.overlay).exists() and not Path(args.overlay).is_dir():
            fail("caption", f"--overlay {args.overlay} is a file: --overlay names the folder the PNGs go to")
        try:
            Path(args.overlay).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            fail("caption", f"cannot create --overlay directory {args.overlay}: {err.strerror or one_line(err)}")
        try:  # a folder that exists but cannot be written: one line now, not one error an image later
            probe_writable(args.overlay)
        except OSError as err:
            fail("caption", f"cannot write into --overlay directory {args.overlay}: {one_line(err)}")
    settings = getattr(args, "run_settings", None)  # with --jsonl: what the records are made with (caption_run)
    if args.resume and settings is not None:  # before anything is written: a refused resume changes no file
        try:
            refused = check_resume(args.jsonl, settings)
        except (OSError, ValueError) as err:
            fail("caption", f"cannot use --jsonl {args.jsonl}: {one_line(err, 300)}")
        if refused:
            fail("caption", refused)
        say_seed("caption", args)  # the --sample seed taken or drawn: said once the resume is not refused
    report = _open_html(captioner, args)  # before --jsonl: a bad --html must not have emptied FILE
    out, done = None, set()
    shards = any(is_shard(p) for p in paths)
    if args.jsonl:
        jsonl = Path(args.jsonl)
        # a rerun without --resume starts FILE afresh, as a shell's > would; say so, as a forgotten --resume loses work
        replacing = not args.resume and jsonl.is_file() and jsonl.stat().st_size > 0
        try:
            done = read_done(jsonl) if args.resume else set()
            if settings is not None:  # its record's path first: one refused after FILE was opened had emptied it
                check_output(run_file(jsonl))
            out = open_stream(jsonl, append=args.resume)  # a link, FIFO or device is refused (safe_files)
            if settings is not None:
                record_run(jsonl, settings)
        except (OSError, UnicodeDecodeError, ResumeError) as err:
            if report is not None:
                report.close()
            fail("caption", f"cannot use --jsonl {jsonl}: {one_line(err, 300)}")
        if replacing:
            print(f"caption: --jsonl {jsonl} existed and is started afresh (--resume continues a file instead)",
                  file=sys.stderr)  # fmt: skip
        held = done_in(paths, done)
        if not held and (lost := _elsewhere(paths, done)):
            if report is not None:
                report.close()
            fail("caption", f"--resume: {jsonl} names its photos by the paths its first run was given, which are not "
                 f"found from here (it holds {_relative(lost) or lost}); run from the folder that run ran in (from "
                 "here each would be captioned again)")  # fmt: skip
        if held:
            print(f"caption: {held} image(s) already in {jsonl}: skipped", file=sys.stderr)
    todo = None if shards else sum(image_key(p) not in done for p in paths)  # a shard's size is known once read
    several = len(paths) > 1 or shards or not one_file_named(args.images)
    # a batch no larger than the photos to do: the loader keeps a list of the batch's size (--batch-size 10**9 filled
    # 17 GB before its first photo), and the captions are the same at any batch size
    batch_size = min(args.batch_size, max(1, todo)) if todo is not None else args.batch_size
    batches = -(-todo // batch_size) if todo is not None else 2
    # starting processes is not worth it for one batch; nor more of them than batches (--workers 40, 37 photos: ~30
    # processes, 3x slower)
    workers = (args.workers if todo is None else min(args.workers, batches)) if batches > 1 else 0  # shards: unknown
    # the CPUs this process may use (a cpuset's), as torch counts them; torch's warning said it twice
    if workers > (cores := len(cpu_ids())):
        print(f"caption: note: --workers {workers} on {cores} core(s): the workers share the cores (more workers than "
              "cores seldom reads faster)", file=sys.stderr)  # fmt: skip
    keep = bool(args.overlay or args.html)  # the decoded images, for overlays and the page's pictures
    skip = NameIn(done) if done else None  # not a lambda: the stream is pickled to workers under spawn
    stream = PhotoStream(paths, captioner.preprocess, batch_size, keep, skip=skip, raw=args.decode_on_device)
    loader = photo_batches(stream, workers)
    quiet = batches <= 1 or not sys.stderr.isatty()  # a bar is for a person watching, not for a log file
    bar = tqdm(total=todo, unit="img", desc="captioning", disable=quiet, file=sys.stderr)
    names = OverlayNames(paths, drawn_overlays(args), tail=overlay_tail(args), done=done)
    options = search_options(args)
    records, failed, finished, interrupted = [], 0, 0, 0
    counts: dict = {}  # the captions cut off at --max-len and the images out of the domain (caption_batch.tally)
    unsure: dict = {}  # --unsure: the captions holding words under its threshold (caption_unsure.count_unsure)
    captions: dict[str, str] = {}  # image -> caption, for --references (with --jsonl, FILE is read at the end)
    if workers:
        _drop_handover_noise()
    stopped, size, complete = None, 0, False  # size: the batch being captioned; 0 while the loader reads
    page_lost = False  # --html could not be finished (its old page, if any, kept)
    terminating = contextlib.ExitStack()  # SIGTERM (a scheduler's limit) as Ctrl-C: it ended the run unsaid
    terminating.enter_context(sigterm_interrupts())
    try:
        for items in loader:
            size = len(items)
            batch = caption_batch(captioner, items, args, options, names)
            # the batch's page sections made first (thumbnails encoded), then the page and the records written
            # together, Ctrl-C held meanwhile: the page held photos --jsonl did not after a Ctrl-C between them
            sections = html_sections(report, items, batch, getattr(args, "unsure", None)) if report else []
            with interrupts_held():
                failed += sum(bool(rec["error"]) for rec in batch)
                if report is not None:
                    try:
                        for section in sections:
                            report.add(section)
                    except OSError as err:  # disk full, the file or its folder gone: what was written stays readable
                        report = None
                        fail("caption", f"cannot write --html {args.html}: {one_line(err)}")
                if out is not None:
                    try:
                        out.write("".join(record_line(rec) + "\n" for rec in batch))
                        out.flush()
                    except OSError as err:  # the records before stay whole; a torn last line is dropped by --resume
                        close_quietly(out)
                        out = None
                        fail("caption", f"cannot write --jsonl {args.jsonl}: {one_line(err)}; --resume continues "
                             "after the images it holds")  # fmt: skip
                elif args.json:
                    records += batch
                else:
                    for rec in batch:
                        for line in stdout_lines(rec, several, args):  # --jsonl -: the record's line
                            emit("caption", line)  # a name or word with a line break or tab cannot forge a line
                if args.references and not args.jsonl:
                    captions.update((rec["image"], rec["caption"]) for rec in batch if rec["caption"] is not None)
                finished += len(items)  # written: what the notes and the interrupted line count
            for rec in batch:
                if rec["truncated"]:
                    tally(counts, "cut", rec["image"])
                if rec["out_of_domain"]:
                    tally(counts, "far", rec["image"])
                count_unsure(unsure, rec["image"], rec.get("unsure") or ())
            bar.update(len(items))
            size = 0
        complete = True
    except KeyboardInterrupt as stop:  # Ctrl-C: what is written stays whole (each batch is flushed), one line
        # The loader's workers already stopped as this unwound; a broken handover's thread traceback is dropped by
        # the hook _drop_handover_noise set before the loop (a thread's error never reaches sys.excepthook).
        interrupted = 143 if isinstance(stop, Terminated) else 130  # the exit code: SIGTERM's, SIGINT's
    except Exception as err:  # out of memory or fds, a worker's batch lost: one line, once the outputs are closed
        stopped = stopped_by(err, size, reading=not size)
        if stopped is None:
            raise
    finally:
        terminating.close()
        bar.close()
        if out is not None:
            close_quietly(out)
        if report is not None:
            try:
                # a run that stopped early (Ctrl-C, an error, an output that failed): the page of the images
                # captioned, whole, saying it is partial
                why = "the run was interrupted" if interrupted else "the run stopped on an error"
                partial = None if complete else f"{why} after {finished} image(s); the images after them are not here"
                _close_html(report, failed, partial)
            except OSError as err:  # the run's exit code says it (it was 0: a script took the page as written)
                print(f"caption: error: cannot finish --html {args.html}: {one_line(err)}", file=sys.stderr)
                page_lost = True
    if stopped is not None:
        if args.json and not args.jsonl:  # the records of the images captioned are not lost with the run
            emit("caption", json.dumps(records))
        where = f" in {args.jsonl}: --resume continues after them" if args.jsonl else ""
        fail("caption", f"{stopped}; stopped after {finished + len(done)} image(s){where}")  # FILE's, not this run's
    if interrupted:
        if args.json and not args.jsonl:  # --json prints its records at the end: those captioned are not lost either
            emit("caption", json.dumps(records))
        _closing_notes(captioner, args, counts, unsure)  # about the captions that were written
        where = f" in {args.jsonl}; --resume continues after them" if args.jsonl else ""
        if failed:  # their records say the error: a --resume tries them again (the count said they were done)
            where += f" ({failed} failed: {'--resume tries them again' if args.jsonl else 'see the lines above'})"
        # with --resume, the images FILE held already count: the line named this run's alone
        print(f"caption: interrupted after {finished + len(done)} image(s){where}", file=sys.stderr)
        if workers:
            # The outputs are closed and flushed; leave now. A normal exit would tear down the loader's worker
            # processes while multiprocessing's fd-sharing thread may be mid-handshake with one of them, and that
            # thread then prints a traceback (seen once in three CI runs of the SIGINT test).
            sys.stdout.flush()
            sys.stderr.flush()
            release_held_on_exit()  # os._exit skips caption_main's release: the outputs' lock files go now
            os._exit(interrupted)
        raise SystemExit(interrupted)
    if args.json:
        emit("caption", json.dumps(records))
    _closing_notes(captioner, args, counts, unsure)
    if args.references:
        from captioning.commands.caption_scores import records_of, score_run

        score_run(args, records_of(args.jsonl) if args.jsonl else captions)
    if page_lost:
        raise SystemExit(2)
    return 1 if failed or empty else 0


def one_file_named(images: list[str]) -> bool:
    """Whether the plain output is the bare caption: one file named on the command line, as grep with one file. A
    folder or ``-`` (paths on stdin) gives ``path<TAB>caption`` however many photos it held: a script reading
    ``caption DIR`` or ``find ... | caption -`` got a bare caption when the folder held one photo."""
    return len(images) == 1 and images[0] != "-" and not os.path.isdir(images[0])


def _relative(path: str) -> str | None:
    """``path`` from the working folder; None on Windows where it is on another drive (relpath raises there)."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return None


def _elsewhere(paths: list[str], done: set[str]) -> str | None:
    """A record of ``done`` that names no file from this working directory while an input ends with its very path
    (the record "photos/a.jpg": no such file here, and an input is ../first/photos/a.jpg): the sign of a --resume
    from another folder than the first run's, whose records keep relative paths as given; None where none does. (A
    new day's day2/IMG_0001.jpg beside a record of a deleted day1/IMG_0001.jpg is no such sign.)"""
    inputs: dict[str, list[tuple[str, ...]]] = {}
    for p in paths:
        parts = Path(os.path.abspath(p)).parts
        inputs.setdefault(parts[-1], []).append(parts)
    for key in sorted(done):
        rel = Path(_relative(key) or "").parts  # the record's path as the first run was given it
        if not rel or os.path.lexists(key) or ".." in rel:
            continue
        if any(parts[-len(rel) :] == rel for parts in inputs.get(rel[-1], ())):
            return key
    return None


def _drop_handover_noise() -> None:
    """A loader worker stopped by Ctrl-C while handing a batch over leaves multiprocessing's fd-sharing thread
    (resource_sharer._serve) with a broken connection, and its traceback would be printed as the loop unwinds, before
    the ``except KeyboardInterrupt`` runs. Only that thread's connection errors are dropped; any other goes on. Set
    once a process (a second caption_main in the same process keeps the one hook)."""
    import threading
    import traceback

    previous = threading.excepthook
    if getattr(previous, "drops_handover_noise", False):
        return

    def hook(args) -> None:
        # the thread's own target is gone by now (Thread.run deletes it): its traceback names the file
        frames = traceback.walk_tb(args.exc_traceback)
        sharer = any(frame.f_code.co_filename.endswith("resource_sharer.py") for frame, _ in frames)
        if not (sharer and isinstance(args.exc_value, (ConnectionError, EOFError))):
            previous(args)

    hook.drops_handover_noise = True
    threading.excepthook = hook
