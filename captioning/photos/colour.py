"""A photo's colours as a viewer shows them: pixels stored in another RGB space than sRGB (an iPhone's Display P3, a
camera's Adobe RGB: the space its embedded ICC profile names) converted to sRGB, as browsers and photo viewers convert
them before showing them. Read as stored, a Display P3 photo's colours were paler than the photo a user sees (up to
39 levels in a saturated patch), on the overlays and the pages and in what the model read.

A profile that is sRGB's (its description names sRGB: what most cameras and phones embed in JPEGs) is not applied: the
pixels are sRGB already, and a round trip through the colour engine would move some by a level. Profiles of other
colour spaces (CMYK, grey) are left to the mode conversion (preprocess.to_rgb), as before.
"""

from __future__ import annotations

import functools
import io
from typing import Any

from PIL import Image

KEPT = 16  # transforms kept: a folder of one phone's photos holds one profile


def converts(info: dict[str, Any]) -> bool:
    """Whether a photo with Pillow's ``info`` (its ``icc_profile``) is converted to sRGB by :func:`in_srgb`."""
    profile = info.get("icc_profile")
    return bool(profile) and _transform(bytes(profile)) is not None


def in_srgb(rgb: Image.Image, info: dict[str, Any]) -> Image.Image:
    """``rgb`` (8-bit RGB, the photo's pixels as stored) in sRGB, where ``info``'s ICC profile is another RGB
    space's; else ``rgb``."""
    profile = info.get("icc_profile")
    if not profile or rgb.mode != "RGB":
        return rgb
    transform = _transform(bytes(profile))
    return rgb if transform is None else transform.apply(rgb)


@functools.lru_cache(maxsize=KEPT)
def _transform(profile: bytes):
    """The transform from ``profile`` (its bytes) to sRGB; None where the profile is sRGB's, not an RGB space's, or
    unreadable (the photo is read as stored, as before)."""
    from PIL import ImageCms

    try:
        source = ImageCms.ImageCmsProfile(io.BytesIO(profile))
        if source.profile.xcolor_space.strip() != "RGB":
            return None
        if "srgb" in (ImageCms.getProfileDescription(source) or "").lower().replace(" ", ""):
            return None
        return ImageCms.buildTransform(source, ImageCms.createProfile("sRGB"), "RGB", "RGB")
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError, AttributeError):
        return None
