"""The LitData glue both training families share: a corpus -> streaming chunks, chunks -> training batches.

A folder ``optimize`` writes (``text-train optimize`` / ``caption-train optimize``)::

    DIR/streaming.json     what it holds: family, format, the data options it was made with, items per split
    DIR/data_state.pt      what training needs besides the samples: vocabularies, tokenizer, checks (tensors and
                           plain values only, read with ``weights_only=True``)
    DIR/train/ val/ test/  one LitData dataset each (``index.json`` + ``chunk-*.bin``), written by ``litdata.optimize``

A split is recorded in ``streaming.json`` only once LitData has written its index, so a run stopped while writing
is continued by running the same command again: finished splits are kept, the interrupted one goes on from LitData's
own checkpoints (``use_checkpoint``). ``fit --data.root DIR`` recognises such a folder by its ``streaming.json``.

Training streams the train split with a ``StreamingDataset`` (shuffled by LitData with the seed and the epoch; under
DDP each rank reads its own chunks, in equal numbers of batches: ``drop_last``) through a ``StreamingDataLoader``.
Evaluation splits are read by index (``StreamingDataset[i]``), so validation and test batch, shard and score exactly
as they do for a folder.

Exact resume. Lightning saves a stateful loader's own state in a checkpoint, but that state counts the batch Lightning
has already fetched ahead (one past those trained), and a run resumed at an epoch's end starts LitData's epoch
counter (its shuffle seed) from 1 again. So the loader here gives Lightning no state of its own; the data module
stores the epoch and the batches trained (``text_attn.core.batching.ResumableBatches``), and ``resume_at`` turns that
into LitData's resume state: LitData's epoch is always the trainer's epoch + 1, and the samples already yielded are
the trained batches times the batch size (per rank).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from text_attn.core.ranks import say

MANIFEST = "streaming.json"
STATE = "data_state.pt"
FORMAT = 2  # 2: the train split is written in a seeded shuffled order (shuffled_for_writing)
SPLITS = ("train", "val", "test")
# data options that say how the samples are loaded, not which they are: chunks made with other values are the same
LOADER_ONLY = ("batch_size", "num_workers", "sort_by_length", "feature_cache_dir")


class ChunkError(ValueError):
    """A chunk folder that cannot be used (missing, from the other family, damaged); the message is one line."""


# --- the folder ------------------------------------------------------------------------------------------------------
def is_chunk_folder(root: str | Path | None) -> bool:
    """Whether ``root`` is a folder ``optimize`` wrote (it holds ``streaming.json``)."""
    return root is not None and (Path(root) / MANIFEST).is_file()


def train_layout(root: str | Path) -> str | None:
    """A digest of how a chunk folder's train split lies in its chunks (each chunk's file name, samples and bytes, in
    LitData's index): LitData shuffles chunk by chunk, so the same samples in other chunks come in another order.
    None where the index cannot be read (the loader says why)."""
    import hashlib

    try:
        chunks = json.loads((Path(root) / "train" / "index.json").read_text(encoding="utf-8"))["chunks"]
        layout = [(c["filename"], c.get("chunk_size"), c.get("chunk_bytes")) for c in chunks]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return hashlib.sha256(json.dumps(layout).encode()).hexdigest()[:16]


def read_manifest(root: str | Path, family: str) -> dict[str, Any]:
    """``DIR/streaming.json``, checked: this family's, this format, every split written and its index present."""
    root = Path(root)
    path = root / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ChunkError(f"{path}: not a readable chunk manifest ({type(err).__name__})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ChunkError(f"{path}: not a chunk manifest of format {FORMAT}: run optimize again")
    if manifest.get("family") != family:
        raise ChunkError(f"{root}: chunks of {manifest.get('family')!r} data, not {family!r}")
    for split in SPLITS:
        if split not in manifest.get("splits", {}):
            raise ChunkError(f"{root}: split {split} was not finished: run the same optimize command again")
        if not _written(root, split, manifest):
            raise ChunkError(f"{root / split / 'index.json'}: missing (the {split} chunks' index)")
    return manifest


def _written(root: Path, split: str, manifest: dict[str, Any]) -> bool:
    """Whether ``split`` is in the folder: its chunks' index, or none for a split with no sample (LitData writes no
    empty split: a test split left empty, as a German corpus of Flickr8k's photos may have, is only in the manifest)."""
    empty = manifest.get("splits", {}).get(split, {}).get("items") == 0
    return empty or (root / split / "index.json").is_file()


def read_state(root: str | Path) -> dict[str, Any]:
    path = Path(root) / STATE
    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except Exception as err:  # noqa: BLE001 - a missing, torn or foreign file: the same one line
        raise ChunkError(f"{path}: cannot read it ({type(err).__name__}): run optimize again") from None


def _shaping(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in json.loads(json.dumps(options, default=str)).items() if k not in LOADER_ONLY}


def shuffled_for_writing(items: Sequence[Any], seed: int) -> list[Any]:
    """The train samples in the order they are written: a permutation seeded by the data seed.

    LitData shuffles chunk by chunk (the order of the chunks, then the samples inside one), so a batch is drawn from
    one or two chunks: a few hundred neighbouring samples. Written in the corpus's order, a chunk holds ~100 photos
    with all their captions, and every batch of an epoch comes from such a window (benchmarks/streaming_scores.py:
    that trained measurably worse than batches drawn from the whole split). Shuffled once here, each chunk is a
    random sample of the split. Every sample keeps its index (the folder reader's number for it)."""
    import random

    order = list(items)
    random.Random(seed).shuffle(order)
    return order


def _earlier(root: Path, family: str, options: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest an earlier optimize left in ``root`` (None: there is none), refused in one line when it is not
    readable, of an older format, or made for the other family or with other (sample-shaping) options."""
    path = root / MANIFEST
    if not path.is_file():
        return None
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        raise ChunkError(f"--out {root}: {MANIFEST} cannot be read; give a new folder (or delete it)") from None
    if not isinstance(old, dict) or old.get("format") != FORMAT:
        raise ChunkError(f"--out {root}: holds chunks of an older format; give a new folder (or delete it)")
    if old.get("family") != family:  # a caption optimize given a text one's folder said "other data options"
        raise ChunkError(f"--out {root}: holds the chunks of {old.get('family', 'another')}-train optimize, not "
                         f"{family}-train's; give a new folder")  # fmt: skip
    if _shaping(old.get("options", {})) != _shaping(options):
        raise ChunkError(f"--out {root}: holds chunks made with other data options; give a new folder")
    return old


def split_counts(manifest: dict[str, Any]) -> str:
    """``train 96, val 16, test 16``: a manifest's items a split, in the splits' order (a finished folder's manifest,
    read back, listed them alphabetically)."""
    splits = manifest["splits"]
    return ", ".join(f"{s} {splits[s]['items']}" for s in [*SPLITS, *sorted(set(splits) - set(SPLITS))] if s in splits)


def finished_earlier(out: str | Path, family: str, options: dict[str, Any], log: Callable[[str], None] = say):
    """The manifest of ``out`` when an earlier optimize with the same (sample-shaping) options finished every split
    there, else None: checked before any work (a feature folder's photos are not encoded again); a folder made with
    other options is refused in one line, also before any work."""
    old = _earlier(Path(out), family, options)
    done = old.get("splits", {}) if old is not None else {}
    if any(s not in done or not _written(Path(out), s, old) for s in SPLITS):
        return None
    for split in SPLITS:
        log(f"{split}: {old['splits'][split]['items']} samples, written earlier: kept")
    return old


def _write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    from text_attn.core.safe_files import write_text

    write_text(root / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def optimize_splits(
    out: str | Path,
    family: str,
    options: dict[str, Any],
    state: dict[str, Any],
    inputs: dict[str, Sequence[Any]],
    item_fn: Callable[[str], Callable[[Any], dict[str, Any]]],
    num_workers: int = 1,
    chunk_bytes: str = "64MB",
    log: Callable[[str], None] = say,
    counts: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Write ``inputs[split]`` (each turned into a sample by ``item_fn(split)``, in LitData's worker processes:
    forked where the platform can fork, else spawned, so ``item_fn(split)`` must be picklable and hold what it needs,
    not read globals) as ``out/<split>/`` chunks, split by split; ``options`` and ``state`` go to
    the manifest and ``data_state.pt``. Splits a previous run finished with the same options are kept. ``counts``:
    samples per split where an input yields several (``item_fn(split)`` a generator: a tar shard). Returns the
    manifest."""
    import multiprocessing

    import litdata

    from text_attn.core.optimize_stops import stops_said
    from text_attn.core.safe_files import atomic_output

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    options = json.loads(json.dumps(options, default=str))  # as the manifest will hold them
    manifest = {"format": FORMAT, "family": family, "options": options, "splits": {}}
    old = _earlier(root, family, options)
    if old is not None:
        manifest["splits"] = old.get("splits", {})
    with atomic_output(root / STATE) as tmp:
        torch.save(state, tmp)
    _write_manifest(root, manifest)  # at once: a fit given this folder before the end says it is unfinished
    for split in SPLITS:
        items = inputs[split]
        n = (counts or {}).get(split, len(items))
        done = manifest["splits"].get(split)
        if done is not None and done.get("items") == n and _written(root, split, manifest):
            log(f"{split}: {n} samples, written earlier: kept")
            continue
        if n == 0:  # LitData writes no empty split: the manifest alone says it holds nothing (read_all: [])
            log(f"{split}: no samples: none written")
            manifest["splits"][split] = {"items": 0}
            _write_manifest(root, manifest)
            continue
        log(f"{split}: {n} samples -> {root / split}")
        fn = item_fn(split)
        # use_checkpoint: a stopped run's chunks are kept and the next run continues after them (LitData cannot for
        # a function that yields several samples an input: that split is written again)
        before = multiprocessing.get_start_method(allow_none=True)
        try:
            with private_litdata_cache(root), stops_said(root / split), _chatter_to_stderr():  # Ctrl-C: exit 130
                litdata.optimize(
                    fn,
                    _as_json(items),
                    str(root / split),
                    chunk_bytes=chunk_bytes,
                    num_workers=max(1, min(num_workers, len(items))),
                    use_checkpoint=not inspect.isgeneratorfunction(fn),
                    keep_data_ordered=True,
                    start_method=_optimize_start_method(),
                    verbose=True,
                )
        finally:  # LitData sets the start method for the whole process (force=True): this process's own is kept
            multiprocessing.set_start_method(before, force=True)
        manifest["splits"][split] = {"items": n}
        _write_manifest(root, manifest)
    return manifest


@contextlib.contextmanager
def _chatter_to_stderr():
    """LitData's lines ("Worker 0 is terminating.", "Finished data processing!": 46 for a tiny corpus), its own and
    its workers', on stderr with the other progress: stdout keeps the command's one result line. The descriptor is
    moved, so the workers it starts inherit it; a stdout without one (a test's capture) is redirected in Python."""
    sys.stdout.flush()
    try:
        out, err = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is an OSError and a ValueError
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    saved = os.dup(out)
    try:
        os.dup2(err, out)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, out)
        os.close(saved)


def _as_json(items: Sequence[Any]) -> list[Any]:
    """The inputs as LitData's checkpoint keeps them (JSON: a tuple is a list), so that a stopped run's checkpoint
    matches the same command's inputs: compared with tuples, it never did, and running the command again to continue
    was refused ("Existing checkpoints are not compatible with the current configuration")."""
    return [list(item) if isinstance(item, tuple) else item for item in items]


# LitData's scratch folders: it empties them (shutil.rmtree) as each optimize starts, and by default they are
# $TMPDIR/chunks and $TMPDIR/data, names anyone may be using: `optimize` deleted a user's own /tmp/data, and two runs
# at once (or two users) emptied each other's.
LITDATA_SCRATCH = ("DATA_OPTIMIZER_CACHE_FOLDER", "DATA_OPTIMIZER_DATA_CACHE_FOLDER")
SCRATCH = ".litdata-scratch"


@contextlib.contextmanager
def private_litdata_cache(out: str | Path):
    """LitData's scratch folders (:data:`LITDATA_SCRATCH`) in ``out/.litdata-scratch``, a folder of this output's
    alone, emptied as it starts and removed at the end; in the output, not in a fresh temporary folder, as a run
    stopped by Ctrl-C (LitData's own handler leaves with os._exit: no cleanup runs) leaves it for the next run to
    empty, not for /tmp to collect. Folders the user named in those variables are theirs to give, and are kept."""
    if all(os.environ.get(name) for name in LITDATA_SCRATCH):
        yield
        return
    scratch = Path(out) / SCRATCH
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(mode=0o700, parents=True)
    saved = {name: os.environ.get(name) for name in LITDATA_SCRATCH}
    for name, folder in zip(LITDATA_SCRATCH, ("chunks", "data"), strict=True):
        if not saved[name]:
            os.environ[name] = str(scratch / folder)  # LitData's forked workers read it too
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(scratch, ignore_errors=True)


def _optimize_start_method() -> str:
    """LitData's workers are forked where the platform can (no fresh interpreter, torch imported again, per split and
    worker), spawned where it cannot (Windows)."""
    import multiprocessing

    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


# --- reading ---------------------------------------------------------------------------------------------------------
def split_dataset(root: str | Path, split: str, shuffle: bool = False, seed: int = 0, drop_last: bool = False):
    """The ``split`` of a chunk folder as a LitData ``StreamingDataset`` (read in place: no cache copy) whose damaged
    chunks are one line naming the file (streaming_dataset.DamagedChunk, a ValueError)."""
    from text_attn.core.streaming_dataset import NamedStreamingDataset

    path = Path(root) / split
    if not (path / "index.json").is_file():
        raise ChunkError(f"{path / 'index.json'}: missing (the {split} chunks' index)")
    _check_chunk_files(path, _check_formats(path / "index.json"))
    try:
        # batch_decode 0: each sample decoded when read (LitData's "auto" decoded windows of 256 feature samples, most
        # of them again for every sample: 20x slower)
        return NamedStreamingDataset(
            str(path.resolve()), shuffle=shuffle, seed=seed, drop_last=drop_last, batch_decode=0
        )
    except Exception as err:  # noqa: BLE001 - LitData raises many types for a damaged index
        raise ChunkError(f"{path}: cannot open its chunks ({type(err).__name__}: {one_line_of(err)})") from None


# The formats optimize writes (numbers, text, bytes, arrays); each is decoded without running code. LitData would also
# read "pickle" (and "file", "video", ... that hand bytes to other decoders): a chunk folder is data from elsewhere (a
# shared file system, a download), and a pickled sample runs code when read, so any other format is refused.
SAFE_FORMATS = frozenset({"int", "float", "bool", "str", "text", "bytes", "json", "tensor", "no_header_tensor", "numpy",
                          "no_header_numpy"})  # fmt: skip


def _check_formats(index: Path) -> dict[str, Any]:
    """Refuse (:class:`ChunkError`, one line) a split whose index declares a sample format other than SAFE_FORMATS;
    returns the index read."""
    try:
        read = json.loads(index.read_text(encoding="utf-8"))
        formats = read["config"]["data_format"]
        names = {str(f).split(":", 1)[0] for f in formats}
    except (OSError, ValueError, KeyError, TypeError):
        raise ChunkError(f"{index}: not a readable chunk index: run optimize again") from None
    unsafe = sorted(names - SAFE_FORMATS)
    if unsafe:
        raise ChunkError(
            f"{index}: declares sample formats {', '.join(unsafe)}, which optimize never writes ({', '.join(unsafe)} "
            "can run code when read): refused; run optimize again on the original data"
        )
    return read


def _check_chunk_files(split: Path, index: dict[str, Any]) -> None:
    """Refuse (:class:`ChunkError`, one line naming it) a chunk file the ``split``'s ``index`` (read) lists that is
    missing or of another size: before, it was found when training reached its first sample, minutes in, after a
    wait, as "damaged"."""
    whole = not index.get("config", {}).get("compression")  # a compressed chunk's size is not chunk_bytes
    for chunk in index.get("chunks", []):
        try:
            file, expected = split / str(chunk["filename"]), int(chunk["chunk_bytes"])
        except (KeyError, TypeError, ValueError):
            raise ChunkError(f"{split / 'index.json'}: not a readable chunk index: run optimize again") from None
        try:
            size = file.stat().st_size
        except OSError:
            raise ChunkError(f"{file}: missing (a chunk its index lists): copy the folder whole, or run optimize "
                             "again") from None  # fmt: skip
        if whole and size != expected:
            raise ChunkError(f"{file}: {size:,} bytes, its index says {expected:,}: a chunk cut short or changed "
                             "(copy the folder again, or run optimize again)")  # fmt: skip


def one_line_of(err: BaseException) -> str:
    from text_attn.core.errors import one_line

    return one_line(err)


def split_size(root: str | Path, split: str) -> int:
    """The samples a split holds, from its index (a StreamingDataset's length is one rank's share under DDP)."""
    path = Path(root) / split / "index.json"
    try:
        return sum(int(c["chunk_size"]) for c in json.loads(path.read_text(encoding="utf-8"))["chunks"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ChunkError(f"{path}: not a readable chunk index: run optimize again") from None


def read_all(root: str | Path, split: str) -> list[dict[str, Any]]:
    """Every sample of a (small) split, in the order written, on every rank; a damaged chunk is one line naming its
    file."""
    where = Path(root) / split
    if not (where / "index.json").is_file() and _written(Path(root), split, _manifest_of(Path(root))):
        return []  # a split optimize found empty
    ds = split_dataset(root, split)
    # a damaged chunk is one line naming its file: split_dataset's NamedStreamingDataset says so when a sample is read
    return [ds[i] for i in range(split_size(root, split))]


def _manifest_of(root: Path) -> dict[str, Any]:
    try:
        return json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}


class _CheckedCollate:
    """``collate`` with a damaged sample turned into one line naming the folder (picklable: loader workers spawn)."""

    def __init__(self, collate: Callable[[list], Any], where: str):
        self.collate, self.where = collate, where

    def __call__(self, items: list) -> Any:
        try:
            return self.collate(items)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
            raise ChunkError(f"{self.where}: a sample cannot be read: a damaged chunk ({type(err).__name__})") from None


def streaming_loader(
    root: str | Path,
    batch_size: int,
    collate: Callable[[list[dict[str, Any]]], Any],
    seed: int,
    num_workers: int = 0,
    world_size: int = 1,
    resume: tuple[int, int] | None = None,
    shuffle: bool = True,
):
    """The train split of a chunk folder as a shuffled ``StreamingDataLoader`` of ``batch_size`` samples per rank
    (``collate``: a list of samples -> a batch); ``resume`` = (epoch, batches trained in it), from
    ``ResumableBatches.take_resume_skip`` (module doc). ``shuffle`` False: the samples in the order written, the same
    every epoch (``--trainer.overfit_batches``: Lightning cannot turn a streaming loader's shuffling off itself)."""
    from litdata import StreamingDataLoader

    class TrainedPositionLoader(StreamingDataLoader):
        """No state for Lightning to save or restore: the data module keeps the trained position (module doc)."""

        def state_dict(self) -> dict[str, Any]:
            return {}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            if state:  # only the data module's resume_at passes a state
                super().load_state_dict(state)
                self.resume_pending = True

        def __iter__(self):
            # LitData keeps a loaded state until an epoch runs to its StopIteration, which Lightning (counting the
            # batches) never asks for: without this, the epoch after a resumed one would replay it.
            if not getattr(self, "resume_pending", False):
                self.restore = False
            self.resume_pending = False
            yield from super().__iter__()

    ds = split_dataset(root, "train", shuffle=shuffle, seed=seed, drop_last=world_size > 1)
    where = str(Path(root) / "train")
    # A generator of its own: LitData makes the torch iterator lazily, at the first batch, so drawing its seed from
    # the global generator would happen after a resumed run restored the random state (dropout would differ).
    loader = TrainedPositionLoader(
        ds,
        batch_size=batch_size,
        collate_fn=_CheckedCollate(collate, where),
        num_workers=num_workers,
        generator=torch.Generator().manual_seed(seed),
    )
    resume_at(loader, *(resume or (0, 0)), world_size=world_size)
    return loader


def resume_at(loader, epoch: int, batches: int, world_size: int = 1) -> None:
    """Set ``loader`` (a fresh StreamingDataLoader, not iterated yet) to start trainer epoch ``epoch`` after its first
    ``batches`` batches (per rank); ``batches`` at or past the epoch's end starts the next epoch."""
    if batches >= len(loader):
        epoch, batches = epoch + 1, 0
    if batches == 0:
        loader.current_epoch = epoch  # LitData adds 1 when the epoch starts: its epoch is the trainer's + 1
        return
    from litdata import StreamingDataLoader

    samples = batches * loader.batch_size
    state = copy.deepcopy(StreamingDataLoader.state_dict(loader))  # LitData's own state of the fresh loader
    state.update(current_epoch=epoch + 1, num_samples_yielded=samples)
    state["latest_worker_idx"] = (batches - 1) % max(1, loader.num_workers)
    state["dataset"].update(current_epoch=epoch + 1, num_samples_yielded=samples, sample_in_epoch=samples * world_size)
    loader.load_state_dict(state)


def world_size_of(trainer) -> int:
    return int(getattr(trainer, "world_size", 1) or 1) if trainer is not None else int(os.environ.get("WORLD_SIZE", 1))
