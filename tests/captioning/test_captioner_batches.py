"""Captioner.caption_images and read_caption take any number of photos BATCH at a time, as ``caption`` does: all of
them in one batch held ~24 MB a photo (40 photos: 1.72 GB against 0.91 GB for 6). In runs of a batch, the captions,
their attention and scores are those of one batch."""

import random

import pytest
import torch

from captioning.commands import caption_parser
from captioning.model import captioner as captioner_module
from captioning.model.captioner import Captioner
from captioning.training.shapes import make_scene

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_batch_is_captions_default_batch():
    assert captioner_module.BATCH == caption_parser.BATCH


def test_photos_in_runs_of_a_batch_caption_and_read_as_in_one(monkeypatch):
    captioner = Captioner.load("shapes")
    rng = random.Random(5)
    photos = [make_scene(rng, size=captioner.preprocess.image_size).image for _ in range(5)]
    whole = captioner.caption_images(photos, beam_size=2, max_len=10)
    read_whole = captioner.read_caption(photos, "a red circle")
    seen = []
    encode = captioner.encode_photos
    monkeypatch.setattr(
        captioner, "encode_photos", lambda part, first: seen.append((first, len(part))) or encode(part, first=first)
    )
    monkeypatch.setattr(captioner_module, "BATCH", 2)
    parts = captioner.caption_images(photos, beam_size=2, max_len=10)
    read_parts = captioner.read_caption(photos, "a red circle")
    assert seen == [(0, 2), (2, 2), (4, 1)] * 2  # never more than a batch encoded at once, each its place in the list
    for one, run in [*zip(whole, parts, strict=True), *zip(read_whole, read_parts, strict=True)]:
        assert run.words == one.words and run.photo is not None and run.name == one.name
        assert torch.allclose(run.alphas, one.alphas, atol=1e-5) and run.score == pytest.approx(one.score, abs=1e-5)
        assert run.probs == pytest.approx(one.probs, abs=1e-5) if one.probs else run.probs is None
