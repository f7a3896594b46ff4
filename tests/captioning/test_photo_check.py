"""The pixel half of a photo model's out-of-domain check (captioning.photos.photo_check): photographs pass; blank
frames, synthetic drawings and pages of text are flagged. Values checked by hand on images built here."""

from __future__ import annotations

import random

import numpy as np
import pytest
from PIL import Image, ImageDraw

from captioning.photos.photo_check import FLAT, GREY, ROUGH, photo_stats, unlike_a_photo
from captioning.training.shapes import make_scene

IMAGES = __import__("pathlib").Path(__file__).parent.parent / "fixtures" / "images"


def test_stats_of_a_blank_frame_and_of_a_half_split_one():
    assert photo_stats(Image.new("RGB", (300, 200), (200, 30, 30)))[:2] == (1.0, 0.0)  # one colour, no grey
    assert photo_stats(Image.new("RGB", (90, 40), "white"))[:2] == (1.0, 1.0)
    half = Image.new("RGB", (64, 64), "black")
    ImageDraw.Draw(half).rectangle([0, 0, 63, 31], fill=(0, 0, 255))  # the top 32 of 64 rows blue
    flat, grey, rough = photo_stats(half)
    assert flat == pytest.approx(0.5, abs=0.02) and grey == pytest.approx(0.5, abs=0.02)
    # brightness 0 and 85 (blue: (0 + 0 + 255) / 3) in two halves: deviation 42.5 everywhere; of the 63 x 64
    # neighbour pairs down the columns only the 64 across the edge differ (by 85, less where bilinear resizing blends
    # the edge); along the rows none do, and the larger of the two directions counts
    assert rough == pytest.approx(85 * 64 / (63 * 64) / 42.5, rel=0.15)


def test_rules_at_their_thresholds():
    assert unlike_a_photo((FLAT, 0.0, 0.3)) and not unlike_a_photo((FLAT - 0.01, 0.0, 0.3))
    assert unlike_a_photo((0.6, GREY, 0.3)) and not unlike_a_photo((0.59, GREY, 0.3))
    assert not unlike_a_photo((0.6, GREY - 0.01, 0.3))
    assert unlike_a_photo((0.1, 0.0, ROUGH)) and not unlike_a_photo((0.1, 0.0, ROUGH - 0.01))


def test_photos_pass_and_drawings_blanks_pages_do_not():
    photos = [Image.open(p).convert("RGB") for p in sorted(IMAGES.glob("*.png"))]
    assert photos and not any(unlike_a_photo(photo_stats(im)) for im in photos)
    shapes = [make_scene(random.Random(s), size=224).image for s in range(5)]
    blanks = [Image.new("RGB", (120, 80), c) for c in ("white", "black", (120, 120, 120), (10, 200, 40))]
    page = Image.new("RGB", (640, 400), "white")
    draw = ImageDraw.Draw(page)
    for y in range(20, 380, 18):
        draw.text((20, y), "a screenshot of some text on a page, line after line after line", fill="black")
    assert all(unlike_a_photo(photo_stats(im)) for im in [*shapes, *blanks, page])
    # colour noise has no dominant colour and plenty of colour, but neighbours as different as any two pixels
    noise = Image.fromarray(np.random.default_rng(0).integers(0, 256, (224, 224, 3), dtype=np.uint8))
    flat, grey, rough = photo_stats(noise)
    assert flat < FLAT and grey < GREY and rough > 1.1 and unlike_a_photo((flat, grey, rough))
    # a strip of noise is stretched to 64 rows alike: down the columns neighbours are equal, along the rows as rough
    for shape in ((1, 1000, 3), (1000, 1, 3), (4, 800, 3)):
        stats = photo_stats(Image.fromarray(np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)))
        assert stats[2] > 1.1 and unlike_a_photo(stats), shape
