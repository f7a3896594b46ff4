"""The feature cache: with a frozen encoder every image is encoded once, kept in memory and on disk.

Option ``data.cache_features: true`` turns it on, ``data.feature_cache_dir`` says where its files live.

Filling it (``fill_features``, which ``CaptionDataModule.fill_feature_cache`` runs over its splits): every image of
a split is preprocessed and encoded once, (B, 3, H, W) -> encode_fn -> (B, L, D), and kept as float16 (half the
memory; ~1e-3 relative rounding, far below what the decoder can notice); batches then carry "features" instead of
"images". The data module never sees the model: it is handed ``encode_fn``.

On disk: a split's features (N, L, D) float16 live in one file named by a key over everything they depend on: the
encoder's weights and settings (``encoder_fingerprint``), the preprocessing, and the split's image list (a file's
name and bytes; an in-memory image's pixels). Change any of them and the key changes, so a stale
file is never read; old files are left for the user to delete. Files load memory-mapped: a rank or a resumed run pays
no copy.

``FeatureCacheCallback``: the Lightning callback that hands the model's image encoder to the data module. The data
module owns preprocessing and the feature cache; the LightningModule builds the encoder (its vocabulary comes from the
data). This callback joins them at the start of each stage, after any checkpoint has been restored and the model moved
to its device, so cached features come from the weights actually used:
- image batches are preprocessed the way the encoder expects (``dm.set_preprocess``), and attention targets are
  distributions over the encoder's grid (``dm.set_grid``);
- with a frozen encoder and ``data.cache_features: true``, every image of the stage's splits is encoded once
  (``dm.fill_feature_cache``), or read from the disk cache of an earlier run; the data module keeps each split's
  features with the encoder's fingerprint, so a later fit of it with another encoder encodes them again, and a stage
  whose batches carry photos lets them go (``dm.drop_features``).
With a partly trainable encoder (``fine_tune: last``) the cache holds each photo's frozen map instead (the output of
the stages that stay frozen, ``ImageEncoder.frozen_map``), keyed by those stages alone; the trainable stages run on it
every step (the LightningModule's ``from_frozen_map``).

A photo that cannot be read (a truncated JPEG, an empty file) does not end the run once hundreds are encoded: its row
is stored as NaN, so the cache file keeps every other photo's features and says which photos to leave out when read
again, one line counts them, and the data module leaves them out (``unreadable_rows``); with ``data.strict`` it is a
CaptionDataError naming the photo. Batches of photos decoded as they are drawn (no cache) leave such a photo out
alike, named once a run and not decoded again (``readable_photos``); a batch left with no photo is skipped
(``UNREADABLE_BATCH``). Under DDP the first process of each machine encodes and writes
the cache files while the others wait, then they read
them (memory-mapped). ``fast_dev_run`` caches nothing: its few batches encode their own images.
"""

from __future__ import annotations

import errno
import hashlib
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytorch_lightning as pl
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from captioning.photos.preprocess import ImageReadError, prepared
from captioning.training.readers import CaptionDataError
from text_attn.core.errors import one_line
from text_attn.core.file_digest import sha256_of
from text_attn.core.precision import parameter_dtype
from text_attn.core.progress_lines import ProgressLines, duration
from text_attn.core.ranks import say
from text_attn.core.safe_files import atomic_output, inert, make_private_dirs, untrusted_reason
from text_attn.core.shm_workers import loader_workers

KEY_CHARS = 20  # hex characters of the sha256 key in file names
STAGE_SPLITS = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("test",)}


