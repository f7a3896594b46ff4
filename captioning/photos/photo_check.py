"""Is an image a photograph? A pixel check beside the feature check of captioning.photos.domain.

A model trained on photographs (Flickr8k) must say when it is handed something else: a blank frame, a synthetic
drawing, a screenshot of a page. The ImageNet features of such images look ordinary (their mean and spread over the
regions sat inside the Flickr8k photos' own range, measured on Lite2: docs/captioning.md, "Honest defaults"), so the
model file's feature check cannot tell them apart. Their pixels can: one colour covers most of them, or they have no
colour at all. On 3,000 Flickr8k photos the largest share of one colour was 0.82 and no photo met either rule below;
blank frames, the shapes scenes (0.92-0.97) and a page of text (grey, 0.70) do. Random noise has neither property, but
in a photo neighbouring pixels are alike: at 64 x 64 the mean difference of neighbours (down the columns or along the
rows, whichever is larger) over the mean deviation from the image's mean brightness was at most 0.80 on those 3,000
photos (median 0.31), and 1.15-1.41 for noise at least 64 pixels along its long side (a smaller image of noise is
blurred by the upscaling to 64 x 64 and can pass). The larger of the two, not their mean: a strip of noise (1 x 1000
pixels) is stretched to 64 rows that are all alike, which halved the mean (0.6, passed as a photo).
The rules are for a model of photographs: ``count_unlike`` tells fit whether a model's own training images break them
(a model of drawings then keeps its feature check alone: captioning.training.data, ``photo_rules``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor

from captioning.photos.preprocess import ImageReadError, load_image

SIDE = 64  # the image is judged at 64 x 64: the rules are about large areas, and this costs ~0.3 ms
FLAT = 0.88  # one colour (within ±8 of each channel's value) covers at least this share: not a photograph
GREY_FLAT = 0.6  # ... or at least this share, when (nearly) every pixel is grey: a page of text, a screenshot
GREY = 0.97  # share of pixels whose channels differ by at most 6: "no colour at all"
ROUGH = 1.0  # neighbours differ as much as any two pixels do (brightness): noise, not a scene


def photo_stats(image: Image.Image) -> tuple[float, float, float]:
    """(share of the most common colour, share of grey pixels, roughness) of an RGB image, at 64 x 64; roughness:
    the mean brightness difference of neighbouring pixels, down the columns or along the rows (the larger), over the
    mean deviation from the mean brightness."""
    a = np.asarray(image.convert("RGB").resize((SIDE, SIDE), Image.Resampling.BILINEAR), dtype=np.uint8)
    return _stats(torch.from_numpy(a.copy()).unsqueeze(0))[0]  # (1, 64, 64, 3)


def unlike_a_photo(stats: tuple[float, float, float]) -> bool:
    """True for blank frames, drawings, pages and noise (module doc), from :func:`photo_stats`."""
    flat, grey, rough = stats
    return flat >= FLAT or (grey >= GREY and flat >= GREY_FLAT) or rough >= ROUGH


def count_unlike(images: Sequence[str | Path | Image.Image]) -> tuple[int, int]:
    """(how many of ``images`` break the rules of :func:`unlike_a_photo`, how many could be read): whether the rules
    suit a model's own training images. Drawings, diagrams, scans and the shapes scenes break them, and a model
    trained on such images would note its own kind as unlike its training photos (half of a shapes folder's scenes
    were). Each is decoded at a reduced scale where its format allows (a JPEG: at least 128 pixels a side)."""
    broken = read = 0
    for image in images:
        try:
            stats = photo_stats(load_image(image, 2 * SIDE))
        except (ImageReadError, OSError):  # the run says which photos cannot be read; this counts the rest
            continue
        read += 1
        broken += unlike_a_photo(stats)
    return broken, read


def photo_stats_tensors(images: list[Tensor]) -> list[tuple[float, float, float]]:
    """:func:`photo_stats` of decoded photos (each (3, H, W) uint8, on any device; Pillow's 64 x 64 bilinear
    resize exactly: captioning.photos.resample_tensor), the batch at once, one read back to the host."""
    from captioning.photos.resample_tensor import resize

    if not images:
        return []
    a = torch.stack([resize(im.unsqueeze(0), (SIDE, SIDE), "bilinear")[0] for im in images])  # (B, 3, 64, 64)
    return _stats(a.permute(0, 2, 3, 1))


def _stats(pixels: Tensor) -> list[tuple[float, float, float]]:
    """(B, 64, 64, 3) uint8 images at the judging size -> each one's :func:`photo_stats`, one read back to the host
    (the rules' one implementation, for a photo in a loader worker and for a batch on the device)."""
    B = pixels.size(0)
    a = pixels.reshape(B, -1, 3).long()  # (B, 4096, 3)
    q = a // 8  # 32 levels a channel: the most common colour is a bin, not an exact value
    keys = (q[..., 0] * 32 + q[..., 1]) * 32 + q[..., 2]  # (B, 4096)
    counts = torch.zeros(B, 32**3, dtype=torch.long, device=a.device).scatter_add_(1, keys, torch.ones_like(keys))
    best = counts.argmax(dim=1)  # the first most common bin
    mode = torch.stack([best // 1024, best // 32 % 32, best % 32], dim=-1).unsqueeze(1)  # (B, 1, 3)
    flat = ((a - (mode * 8 + 4)).abs() <= 8).all(dim=-1).double().mean(dim=1)
    grey = ((a.max(dim=-1).values - a.min(dim=-1).values) <= 6).double().mean(dim=1)
    g = a.view(B, SIDE, SIDE, 3).double().mean(dim=-1)  # (B, 64, 64) brightness
    down = (g[:, 1:] - g[:, :-1]).abs().mean(dim=(1, 2))
    along = (g[:, :, 1:] - g[:, :, :-1]).abs().mean(dim=(1, 2))
    spread = (g - g.mean(dim=(1, 2), keepdim=True)).abs().mean(dim=(1, 2)).clamp(min=1e-6)
    rough = torch.maximum(down, along) / spread
    return [tuple(row) for row in torch.stack([flat, grey, rough], dim=1).tolist()]
