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

import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from captioning.photos import collection
from captioning.photos.preprocess import Preprocess
from captioning.photos.shards import ShardNote, ShardSample, is_shard, iter_shard

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
        self.skip, self.held = skip or (lambda i, n: False), held or (lambda i, n: False)

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
        extra = {"key": sample.key, "reference": sample.text}
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
    return batch


def photo_batches(stream: PhotoStream, workers: int) -> DataLoader:
    """Batches (:class:`PhotoBatch`: lists of items, in id order) of ``stream``, read by ``workers`` processes ahead
    of the model; a few batches in memory at any time, whatever the number of photos."""
    return DataLoader(
        stream,
        batch_size=stream.batch_size,
        num_workers=workers,
        collate_fn=pack,
        prefetch_factor=2 if workers else None,
    )
