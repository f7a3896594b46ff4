"""Readers for Flickr8k as people actually have it: the original distribution and Kaggle's copy.

Both return ``{"train", "val", "test": [ImageItem]}`` like ``read_karpathy`` (captioning.data), so every reader
feeds the same data module.

Original layout (the dataset's own download; the image folder's typo is the original's)::

    ROOT/Flicker8k_Dataset/*.jpg
    ROOT/Flickr8k_text/Flickr8k.token.txt           "<image>#<0-4><TAB><caption>"
    ROOT/Flickr8k_text/Flickr_8k.{train,dev,test}Images.txt   one image name a line (6000 / 1000 / 1000)

Kaggle layout (a CSV with a header line ``image,caption``; a caption may be quoted and hold commas)::

    ROOT/Images/*.jpg
    ROOT/captions.txt

Kaggle's copy ships no split: when the three split files above are found in ROOT or ROOT/Flickr8k_text they are used
(the standard split, the same as Karpathy's), else the images are shuffled once with ``seed`` and 1000 / 1000 of them
(an eighth each for a smaller set) held out for val / test.

Real files carry junk: Flickr8k.token.txt has 505 lines naming images that are not in the folder
(``..._586949ec62.jpg.1#0``) and the split files list names that are not there either. Such lines are skipped and
counted in ONE stderr line per file; a missing folder, a missing or unreadable file, or a split left empty is a
CaptionDataError naming it.

Captions are lowercased and split into words; punctuation-only tokens are dropped (as in Karpathy's tokens, which
coco-caption's PTB tokenizer also strips before scoring).
"""

from __future__ import annotations

import csv
import io
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from captioning.attention_targets import TokenBoxes
from text_attn.core.vocab import tokenize

LAYOUTS = ("auto", "original", "kaggle")
ORIGINAL_IMAGES, ORIGINAL_TEXT = "Flicker8k_Dataset", "Flickr8k_text"
TOKEN_FILE = "Flickr8k.token.txt"
SPLIT_FILES = {
    "train": "Flickr_8k.trainImages.txt",
    "val": "Flickr_8k.devImages.txt",
    "test": "Flickr_8k.testImages.txt",
}
KAGGLE_IMAGES, KAGGLE_CAPTIONS = "Images", "captions.txt"
_HELD_OUT = 1000  # Flickr8k's val and test sizes, for a Kaggle copy without split files


class CaptionDataError(ValueError):
    """Caption data that cannot be used; the message is one line naming the input and what is wrong."""


@dataclass
class ImageItem:
    path: Path
    captions: list[list[str]]  # reference captions as token lists
    boxes: list[TokenBoxes] | None = None  # per caption, its token boxes (karpathy "boxes"); None: no sentence has any
    size: tuple[int, int] | None = None  # (width, height) in pixels when the JSON gives them


def caption_tokens(text: str) -> list[str]:
    """A raw caption -> lowercased word tokens, punctuation-only tokens dropped."""
    return [t for t in tokenize(text) if any(ch.isalnum() for ch in t)]


