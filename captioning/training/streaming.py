"""Photos and captions as LitData chunks: ``caption-train optimize`` writes them, ``caption-train fit --data.root DIR``
streams them (text_attn.core.streaming holds what both families share).

A sample is ``{"index", "image", "caption", "jpeg" | "features"}``:
- train: one sample per (image, caption) pair as the folder reader numbers them (``index`` = its pair index,
  ``image`` = its image's index in the split), ``caption`` the JSON ``{"tokens": [...], "k": caption number,
  "refs": all the image's captions}``. An image with 5 captions is stored 5 times (Flickr8k: 5 x its JPEG bytes);
  web-scale sets have one caption an image.
- val / test: one sample per image (``index`` = ``image``), ``caption`` the JSON ``{"refs": [...]}``.
- ``jpeg``: the image file's bytes exactly as they were on disk (decoded, with the JPEG's reduced-scale draft, by the
  same ``prepared`` as a file); or, with ``--features true`` and a frozen encoder, ``features``: its (L, D) float16
  region features (the feature cache, at scale); the encoder's fingerprint is kept and a fit with another encoder is
  refused in one line.
The vocabulary is built from the train captions (data.min_freq, captions_per_image), as fit builds it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from captioning.photos.preprocess import prepared
from captioning.training.readers import CaptionDataError, caption_tokens
from text_attn.core.errors import one_line
from text_attn.core.streaming import (
    ChunkError,
    finished_earlier,
    optimize_splits,
    read_all,
    read_manifest,
    read_state,
    shuffled_for_writing,
    split_dataset,
    split_size,
)
from text_attn.core.vocab import Vocabulary

FAMILY = "caption"
SHAPING = ("min_freq", "captions_per_image")  # options that shape the samples or the vocabulary
ENCODE_BATCH = 16  # a shard's photos encoded this many at a time


def make_item(split: str, entry: tuple[int, int, str, str], features: np.ndarray | None = None) -> dict[str, Any]:
    """optimize's function (runs in LitData's workers): (index, image index, file, caption JSON) -> sample;
    ``features``: the split's (N, L, D) float16 features, stored instead of the photo's bytes. Given to it, not read
    from a global: a worker started by spawn (Windows, macOS) or forkserver inherits no global."""
    index, image, path, caption = entry
    item: dict[str, Any] = {"index": index, "image": image, "caption": caption}
    if features is not None:
        item["features"] = features[image]  # (L, D) float16
    else:
        item["jpeg"] = Path(path).read_bytes()
    return item


def token_boxes(split, i: int, k: int, boxed: bool) -> dict[str, Any]:
    """With attention targets, caption ``k`` of image ``i``'s token boxes and the image's (width, height): the
    targets are made from them when the batch is, on the grid of the model that trains
    (captioning.training.attention_targets).
    """
    if not boxed:
        return {}
    from captioning.training.attention_targets import image_size

    found = split.boxes[i][k] if split.boxes is not None else []
    size = split.sizes[i] if split.sizes is not None and split.sizes[i] is not None else None
    return {"boxes": found, "size": size or (image_size(split.images[i]) if found else None)}


def settled_encoder(config: dict[str, Any], found) -> Any:
    """The ``model.encoder`` block of a caption config as an EncoderConfig whose JPEG step is settled against the
    training photos ``found`` (a captioning.photos.jpeg_step.PhotoFormat): auto reads theirs (said in one line), a value
    given by hand that they contradict is refused (ValueError, one line) before anything is written. None when the
    config has no such block."""
    from captioning.model.encoder import EncoderConfig, settled

    block = (config.get("model") or {}).get("encoder")
    if block is None:
        return None
    try:
        cfg = EncoderConfig(**dict(block))
    except TypeError as err:
        raise CaptionDataError(f"--config: model.encoder: {err}") from None
    cfg, line = settled(cfg, found)
    if line:
        print(f"caption-train optimize: {line}", file=sys.stderr)
    return cfg


def frozen_encoder(cfg, init_from: str | None = None, init_member: int | None = None):
    """An EncoderConfig (its JPEG step settled), built and frozen, with ``init_from``'s encoder weights where the
    config starts from a model (as fit's encoder has them: the bundled model's last stage learned from captions; built
    from the package alone, no fit of that config could read the chunks, "the features of another encoder"):
    (encoder, its fingerprint)."""
    from captioning.model.encoder import EncoderConfig, ImageEncoder
    from captioning.training.feature_cache import encoder_fingerprint

    cfg = cfg or EncoderConfig()
    if cfg.fine_tune != "none":
        raise CaptionDataError(
            f"--features: model.encoder.fine_tune is {cfg.fine_tune!r}: stored features need a frozen encoder (none)"
        )
    if cfg.weights is None:  # drawn from the random stream: fit draws another one than this process would
        raise CaptionDataError(
            "--features: model.encoder.weights is null (random weights, drawn anew by each run): stored features "
            "need an encoder whose weights are fixed ('imagenet' or a weights file); optimize the photos instead"
        )
    encoder = ImageEncoder.from_config(cfg).eval()
    if init_from:
        from captioning.model.captioner import Captioner

        try:
            start = Captioner.read_start(init_from, init_member)
            encoder.load_state_dict({k.removeprefix("encoder."): v for k, v in start.state.items()
                                     if k.startswith("encoder.")})  # fmt: skip
        except (ValueError, RuntimeError) as err:  # unreadable, or weights of another encoder than the config's
            raise CaptionDataError(f"--features: {one_line(err)}") from None
    settings = {**encoder.config(), "preprocess": repr(encoder.preprocess)}
    return encoder, encoder_fingerprint(encoder, settings)


def optimize_captions(
    dm, out: str | Path, config: dict[str, Any], features: bool = False, num_workers: int = 1, chunk_bytes="64MB"
) -> dict[str, Any]:
    """Read the corpus the data module ``dm`` describes with its folder reader and write it as chunks to ``out``
    (``features``: the frozen ``model.encoder`` of ``config`` encodes every image once; the float16 features are
    stored instead of the image bytes). Returns the manifest."""
    hp = dm.hparams
    if hp.source == "shapes":
        raise CaptionDataError("data.source shapes: the scenes are drawn in memory, there is no corpus to optimize")
    options = {**dict(hp), "features": features}
    model = config.get("model") or {}
    start = model.get("init_from")
    if features and start:  # the features are its encoder's: a folder of another start's, or the package's, or of
        # this start before it was trained again, is another folder (review: it was kept, "written earlier", and fit
        # refused it again and again); by its bytes, however its path is spelled
        from captioning.model.bundled import model_path
        from text_attn.core.file_digest import sha256_of

        try:
            digest = sha256_of(model_path(start))
        except OSError as err:
            raise CaptionDataError(f"model.init_from {start}: cannot read it ({err.strerror or err})") from None
        options["features_from"] = [digest, model.get("init_member")]
    if (done := finished_earlier(out, FAMILY, options)) is not None:
        return done
    dm.setup("fit")
    found = dm.train_photo_format()  # the photos' JPEG step and side: recorded, and settled against the config's
    cfg = settled_encoder(config, found)
    fingerprint, feats = None, {}
    if features:
        from captioning.training.feature_cache import fill_features, unreadable_rows

        encoder, fingerprint = frozen_encoder(cfg, start, model.get("init_member"))
        with torch.no_grad():
            images = {s: sp.images for s, sp in dm.splits.items()}
            fill_features(feats, images, encoder, encoder.preprocess, 16, hp.num_workers, True)
        for split in list(feats):  # photos that could not be read (NaN rows, said "skipped"): left out, as fit does
            if rows := unreadable_rows(feats[split]):  # they were written with their NaN features, and trained on
                dm.features[split] = feats[split]
                dm._leave_out(split, rows)  # the split, its captions and the train pairs renumbered without them
                feats[split] = dm.features.pop(split)
    boxes = partial(token_boxes, boxed=hp.attention_targets)
    inputs: dict[str, list] = {}
    train = dm.splits["train"]
    inputs["train"] = []
    for p, ((i, _), k) in enumerate(zip(dm._train_pairs, dm._train_caption, strict=True)):
        record = {"tokens": train.references[i][k], "k": k, "refs": train.references[i], **boxes(train, i, k)}
        inputs["train"].append((p, i, str(train.images[i]), json.dumps(record)))
    inputs["train"] = shuffled_for_writing(inputs["train"], hp.seed)
    for split in ("val", "test"):
        sp = dm.splits[split]
        # evaluation scores the first caption's attention (the folder reader's _collate_eval)
        records = [json.dumps({"refs": sp.references[i], **boxes(sp, i, 0)}) for i in range(len(sp.images))]
        inputs[split] = [(i, i, str(path), records[i]) for i, path in enumerate(sp.images)]
    state = {
        "vocab": dm.vocab.to_dict(),
        "train_references": train.references,
        "domain": dm.domain,
        "casing": dm.casing,  # the captions' capitals (data.language de, fr, cs), for the model files fit writes
        "stores": "features" if features else "jpeg",
        "fingerprint": fingerprint or "",
        **recorded_format(found),
    }
    state["photo_rules"] = dm.photo_rules  # judged on the photos' files, which fit from the chunks will not have
    if dm.mixed_facts:  # photos mixed in (data.mix_*): the model files fit writes from the chunks say so
        state["mixed"] = dm.mixed_facts
    if features:  # where the training features lie: model files note photos unlike them (captioning.photos.domain)
        state["domain_check"] = dm.check_of(feats["train"], feats.get("val"))
    arrays = {s: f.numpy() for s, f in feats.items()}

    def item_fn(split: str) -> partial:  # a partial of a module-level function: picklable (spawn, forkserver)
        return partial(make_item, split, features=arrays.get(split))

    return optimize_splits(out, FAMILY, options, state, inputs, item_fn, num_workers, chunk_bytes)


def recorded_format(found) -> dict[str, Any]:
    """What a chunk folder's state records of its train photos (captioning.photos.jpeg_step.PhotoFormat): fit settles
    the model's JPEG step from it, as it would from the files."""
    return {"jpeg_step": tuple(found.step) if found.step else None, "photo_side": found.side, "photo_why": found.why}


