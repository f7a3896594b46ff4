"""The domain check: whether an image lies far from the images a caption model was trained on.

The check is a novelty measure on the encoder's features: each image is summarised by its mean region feature,
scaled to unit length (the direction, not the size, says what is in a photo), and its novelty is the cosine distance
to the nearest of a few hundred prototypes of the training images (spherical k-means of their summaries). The
threshold is calibrated on held-out images of the training world (Flickr8k val): at most ``FLAGGED`` (2%) of them lie
further than it. ``domain_check`` builds it (the data module does, from its cached train and val features; model files
store it); ``far_from_domain`` compares images with it (``Captioner.out_of_domain``). A check made on photographs also
flags images whose pixels are unlike any photo (captioning.photos.photo_check). Model files older than the prototypes
store a centre and a radius instead (the mean summary, and 1.5 x the distance 99% of training images stay within): still
read and applied as they were. The pixel check never waits on the feature check: where no feature check can be made
(too few photos to set a threshold, or no features to make it from), a model trained on photographs stores
``PIXELS_ONLY``.
"""

from __future__ import annotations

import math

import torch
from PIL import Image
from torch import Tensor

from captioning.photos.photo_check import photo_stats, unlike_a_photo

# "a few hundred": on the bundled Flickr8k model any count from 32 to 1,024 flagged 1.3-2.2% of test and noted the same
# 21 of 24 photos from outside its world (benchmarks/domain_check.py --sweep, docs/captioning.md)
PROTOTYPES = 256
FLAGGED = 0.02  # at most this share of the calibration images get the note
# fewer held-out images than this set no threshold worth the name (the most novel of 2 val photos flags about a third
# of new photos like them): a tenth of train is held out beside them, and with fewer still there is no check at all
MIN_HELD_OUT = 20
PIXELS_ONLY = {"photos": True}  # the check of a photo model without a feature check: its pixel rules alone


def summaries(features: Tensor, chunk: int = 256) -> Tensor:
    """Region features (N, L, D) -> per image its mean region feature at unit length (N, D) float32; a chunk at a
    time: a feature cache may be float16 and far larger than memory in float32."""
    means = torch.cat([features[i : i + chunk].float().mean(dim=1) for i in range(0, len(features), chunk)])
    return torch.nn.functional.normalize(means, dim=-1)


def prototypes(points: Tensor, k: int = PROTOTYPES, iters: int = 30, seed: int = 0) -> Tensor:
    """Spherical k-means of unit vectors (N, D) -> k unit centroids (k', D), k' = min(k, N). Seeded the k-means++
    way (each next seed drawn with probability growing with its squared distance to the seeds so far), so a cluster is
    not left without a prototype because the first draws fell in another; the same features give the same prototypes."""
    k = min(k, len(points))
    g = torch.Generator().manual_seed(seed)
    centres = [points[torch.randint(len(points), (1,), generator=g)].squeeze(0)]
    far = 1 - points @ centres[0]  # (N,) cosine distance to the nearest seed so far
    for _ in range(k - 1):
        weights = far.clamp(min=0) ** 2
        pick = (
            torch.multinomial(weights, 1, generator=g)
            if weights.sum() > 0
            else torch.randint(len(points), (1,), generator=g)
        )
        centres.append(points[pick].squeeze(0))
        far = torch.minimum(far, 1 - points @ centres[-1])
    centres = torch.stack(centres)  # (k, D)
    for _ in range(iters):
        nearest = (points @ centres.T).argmax(dim=1)  # (N,)
        sums = torch.zeros_like(centres).index_add_(0, nearest, points)
        counts = torch.bincount(nearest, minlength=k)
        centres = torch.where(counts[:, None] > 0, torch.nn.functional.normalize(sums, dim=-1), centres)
    return centres


def novelty(check: dict, features: Tensor) -> Tensor:
    """Per image (features (B, L, D)), its cosine distance to the nearest prototype of ``check`` (B,): 0 for a
    prototype itself, up to 2."""
    protos = torch.as_tensor(check["prototypes"], device=features.device).float()  # (k, D)
    return 1 - (summaries(features) @ protos.T).max(dim=1).values


