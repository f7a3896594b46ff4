"""The domain check of an encoder whose features no cache holds, made from a sample of the photos at export.

A fit whose encoder reads the photos whole every step (``model.encoder.fine_tune: all``, or ``data.cache_features:
false``) has neither cached features nor stored frozen maps to make the check from (captioning.photos.domain): its
model file held none, so ``caption`` could not tell photos unlike the training world. Here up to ``SAMPLE`` train
photos and as many val photos, spread evenly over each split, are read as the run read them and encoded once by the
exported weights, as ``caption`` will run them (the caller's ``encode``); each photo's mean region feature is all the
check needs. The 1,000 photos of a Flickr8k-sized run through its configs' encoder (EfficientNet-Lite2 at 260 px,
folded, in ONNX Runtime) took 97 s on 2 cores that other work shared (2026-12-02), once, at the end of fit; the
plain body that trained is about 4x slower. Imports no model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from PIL import Image

from captioning.photos.domain import domain_check
from captioning.photos.preprocess import ImageReadError, prepared

SAMPLE = 500  # photos of each split: 500 val photos set the 2% threshold on 10 of them, as Flickr8k's 1,000 on 20


def spread(images: Sequence, limit: int = SAMPLE) -> list:
    """Up to ``limit`` of ``images``, evenly spaced (the same ones every time: the check repeats)."""
    if len(images) <= limit:
        return list(images)
    return [images[math.floor(i * len(images) / limit)] for i in range(limit)]


def mean_features(
    images: Sequence[Path | Image.Image], encode: Callable[[torch.Tensor], torch.Tensor], preprocess: Callable,
    batch: int = 32,
) -> torch.Tensor:  # fmt: skip
    """Each readable photo of ``images`` prepared, encoded (``encode``: (B, 3, H, W) -> (B, L, D)) and averaged over
    its regions: (N', 1, D) float32, the photos that cannot be read left out (the run said which)."""
    out, ready = [], []

    def flush() -> None:
        if ready:
            out.append(encode(torch.stack(ready)).float().mean(dim=1, keepdim=True).cpu())
            ready.clear()

    for image in images:
        try:
            ready.append(prepared(image, preprocess))
        except ImageReadError:
            continue
        if len(ready) == batch:
            flush()
    flush()
    return torch.cat(out) if out else torch.empty(0, 1, 0)


def sampled_check(
    train: Sequence, val: Sequence, encode: Callable[[torch.Tensor], torch.Tensor], preprocess: Callable, photos: bool,
    limit: int = SAMPLE,
) -> dict | None:  # fmt: skip
    """The domain check (captioning.photos.domain.domain_check) from up to ``limit`` photos of ``train`` and of
    ``val`` through ``encode``; None where too few are readable to set a threshold (as domain_check's)."""
    means = mean_features(spread(train, limit), encode, preprocess)
    if len(means) < 2:
        return None
    held_out = mean_features(spread(val, limit), encode, preprocess) if val else None
    return domain_check(means, held_out if held_out is not None and len(held_out) else None, photos=photos)
