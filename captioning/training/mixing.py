"""Photos mixed into training beside the data's own: trained on, never validated or tested on (data.mix_root,
data.mix_image_dir with data.mix_captions_tsv; data.mix_size of them).

Why: a model taught a folder of a new kind of photo forgets the photos it knew (benchmarks/your_photos.py, shapes: the
bundled model's CIDEr-D on Flickr8k's other test photos 53.26 -> 23.62). Some of the old photos trained on beside the
new ones keep it. They cannot simply be put in the folder: a folder's val and test photos are drawn from all of its
photos by a hash of their names (captioning.training.data), so the old photos would become most of val and test, and
the scores would no longer say how the model does on the new kind.

``mix_root`` is a Flickr8k folder (either layout: captioning.training.readers.read_flickr8k) with its standard split
files: its train split only, so that no photo Flickr8k holds out for scoring is trained on (a copy without them is
refused: its split would be a random draw). ``mix_image_dir`` is any folder with its captions file
(read_folder's format, Flickr8k's token file too): all its photos. ``mix_size`` takes that many, the first in the order
of a hash of the seed and each photo's name: the same photos at every run, and a larger size keeps the smaller one's.
A mixed photo that is one of the data's own (the same file, one of the same name and size, or a file of the same
bytes under another name) is left out, said in one line: it would be trained on twice, or trained on where it is held
out.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from pathlib import Path

import torch

from captioning.training.readers import (
    ORIGINAL_TEXT,
    SPLIT_FILES,
    CaptionDataError,
    ImageItem,
    content_digest,
    has_standard_split,
    read_flickr8k,
    read_folder,
)
from text_attn.core.ranks import say


def _order(seed: int, name: str) -> bytes:
    return hashlib.sha256(f"mix\t{seed}\t{name}".encode()).digest()


def _identity(path: Path) -> tuple:
    """What makes two photo files one: the file itself, or its name with its size (a copy in another folder)."""
    try:
        return (path.resolve(),), (path.name, path.stat().st_size)
    except OSError:  # gone since it was listed: the reader's checks say so, not this
        return (path.resolve(),), (path.name, -1)


def _copies_of(photos: list[Path]) -> Callable[[Path], bool]:
    """Whether a file holds the bytes of one of ``photos`` (a copy under another name: IMG_0002.jpg of a mixed-in
    photo was held out as the data's own and trained on as the mix's, its test score of a photo learned; the folder
    reader makes such copies one photo too). Only files of a size one of ``photos`` has are read, each once."""
    by_size: dict[int, list[Path]] = {}
    for path in photos:
        with contextlib.suppress(OSError):  # gone since it was listed: the reader's checks say so
            by_size.setdefault(path.stat().st_size, []).append(path)
    digests: dict[Path, str | None] = {}

    def digest(path: Path) -> str | None:
        if path not in digests:
            digests[path] = content_digest(path)
        return digests[path]

    def copy(path: Path) -> bool:
        try:
            alike = by_size.get(path.stat().st_size)
        except OSError:
            return False
        return bool(alike) and (found := digest(path)) is not None and any(digest(p) == found for p in alike)

    return copy


def mixed_in(
    own: dict[str, list[ImageItem]],
    root: str | None,
    layout: str,
    image_dir: str | None,
    captions_tsv: str | None,
    size: int | None,
    seed: int,
    strict: bool,
) -> tuple[list[ImageItem], str]:
    """The photos to train on beside ``own`` (split -> items: the data's own photos), and what they are in words
    ("1,000 of Flickr8k's train photos"), said on stderr with what was left out."""
    option = "data.mix_root" if root else "data.mix_image_dir, data.mix_captions_tsv"
    try:  # the reader's line, said of the option: the data's own files are read by the same readers
        if root and not has_standard_split(root, layout):  # Kaggle's download has none: a random "train" holds
            # about 1 in 8 of the standard test photos, on which the everyday photos are scored (docs/captioning.md)
            raise CaptionDataError(
                f"{root}: no standard split files ({', '.join(SPLIT_FILES.values())}) in it or in {ORIGINAL_TEXT}/: "
                "its train photos cannot be told from those Flickr8k holds out for scoring, and a random draw would "
                "mix its test photos in; put the three files there, or give a folder of photos as data.mix_image_dir "
                "with data.mix_captions_tsv"
            )
        pool = read_flickr8k(root, layout, seed)["train"] if root else read_folder(image_dir, captions_tsv, strict)
    except CaptionDataError as e:
        raise CaptionDataError(f"{option}: {e}") from None
    if root:
        what, where = "Flickr8k's train photos", f"data.mix_root {root}"
    else:
        what, where = f"the photos of {Path(image_dir).resolve().name}", f"data.mix_captions_tsv {captions_tsv}"
    mine = set()
    for items in own.values():
        for it in items:
            mine.update(_identity(Path(it.path)))
    same_bytes = _copies_of([Path(it.path) for items in own.values() for it in items])
    kept = [it for it in pool if not mine.intersection(_identity(Path(it.path))) and not same_bytes(Path(it.path))]
    theirs = len(pool) - len(kept)  # photos of the mix that are the data's own
    if not kept:
        raise CaptionDataError(f"{where}: all {len(pool):,} of its photos are the data's own: nothing to mix in")
    if size is not None and size > len(kept):
        held = f" ({theirs:,} more are the data's own)" if theirs else ""
        raise CaptionDataError(f"data.mix_size {size:,}: {where} has {len(kept):,} photos to mix in{held}")
    kept.sort(key=lambda it: _order(seed, it.key or Path(it.path).name))
    kept = kept[:size] if size is not None else kept
    said = f"{len(kept):,} of {what}" if len(kept) < len(pool) else f"all {len(kept):,} of {what}"
    captions = sum(len(it.captions) for it in kept)
    line = f"caption data: mixed in {said} ({captions:,} captions): trained on, never validated or tested on"
    line += f"; {theirs:,} left out as the data's own photos" if theirs else ""
    say(line)
    return kept, said


def with_mixed_held_out(train, val, mixed: int):
    """``train`` and ``val`` (features (N, ...) tensors, or lists of photos) for the domain check
    (captioning.photos.domain.domain_check: prototypes of train, a threshold set on val): every tenth of train's last
    ``mixed`` rows (the photos mixed in) moved to val. Val holds only the data's own photos: a threshold set on them
    alone flagged every everyday photo as unlike the training ones (30 of 30 Flickr8k photos, for a model trained on
    shape scenes with 500 of Flickr8k's mixed in, which captions them at CIDEr-D 48.51)."""
    n = len(train)
    held = list(range(n - mixed, n))[9::10] if 10 <= mixed <= n else []
    if not held:
        return train, val
    out = set(held)
    kept = [i for i in range(n) if i not in out]
    if isinstance(train, torch.Tensor):
        extra = train[held]
        return train[kept], extra if val is None or not len(val) else torch.cat([val, extra])
    return [train[i] for i in kept], [*(val or []), *(train[i] for i in held)]
