"""What ``caption`` reads and writes at collection scale: image paths from arguments, folders (recursive) and stdin;
images decoded and preprocessed in DataLoader workers, in parallel with the model; the JSON Lines file that
``--resume`` continues. No Lightning.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from PIL import Image
from torch.utils.data import DataLoader, Dataset

from captioning.photo_check import photo_stats
from captioning.preprocess import ImageReadError, Preprocess, load_photo

# What a folder contributes: files with these extensions (any case), found recursively, in sorted order.
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"})


def image_paths(items: Iterable[str], stdin: IO[str] | None = None, empty: list[str] | None = None) -> Iterator[str]:
    """Expand IMAGE arguments: a folder -> its image files (recursive, sorted; symlinked folders not followed),
    ``-`` -> one path per non-empty line of stdin, anything else as given (a missing file is reported later).
    A folder without image files is appended to ``empty`` (the caller names it: it is a failed input)."""
    for item in items:
        if item == "-":
            for line in stdin if stdin is not None else sys.stdin:
                if line.strip():
                    yield line.rstrip("\r\n")  # a list written on Windows too
        elif os.path.isdir(item):
            found = 0
            for root, dirs, files in os.walk(item):
                dirs.sort()
                for name in sorted(files):
                    if os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS:
                        found += 1
                        yield os.path.join(root, name)
            if not found and empty is not None:
                empty.append(item)
        else:
            yield item


def read_done(jsonl: Path) -> set[str]:
    """The images a JSON Lines output already holds a caption for (``--resume``). The file is rewritten with those
    records only: a line torn by a killed run and the records of failed images (tried again) are dropped."""
    if not jsonl.is_file():
        return set()
    kept, done = [], set()
    for line in jsonl.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and rec.get("error") is None and isinstance(rec.get("image"), str):
            kept.append(line)
            done.add(rec["image"])
    tmp = jsonl.with_name(jsonl.name + ".part")
    tmp.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
    os.replace(tmp, jsonl)
    return done


class ImageFiles(Dataset):
    """Per path: the preprocessed tensor (3, S, S), the image's size, its photo_stats (captioning.photo_check), and
    with ``keep`` the RGB image itself (for overlays); an unreadable file gives its one-line error instead. Runs in
    DataLoader workers."""

    def __init__(self, paths: list[str], preprocess: Preprocess, keep: bool = False):
        self.paths, self.preprocess, self.keep = paths, preprocess, keep

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> dict[str, Any]:
        name = self.paths[i]
        item: dict[str, Any] = {"name": name, "tensor": None, "image": None, "error": None, "note": None}
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", Image.DecompressionBombWarning)
                image, size = load_photo(name, self.preprocess.decode_side)  # a large JPEG: decoded smaller
        except ImageReadError as err:
            item["error"] = str(err)
            return item
        if any(issubclass(w.category, Image.DecompressionBombWarning) for w in caught):
            pixels = size[0] * size[1]
            item["note"] = f"{name}: a very large image ({pixels / 1e6:.0f} megapixels): decoding it takes much memory"
        item["tensor"] = self.preprocess(image)  # (3, S, S)
        item["size"] = size  # the full image's (W, H): the record's crop box is in its pixels
        item["photo_stats"] = photo_stats(image)  # for a photo model's out-of-domain check
        if self.keep:
            item["image"] = image
        return item


def image_batches(paths: list[str], preprocess: Preprocess, batch_size: int, workers: int, keep: bool) -> DataLoader:
    """Batches of ``ImageFiles`` items (lists, in input order), decoded by ``workers`` processes ahead of the model;
    at most a few batches are in memory at any time, whatever the number of paths."""
    return DataLoader(
        ImageFiles(paths, preprocess, keep),
        batch_size=batch_size,
        num_workers=workers,
        collate_fn=list,
        prefetch_factor=2 if workers else None,
    )
