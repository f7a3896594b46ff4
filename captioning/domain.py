"""The domain check: where a model's training images lie in feature space, and whether an image lies far from them.

``domain_check`` builds it from the training images' region features (the data module does, from its cached train
features; model files store it); ``far_from_domain`` compares images with it (``Captioner.out_of_domain``). A check
made on photographs also flags images whose pixels are unlike any photo (captioning.photo_check). Plain tensors and
JSON-able values: neither side needs a model.
"""

from __future__ import annotations

import torch
from PIL import Image
from torch import Tensor

from captioning.photo_check import photo_stats, unlike_a_photo


def domain_check(features: Tensor, margin: float = 1.5, photos: bool = False) -> dict:
    """What ``far_from_domain`` compares with, from training images' features (N, L, D): the centre of their mean
    region features and ``margin`` times the distance from it that 99% of them stay within (JSON-able); ``photos``:
    the images were photographs, so the pixel check applies too (captioning.photo_check)."""
    # per image its mean region, a chunk at a time: the cache may be float16 and far larger than memory in float32
    means = torch.cat([features[i : i + 256].float().mean(dim=1) for i in range(0, len(features), 256)])  # (N, D)
    centre = means.mean(dim=0)
    radius = (means - centre).norm(dim=-1).quantile(0.99).item() * margin
    return {"centre": [round(v, 6) for v in centre.tolist()], "radius": radius, **({"photos": True} if photos else {})}


def far_from_domain(
    check: dict, features: Tensor, images: list[Image.Image | tuple[float, float, float]] | None = None
) -> list[bool]:
    """Per image (features (B, L, D)), whether it lies far from the training images of ``check`` (a
    :func:`domain_check`). A check made on photographs (``check["photos"]``) also flags images whose pixels are
    unlike any photo: pass ``images``, the PIL images or their ``photo_stats``, in batch order."""
    centre = torch.tensor(check["centre"], dtype=features.dtype, device=features.device)  # (D,)
    distance = (features.mean(dim=1) - centre).norm(dim=-1)  # (B,)
    far = (distance > check["radius"]).tolist()
    if check.get("photos") and images is not None:
        stats = [im if isinstance(im, tuple) else photo_stats(im) for im in images]
        far = [f or unlike_a_photo(s) for f, s in zip(far, stats, strict=True)]
    return far
