"""Photos prepared as in training (``Preprocess.source_side``): a model trained on square copies of one size (the
shared Flickr8k copy: 224 x 224, squashed) squashes every photo to that size first. The same photo gets the same
tensor through `caption` (its loader), ``Captioner.caption_images``, the server and the training data path; a photo
already of that size is unchanged (so training on the copies is too); a model with no source size is unchanged."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import torch
from helpers.tiny_captioner import tiny_model_file
from PIL import Image

from captioning.bundled import BUNDLED_MODEL
from captioning.captioner import Captioner
from captioning.collection import ImageFiles
from captioning.preprocess import Preprocess, load_photo, prepared
from text_attn.core.modelfile import update_info

PHOTO = Path(__file__).parent.parent / "fixtures" / "images" / "rocket.jpg"


def test_a_photo_is_squashed_to_the_training_size_first():
    pre = Preprocess(image_size=40, crop=False, source_side=24)
    image = Image.open(PHOTO).convert("RGB")
    by_hand = Preprocess(image_size=40, crop=False)(image.resize((24, 24), Image.Resampling.BICUBIC))
    torch.testing.assert_close(pre(image), by_hand)
    assert not torch.allclose(pre(image), Preprocess(image_size=40, crop=False)(image))  # it does change the input
    assert pre.crop_box(*image.size) == (0.0, 0.0, float(image.size[0]), float(image.size[1]))


def test_a_photo_already_of_the_training_size_is_unchanged():
    copy = Image.open(PHOTO).convert("RGB").resize((24, 24), Image.Resampling.BICUBIC)
    for crop in (False, True):
        torch.testing.assert_close(Preprocess(40, crop, source_side=24)(copy), Preprocess(40, crop)(copy))


def test_the_same_tensor_through_caption_captioner_server_and_training(tmp_path):
    model = tiny_model_file(tmp_path / "m.pt")
    update_info(model, {}, merge={"preprocess": {"source_side": 48}, "encoder": {"source_side": 48}})
    cap = Captioner.load(model)
    pre = cap.preprocess
    assert pre.source_side == 48 and cap.model.encoder.config()["source_side"] == 48
    command = ImageFiles([str(PHOTO)], pre)[0]["tensor"]  # `caption`'s loader
    python = pre(load_photo(PHOTO, pre.decode_side)[0])  # Captioner.caption_images
    training = prepared(PHOTO, pre)  # the training data and the feature cache
    from attention_serve.front import prepare_photo  # the server: its HTTP process prepares, a worker normalises
    from attention_serve.models import Served

    sent = prepare_photo(PHOTO.read_bytes(), Served(model, "m", {}, {}, {"preprocess": pre}), _Limits())
    pixels = np.frombuffer(bytearray(base64.b64decode(sent["pixels"])), np.uint8).reshape(sent["shape"])
    for other in (python, training, pre.normalise(pixels)):
        torch.testing.assert_close(command, other)
    ((words, alphas, *_),) = cap.caption_images([PHOTO])
    assert alphas.shape == (len(words), 16)


class _Limits:
    max_pixels = 89_478_485


def test_the_bundled_model_records_its_training_photos_size():
    data = torch.load(BUNDLED_MODEL, weights_only=True, mmap=True)
    assert data["preprocess"]["source_side"] == 224 and data["encoder"]["source_side"] == 224
    assert Captioner.load().preprocess.source_side == 224