# --- files on disk ---------------------------------------------------------------------------------------------------
def encoder_fingerprint(encoder: torch.nn.Module, settings: dict) -> str:
    """sha256 over the encoder's weights and buffers and its JSON-able settings (backbone, grid, preprocessing...)."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for name, value in sorted(encoder.state_dict().items()):
        h.update(name.encode())
        h.update(value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _image_identity(image: Path | Image.Image) -> bytes:
    if isinstance(image, Image.Image):
        return hashlib.sha256(image.tobytes() + f"{image.mode}{image.size}".encode()).digest()
    # The file's name and bytes, not its folder or modification time: a copy of the dataset elsewhere (another disk,
    # a fresh checkout of the data) finds the features of the same photos, and a photo edited in place does not.
    # Hashing reads every file once a run: ~2 s for Flickr8k's 1 GB, against minutes to encode it.
    path = Path(image)
    try:
        digest = sha256_of(path)
    except OSError:
        return f"{path}|missing".encode()
    return f"{path.name}|{digest}".encode()


def split_key(fingerprint: str, images: Sequence[Path | Image.Image]) -> str:
    h = hashlib.sha256(fingerprint.encode())
    for image in images:
        h.update(_image_identity(image))
    return h.hexdigest()[:KEY_CHARS]


def cache_folder(setting: str | None, root: str | Path | None) -> str | None:
    """data.feature_cache_dir as a folder: "auto" is the run's ``root``/feature_cache (trainer.default_root_dir);
    None or "" (no disk cache) as they are."""
    if setting == "auto":
        return str(Path(root, "feature_cache")) if root else None
    return setting


def cache_file(cache_dir: str | Path, split: str, key: str) -> Path:
    return Path(cache_dir) / f"{split}-{key}.pt"


def load_features(path: Path, n_images: int) -> torch.Tensor | None:
    """The cached (N, L, D) tensor, memory-mapped; None when absent, unreadable or of the wrong length, or when the
    file or a folder above it is not this user's alone (safe_files.untrusted_reason: features someone else could
    write would train the model on whatever they put there; one note, then the photos are encoded afresh)."""
    if not path.is_file():
        return None
    why = untrusted_reason(path)
    if why is not None:
        print(f"caption data: note: the cached features {inert(path)} are not used ({inert(why)}); encoding afresh",
              file=sys.stderr)  # fmt: skip
        return None
    try:
        feats = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - a torn or foreign file is re-encoded, not trusted
        return None
    # (N, L, D) region features, or (N, C, h, w) frozen maps (a partly trainable encoder's)
    return feats if isinstance(feats, torch.Tensor) and feats.dim() in (3, 4) and feats.size(0) == n_images else None


def save_features(path: Path, features: torch.Tensor) -> None:
    """Write atomically (a temporary file, then rename): a crash or a second rank never leaves half a file."""
    make_private_dirs(path.parent)  # this user's alone, as load_features requires
    with atomic_output(path, mode=0o644) as tmp:
        torch.save(features.contiguous(), tmp)


def _saved(path: Path, features: torch.Tensor) -> bool:
    """save_features, or where the disk refuses it (full, read-only, over quota) one note and False: the features are
    in memory and the run goes on (issue: a full disk lost the run to a torch traceback after every photo was
    encoded). atomic_output removes the half-written file."""
    try:
        save_features(path, features)
    except (OSError, RuntimeError) as err:  # torch's writer: RuntimeError "[enforce fail ...] unexpected pos ..."
        text = str(err)
        full = getattr(err, "errno", None) == errno.ENOSPC or "unexpected pos" in text or "No space left" in text
        why = "no space left on device" if full else one_line(err, 200)
        print(f"caption data: note: cannot write the feature cache {inert(path)}: {inert(why)}; training on the "
              "features in memory", file=sys.stderr)  # fmt: skip
        return False
    return True


# --- filling it ------------------------------------------------------------------------------------------------------
class _ImageTensors(Dataset):
    """Preprocessed image tensors of one split, for the encoding pass: (tensor, "") or, for a photo that cannot be
    read, (None, why), so that the main process decides (a worker's exception came back as a traceback's text)."""

    def __init__(self, images: Sequence[Path | Image.Image], preprocess: Callable):
        self.images, self.preprocess = images, preprocess

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor | None, str]:
        try:
            return prepared(self.images[i], self.preprocess), ""  # (3, H, W)
        except ImageReadError as err:
            return None, str(err)


def _photo_batch(items: list[tuple[torch.Tensor | None, str]]) -> tuple[torch.Tensor | None, list[str]]:
    """The readable photos of a batch stacked, (b, 3, H, W) or None; per photo, why it cannot be read ("": it can)."""
    good = [t for t, _ in items if t is not None]
    return (torch.stack(good) if good else None), [why for _, why in items]


def _unreadable(why: str, strict: bool) -> None:
    if strict:
        raise CaptionDataError(f"{why} (data.strict: a photo that cannot be read ends the run; without it, it is "
                               "left out)")  # fmt: skip


def unreadable_rows(features: torch.Tensor) -> list[int]:
    """The rows of cached features (N, L, D) or frozen maps (N, C, h, w) whose photo could not be read (stored as
    NaN by :func:`fill_features`; an encoder's output is never NaN there)."""
    return torch.isnan(features.reshape(len(features), -1)[:, 0]).nonzero().flatten().tolist()


def _say_skipped(split: str, bad: list[int], images: Sequence, first: str) -> None:
    if bad:
        say(f"caption data: skipped {len(bad)} of {len(images)} {split} photos that cannot be read (first: "
            f"{inert(first)}): {len(images) - len(bad):,} {split} photos are trained or scored on, as the model "
            "file records; data.strict refuses them")  # fmt: skip


# The key of a batch none of whose photos can be read (its one key; its value: the entries left out): the data module's
# collate makes it, CaptionModule's steps skip it (it ended the run: "none of the 1 photos of a val batch can be read")
UNREADABLE_BATCH = "unreadable_batch"


def readable_photos(
    images: Sequence[Path | Image.Image],
    index: Sequence[int],
    preprocess: Callable,
    strict: bool,
    split: str,
    known: torch.Tensor,
) -> dict[int, torch.Tensor]:
    """Photo i of ``images`` prepared (3, H, W) for each i of ``index`` that can be read: a batch of photos decoded as
    it is drawn leaves out one that cannot, or with ``strict`` refuses it. ``known`` (N,) uint8, 1 for the photos found
    unreadable so far (the data module's for the run, in shared memory where loader workers make the batches): such a
    photo is not decoded again, and the line naming it is said by the first process to find it, once a run, not once a
    worker and an epoch (two workers failing on it at the same instant may both say it; each DDP process has its
    own flags)."""
    out = {}
    for i in dict.fromkeys(index):
        if known[i] and not strict:
            continue
        try:
            out[i] = prepared(images[i], preprocess)
        except ImageReadError as err:
            _unreadable(str(err), strict)
            said, known[i] = bool(known[i]), 1
            if not said:
                print(f"caption data: a {split} photo cannot be read and is left out of its batches: {inert(str(err))}",
                      file=sys.stderr)  # fmt: skip
    return out


@torch.no_grad()
def fill_features(
    features: dict[str, torch.Tensor],
    images: Mapping[str, Sequence[Path | Image.Image]],
    encode_fn: Callable[[torch.Tensor], torch.Tensor],
    preprocess: Callable,
    batch_size: int = 16,
    num_workers: int = 0,
    progress: bool | Callable[[str], None] = True,
    cache_dir: str | Path | None = None,
    fingerprint: str | None = None,
    strict: bool = False,
) -> list[str]:
    """Put into ``features`` (split -> (N, L, D) float16) every split of ``images`` (split -> its images) it lacks.

    ``progress``: True, a bar on stderr; a function, a line to it as the encoding starts and one as it ends (a run
    whose output is a log file: text_attn.core.progress_lines); False, nothing.

    With ``cache_dir`` and the encoder's ``fingerprint``, a split found on disk is loaded, and a split encoded here is
    written there. The features must come from a frozen encoder: caching assumes they never change during training.
    A photo that cannot be read gets a row of NaN (:func:`unreadable_rows`), counted in one line, encoded or loaded;
    with ``strict`` it is a CaptionDataError (the splits encoded before it stay written). Returns the splits that were
    encoded (not loaded).
    """
    from tqdm.auto import tqdm

    todo = [s for s in images if s not in features]
    files = {}
    if cache_dir is not None and fingerprint is not None:
        for split in list(todo):
            files[split] = cache_file(cache_dir, split, split_key(fingerprint, images[split]))
            found = load_features(files[split], len(images[split]))
            if found is not None:
                bad = unreadable_rows(found)
                if bad:  # the same bytes as when they were cached (the key says so): still unreadable
                    _unreadable(f"{images[split][bad[0]]}: could not be read when its split's features were cached",
                                strict)  # fmt: skip
                    _say_skipped(split, bad, images[split], str(images[split][bad[0]]))
                features[split] = found
                todo.remove(split)
    total = sum(len(images[s]) for s in todo)
    if total == 0:
        return []
    bar = tqdm(total=total, desc="caching image features", unit="img", disable=progress is not True, file=sys.stderr)
    say = progress if callable(progress) else None
    if say is not None:
        say(f"caching image features: {total:,} images")
        started = time.monotonic()
    side = getattr(preprocess, "image_size", 224)
    num_workers = loader_workers(num_workers, batch_size * 3 * side * side * 4, "caption data")  # float32 photos
    unsaved = False  # a cache file that could not be written (its note said so)
    for split in todo:
        chunks, ds = [], _ImageTensors(images[split], preprocess)
        # its own generator: a loader's iterator draws its workers' base seed from torch's global stream otherwise,
        # and a run that found its features on disk drew other dropout masks (and hard-attention and SCST samples)
        # than the same config's first run, which encoded them
        loader = DataLoader(ds, batch_size=batch_size, num_workers=num_workers, generator=torch.Generator(),
                            collate_fn=_photo_batch)  # fmt: skip
        for batch, said in loader:
            for why in filter(None, said):
                _unreadable(why, strict)
            encoded = None if batch is None else encode_fn(batch).to("cpu", torch.float16).contiguous()
            chunks.append((encoded, said))  # (b, L, D) or (b, C, h, w), the readable photos' rows
            bar.update(len(said))
        features[split] = _with_gaps(chunks, images[split], split)  # (N, L, D)
        if split in files and not _saved(files[split], features[split]):
            files.clear()  # the disk is full or read-only: the other splits are not tried either
            unsaved = True
    bar.close()
    if say is not None:  # "cached" after the note that the cache could not be written read as a contradiction
        done = "encoded image features (kept in memory only)" if unsaved else "cached image features"
        say(f"{done}: {total:,} images in {duration(time.monotonic() - started)}")
    return todo


def _with_gaps(chunks: list[tuple[torch.Tensor | None, list[str]]], images: Sequence, split: str) -> torch.Tensor:
    """The encoded batches as one (N, ...) tensor, a row of NaN where a photo could not be read (said in one line)."""
    whys = [why for _, said in chunks for why in said]
    bad = [k for k, why in enumerate(whys) if why]
    if not bad:
        return torch.cat([encoded for encoded, _ in chunks])
    shape = next((e.shape[1:] for e, _ in chunks if e is not None), None)
    if shape is None:
        raise CaptionDataError(f"none of the {len(images)} {split} photos can be read (first: {whys[0]})")
    rows = torch.full((len(whys), *shape), float("nan"), dtype=torch.float16)
    rows[[k for k, why in enumerate(whys) if not why]] = torch.cat([e for e, _ in chunks if e is not None])
    _say_skipped(split, bad, images, whys[bad[0]])
    return rows


def cache_fingerprint(encoder) -> str:
    """The key over what an encoder's cached output depends on: a frozen encoder's region features on all its
    weights and settings; a partly trainable one's frozen maps on its frozen stages alone (the trainable stages change
    at every step and on resume, the maps they read do not)."""
    settings = {**encoder.config(), "preprocess": repr(encoder.preprocess)}
    if encoder.fine_tune == "none":
        return encoder_fingerprint(encoder, settings)
    settings = {**settings, "fine_tune": None, "frozen_bn": None, "frozen_stages": encoder.frozen_stage_count}
    return encoder_fingerprint(_Weights(encoder.frozen_state()), settings)


class _Weights:
    """A state_dict as encoder_fingerprint reads one (a part of an encoder's: its frozen stages)."""

    def __init__(self, state: dict[str, torch.Tensor]):
        self._state = state

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self._state


# --- the callback ----------------------------------------------------------------------------------------------------
class FeatureCacheCallback(pl.Callback):
    def _share(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        dm, model = trainer.datamodule, pl_module.model
        encoder = model.encoder
        dm.set_preprocess(encoder.preprocess)
        dm.set_grid(encoder.grid)  # attention targets are distributions over the encoder's grid cells
        # frozen: the region features are stored; partly trainable: the frozen stages' maps (frozen_map), the
        # trainable stages then run every step on them; all trainable: nothing to store
        stage_maps = encoder.fine_tune != "none" and encoder.stage_cacheable
        nothing_kept = encoder.fine_tune != "none" and not stage_maps  # every stage trains, or the multiscale tap
        if nothing_kept or not dm.hparams.cache_features or trainer.fast_dev_run:
            if nothing_kept and dm.hparams.cache_features and stage == "fit":
                # asked for and unused: it was silent, every step running the whole encoder
                why = (
                    "model.encoder.fine_tune all trains every stage"
                    if encoder.fine_tune == "all"
                    else "model.encoder.multiscale's fine map may come from a stage that fine_tune "
                    f"{encoder.fine_tune} trains"
                )
                say(f"note: data.cache_features stores nothing here: {why}, so each step runs the whole encoder on "
                    "the photos")  # fmt: skip
            dm.drop_features()  # the batches carry photos: none of an earlier fit's encoder's features is read
            return
        cache_dir = cache_folder(dm.hparams.feature_cache_dir, trainer.default_root_dir)
        if cache_dir:  # said now, not after every photo is encoded (a file there failed at the first write)
            try:
                if Path(cache_dir).exists() and not Path(cache_dir).is_dir():
                    raise FileExistsError(17, "a file is there")
                make_private_dirs(cache_dir)  # 0700, as the cache's files require (untrusted_reason)
            except OSError as err:
                raise CaptionDataError(f"data.feature_cache_dir {cache_dir}: cannot be made a folder "
                                       f"({err.strerror or err})") from None  # fmt: skip
        # also without a disk cache: the data module keeps it with each split, and a later fit of the same data
        # module with another encoder (image size, backbone, grid) encodes its photos again
        fingerprint = cache_fingerprint(encoder)

        dtype = parameter_dtype(encoder)  # bf16-true, 16-true: the weights are half, the photos float32

        def encode(images: torch.Tensor) -> torch.Tensor:
            images = images.to(pl_module.device, dtype)
            return encoder.frozen_map(images) if stage_maps else model.encode(images)  # (B, C, h, w) | (B, L, D)

        def run(progress: bool) -> None:
            was_training = model.training
            model.eval()
            dm.fill_feature_cache(
                encode,
                encoder.preprocess,
                STAGE_SPLITS[stage],
                progress=progress,
                cache_dir=cache_dir,
                fingerprint=fingerprint,
            )
            model.train(was_training)

        progress: bool | Callable[[str], None] = trainer.progress_bar_callback is not None
        lines = [c for c in trainer.callbacks if isinstance(c, ProgressLines)]
        if not progress and lines:  # the output is a log file: a line as the encoding starts and one as it ends
            progress = lines[0].say
        if trainer.world_size > 1 and cache_dir:
            if trainer.local_rank == 0:
                run(progress)
            trainer.strategy.barrier("feature_cache")
            if trainer.local_rank != 0:
                run(False)  # reads what the first process wrote (encodes only if the disk is not shared)
        else:
            run(progress if trainer.is_global_zero else False)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._share(trainer, pl_module, "fit")

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._share(trainer, pl_module, "validate")  # a no-op during fit: val was cached at fit start

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._share(trainer, pl_module, "test")

    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._share(trainer, pl_module, "predict")
