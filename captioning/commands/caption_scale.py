"""``caption SOURCES --jsonl OUT --devices N [--num-nodes M] [--resume]``: captioning on N processes per machine (N
GPUs, or N CPU processes with gloo), on Lightning's predict loop, as training runs on its fit loop; Lightning's own
launcher starts the processes, or torchrun / SLURM do (docs/scale.md).

What it adds to the one-process run is only the loop and the part files: each batch is read by the same
captioning.photos.photo_stream reader and captioned by the same ``caption_batch.caption_batch``
as without ``--devices``.

- Each process takes its share of the photos (photo_stream.owner: shards whole when there are at least as many as
  processes); every photo carries its id (source, sample), so nothing relies on the loop's batch indices.
- Nothing inside the loop waits on another process: shares are uneven, and a collective call inside predict would
  hang a process whose share ran out. The only waits are one barrier before the loop (the parts folder ready) and one
  after it (every part written).
- Each process appends its rows to its own part in ``OUT.parts/`` (text_attn.core.part_files), a batch at a time;
  after the loop the first process merges the parts by id into OUT (atomically: OUT is the old file or the whole new
  one) and removes the folder. OUT is then record for record what one process writes (beam search and greedy
  decoding; ``--sample`` draws per process).
- ``--resume``: the photos a part or OUT already holds are skipped (OUT's records are carried over by name), the
  failed ones tried again; the finished OUT equals an uninterrupted run's.
- Progress: the first process shows one bar counting the rows every process has written (it reads the parts'
  sizes; no process is asked); with stderr not a terminal, one line a minute instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shutil
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import BasePredictionWriter

from captioning.commands.caption_batch import (
    OverlayNames,
    _closing_notes,
    caption_batch,
    drawn_overlays,
    overlay_tail,
    record_line,
)
from captioning.commands.caption_limits import stopped_by
from captioning.commands.caption_run import check_resume
from captioning.commands.process_start import loop_started
from captioning.photos.collection import ResumeError, captioned_lines, done_in, image_key
from captioning.photos.photo_stream import Id, IdIn, NameIn, PhotoStream, owner, photo_batches
from captioning.photos.shards import is_shard
from text_attn.core import ddp_sigterm
from text_attn.core.drawn_seed import say_seed
from text_attn.core.errors import fail, one_line
from text_attn.core.part_files import (
    LineCounter,
    PartError,
    PartWriter,
    Row,
    held_ids,
    merge_parts,
    part_files,
    read_rows,
)
from text_attn.core.run_record import record_run
from text_attn.core.safe_files import write_text
from text_attn.core.search_options import search_options
from text_attn.core.sigterm import Terminated, sigterm_interrupts
from text_attn.core.unsure_options import NAMED

MANIFEST = "inputs.json"  # in OUT.parts/: the inputs the parts' ids index (a resume must give the same ones)


def parts_folder(jsonl: str | Path) -> Path:
    return Path(f"{jsonl}.parts")


def out_records(jsonl: Path, lines: bool = True) -> dict[str, str | None]:
    """The records an earlier OUT holds, by image key (:func:`collection.image_key`) -> its line (None without
    ``lines``: the keys are all a process needs to skip them); failed records and a torn last line are left out
    (:func:`collection.captioned_lines`). Read only (every process reads it). A line that is not a caption record:
    ResumeError."""
    return {key: line if lines else None for key, line in captioned_lines(jsonl)}


class CaptionPredictor(pl.LightningModule):
    """One process's captioning: its share of the photos (predict_dataloader) and per batch the rows for its part
    (predict_step: caption_batch.caption_batch's records, by id). ``captioner.model`` is a submodule, so Lightning puts
    it on this process's device."""

    def __init__(self, captioner, args: argparse.Namespace, sources: list[str], total: int | None = None):
        super().__init__()
        self.total, self.progress = total, None  # total: photos in the input, when known before reading
        self.captioner, self.args, self.sources = captioner, args, sources
        self.model = captioner.model
        # a shard member's overlay named by its shard too: processes cannot see each other's names
        self.names = OverlayNames(sources, drawn_overlays(args), by_shard=True, tail=overlay_tail(args))
        self.options = search_options(args)
        self.parts = parts_folder(args.jsonl)
        self.done: set[Id] = set()
        self.held: set[str] = set()
        self.counts = {"failed": 0, "cut": 0, "far": 0, "unsure": 0, "unsure_words": 0}
        # this process's first NAMED (id, name) of the captions cut off and the images out of the domain, for the notes
        self.first: dict[str, list[tuple[Id, str]]] = {"cut": [], "far": []}
        self.earlier: list[Path] = []  # parts of earlier runs (not counted by this run's bar)
        self.captioning = 0  # the photos of the batch being captioned; 0 while the loader reads

    def setup(self, stage: str) -> None:
        if self.args.threads:  # Lightning's launcher gave each process its own share of the cores: the user's wins
            torch.set_num_threads(self.args.threads)
        rank, parts, jsonl = self.global_rank, self.parts, Path(self.args.jsonl)
        manifest = [str(Path(s).absolute()) for s in self.sources]
        settings = getattr(self.args, "run_settings", None)  # what the records are made with (caption_run)
        if parts.is_symlink() or (parts.exists() and not parts.is_dir()):  # a planted link was written through: the
            # records went where it pointed (and a --resume read what was planted there)
            what = "a symbolic link" if parts.is_symlink() else "a file"
            _stop(rank, f"cannot use --jsonl {jsonl}: {parts} is {what}, not the parts folder a run makes; remove it")
        try:
            if self.args.resume and settings is not None and (refused := check_resume(jsonl, settings, rank == 0)):
                _stop(rank, refused)
            if self.args.resume and rank == 0:  # the --sample seed taken or drawn: said once the resume passed
                say_seed("caption", self.args)
            if self.args.resume:  # every process reads what is done; none writes before the barrier
                old = parts / MANIFEST
                if old.is_file() and json.loads(old.read_text(encoding="utf-8")) != manifest:
                    _stop(rank, f"{parts} holds the parts of a run over other inputs: give the same inputs to "
                          "--resume, or remove the folder to start afresh")  # fmt: skip
                self.earlier = part_files(parts)
                mine = owner(self.sources, self.trainer.world_size)
                self.done = held_ids(parts, keep=lambda i: mine(i) == rank)  # this process's share only
                self.held = set(out_records(jsonl, lines=False))
                # the photos OUT holds take no overlay name (as the one-process run's: a new one was numbered past)
                self.names = OverlayNames(self.sources, drawn_overlays(self.args), by_shard=True,
                                          tail=overlay_tail(self.args), done=self.held)  # fmt: skip
                if rank == 0 and (n := _already(self.sources, self.held, self.earlier)):
                    print(f"caption: {n} image(s) already in {jsonl} or {parts}: skipped", file=sys.stderr)
                if rank == 0 and not old.is_file():
                    parts.mkdir(parents=True, exist_ok=True)
                    write_text(old, json.dumps(manifest))
            elif rank == 0:  # a fresh run: the first process empties the folder, the others wait at the barrier
                if parts.exists():
                    shutil.rmtree(parts)
                    print(f"caption: {parts} held an earlier run's parts: started afresh (--resume continues "
                          "one)", file=sys.stderr)  # fmt: skip
                if jsonl.is_file() and jsonl.stat().st_size:
                    print(f"caption: --jsonl {jsonl} existed and is started afresh (--resume continues a file "
                          "instead)", file=sys.stderr)  # fmt: skip
                parts.mkdir(parents=True)
                write_text(parts / MANIFEST, json.dumps(manifest))
            if rank == 0 and settings is not None:
                record_run(jsonl, settings)
        except (OSError, UnicodeDecodeError, ValueError, PartError, ResumeError) as err:
            _stop(rank, f"cannot use --jsonl {jsonl} ({parts}): {one_line(err, 300)}")
        self.trainer.strategy.barrier("caption: parts folder ready")  # before the loop: every process reaches it

    def on_predict_start(self) -> None:
        loop_started()  # a process started early says its own errors from here on (captioning.commands.process_start)
        if self.global_rank == 0:  # one bar, every process's rows (Progress)
            todo = None if self.total is None or self.args.resume else self.total  # resumed: left to do unknown
            self.progress = Progress(self.parts, self.earlier, todo).__enter__()

    def predict_dataloader(self):
        done, held = self.done, self.held
        stream = PhotoStream(
            self.sources,
            self.captioner.preprocess,
            self.args.batch_size,
            keep=bool(self.args.overlay),
            rank=self.global_rank,
            world=self.trainer.world_size,
            skip=IdIn(done) if done else None,  # not lambdas: the stream is pickled to workers under spawn
            held=NameIn(held) if held else None,
            raw=self.args.decode_on_device,
        )
        return photo_batches(stream, self.args.workers)

    def transfer_batch_to_device(self, batch: Any, device: Any, dataloader_idx: int) -> Any:
        # The batch stays as the loader made it: the captioner moves its one stacked tensor to the device (Lightning
        # would move each item's row on its own and drop the stacked tensor, so each batch was stacked again here),
        # and JPEG bytes for --decode-on-device must stay on the host for the decoder.
        return batch

    def predict_step(self, batch: list[dict[str, Any]], batch_idx: int) -> list[Row]:
        fresh = [it for it in batch if not it.get("held")]
        self.captioning = len(fresh)  # for the line an exception here gets (caption_limits); 0 again at the end
        stacked = getattr(batch, "tensor", None)  # the fresh photos' tensors (held ones have none)
        records = iter(caption_batch(self.captioner, fresh, self.args, self.options, self.names, stacked) if fresh
                       else [])  # fmt: skip
        rows = []
        for it in batch:  # in id order: photo_stream yields them so
            if it.get("held"):
                rows.append(Row(it["id"], "held", image_key(it["name"])))
                continue
            rec = next(records)
            self.counts["failed"] += rec["error"] is not None
            for kind, flagged in (("cut", rec["truncated"]), ("far", rec["out_of_domain"])):
                self.counts[kind] += bool(flagged)
                if flagged and len(self.first[kind]) < NAMED:
                    self.first[kind].append((it["id"], rec["image"]))
            self.counts["unsure"] += bool(rec.get("unsure"))  # --unsure: counted, named by the records alone
            self.counts["unsure_words"] += len(rec.get("unsure") or ())
            rows.append(Row(it["id"], "retry" if rec["error"] else "ok", record_line(rec)))
        self.captioning = 0
        return rows


class PartFileWriter(BasePredictionWriter):
    """Each process's rows into its own part, a batch at a time (no process waits on another)."""

    def __init__(self, parts: Path):
        super().__init__(write_interval="batch")
        self.parts, self.part = parts, None
        self.interrupted = 0  # Ctrl-C (130) or SIGTERM (143) reached this process: Lightning then exits with 1

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx):
        try:
            if self.part is None:  # a process with nothing to do writes no part
                self.part = PartWriter(self.parts, trainer.global_rank)
            self.part.write(prediction)
        except OSError as err:  # a full disk, the folder gone: this process says why (it alone knows) and ends
            where = self.part.path if self.part is not None else self.parts
            fail("caption", f"cannot write {where}: {one_line(err)}; --resume continues after the photos {self.parts} "
                 "holds")  # fmt: skip

    def on_predict_end(self, trainer, pl_module) -> None:
        if self.part is not None:
            self.part.close()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if self.part is not None and self.part._file is not None:  # what was written stays: --resume reads it
            self.part._file.flush()
        if isinstance(exception, KeyboardInterrupt):
            self.interrupted = 143 if isinstance(exception, Terminated) else 130  # SIGTERM's code, or Ctrl-C's
        if isinstance(exception, KeyboardInterrupt) and trainer.global_rank == 0:
            print(f"caption: interrupted; {self.parts} holds what was captioned: --resume continues",
                  file=sys.stderr)  # fmt: skip


