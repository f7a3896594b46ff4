"""What ``caption`` reads and writes at collection scale (the image paths its arguments name: image_paths.py):
images decoded and preprocessed in DataLoader workers, in parallel with the model; the JSON Lines file that
``--resume`` continues. No Lightning.
"""

from __future__ import annotations

import functools
import io
import json
import os
import warnings
from pathlib import Path
from typing import Any

from PIL import ExifTags, Image
from torch.utils.data import Dataset

from captioning.photos.colour import converts
from captioning.photos.photo_check import photo_stats
from captioning.photos.preprocess import ImageReadError, Preprocess, load_photo
from text_attn.core.os_text import os_name, utf8_name
from text_attn.core.safe_files import text_lines, write_text


class ResumeError(ValueError):
    """The --jsonl file to resume is not one that caption wrote; the message names the file and line."""


def image_key(path: str) -> str:
    """What identifies an image between runs: its absolute, normalised path with its folder's links resolved
    (``rs/a.jpg``, ``./rs/a.jpg``, ``$PWD/rs/a.jpg`` and ``link-to-rs/a.jpg`` are one image), relative paths taken
    from the working directory. The folder only: resolved once per folder (:func:`_real_folder`), not per photo.
    ``path`` as the file functions take it; the key as records name it (os_text.utf8_name: the same under every
    locale)."""
    folder, name = os.path.split(os.path.abspath(path))
    return utf8_name(os.path.join(_real_folder(folder), name))


@functools.lru_cache(maxsize=4096)
def _real_folder(folder: str) -> str:
    return os.path.realpath(folder)


def captioned_lines(jsonl: Path) -> list[tuple[str, str]]:
    """(image key, line) of each caption a JSON Lines output of caption's holds (``--resume``), in file order: a
    line torn by a killed run (the last), empty lines and the records of failed images (tried again) are left out.
    Any other line that is not a caption record means the file is not caption's: ResumeError. Only reads."""
    if not jsonl.is_file():
        return []
    held = []
    text = jsonl.read_text(encoding="utf-8")
    lines = text_lines(text)
    # a record is written with its newline, so only a last line WITHOUT one can be a killed run's torn write; a whole
    # last line that is not a record is someone else's (dropping it lost a user's own line)
    last = len(lines) - 1 if lines and not text.endswith("\n") else -1
    for i, line in enumerate(lines):
        try:
            rec = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            rec = None
        if not (isinstance(rec, dict) and isinstance(rec.get("image"), str) and "caption" in rec):
            if i == last or not line.strip():  # the torn last line of a killed run, or an empty line
                continue
            raise ResumeError(
                f"line {i + 1} is not a caption record: --resume continues a file that caption --jsonl wrote "
                "(give that file, or a new one without --resume)"
            )
        if rec.get("error") is None:
            held.append((image_key(os_name(rec["image"])), line))  # a record's name is UTF-8 (os_text)
    return held


def done_in(paths: list[str], done: set[str]) -> int:
    """How many of the inputs (files, and shard members by their ``SHARD.tar/MEMBER`` names) ``done`` (image keys)
    holds: what ``--resume`` says it skips."""
    from captioning.photos.shards import is_shard

    shards = {image_key(p) for p in paths if is_shard(p)}
    files = sum(image_key(p) in done for p in paths if not is_shard(p))
    members = 0
    for key in done if shards else ():
        parent = os.path.dirname(key)
        while parent and parent not in shards and parent != os.path.dirname(parent):  # a member in a tar's folder
            parent = os.path.dirname(parent)
        members += parent in shards
    return files + members


def read_done(jsonl: Path) -> set[str]:
    """The images (:func:`image_key`) a JSON Lines output already holds a caption for (``--resume``). The file is
    rewritten with those records only (:func:`captioned_lines`); a file that is not caption's (ResumeError) is left
    as it is."""
    if not jsonl.is_file():
        return set()
    held = captioned_lines(jsonl)
    write_text(jsonl, "".join(f"{line}\n" for _, line in held))  # a fresh temporary file, renamed: never FILE.part
    return {key for key, _ in held}


def read_jpeg(name: str, src: str | bytes) -> dict[str, Any] | None:
    """A photo for ``caption --decode-on-device``: a baseline JPEG's bytes (a 1-D uint8 tensor, decoded later on the
    model's device: captioning.photos.device_prepare) and its size after the EXIF rotation, read from its header
    without decoding it. None for anything else (progressive or CMYK JPEGs, colours in another space than sRGB, other
    formats, unreadable files): those are read and prepared here as usual, which also says what is wrong with them."""
    import torch

    try:
        data = src if isinstance(src, bytes) else Path(src).read_bytes()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=["JPEG"]) as img:
                plain = img.format == "JPEG" and img.mode in ("RGB", "L") and not img.info.get("progressive")
                plain = plain and not converts(img.info)  # its colours to sRGB: Pillow's path (colour.in_srgb)
                width, height = img.size
                turned = img.getexif().get(ExifTags.Base.Orientation) in (5, 6, 7, 8)  # as load_photo reads it
    except Exception:  # noqa: BLE001 - the usual reading names the problem
        return None
    if not plain:
        return None
    item: dict[str, Any] = {"name": name, "tensor": None, "image": None, "error": None, "note": None}
    if any(issubclass(w.category, Image.DecompressionBombWarning) for w in caught):
        item["note"] = (
            f"{name}: a very large image ({width * height / 1e6:.0f} megapixels): decoding it takes much memory"
        )
    item["jpeg"] = torch.frombuffer(bytearray(data), dtype=torch.uint8)  # (bytes,)
    item["size"] = (height, width) if turned else (width, height)
    return item


def read_photo(
    name: str, src: str | bytes, preprocess: Preprocess, keep: bool = False, raw: bool = False
) -> dict[str, Any]:
    """One photo read and prepared, as ``caption`` captions it: the preprocessed tensor (3, S, S), the image's size,
    its photo_stats (captioning.photos.photo_check), and with ``keep`` the RGB image itself (for overlays and the page);
    an unreadable photo gives its one-line error (naming ``name``) instead. ``src``: a file, or a shard member's bytes.
    Runs in DataLoader workers: the per-photo half of the per-batch work (captioning.commands.caption_batch is the
    other). ``raw``: a baseline JPEG is only read (:func:`read_jpeg`), to be decoded on the model's device."""
    if raw and not keep:
        item = read_jpeg(name, src)
        if item is not None:
            return item
    item = {"name": name, "tensor": None, "image": None, "error": None, "note": None}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", Image.DecompressionBombWarning)
            image, size = load_photo(src, preprocess.decode_side, name)  # a large JPEG: decoded smaller; bytes named
    except ImageReadError as err:
        item["error"] = str(err)
        return item
    if any(issubclass(w.category, Image.DecompressionBombWarning) for w in caught):
        pixels = size[0] * size[1]
        item["note"] = f"{name}: a very large image ({pixels / 1e6:.0f} megapixels): decoding it takes much memory"
    item["tensor"] = preprocess(image)  # (3, S, S)
    item["size"] = size  # the full image's (W, H): the record's crop box is in its pixels
    item["photo_stats"] = photo_stats(image)  # for a photo model's out-of-domain check
    if keep:
        item["image"] = image
    return item


class ImageFiles(Dataset):
    """Per path, :func:`read_photo` (map-style; ``caption`` itself reads through :class:`PhotoStream`)."""

    def __init__(self, paths: list[str], preprocess: Preprocess, keep: bool = False):
        self.paths, self.preprocess, self.keep = paths, preprocess, keep

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return read_photo(self.paths[i], self.paths[i], self.preprocess, self.keep)
