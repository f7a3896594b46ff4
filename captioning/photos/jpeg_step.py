"""The JPEG step of a model's training photos, read from the photos themselves.

A JPEG file keeps the quantization tables its encoder used (Pillow: ``Image.quantization``) and its chroma
subsampling (``JpegImagePlugin.get_sampling``). Pillow's (libjpeg's) ``save(quality=q)`` writes the standard tables
scaled by q, so the quality a file was saved at is the q whose tables equal the file's: the shared Flickr8k copies
read quality 90, 4:2:0. Only the headers are read (no pixels decoded): about 0.3 ms a photo.

``check_jpeg_step`` is what fit runs: a model whose ``model.encoder.jpeg_quality`` / ``jpeg_subsampling`` is not what
its training photos say is refused in one line that says what to set (a model trained on other photos records their
own step; photos that are not JPEG files of one quality, a folder of PNGs or the shapes scenes, record none).
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import NamedTuple

from PIL import Image, JpegImagePlugin

from captioning.photos.preprocess import SUBSAMPLINGS, Preprocess

CHECKED = 1000  # at most this many training photos are read, spread evenly over the split


class JpegStep(NamedTuple):
    quality: int  # 1..100, as Pillow's save(quality=) takes it
    subsampling: str | None  # "4:4:4", "4:2:2", "4:2:0"; None for a greyscale file (one component: no chroma)


@cache
def _tables_by_quality() -> dict[tuple, int]:
    """{(luma table, chroma table): quality} of what Pillow's save(quality=q) writes, q = 1..100. Qualities whose
    tables coincide (near 100) write the same file, so either one names it."""
    out = {}
    for q in range(1, 101):
        buffer = io.BytesIO()
        Image.new("RGB", (8, 8)).save(buffer, "JPEG", quality=q)
        buffer.seek(0)
        with Image.open(buffer) as img:
            out.setdefault(tuple(tuple(img.quantization[k]) for k in sorted(img.quantization)), q)
    return out


def jpeg_step_of(src: str | Path | bytes | Image.Image) -> JpegStep | None:
    """The quality and chroma subsampling a JPEG file (or its bytes: a shard's) was saved with; None when it is not a
    JPEG file or its tables are not any quality's of the standard tables (another encoder's own tables)."""
    if isinstance(src, Image.Image):
        return None  # pixels in memory (the shapes scenes): never recompressed
    try:
        with Image.open(io.BytesIO(src) if isinstance(src, bytes) else src, formats=["JPEG"]) as img:
            tables = tuple(tuple(img.quantization[k]) for k in sorted(img.quantization))
            sampling = JpegImagePlugin.get_sampling(img)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None  # not a JPEG file (or not readable: the data reader names those)
    if len(tables) == 1:  # greyscale: the luma table alone
        quality = next((q for t, q in _tables_by_quality().items() if t[0] == tables[0]), None)
    else:
        quality = _tables_by_quality().get(tables)
    if quality is None:
        return None
    return JpegStep(quality, SUBSAMPLINGS[sampling] if 0 <= sampling < len(SUBSAMPLINGS) else None)


def photos_jpeg_step(photos: Sequence[str | Path | Image.Image], limit: int | None = CHECKED) -> JpegStep | None:
    """The one JPEG step of these photos (up to ``limit`` of them, spread evenly): None unless every one read is a
    JPEG file of the same quality and the same subsampling (greyscale files agree with any)."""
    return one_step(steps_of(photos, limit))


def steps_of(photos: Sequence[str | Path | Image.Image], limit: int | None = CHECKED) -> list[JpegStep | None]:
    stride = max(1, len(photos) // limit) if limit else 1
    return [jpeg_step_of(p) for p in list(photos)[::stride][:limit]]


def one_step(steps: Sequence[JpegStep | None]) -> JpegStep | None:
    if not steps or any(s is None for s in steps):
        return None
    qualities = Counter(s.quality for s in steps)
    samplings = Counter(s.subsampling for s in steps if s.subsampling is not None)
    if len(qualities) != 1 or len(samplings) > 1:
        return None
    # all greyscale: no chroma to match; Pillow's own default for a colour photo
    return JpegStep(next(iter(qualities)), next(iter(samplings), "4:2:0"))


def check_jpeg_step(
    preprocess: Preprocess, photos: Sequence[str | Path | Image.Image], known: tuple[JpegStep | None] | None = None
) -> None:
    """Refuse (ValueError, one line) a squash to ``source_side`` whose recorded JPEG step is not the one the training
    photos themselves show; nothing to check without ``source_side`` (photos go to the network as they come).
    ``known``: (the photos' step,) when it was read before (a chunk folder records it: its photos are not files)."""
    if preprocess.source_side is None or (not photos and known is None):
        return
    found = known[0] if known is not None else photos_jpeg_step(photos)
    recorded = None
    if preprocess.jpeg_quality is not None:
        recorded = JpegStep(int(preprocess.jpeg_quality), preprocess.jpeg_subsampling)
    if found == recorded:
        return
    if found is None:
        raise ValueError(
            f"model.encoder.jpeg_quality {recorded.quality} / jpeg_subsampling {recorded.subsampling!r}: the "
            "training photos are not JPEG files of one quality, so no JPEG step follows the squash; leave both null"
        )
    raise ValueError(
        f"the training photos are JPEG quality {found.quality}, {found.subsampling} (their quantization tables), "
        f"but model.encoder.jpeg_quality / jpeg_subsampling say "
        f"{'none' if recorded is None else f'{recorded.quality}, {recorded.subsampling}'}: set "
        f"model.encoder.jpeg_quality: {found.quality} and jpeg_subsampling: '{found.subsampling}' so photos of other "
        "sizes are prepared as they were"
    )