PROGRESS_THREAD = "caption-progress"


class Progress:
    """The first process's view of every process's progress: rows in the parts folder, polled. A bar on a terminal,
    else one line a minute."""

    def __init__(self, parts: Path, earlier: list[Path], total: int | None):
        self.count, self.total = LineCounter(parts, earlier), total
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=PROGRESS_THREAD)

    def _run(self) -> None:
        from tqdm.auto import tqdm

        tty = sys.stderr.isatty()
        bar = tqdm(total=self.total, unit="img", desc="captioning (all processes)", file=sys.stderr, disable=not tty)
        start = last = time.monotonic()
        while True:
            stopped = self.stop.wait(0.5)
            n = self.count()
            bar.update(n - bar.n)
            if not tty and time.monotonic() - last >= 60:
                last = time.monotonic()
                rate = n / (last - start)
                print(f"caption: {n} image(s) captioned by all processes ({rate:.1f}/s)", file=sys.stderr)
            if stopped:
                break
        bar.close()

    def __enter__(self) -> Progress:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def _already(sources: list[str], held: set[str], parts: list[Path]) -> int:
    """What a resumed run skips, as the one-process run says it: the inputs OUT holds (by image key) and the photos
    an interrupted run's parts hold captioned (``ok`` rows, every process's; a ``held`` row is one of OUT's)."""
    captioned = {row.id for path in parts for row in read_rows(path) if row.kind == "ok"}
    return done_in(sources, held) + len(captioned)