# --- reading ---------------------------------------------------------------------------------------------------------
class ChunkImages(Sequence):
    """An evaluation split's images, read from its chunks by index: the image file's bytes (``prepared`` decodes them
    as it decodes a file)."""

    def __init__(self, root: str | Path, split: str):
        self.ds = split_dataset(root, split)  # a damaged chunk is one line naming its file when a sample is read
        self.n = split_size(root, split)  # every rank reads the whole split by index

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> bytes:
        if not -self.n <= i < self.n:  # an IndexError ends iteration (list(), a for loop): the dataset's is a crash
            raise IndexError(f"sample {i} of {self.n}")
        return bytes(self.ds[i % self.n]["jpeg"])


def load_chunks(dm) -> None:
    """Fill the caption data module ``dm`` from the chunk folder ``dm.hparams.root``: vocabulary and train references
    from ``data_state.pt``; val and test references (and features, when the chunks hold them) in memory, their images
    read by index; the train split streams (``StreamCollate``)."""
    from captioning.training.splits import CaptionSplit

    hp = dm.hparams
    root = hp.root
    manifest = read_manifest(root, FAMILY)
    made = manifest["options"]
    for name in SHAPING:
        if made.get(name) != hp[name]:
            raise ChunkError(
                f"data.{name}={hp[name]!r}, but {root} was made with {made.get(name)!r}: give the same data options "
                "to optimize and fit, or optimize again"
            )
    if hp.attention_targets and not made.get("attention_targets"):
        raise ChunkError(
            f"data.attention_targets: {root} holds no boxes: optimize again with --data.attention_targets true"
        )
    state = read_state(root)
    dm.chunk_state = state
    dm._domain_check = state.get("domain_check")
    dm.vocab = Vocabulary.from_dict(state["vocab"])
    dm.casing = state.get("casing")
    if state["stores"] == "features" and not hp.cache_features:
        raise ChunkError(f"{root} holds encoder features: set data.cache_features: true (and a frozen encoder)")
    dm.splits = {"train": CaptionSplit([], state["train_references"])}
    dm.say_cut(state["train_references"])  # the collate cuts them as they stream
    for split in ("val", "test"):
        items = read_all(root, split)
        if not items:  # a split optimize found empty (a test split with no photo): nothing to read
            dm.splits[split] = CaptionSplit([], [])
            continue
        try:
            records = [json.loads(it["caption"]) for it in items]
            refs = [r["refs"] for r in records]
            # attention targets: the first caption's token boxes (the one evaluation scores), the image's size
            boxes = [[r["boxes"]] for r in records] if hp.attention_targets else None
            sizes = [tuple(r["size"]) if r.get("size") else None for r in records] if hp.attention_targets else None
            if state["stores"] == "features":
                dm.features[split] = torch.from_numpy(np.stack([np.asarray(it["features"]) for it in items]))
                images: Sequence = [None] * len(items)
            else:
                images = ChunkImages(root, split)
        except (KeyError, TypeError, ValueError):
            raise ChunkError(f"{Path(root) / split}: a sample cannot be read: a damaged chunk") from None
        dm.splits[split] = CaptionSplit(images, refs, None, boxes, sizes)


