"""Photos prepared as in training (``Preprocess.source_side`` and the JPEG step after it): a model trained on square
copies of one size (the shared Flickr8k copy: 224 x 224, squashed, JPEG quality 90) squashes every photo to that size
first and recompresses it so. The same photo gets the same tensor through `caption` (its loader),
``Captioner.caption_images``, the server, the training data path and the feature cache; a photo already of that size
is unchanged (so training on the copies is too); a model with no source size is unchanged."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.tiny_captioner import tiny_model_file
from PIL import Image

from captioning.model.bundled import BUNDLED_MODEL
from captioning.model.captioner import Captioner
from captioning.photos.collection import ImageFiles
from captioning.photos.preprocess import Preprocess, load_photo, prepared
from captioning.training.feature_cache import _ImageTensors
from text_attn.core.modelfile import update_info

PHOTO = Path(__file__).parent.parent / "fixtures" / "images" / "rocket.jpg"


def test_a_photo_is_squashed_to_the_training_size_first():
    pre = Preprocess(image_size=40, crop=False, source_side=24)
    image = Image.open(PHOTO).convert("RGB")
    by_hand = Preprocess(image_size=40, crop=False)(image.resize((24, 24), Image.Resampling.BICUBIC))
    torch.testing.assert_close(pre(image), by_hand)
    assert not torch.allclose(pre(image), Preprocess(image_size=40, crop=False)(image))  # it does change the input
    assert pre.crop_box(*image.size) == (0.0, 0.0, float(image.size[0]), float(image.size[1]))
    # crop=True too: the photo is squashed to a square first, so the network sees all of it, not its centre square
    # (the box overlays and records draw the attention in)
    square = Preprocess(image_size=40, crop=True, source_side=24)
    assert square.crop_box(640, 480) == (0.0, 0.0, 640.0, 480.0)
    assert Preprocess(image_size=40, crop=True).crop_box(640, 480) == (80.0, 0.0, 560.0, 480.0)
    by_hand = Preprocess(image_size=40, crop=True)(image.resize((24, 24), Image.Resampling.BICUBIC))
    torch.testing.assert_close(square(image), by_hand)


def test_a_photo_already_of_the_training_size_is_unchanged():
    copy = Image.open(PHOTO).convert("RGB").resize((24, 24), Image.Resampling.BICUBIC)
    for crop in (False, True):
        torch.testing.assert_close(Preprocess(40, crop, source_side=24)(copy), Preprocess(40, crop)(copy))


def _full_size_photo(path: Path) -> Path:
    """A 640 x 480 JPEG (quality 95): squashed to 48 and recompressed at 90 on every path."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:480, 0:640]
    rgb = np.stack([x * 255 / 640, y * 255 / 480, 128 + 90 * np.sin(x / 9.0)], -1) + rng.normal(0, 10, (480, 640, 3))
    Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(path, quality=95)
    return path


def _training_size_copy(path: Path) -> Path:
    """A 48 x 48 JPEG at quality 90, 4:2:0, as the training copies: no path squashes or recompresses it."""
    Image.open(PHOTO).convert("RGB").resize((48, 48), Image.Resampling.BICUBIC).save(path, quality=90)
    return path


@pytest.mark.parametrize("make_photo", [_full_size_photo, _training_size_copy, lambda _: PHOTO])
def test_the_same_tensor_through_caption_captioner_server_and_training(tmp_path, make_photo):
    """Issue 57: the model records the squash to 48 and the JPEG step (quality 90, 4:2:0); `caption`'s loader,
    Captioner, the server's HTTP side and the feature cache all give one tensor, the JPEG step included for a
    full-size photo and left out for one already 48 x 48."""
    photo = make_photo(tmp_path / "photo.jpg")
    model = tiny_model_file(tmp_path / "m.pt")
    step = {"source_side": 48, "jpeg_quality": 90, "jpeg_subsampling": "4:2:0"}
    update_info(model, {}, merge={"preprocess": step, "encoder": step})
    cap = Captioner.load(model)
    pre = cap.preprocess
    assert (pre.source_side, pre.jpeg_quality) == (48, 90) and cap.model.encoder.config()["jpeg_quality"] == 90
    command = ImageFiles([str(photo)], pre)[0]["tensor"]  # `caption`'s loader
    training = prepared(photo, pre)  # the training data path
    cached, _ = _ImageTensors([photo], pre)[0]  # the feature cache's encoding pass: (tensor, why not)
    from attention_serve.front import prepare_photo  # the server: its HTTP process prepares, a worker normalises
    from attention_serve.models import Served

    sent = prepare_photo(photo.read_bytes(), Served(model, "m", {}, {}, {"preprocess": pre}), _Limits())
    pixels = np.frombuffer(bytearray(base64.b64decode(sent["pixels"])), np.uint8).reshape(sent["shape"])
    for other in (training, cached, pre.normalise(pixels)):
        torch.testing.assert_close(command, other, rtol=0, atol=0)
    loaded, features = cap.encode_photos([photo])  # Captioner (caption_images encodes so)
    torch.testing.assert_close(features, cap.encode(command.unsqueeze(0)))
    by_hand = pre.normalise(_by_hand(load_photo(photo, pre.decode_side)[0], pre))
    torch.testing.assert_close(command, by_hand, rtol=0, atol=0)
    ((words, alphas, *_),) = cap.caption_images([photo])
    assert alphas.shape == (len(words), 16)


def _by_hand(img: Image.Image, pre: Preprocess) -> np.ndarray:
    """The squash (bicubic) and JPEG round trip written out, only for a photo not already of source_side."""
    if img.size != (pre.source_side, pre.source_side):
        buffer = io.BytesIO()
        img.resize((48, 48), Image.Resampling.BICUBIC).save(buffer, "JPEG", quality=90, subsampling="4:2:0")
        img = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
    return np.array(img.resize((pre.image_size,) * 2, Image.Resampling.BILINEAR, box=pre.crop_box(*img.size)))


class _Limits:
    max_pixels = 89_478_485


def test_the_bundled_model_records_its_training_photos_size():
    data = torch.load(BUNDLED_MODEL, weights_only=True, mmap=True)
    assert data["preprocess"]["source_side"] == 224 and data["encoder"]["source_side"] == 224
    assert Captioner.load().preprocess.source_side == 224