def domain_check(
    train: Tensor,
    held_out: Tensor | None = None,
    photos: bool = False,
    k: int = PROTOTYPES,
    flagged: float = FLAGGED,
    held_out_stats: list[tuple[float, float, float]] | None = None,
    min_held_out: int = MIN_HELD_OUT,
) -> dict | None:
    """What ``far_from_domain`` compares with: prototypes of the training images' features ``train`` (N, L, D) and
    the novelty that at most ``flagged`` of the ``held_out`` images (M, L, D; e.g. val) exceed. With fewer than
    MIN_HELD_OUT held-out images, a tenth of ``train`` (every tenth image) is held out of the prototypes beside them to
    set the threshold; with fewer than that still, no feature check (a model trained on a few dozen photos says nothing
    rather than flag ordinary photos at random; ``min_held_out``: that number, for a calibration on purpose small):
    PIXELS_ONLY for photographs, else None. ``photos``: the images were photographs, so the pixel check applies too
    (captioning.photos.photo_check); given the held-out images' ``photo_stats``, those it flags count against the
    ``flagged`` share, so both checks together stay within it."""
    if held_out is None or len(held_out) < min_held_out:
        rest = torch.arange(len(train)) % 10 != 9
        extra = train[~rest]
        held_out = extra if held_out is None or len(held_out) == 0 else torch.cat([held_out, extra])
        train, held_out_stats = train[rest], None  # the train images' pixel statistics are not at hand
    if len(held_out) < min_held_out:
        return dict(PIXELS_ONLY) if photos else None
    check: dict = {"prototypes": prototypes(summaries(train), k).half()}
    scores = novelty(check, held_out)  # (M,)
    allowed = int(len(scores) * flagged)  # the most held-out images that may get the note
    if photos and held_out_stats is not None:
        by_pixels = torch.tensor([unlike_a_photo(s) for s in held_out_stats], dtype=torch.bool)
        scores, allowed = scores[~by_pixels], allowed - int(by_pixels.sum())
    scores = scores.sort().values  # ascending
    allowed = max(0, min(allowed, len(scores) - 1))
    # rounded up: a threshold rounded below an image's novelty would flag it too (no scores: 2, the farthest of all)
    edge = scores[len(scores) - allowed - 1].item() if len(scores) else 2.0
    check["threshold"] = math.ceil(edge * 1e6) / 1e6
    return {**check, **({"photos": True} if photos else {})}


def check_fault(check: object, width: int | None = None) -> str | None:
    """What is wrong with ``check`` (read from a model file or checkpoint), for a message; None where it is what
    :func:`domain_check` makes, or the older centre and radius. ``width``: the encoder's feature size (D), which its
    prototypes (or centre) must have: a check made on another encoder's features passed, and every photo's novelty then
    failed as a matrix product of mismatched shapes in the middle of a run."""
    if not isinstance(check, dict):
        return "its domain check is not one this toolkit writes"
    if check == PIXELS_ONLY:
        return None
    if "prototypes" in check:
        protos = check["prototypes"]
        if not (isinstance(protos, Tensor) and protos.dim() == 2 and isinstance(check.get("threshold"), (int, float))):
            return "its domain check is not one this toolkit writes"
        found = protos.shape[1]
    else:
        if not (isinstance(check.get("centre"), list) and isinstance(check.get("radius"), (int, float))):
            return "its domain check is not one this toolkit writes"
        found = len(check["centre"])
    if width is not None and found != width:
        return f"its domain check was made on features {found} wide, its encoder's are {width}: another encoder's check"
    return None


def valid_check(check: object, width: int | None = None) -> bool:
    """Whether ``check`` (read from a model file) is what :func:`domain_check` makes, or the older centre and radius
    (``width``: of the encoder's features, :func:`check_fault`)."""
    return check_fault(check, width) is None


def far_from_domain(
    check: dict, features: Tensor, images: list[Image.Image | tuple[float, float, float]] | None = None
) -> list[bool]:
    """Per image (features (B, L, D)), whether it lies far from the training images of ``check`` (a
    :func:`domain_check`). A check made on photographs (``check["photos"]``) also flags images whose pixels are
    unlike any photo: pass ``images``, the PIL images or their ``photo_stats``, in batch order."""
    if "prototypes" in check:
        far = (novelty(check, features) > check["threshold"]).tolist()
    elif check == PIXELS_ONLY:
        far = [False] * len(features)
    else:  # a model file from before the prototypes: its centre and radius
        centre = torch.tensor(check["centre"], dtype=features.dtype, device=features.device)  # (D,)
        far = ((features.mean(dim=1) - centre).norm(dim=-1) > check["radius"]).tolist()
    if check.get("photos") and images is not None:
        stats = [im if isinstance(im, tuple) else photo_stats(im) for im in images]
        far = [f or unlike_a_photo(s) for f, s in zip(far, stats, strict=True)]
    return far
