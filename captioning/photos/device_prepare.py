"""Decoding and preparing photos on the model's device (``caption --decode-on-device``), in batches.

The CPU path (captioning.photos.preprocess.Preprocess) decodes each photo with Pillow in a loader worker, squashes it
to the training photos' side, applies their JPEG step and resizes it to the network's input. Here the loader's
workers only read each JPEG's bytes (and its size and pixel check from a small DCT-scaled decode); the main process
hands a batch's bytes to nvjpeg (torchvision's batched ``decode_jpeg`` on CUDA) and does the rest as tensor
arithmetic on the GPU, each step giving Pillow's pixels exactly: the squash and the resize over the crop box
(captioning.photos.resample_tensor), the JPEG step (captioning.photos.jpeg_tensor), then the normalisation. Photos
that are not plain JPEGs (PNG, CMYK, ...) are prepared on the CPU as before, in the same batch.

Why torchvision's decoder and not TorchCodec's: TorchCodec is not installed here or on the device machine, and
torchvision's ``decode_jpeg`` takes a list of JPEGs to one batched nvjpeg call on CUDA and to libjpeg on a CPU, so the
same code runs (and is tested) here. torchvision 0.29 deprecates it in favour of TorchCodec: when it goes, this one
function (:func:`decode`) changes.

Where the result can still differ from the CPU path's: nvjpeg's inverse DCT is not libjpeg's (a level here and there),
and Pillow decodes a JPEG much larger than the network's input at reduced size (DCT scaling) where nvjpeg decodes it
whole. On a CPU (libjpeg) the prepared photos are the CPU path's exactly for JPEGs below twice the input's side
(tests/captioning/test_photo_tensors.py); on a GPU never measured here, so the flag is off by default.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from captioning.photos.jpeg_tensor import jpeg_round_trip
from captioning.photos.preprocess import Preprocess
from captioning.photos.resample_tensor import FILTERS, resize


def supported(preprocess: Preprocess) -> str | None:
    """None when this preparation can run on the device, else why not (one line)."""
    if preprocess.source_side is not None and preprocess.squash_filter not in FILTERS:
        return f"the model squashes its photos with {preprocess.squash_filter}, which is not done on the device"
    return None


def decode(datas: Sequence[Tensor], device: torch.device | str) -> list[Tensor]:
    """JPEG files' bytes (each a 1-D uint8 CPU tensor) -> (3, H, W) uint8 RGB on ``device`` (EXIF orientation
    applied): one batched nvjpeg call on CUDA, libjpeg on a CPU."""
    from torchvision.io import ImageReadMode, decode_jpeg

    if not datas:
        return []
    return decode_jpeg(list(datas), mode=ImageReadMode.RGB, device=device, apply_exif_orientation=True)


def pixels(images: list[Tensor], preprocess: Preprocess) -> Tensor:
    """Decoded photos (each (3, H, W) uint8, any sizes) -> (B, 3, S, S) uint8, what :meth:`Preprocess.pixels` makes
    of them, level for level: photos of one size are resized together."""
    side = preprocess.source_side
    S = int(preprocess.image_size)
    out: list[Tensor | None] = [None] * len(images)
    groups: dict[tuple[int, int], list[int]] = {}
    for k, im in enumerate(images):
        groups.setdefault((im.shape[1], im.shape[2]), []).append(k)
    for (h, w), ks in groups.items():
        for part in _parts(ks, h * w):
            x = torch.stack([images[k] for k in part])  # (n, 3, h, w)
            if side is not None and (h, w) != (side, side):
                x = resize(x, (side, side), preprocess.squash_filter)  # as the training copies were
                if preprocess.jpeg_quality is not None:
                    x = jpeg_round_trip(x, int(preprocess.jpeg_quality), str(preprocess.jpeg_subsampling))
            x = resize(x, (S, S), "bilinear", preprocess.crop_box(x.shape[3], x.shape[2]))
            for k, row in zip(part, x, strict=True):
                out[k] = row
    return torch.stack(out)  # type: ignore[arg-type]


PIXEL_BUDGET = 64_000_000  # photos resized together hold at most this many pixels (float64: 1.5 GB with 3 channels)


def _parts(ks: list[int], pixels_each: int) -> list[list[int]]:
    """Photos of one size in groups small enough to resize together."""
    n = max(1, PIXEL_BUDGET // max(pixels_each, 1))
    return [ks[i : i + n] for i in range(0, len(ks), n)]


def normalise(x: Tensor, preprocess: Preprocess) -> Tensor:
    """(B, 3, S, S) uint8 -> the normalised float tensor, as :meth:`Preprocess.normalise`."""
    mean = torch.tensor(preprocess.mean, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(preprocess.std, device=x.device).view(1, 3, 1, 1)
    return (x.float() / 255.0 - mean) / std


def prepare(datas: Sequence[Tensor], preprocess: Preprocess, device: torch.device | str) -> Tensor:
    """JPEG files' bytes -> (B, 3, S, S) normalised on ``device``: decoded there and prepared as the CPU path
    prepares a photo."""
    return normalise(pixels(decode(datas, device), preprocess), preprocess)


def prepare_items(items: list[dict], preprocess: Preprocess, device: torch.device | str) -> Tensor:
    """A batch's readable items, in order -> their prepared photos (n, 3, S, S) on ``device``: the JPEGs the workers
    only read (``item["jpeg"]``) decoded and prepared there (each item's ``photo_stats`` filled in from its decoded
    pixels, for the out-of-domain check), the others' CPU-prepared ``tensor`` copied over."""
    from captioning.photos.photo_check import photo_stats_tensors

    files = [k for k, it in enumerate(items) if it.get("jpeg") is not None]
    others = [k for k, it in enumerate(items) if it.get("jpeg") is None]
    S = int(preprocess.image_size)
    out = torch.empty(len(items), 3, S, S, device=device)
    if files:
        decoded = decode([items[k]["jpeg"] for k in files], device)
        out[files] = normalise(pixels(decoded, preprocess), preprocess)
        for k, stats in zip(files, photo_stats_tensors(decoded), strict=True):
            items[k]["photo_stats"] = stats
    if others:
        out[others] = torch.stack([items[k]["tensor"] for k in others]).to(device)
    return out