def _stop(rank: int, message: str) -> None:
    """End every process the same way; the first says why (the others would repeat it)."""
    if rank == 0:
        fail("caption", message)
    raise SystemExit(2)


@contextlib.contextmanager
def _quiet_lightning():
    """Lightning's start-up lines (devices found, ranks initialised) are not the command's output; the loggers and
    warning filters are as they were after the run (a notebook or a test goes on in the same process)."""
    names = ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "lightning.fabric")
    levels = {name: logging.getLogger(name).level for name in names}
    with warnings.catch_warnings():
        for name in names:
            logging.getLogger(name).setLevel(logging.WARNING)
        warnings.filterwarnings("ignore", module="pytorch_lightning")
        warnings.filterwarnings("ignore", module="lightning_fabric")
        try:
            yield
        finally:
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)


def _first_named(first: dict[str, list[tuple[Id, str]]]) -> dict[str, list[str]]:
    """Of each kind, the first NAMED names of every process's first NAMED (id, name), in input order (ids are
    (source, sample) indexes); every process calls it: the lists are gathered from all of them."""
    gathered = [first]
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        gathered = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(gathered, first)
    return {kind: [name for _, name in sorted(p for each in gathered for p in each[kind])[:NAMED]] for kind in first}


def caption_on_processes(captioner, args: argparse.Namespace, sources: list[str], empty: list[str]) -> int:
    """The run (every process calls it): the loop on Lightning, then on the first process the merge into OUT and the
    notes. The exit code: 0, or 1 when a photo failed or a folder held none."""
    with _quiet_lightning():
        return _run(captioner, args, sources, empty)