class StreamCollate:
    """Streamed train samples -> the batch the folder reader's train collate makes: images (B, 3, H, W) or features
    (B, L, D), captions_in / targets (B, T), image_index, references, pair_index; with ``grid`` (attention targets)
    also attn_targets (B, T, L) and attn_targets_mask (B, T). Picklable (loader workers)."""

    def __init__(self, vocab: Vocabulary, preprocess, max_caption_len: int, grid: tuple[int, int] | None = None):
        self.vocab, self.preprocess, self.max_len, self.grid = vocab, preprocess, max_caption_len, grid

    def __call__(self, items: list[dict[str, Any]]) -> dict:
        v = self.vocab
        records = [json.loads(it["caption"]) for it in items]
        captions = [v.encode(r["tokens"][: self.max_len], eos=False) for r in records]
        if "features" in items[0]:
            visual = {"features": torch.from_numpy(np.stack([np.asarray(it["features"]) for it in items])).float()}
        else:
            visual = {"images": torch.stack([prepared(bytes(it["jpeg"]), self.preprocess) for it in items])}
        pad = partial(torch.nn.utils.rnn.pad_sequence, batch_first=True, padding_value=v.pad_id)
        batch = {
            **visual,  # (B, L, D) or (B, 3, H, W)
            "captions_in": pad([torch.tensor([v.bos_id, *c]) for c in captions]),  # (B, T)
            "targets": pad([torch.tensor([*c, v.eos_id]) for c in captions]),  # (B, T)
            "image_index": torch.tensor([int(it["image"]) for it in items]),  # (B,)
            "references": [r["refs"] for r in records],
            "pair_index": torch.tensor([int(it["index"]) for it in items]),  # (B,)
        }
        if self.grid is not None:
            batch.update(self._attention_targets(records, batch["targets"].size(1)))
        return batch

    def _attention_targets(self, records: list[dict], steps: int) -> dict[str, torch.Tensor]:
        """As the folder reader makes them (CaptionDataModule._token_cells), from the stored boxes and size."""
        from captioning.training.attention_targets import caption_cells
        from text_attn.core.attention_supervision import dense_targets

        cells = []
        for r in records:
            if "boxes" not in r:
                raise ChunkError("a train sample holds no token boxes: optimize again with --data.attention_targets")
            n_tokens = min(len(r["tokens"]), self.max_len)  # training truncates captions
            size = tuple(r["size"]) if r.get("size") else None
            cells.append(caption_cells(r["boxes"], n_tokens, None, size, self.grid, self.preprocess))
        target, mask = dense_targets(cells, steps, self.grid[0] * self.grid[1])
        return {"attn_targets": target, "attn_targets_mask": mask}


