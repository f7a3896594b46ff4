"""The photos ``caption`` reads, in input order, as one stream for one process or a share of it for each of many.

The input is a list of sources: image files and webdataset tar shards (captioning.photos.shards). Every photo has an id,
``(source index, sample index in the shard)`` (``(s, 0)`` for a file), so ids sort in input order whatever process
read them: the part files of a run over many processes merge back into the one process's order by id
(text_attn.core.part_files), and nothing depends on the loop's batch numbers.

Sharing (:func:`owner`): with ``world`` processes, files go round robin; shards go whole, round robin, when there are
at least as many shards as processes, else each shard's samples are dealt round robin. Inside a process, DataLoader
workers take whole batches in turn (worker w: batches w, w + n, ...), so the loader hands batches over in order.
"""

from __future__ import annotations

import errno
import functools
import multiprocessing
import multiprocessing.queues
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._utils import ExceptionWrapper
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from captioning.photos import collection
from captioning.photos.preprocess import Preprocess
from captioning.photos.shards import ShardNote, ShardSample, is_shard, iter_shard
from text_attn.core.errors import one_line

Id = tuple[int, int]  # (source index, sample index in the shard; 0 for a file)


def owner(sources: list[str], world: int) -> Callable[[Id], int]:
    """The rank that captions each id (see the module doc)."""
    shard_order = {s: k for k, s in enumerate(i for i, src in enumerate(sources) if is_shard(src))}
    file_order = {s: k for k, s in enumerate(i for i, src in enumerate(sources) if not is_shard(src))}
    whole = len(shard_order) >= world

    def rank_of(item: Id) -> int:
        s, m = item
        if s in file_order:
            return file_order[s] % world
        return shard_order[s] % world if whole else (shard_order[s] + m) % world

    return rank_of


# A stream's skip and held tests are module-level (a lambda cannot be pickled): under the spawn and forkserver start
# methods (macOS's default, Python 3.14's on Linux) the stream is pickled to each loader worker.
def _none(item: Id, name: str) -> bool:
    return False


class NameIn:
    """``(id, name) -> whether the photo's image_key(name) is in keys`` (caption --resume: photos its --jsonl holds)."""

    def __init__(self, keys: set[str]):
        self.keys = keys

    def __call__(self, item: Id, name: str) -> bool:
        return collection.image_key(name) in self.keys


class IdIn:
    """``(id, name) -> whether id is in ids`` (caption --devices --resume: photos the part files hold)."""

    def __init__(self, ids: set[Id]):
        self.ids = ids

    def __call__(self, item: Id, name: str) -> bool:
        return item in self.ids


