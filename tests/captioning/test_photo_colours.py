"""A photo's colours as a viewer shows them (captioning.photos.colour): pixels stored in a wider RGB space than sRGB
(an iPhone's Display P3) converted to sRGB as browsers convert them; sRGB's own profile, other spaces' and broken
profiles leave the pixels as stored."""

from __future__ import annotations

import io

import numpy as np
import pytest
from helpers.icc import wide_rgb_profile
from PIL import Image, ImageCms

from captioning.photos.collection import read_jpeg
from captioning.photos.preprocess import load_photo


def _photo() -> Image.Image:
    arr = np.zeros((48, 64, 3), dtype=np.uint8)
    arr[:, :32] = (255, 0, 0)  # saturated red: where the two spaces differ most
    arr[:, 32:] = (120, 150, 90)
    return Image.fromarray(arr)


def _png(profile: bytes | None) -> bytes:
    buf = io.BytesIO()
    _photo().save(buf, format="PNG", **({"icc_profile": profile} if profile else {}))
    return buf.getvalue()


def test_a_wide_space_photo_is_read_in_srgb_as_a_viewer_shows_it():
    profile = wide_rgb_profile()
    expected = ImageCms.profileToProfile(_photo(), ImageCms.ImageCmsProfile(io.BytesIO(profile)),
                                         ImageCms.createProfile("sRGB"), outputMode="RGB")  # fmt: skip
    got, size = load_photo(_png(profile), name="p3.png")
    assert size == (64, 48) and np.array_equal(np.asarray(got), np.asarray(expected))
    assert not np.array_equal(np.asarray(got), np.asarray(_photo()))  # the stored pixels are not what is shown
    # a PIL image given (Python's Captioner) is read alike
    with Image.open(io.BytesIO(_png(profile))) as img:
        assert np.array_equal(np.asarray(load_photo(img)[0]), np.asarray(expected))


@pytest.mark.parametrize("profile", [None, b"not a profile", "srgb"])
def test_srgb_no_profile_or_a_broken_one_leave_the_pixels_as_stored(profile):
    if profile == "srgb":  # what most cameras and phones embed: applied, a level here and there would move
        profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    got, _ = load_photo(_png(profile), name="p.png")
    assert np.array_equal(np.asarray(got), np.asarray(_photo()))


def test_decoding_on_the_device_leaves_a_wide_space_jpeg_to_pillow(tmp_path):
    for name, profile in (("p3.jpg", wide_rgb_profile()), ("plain.jpg", None)):
        _photo().save(tmp_path / name, quality=95, **({"icc_profile": profile} if profile else {}))
    assert read_jpeg("p3.jpg", str(tmp_path / "p3.jpg")) is None  # nvjpeg reads no profile: Pillow's path
    assert read_jpeg("plain.jpg", str(tmp_path / "plain.jpg"))["jpeg"] is not None