# --- img2dataset shards ----------------------------------------------------------------------------------------------
def shard_item(
    split: str, entry: tuple[str, list[tuple[int, int, str]]], encoder: Any = None
) -> Iterator[dict[str, Any]]:
    """optimize's function for one shard (runs in LitData's workers): its chosen samples, in the shard's order,
    as chunk samples. ``entry``: (shard path, [(sample index in the shard, index in the split, caption JSON)]);
    ``encoder``: the frozen encoder whose features are stored instead of the photos' bytes (given, not a global: a
    worker started by spawn or forkserver inherits none)."""
    from captioning.photos.shards import iter_shard

    path, chosen = entry
    record = {k: (i, caption) for k, i, caption in chosen}
    pending: list[dict[str, Any]] = []
    for sample in iter_shard(path, wanted=lambda k: k in record, notes=None):
        if sample.image is None:
            continue  # read whole by the first pass; changed since: left out (that pass named the damaged ones)
        i, caption = record[sample.index]
        item = {"index": i, "image": i, "caption": caption, "jpeg": sample.image}
        if encoder is None:
            yield item
            continue
        pending.append(item)
        if len(pending) == ENCODE_BATCH:
            yield from _encoded(pending, encoder)
            pending = []
    if pending:
        yield from _encoded(pending, encoder)


def _encoded(items: list[dict[str, Any]], encoder) -> list[dict[str, Any]]:
    """Shard samples with their photo's bytes replaced by the frozen encoder's (L, D) float16 features."""
    # In a forked worker the parent's thread pool is not usable (its first parallel op would wait forever), as in a
    # torch DataLoader worker: one thread each, the workers (--num_workers) are the parallelism.
    torch.set_num_threads(1)
    with torch.no_grad():
        images = torch.stack([prepared(it["jpeg"], encoder.preprocess) for it in items])  # (B, 3, H, W)
        feats = encoder(images).to(torch.float16).numpy()  # (B, L, D)
    out = []
    for it, f in zip(items, feats, strict=True):
        it = {k: v for k, v in it.items() if k != "jpeg"}
        out.append({**it, "features": f})
    return out