def _read_text(path: Path, what: str) -> str:
    if not path.is_file():
        raise CaptionDataError(f"{path}: {what} not found")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise CaptionDataError(f"{path}: cannot read {what} ({err.strerror or err})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise CaptionDataError(f"{path}: line {line}: not UTF-8 text ({what})") from None


def _note(path: Path, skipped: int, total: int, why: str, first: str) -> None:
    if skipped:
        print(f"caption data: {path}: skipped {skipped} of {total} lines {why} (first: {first!r})", file=sys.stderr)


def _image_names(folder: Path) -> set[str]:
    if not folder.is_dir():
        raise CaptionDataError(f"{folder}: image folder not found")
    names = {p.name for p in folder.iterdir() if p.is_file()}
    if not names:
        raise CaptionDataError(f"{folder}: image folder has no files")
    return names


def read_token_file(path: Path, images: set[str]) -> dict[str, list[list[str]]]:
    """``<image>#<n><TAB><caption>`` lines -> {image name: [tokens, ...]} in file order, for images in ``images``."""
    text = _read_text(path, "captions file")
    captions: dict[str, list[list[str]]] = {}
    skipped, total, first = 0, 0, ""
    for line in text.splitlines():
        if not line.strip():
            continue
        total += 1
        key, tab, caption = line.partition("\t")
        name = key.rsplit("#", 1)[0].strip()
        toks = caption_tokens(caption)
        if not tab or name not in images or not toks:
            skipped, first = skipped + 1, first or line[:60]
            continue
        captions.setdefault(name, []).append(toks)
    _note(path, skipped, total, "that name no image in the folder or have no caption", first)
    if not captions:
        raise CaptionDataError(f"{path}: no caption names an image of the folder")
    return captions


def read_kaggle_captions(path: Path, images: set[str]) -> dict[str, list[list[str]]]:
    """Kaggle's ``image,caption`` CSV (header line first) -> {image name: [tokens, ...]}."""
    text = _read_text(path, "captions file")
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header is None or [h.strip().lower() for h in header[:2]] != ["image", "caption"]:
        raise CaptionDataError(f"{path}: line 1: expected the header 'image,caption', got {','.join(header or [])!r}")
    captions: dict[str, list[list[str]]] = {}
    skipped, total, first = 0, 0, ""
    for row in rows:
        if not row or not "".join(row).strip():
            continue
        total += 1
        name = row[0].strip()
        toks = caption_tokens(",".join(row[1:]))  # an unquoted caption with commas spans several fields
        if name not in images or not toks:
            skipped, first = skipped + 1, first or ",".join(row)[:60]
            continue
        captions.setdefault(name, []).append(toks)
    _note(path, skipped, total, "that name no image in the folder or have no caption", first)
    if not captions:
        raise CaptionDataError(f"{path}: no caption names an image of the folder")
    return captions


def read_split_file(path: Path, captioned: dict[str, list[list[str]]]) -> list[str]:
    """One image name a line -> the names that have captions (others skipped and counted), without repeats."""
    names, seen, skipped, total, first = [], set(), 0, 0, ""
    for line in _read_text(path, "split file").splitlines():
        name = line.strip()
        if not name:
            continue
        total += 1
        if name not in captioned or name in seen:
            skipped, first = skipped + 1, first or name[:60]
            continue
        seen.add(name)
        names.append(name)
    _note(path, skipped, total, "that name no captioned image of the folder", first)
    if not names:
        raise CaptionDataError(f"{path}: the split is empty (no line names a captioned image)")
    return names


def detect_layout(root: Path) -> str:
    """``original`` or ``kaggle``, from what ROOT holds."""
    if not root.is_dir():
        raise CaptionDataError(f"{root}: data root not found")
    if (root / ORIGINAL_IMAGES).exists() or (root / ORIGINAL_TEXT).exists():
        return "original"
    if (root / KAGGLE_CAPTIONS).exists() or (root / KAGGLE_IMAGES).exists():
        return "kaggle"
    raise CaptionDataError(
        f"{root}: neither Flickr8k layout found (expected {ORIGINAL_IMAGES}/ and {ORIGINAL_TEXT}/, "
        f"or Kaggle's {KAGGLE_IMAGES}/ and {KAGGLE_CAPTIONS})"
    )


def _split_dir(root: Path) -> Path | None:
    for folder in (root / ORIGINAL_TEXT, root):
        if all((folder / f).is_file() for f in SPLIT_FILES.values()):
            return folder
    return None


def read_flickr8k(root: str | Path, layout: str = "auto", seed: int = 0) -> dict[str, list[ImageItem]]:
    """Flickr8k at ROOT (either layout, module doc) -> {"train", "val", "test": [ImageItem]}."""
    root = Path(root)
    if layout not in LAYOUTS:
        raise CaptionDataError(f"unknown Flickr8k layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    layout = detect_layout(root) if layout == "auto" else layout
    if layout == "original":
        folder = root / ORIGINAL_IMAGES
        captions = read_token_file(root / ORIGINAL_TEXT / TOKEN_FILE, _image_names(folder))
        split_dir = root / ORIGINAL_TEXT
    else:
        folder = root / KAGGLE_IMAGES
        captions = read_kaggle_captions(root / KAGGLE_CAPTIONS, _image_names(folder))
        split_dir = _split_dir(root)
    if split_dir is not None:
        names = {s: read_split_file(split_dir / f, captions) for s, f in SPLIT_FILES.items()}
    else:
        pool = sorted(captions)
        random.Random(seed).shuffle(pool)
        held = min(_HELD_OUT, max(1, len(pool) // 8))
        if len(pool) < 3:
            raise CaptionDataError(f"{root / KAGGLE_CAPTIONS}: {len(pool)} captioned images are too few to split")
        names = {"val": pool[:held], "test": pool[held : 2 * held], "train": pool[2 * held :]}
    return {s: [ImageItem(folder / n, captions[n]) for n in v] for s, v in names.items()}