def _run(captioner, args: argparse.Namespace, sources: list[str], empty: list[str]) -> int:
    accelerator = "cpu" if args.device == "cpu" else "gpu" if args.device.startswith("cuda") else args.device
    processes = args.devices * args.num_nodes
    writer = PartFileWriter(parts_folder(args.jsonl))
    try:
        trainer = pl.Trainer(
            accelerator=accelerator,
            devices=args.devices,
            num_nodes=args.num_nodes,
            strategy="ddp" if processes > 1 else "auto",
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            use_distributed_sampler=False,  # photo_stream shares the photos out itself, whole shards included
            callbacks=[writer],
        )
    except Exception as err:  # no GPU for --device cuda, more devices than the machine has, ...
        fail("caption", f"cannot run on {args.devices} x {args.device} (--devices, --device): {one_line(err)}")
    cluster = getattr(trainer.strategy, "cluster_environment", None)
    try:  # the launcher's numbers against ours (SLURM's --ntasks-per-node against --devices): Lightning checks them
        if cluster is not None:  # only as predict starts, and its ValueError came out as a traceback
            cluster.validate_settings(num_devices=args.devices, num_nodes=args.num_nodes)
    except ValueError as err:
        fail("caption", f"--devices {args.devices} --num-nodes {args.num_nodes} do not match how the processes are "
                        f"started: {one_line(err)} (--devices is devices there, --num-nodes num_nodes)")  # fmt: skip
    total = None if any(is_shard(s) for s in sources) else len(sources)  # a shard's size is known once read
    module = CaptionPredictor(captioner, args, sources, total)
    # a SIGTERM (kill, a scheduler's limit) stops the run as Ctrl-C does: Lightning's handler broadcast inside the
    # handler, which met the other process's barrier or collective and hung both for good (SIGKILL alone ended them)
    ddp_sigterm.keep_collectives_out_of_the_handler()
    try:
        with sigterm_interrupts():
            trainer.predict(module, return_predictions=False)
    except BaseException as err:
        # the progress thread ends with the run however it ends: left polling, an in-process caller's stderr got
        # "0 image(s) captioned by all processes" a minute after an interrupted run
        if module.progress is not None:
            module.progress.__exit__()
        if isinstance(err, SystemExit) and writer.interrupted:  # Lightning's exit(1) after Ctrl-C: 130 (SIGTERM:
            raise SystemExit(writer.interrupted) from None  # 143), as every command's interrupted run
        stopped = stopped_by(err, module.captioning, reading=not module.captioning) if isinstance(err, Exception) \
            else None  # fmt: skip
        if stopped is None:
            raise
        # out of memory or fds, a worker's batch lost: this process says so (it alone knows)
        fail("caption", f"{stopped}; --resume continues after the photos {parts_folder(args.jsonl)} holds")
    trainer.strategy.barrier("caption: every part written")  # after the loop: uneven shares are all done here
    if module.progress is not None:
        module.progress.__exit__()
    # every process's counts summed, for the first to print one set of notes (after the loop: no rank can miss it)
    names = ("cut", "far", "unsure", "unsure_words")
    counts = torch.tensor([module.counts[k] for k in names], device=trainer.strategy.root_device)
    cut, far, unsure, unsure_words = (int(n) for n in trainer.strategy.reduce(counts, reduce_op="sum").tolist())
    first = _first_named(module.first)
    if trainer.global_rank != 0:
        return 0
    jsonl = Path(args.jsonl)
    parts = parts_folder(jsonl)
    try:
        earlier = out_records(jsonl) if args.resume else {}
        merged = merge_parts(parts, jsonl, held=earlier.get)
        shutil.rmtree(parts)
    except (OSError, PartError, ResumeError, UnicodeDecodeError) as err:
        fail("caption", f"cannot merge {parts} into --jsonl {jsonl}: {one_line(err, 300)}; --resume merges again")
    notes = {"cut": cut, "far": far, "cut_first": first["cut"], "far_first": first["far"]}
    _closing_notes(captioner, args, notes, {"unsure": unsure, "unsure_words": unsure_words})
    if args.references:
        from captioning.commands.caption_scores import records_of, score_run

        score_run(args, records_of(jsonl))
    return 1 if merged.failed or empty else 0