def _undecodable(sample) -> str | None:
    """Why a shard sample's photo cannot be decoded (bytes that are not an image, a JPEG cut off), else None: found
    here it is skipped with its line; stored, it stopped fit at its first epoch ("a damaged chunk"). The photo is
    decoded as ``caption`` reads one (every format it reads: HEIC and AVIF too), a JPEG at a small scale (its decoder's
    own, so a large photo costs a few milliseconds)."""
    from captioning.photos.preprocess import load_photo

    try:
        load_photo(sample.image, 64)
    except Exception as err:  # noqa: BLE001 - any decoder's error: the photo is unusable
        why = " ".join(str(err).split()).removeprefix("upload: ") or type(err).__name__  # load_photo names bytes so
        return f"{sample.name}: cannot be decoded ({why})"
    return None


def read_shard_captions(
    patterns: str, steps: list | None = None
) -> tuple[list[tuple[str, list[tuple[int, str]]]], int]:
    """The shards a pattern names (``expand_braces``) read once for their captions: per shard the (sample index,
    caption) of its usable samples, and how many were left out; a damaged sample is one line on stderr naming it.
    ``steps``: filled with the JPEG step and size of the first usable photos (captioning.photos.jpeg_step, at most its
    CHECKED)."""
    from captioning.photos.jpeg_step import CHECKED, header_of
    from captioning.photos.shards import expand_braces, iter_shard
    from text_attn.core.safe_files import inert

    shards, skipped = [], 0
    for pattern in patterns.split():
        for path in expand_braces(pattern):
            if not Path(path).is_file():
                raise CaptionDataError(f"{path}: no such shard")
            found = []
            for sample in iter_shard(path):
                text = (sample.text or "").strip()
                broken = None if sample.error else _undecodable(sample)
                if sample.error or broken or not caption_tokens(text):
                    what = "no caption (.txt member)" if not text else f"no word in its caption {text[:40]!r}"
                    why = sample.error or broken or f"{sample.name}: {what}"
                    print(f"caption-train optimize: skipped: {inert(why)}", file=sys.stderr)
                    skipped += 1
                    continue
                found.append((sample.index, text))
                if steps is not None and len(steps) < CHECKED:
                    steps.append(header_of(sample.image))
            shards.append((path, found))
    return shards, skipped


def optimize_shards(
    dm,
    out: str | Path,
    patterns: dict[str, str],
    num_workers: int = 1,
    chunk_bytes="64MB",
    config: dict[str, Any] | None = None,
    features: bool = False,
):
    """img2dataset webdataset shards -> chunks: ``patterns`` {train, val, test: shard pattern(s)}; one caption an image
    (the shard's ``KEY.txt``), read as a captions TSV's (readers.caption_tokens); the vocabulary from the train
    captions (data.min_freq).
    ``features``: the frozen ``model.encoder`` of ``config`` encodes each photo as its shard is written (in
    LitData's workers, ENCODE_BATCH at a time: nothing the size of the corpus is held in memory)."""
    from captioning.photos.jpeg_step import one_format

    hp = dm.hparams
    steps: list = []
    read = {split: read_shard_captions(patterns[split], steps if split == "train" else None)
            for split in ("train", "val", "test")}  # fmt: skip
    photos = one_format(steps)  # the train photos' JPEG step and side
    cfg = settled_encoder(config or {}, photos) if config else None
    inputs, counts, refs = {}, {}, {}
    for split, (shards, _) in read.items():
        n, inputs[split], refs[split] = 0, [], []
        for path, found in shards:
            chosen = []
            for k, text in found:
                tokens = caption_tokens(text)
                record = {"tokens": tokens, "k": 0, "refs": [tokens]} if split == "train" else {"refs": [tokens]}
                chosen.append((k, n, json.dumps(record)))
                refs[split].append([tokens])
                n += 1
            if chosen:
                inputs[split].append((path, chosen))
        counts[split] = n
        if n == 0:
            raise CaptionDataError(f"--shards_{split} {patterns[split]}: no usable sample")
    vocab = Vocabulary.build((c for caps in refs["train"] for c in caps), hp.min_freq)
    state = {"vocab": vocab.to_dict(), "train_references": refs["train"], "domain": Path(out).name,
             "stores": "jpeg", "fingerprint": "", **recorded_format(photos)}  # fmt: skip
    encoder = None
    if features:
        encoder, state["fingerprint"] = frozen_encoder(cfg)
        state["stores"] = "features"
    options = {**dict(hp), "features": features, "shards": patterns, "captions_per_image": None}

    def item_fn(split: str) -> partial:  # a partial of a module-level function: picklable (spawn, forkserver)
        return partial(shard_item, split, encoder=encoder)

    return optimize_splits(out, FAMILY, options, state, inputs, item_fn, num_workers, chunk_bytes, counts=counts)
