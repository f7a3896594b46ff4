"""The JPEG step of a model's training photos, read from the photos themselves.

A JPEG file keeps the quantization tables its encoder used (Pillow: ``Image.quantization``) and its chroma
subsampling (``JpegImagePlugin.get_sampling``). Pillow's (libjpeg's) ``save(quality=q)`` writes the standard tables
scaled by q, so the quality a file was saved at is the q whose tables equal the file's: the shared Flickr8k copies
read quality 90, 4:2:0. Only the headers are read (no pixels decoded): about 0.3 ms a photo.

A JPEG step describes photos that were recompressed at the source size (``model.encoder.source_side``): the shared
copies were squashed to 224 x 224 and saved at quality 90, so a photo of another size is squashed and recompressed
so before the network sees it. Full-size photos of many sizes (Flickr8k as people download it) went through no such
step, whatever quality their camera saved them at: they record none.

``settle_jpeg_step`` is what fit and optimize run: ``model.encoder.jpeg_quality`` / ``jpeg_subsampling`` left at
``auto`` (the default) take what the training photos show, and say it in one line; a value given by hand that the
photos contradict is refused in one line that says what to set.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import NamedTuple

from PIL import Image, JpegImagePlugin

from captioning.photos.preprocess import HEAD, SUBSAMPLINGS, file_head, photo_formats

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
    return header_of(src)[0]


def header_of(src: str | Path | bytes | Image.Image) -> tuple[JpegStep | None, tuple[int, int] | None]:
    """(the photo's JPEG step or None, its (width, height) or None when it cannot be read): its headers only."""
    if isinstance(src, Image.Image):
        return None, src.size  # pixels in memory (the shapes scenes): never recompressed
    try:
        head = src[:HEAD] if isinstance(src, bytes) else file_head(src)
        with Image.open(io.BytesIO(src) if isinstance(src, bytes) else src, formats=photo_formats(head, src)) as img:
            if img.format != "JPEG":
                return None, img.size
            tables = tuple(tuple(img.quantization[k]) for k in sorted(img.quantization))
            sampling, size = JpegImagePlugin.get_sampling(img), img.size
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return None, None  # not an image (or not readable: the data reader names those)
    if len(tables) == 1:  # greyscale: the luma table alone
        quality = next((q for t, q in _tables_by_quality().items() if t[0] == tables[0]), None)
    else:
        quality = _tables_by_quality().get(tables)
    if quality is None:
        return None, size
    return JpegStep(quality, SUBSAMPLINGS[sampling] if 0 <= sampling < len(SUBSAMPLINGS) else None), size


def one_step(steps: Sequence[JpegStep | None]) -> JpegStep | None:
    if not steps or any(s is None for s in steps):
        return None
    qualities = Counter(s.quality for s in steps)
    samplings = Counter(s.subsampling for s in steps if s.subsampling is not None)
    if len(qualities) != 1 or len(samplings) > 1:
        return None
    # all greyscale: no chroma to match; Pillow's own default for a colour photo
    return JpegStep(next(iter(qualities)), next(iter(samplings), "4:2:0"))


class PhotoFormat(NamedTuple):
    """What the training photos' headers say: their one JPEG step and their one size, when they share them."""

    step: JpegStep | None  # the JPEG step every photo read shares (None: not JPEG files of one quality)
    side: int | None  # the side every photo read shares, square (None: sizes differ, or not square; ANY: unknown)
    why: str = ""  # why there is no one step at one side, in words ("" when there is)


ANY = 0  # PhotoFormat.side of a chunk folder written before sizes were recorded: its step is taken as it was
AUTO = "auto"  # model.encoder.jpeg_quality / jpeg_subsampling: read from the training photos (the default)


def photo_format(photos: Sequence[str | Path | bytes | Image.Image], limit: int | None = CHECKED) -> PhotoFormat:
    """The one JPEG step and one square side of these photos (up to ``limit`` of them, spread evenly). A photo that
    cannot be read (an empty file) says nothing of them: training leaves it out, and one made a folder of good JPEGs
    "not all JPEG files" (no JPEG step recorded)."""
    stride = max(1, len(photos) // limit) if limit else 1
    reads = [header_of(p) for p in list(photos)[::stride][:limit]]
    return one_format([read for read in reads if read != (None, None)])


def one_format(reads: Sequence[tuple[JpegStep | None, tuple[int, int] | None]]) -> PhotoFormat:
    """The PhotoFormat of photos read by ``header_of`` (each: its step, its size)."""
    if not reads:
        return PhotoFormat(None, None, "there are none")
    step = one_step([s for s, _ in reads])
    sizes = Counter(size for _, size in reads)
    side = None
    if len(sizes) == 1 and (size := next(iter(sizes))) is not None and size[0] == size[1]:
        side = size[0]
    whys = []
    if step is None:
        qualities = Counter(s.quality for s, _ in reads if s is not None)
        if any(s is None for s, _ in reads):
            whys.append("not all JPEG files of the standard tables" if qualities else "not JPEG files")
        elif len(qualities) > 1:
            whys.append(f"JPEG files of {len(qualities)} qualities ({', '.join(map(str, sorted(qualities)))})")
        else:
            whys.append("JPEG files of several chroma subsamplings")
    if side is None:
        shown = ", ".join(f"{w} x {h}" for (w, h) in [s for s in sizes if s is not None][:3])
        whys.append(f"of {len(sizes)} sizes ({shown}, ...)" if len(sizes) > 1 else f"{shown} (not square)")
    return PhotoFormat(step, side, " and ".join(whys))


def _named(step: JpegStep | None) -> str:
    return "none" if step is None else f"{step.quality}, {step.subsampling}"


def settle_jpeg_step(
    source_side: int | None, quality: int | str | None, subsampling: str | None, found: PhotoFormat
) -> tuple[JpegStep | None, str]:
    """The JPEG step a model records, and one line saying what the training photos showed ("" when there is nothing
    to say: no squash, or a value given by hand that they agree with).

    ``quality`` / ``subsampling``: the ``model.encoder`` options; ``auto`` (both) takes the photos' own step when
    they are JPEG files of one quality at ``source_side`` x ``source_side``, else none. A value given by hand
    (null included) that the photos contradict: ValueError, one line that says what to set."""
    if (quality == AUTO) != (subsampling == AUTO):
        raise ValueError(
            "model.encoder.jpeg_quality and jpeg_subsampling are given together, or both left auto (read from the "
            f"training photos); got {quality!r} and {subsampling!r}"
        )
    if source_side is None:  # no squash, so no step after it (Preprocess refuses a quality without source_side)
        return (None, "") if quality == AUTO else (JpegStep(int(quality), subsampling) if quality else None, "")
    side = f"{source_side} x {source_side}"
    step = found.step if found.side in (source_side, ANY) else None
    why = found.why or (f"{found.side} x {found.side}, not the source side {side}" if step is None else "")
    if quality == AUTO:
        if step is None:
            return None, f"the training photos are {why}: no JPEG step recorded (other photos are squashed to {side})"
        return step, (
            f"the training photos are {side} JPEG files of quality {step.quality}, {step.subsampling} (their "
            f"quantization tables): recorded, so a photo of another size is squashed to {side} and recompressed so"
        )
    given = None if quality is None else JpegStep(int(quality), subsampling)
    if given == step:
        return given, ""
    if step is None:
        raise ValueError(
            f"model.encoder.jpeg_quality / jpeg_subsampling say {_named(given)}, but the training photos are {why}, "
            f"so they went through no JPEG step at {side}: leave both auto (the default: read from the photos)"
        )
    raise ValueError(
        f"model.encoder.jpeg_quality / jpeg_subsampling say {_named(given)}, but the training photos are {side} JPEG "
        f"files of quality {step.quality}, {step.subsampling} (their quantization tables): leave both auto (the "
        f"default: read from the photos), or set {step.quality} and '{step.subsampling}'"
    )