class PhotoStream(IterableDataset):
    """This process's photos (``rank`` of ``world``), in id order, each read by :func:`collection.read_photo` into
    an item with its ``id``; a shard member's item also has its img2dataset ``key`` and its ``reference`` (the
    shard's caption, or None). ``skip(id, name)``: photos already captioned (resume), left out before anything is
    read; ``held(id, name)``: photos an earlier output holds, passed on unread as ``{"id", "name", "held": True}``
    (a run over many processes carries their records over by id). Batches of ``batch_size`` are dealt whole to the
    loader's workers."""

    def __init__(
        self,
        sources: list[str],
        preprocess: Preprocess,
        batch_size: int,
        keep: bool = False,
        rank: int = 0,
        world: int = 1,
        skip: Callable[[Id, str], bool] | None = None,
        held: Callable[[Id, str], bool] | None = None,
        raw: bool = False,
    ):
        self.sources, self.preprocess, self.batch_size, self.keep = sources, preprocess, batch_size, keep
        self.raw = raw  # baseline JPEGs only read, decoded on the model's device (caption --decode-on-device)
        self.rank, self.world = rank, world
        self.skip, self.held = skip or _none, held or _none

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rank_of, position = owner(self.sources, self.world), [0]
        asked, pending = [-1], []  # the last shard sample chosen() was asked about; held members not yet passed on

        def mine(item: Id, name: str) -> str | None:
            """ "read", "held" or None (not this worker's): this rank's, not skipped, and in one of this worker's
            batches (every worker walks the same list of this rank's photos to count positions; only its own are
            read)."""
            if rank_of(item) != self.rank or self.skip(item, name):
                return None
            p = position[0]
            position[0] += 1
            if (p // self.batch_size) % workers != worker:
                return None
            return "held" if self.held(item, name) else "read"

        for s, src in enumerate(self.sources):
            if not is_shard(src):
                what = mine((s, 0), src)
                if what == "held":
                    yield {"id": (s, 0), "name": src, "held": True}
                elif what == "read":
                    yield {"id": (s, 0), **collection.read_photo(src, src, self.preprocess, self.keep, self.raw)}
                continue
            asked[0] = -1

            def chosen(sample: ShardSample, s: int = s) -> bool:
                asked[0] = sample.index
                what = mine((s, sample.index), sample.name)
                if what == "held":  # passed on before the next sample read (ids stay in order)
                    pending.append({"id": (s, sample.index), "name": sample.name, "held": True})
                return what == "read"

            notes = _note if worker == 0 and rank_of((s, 0)) == self.rank else None  # one process says it
            for sample in iter_shard(src, lambda m, s=s: rank_of((s, m)) == self.rank, notes, chosen):
                yield from pending
                pending.clear()
                # a damaged region or an unreadable shard has no members to choose by: counted here instead
                if asked[0] != sample.index and mine((s, sample.index), sample.name) is None:
                    continue
                yield {"id": (s, sample.index), **self._member(sample)}
            yield from pending
            pending.clear()

    def _member(self, sample: ShardSample) -> dict[str, Any]:
        extra = {"key": sample.key or None, "reference": sample.text}  # None: the whole shard failed (no sample)
        if sample.error is not None:
            return {"name": sample.name, "tensor": None, "image": None, "error": sample.error, "note": None, **extra}
        return {**collection.read_photo(sample.name, sample.image, self.preprocess, self.keep, self.raw), **extra}


def _note(note: ShardNote) -> None:
    print(f"caption: note: {note}", file=sys.stderr)


class PhotoBatch(list):
    """A batch of items (a list, in id order) with ``tensor``: the prepared photos of the items that have one, stacked
    (n, 3, S, S), or None. Each such item's ``tensor`` is its row of it. Made in the loader's worker, so the main
    process receives one tensor a batch through shared memory, not one a photo (and stacks none: issue 65's profile,
    about 1 ms a photo of the main process)."""

    tensor: Any = None
    jpegs: Any = None  # the batch's JPEG files (caption --decode-on-device), one uint8 tensor; each item's a slice


def pack(items: list[dict[str, Any]]) -> PhotoBatch:
    """The loader's collate function (runs in its workers): the items, their tensors stacked once (and the bytes of
    JPEGs to decode on the device joined into one tensor)."""
    batch = PhotoBatch(items)
    rows = [it for it in items if it.get("tensor") is not None]
    if rows:
        batch.tensor = torch.stack([it["tensor"] for it in rows])  # (n, 3, S, S)
        for k, it in enumerate(rows):
            it["tensor"] = batch.tensor[k]  # a view: pickled with the batch's one storage
    files = [it for it in items if it.get("jpeg") is not None]
    if files:
        batch.jpegs = torch.cat([it["jpeg"] for it in files])  # (total bytes,)
        start = 0
        for it in files:
            n = it["jpeg"].numel()
            it["jpeg"] = batch.jpegs[start : start + n]  # a view of the one storage
            start += n
    return _shared(batch) if get_worker_info() is not None else batch


# Handing a batch over from a loader worker (issue: a small /dev/shm lost photos with exit 0, or hung).
# torch moves a batch's tensors into shared memory (/dev/shm) as the worker's queue thread pickles it. There a failure
# (/dev/shm full: "unable to allocate shared memory", no file descriptor left) is printed and the batch dropped; the
# loader then skips that batch once its worker ends (photos missing, exit 0) or, with every worker's batches lost,
# waits for ever. The file_system sharing strategy, a DataLoader timeout or a larger /dev/shm do not remove that: the
# first needs /dev/shm too, the second misfires on slow photos. So the memory is taken here, in the worker's own
# thread, where a failure can be answered: such a batch goes through the pipe instead (slower, said once), and
# anything the queue thread still cannot send reaches the main process as a HandoverError (_HandoverQueue).
def _shared(batch: PhotoBatch) -> Any:
    """``batch`` with its tensors in shared memory, or, where that memory cannot be had, a :class:`_Piped` copy."""
    try:
        for tensor in _tensors(batch):
            tensor.share_memory_()  # what the queue thread's pickling would do, here; a no-op for a view's storage
    except (RuntimeError, OSError) as err:
        return _Piped(batch, one_line(err, 300))
    return batch


def _tensors(batch: PhotoBatch) -> Iterator[torch.Tensor]:
    for t in (batch.tensor, batch.jpegs):
        if t is not None:
            yield t
    for it in batch:
        yield from (v for v in it.values() if isinstance(v, torch.Tensor))


class _Piped:
    """A batch's items with their tensors as numpy arrays, pickled by value (each photo's row once) to go through the
    loader's pipe rather than shared memory; in the main process :func:`_unpiped` makes them the batch again."""

    def __init__(self, batch: PhotoBatch, why: str):
        self.keys = [[k for k, v in it.items() if isinstance(v, torch.Tensor)] for it in batch]
        self.items = [
            {k: v.numpy() if k in ks else v for k, v in it.items()} for it, ks in zip(batch, self.keys, strict=True)
        ]
        self.why = why

    def __reduce__(self) -> tuple[Any, ...]:
        return _unpiped, (self.items, self.keys, self.why)


_said: list[str] = []  # the pipe's note, once a loader (photo_batches empties it)


def _unpiped(items: list[dict[str, Any]], keys: list[list[str]], why: str) -> PhotoBatch:
    if not _said:
        _said.append(why)
        full = "No space left on device" in why or "unable to allocate shared memory" in why
        what = "shared memory (/dev/shm) is full" if full else f"no shared memory for the photos ({why})"
        print(f"caption: note: {what}: photos come from the --workers processes through a pipe instead (slower); "
              "a larger /dev/shm (docker run --shm-size 1g) or --workers 0 avoids it", file=sys.stderr)  # fmt: skip
    for it, ks in zip(items, keys, strict=True):
        it.update((k, torch.from_numpy(it[k])) for k in ks)
    return pack(items)  # stacked again, here


class HandoverError(RuntimeError):
    """A loader worker could not hand a batch over (its queue thread could not pickle or send it): raised by the loader
    in the main process, where that batch was due. ``errno``: the cause's, if it had one."""

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno


class _Lost(ExceptionWrapper):
    """Sent in place of a batch the worker's queue thread could not send; the loader re-raises it (``reraise``)."""

    def __init__(self, err: BaseException):  # not ExceptionWrapper's: its message is a whole traceback
        self.reason, self.errno, self.where = one_line(err), getattr(err, "errno", None), "in a loader worker"

    def reraise(self) -> None:
        raise HandoverError(self.reason, self.errno)


class _HandoverQueue(multiprocessing.queues.Queue):
    """The loader's queues: the result queue's thread in a worker sends :class:`_Lost` for a batch it cannot send,
    where the standard queue prints a traceback and drops it (and the loader skips it or waits for ever)."""

    def _on_queue_feeder_error(self, e: Exception, obj: Any) -> None:
        if not (isinstance(obj, tuple) and len(obj) == 2 and not isinstance(obj[1], _Lost)):
            super()._on_queue_feeder_error(e, obj)
            return
        self._sem.acquire()  # as put() does; the queue thread released the lost batch's
        with self._notempty:  # first in line, where the batch was: the worker's end put after it must not pass it
            self._buffer.appendleft((obj[0], _Lost(e)))  # (batch index, batch) -> (batch index, why)
            self._notempty.notify()


def _context() -> multiprocessing.context.BaseContext:
    """The default start method's context, making :class:`_HandoverQueue` queues."""
    base = multiprocessing.get_context()

    class Context(type(base)):  # ForkContext, SpawnContext or ForkServerContext
        def Queue(self, maxsize: int = 0) -> _HandoverQueue:  # noqa: N802 - multiprocessing's name
            return _HandoverQueue(maxsize, ctx=self.get_context())

    return Context()


def photo_batches(stream: PhotoStream, workers: int) -> DataLoader:
    """Batches (:class:`PhotoBatch`: lists of items, in id order) of ``stream``, read by ``workers`` processes ahead
    of the model; a few batches in memory at any time, whatever the number of photos. A batch a worker cannot hand
    over comes through a pipe, or the loader raises :class:`HandoverError` where it was due (never lost, no hang)."""
    _said.clear()
    if workers:
        _quiet_half_made_loader()
    return _PhotoLoader(
        stream,
        batch_size=stream.batch_size,
        num_workers=workers,
        collate_fn=pack,
        prefetch_factor=2 if workers else None,
        multiprocessing_context=_context() if workers else None,
        worker_init_fn=functools.partial(_quiet_sharer, parent=os.getpid()) if workers else None,  # picklable: spawn
    )


class _PhotoLoader(DataLoader):
    """caption's loader: torch's advice when there are more workers than cores (twice, with its source line) is not
    given; caption's note says it (a filter of the warning stayed in the process after the run: a notebook's own
    loaders lost it)."""

    def check_worker_number_rationality(self) -> None:
        pass


def _quiet_sharer(worker: int, parent: int | None = None) -> None:
    """In a worker: the fd-sharing thread's broken connection (the main process stopped taking a batch, and says why
    itself: no file descriptor left) is not printed as a traceback; that thread reports through sys.excepthook."""
    _end_with_parent(parent)
    previous = sys.excepthook

    def hook(kind, value, tb) -> None:
        out_of_fds = issubclass(kind, OSError) and getattr(value, "errno", None) in (errno.EMFILE, errno.ENFILE)
        if not ((issubclass(kind, (ConnectionError, EOFError)) or out_of_fds) and _in_sharer(tb)):
            previous(kind, value, tb)

    sys.excepthook = hook


def _end_with_parent(parent: int | None) -> None:
    """In a worker, on Linux: SIGTERM when the process that started it (``parent``) ends (PR_SET_PDEATHSIG). A caption
    ended by a SIGTERM (a scheduler's stop: its handler ends it with os._exit) left its workers running, ~450 MB each,
    until torch's own check found the parent gone, which a worker blocked on a full queue did not do for minutes."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl (musl without it, a sandbox): torch's own check remains
        return
    if parent is not None and os.getppid() != parent:  # it ended before the line above: nothing would send it
        os._exit(0)
    if parent is not None:
        signal.signal(signal.SIGTERM, functools.partial(_stop_if_orphaned, parent))


def _stop_if_orphaned(parent: int, signum: int, frame: Any) -> None:
    """A worker's SIGTERM: it ends where its parent is gone (PR_SET_PDEATHSIG's); else it was sent to the whole group
    (``timeout``, a scheduler, a terminal), whose main process ends the run and then its loader's workers: killed
    first, each died under the loader's feet ("DataLoader worker (pid N) is killed by signal: Terminated", said as an
    out-of-memory error with exit 2, or an "Exception ignored" traceback beside the run's interrupted line)."""
    if os.getppid() != parent:
        os._exit(0)


def _in_sharer(tb: Any) -> bool:
    import traceback

    return any(frame.f_code.co_filename.endswith("resource_sharer.py") for frame, _ in traceback.walk_tb(tb))


def _quiet_half_made_loader() -> None:
    """torch's loader iterator, when starting its workers fails (no file descriptor left), is left half made, and its
    __del__ then fails on an attribute never set ("Exception ignored in ..."): the run says why it stopped itself.
    Set once a process."""
    previous = sys.unraisablehook
    if getattr(previous, "quiets_loader", False):
        return

    def hook(unraisable: Any) -> None:
        half_made = isinstance(unraisable.exc_value, AttributeError) and "DataLoaderIter" in repr(unraisable.object)
        if not half_made:
            previous(unraisable)

    hook.quiets_loader = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook
