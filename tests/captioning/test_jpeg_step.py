"""The JPEG step of the training photos (issues 57, 63): read from a JPEG file's own quantization tables, recorded in
the model's preprocessing when the photos are JPEG files of one quality at ``source_side`` (auto), applied after the
squash to ``source_side`` and never to a photo already of that size; a value given by hand that the training photos
contradict is refused in one line that says what to set."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.tiny_captioner import tiny_model_file
from PIL import Image

from captioning.commands.train import caption_train_cli
from captioning.model.bundled import BUNDLED_MODEL
from captioning.model.captioner import Captioner
from captioning.photos.jpeg_step import AUTO, JpegStep, PhotoFormat, jpeg_step_of, photo_format, settle_jpeg_step
from captioning.photos.preprocess import Preprocess
from text_attn.core.modelfile import update_info

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "flickr8k" / "Flicker8k_Dataset"
TINY = Path(__file__).parent.parent / "fixtures" / "captions" / "tiny_shapes.yaml"


def _photo(width: int = 90, height: int = 60, seed: int = 0) -> Image.Image:
    """A photo-like picture: smooth colour gradients with fine noise (JPEG changes it, unlike a flat colour)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([255 * x / width, 255 * y / height, 128 + 100 * np.sin(x / 5.0)], axis=-1)
    return Image.fromarray(np.clip(rgb + rng.normal(0, 12, rgb.shape), 0, 255).astype(np.uint8))


def _save(img: Image.Image, path: Path, **options) -> Path:
    img.save(path, **options)
    return path


@pytest.mark.parametrize(("quality", "subsampling"), [(90, "4:2:0"), (75, "4:4:4"), (50, "4:2:2"), (100, "4:2:0")])
def test_the_quality_and_subsampling_are_read_from_the_files_tables(tmp_path, quality, subsampling):
    path = _save(_photo(), tmp_path / "p.jpg", quality=quality, subsampling=subsampling)
    assert jpeg_step_of(path) == JpegStep(quality, subsampling)


def test_photos_not_jpeg_or_of_two_qualities_have_no_one_step(tmp_path):
    a = _save(_photo(seed=1), tmp_path / "a.jpg", quality=90, subsampling="4:2:0")
    b = _save(_photo(seed=2), tmp_path / "b.jpg", quality=90, subsampling="4:2:0")
    grey = _save(_photo(seed=3).convert("L"), tmp_path / "g.jpg", quality=90)  # one component: agrees with any
    assert photo_format([a, b, grey]) == PhotoFormat(JpegStep(90, "4:2:0"), None, "90 x 60 (not square)")
    two = photo_format([a, _save(_photo(), tmp_path / "c.jpg", quality=80)])
    assert two.step is None and two.why.startswith("JPEG files of 2 qualities (80, 90)")
    assert photo_format([a, _save(_photo(), tmp_path / "d.jpg", quality=90, subsampling="4:4:4")]).step is None
    png = photo_format([a, _save(_photo(), tmp_path / "p.png")])
    assert png.step is None and png.why.startswith("not all JPEG files of the standard tables")
    assert photo_format([_photo(), _photo(seed=1)]).step is None  # in memory (the shapes scenes)
    square = [_save(_photo(24, 24, seed=i), tmp_path / f"s{i}.jpg", quality=75) for i in range(3)]
    assert photo_format(square) == PhotoFormat(JpegStep(75, "4:2:0"), 24, "")
    (tmp_path / "empty.jpg").write_bytes(b"")  # unreadable: left out of training, and of what its photos show
    assert photo_format([*square, tmp_path / "empty.jpg"]) == PhotoFormat(JpegStep(75, "4:2:0"), 24, "")
    mixed = photo_format([*square, _save(_photo(30, 24), tmp_path / "w.jpg", quality=75)])
    assert mixed == PhotoFormat(JpegStep(75, "4:2:0"), None, "of 2 sizes (24 x 24, 30 x 24, ...)")


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the shared Flickr8k copy is not at {SHARED}")
def test_the_shared_flickr8k_copies_are_jpeg_quality_90_420():
    photos = sorted(SHARED.iterdir())
    assert photo_format(photos, limit=500) == PhotoFormat(JpegStep(90, "4:2:0"), 224, "")


def test_the_jpeg_step_follows_the_squash_in_memory():
    photo = _photo(300, 200)
    pre = Preprocess(image_size=40, crop=False, source_side=24, jpeg_quality=90, jpeg_subsampling="4:2:0")
    squashed = photo.resize((24, 24), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    squashed.save(buffer, "JPEG", quality=90, subsampling="4:2:0")
    by_hand = np.array(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB").resize((40, 40), Image.BILINEAR))
    assert np.array_equal(pre.pixels(photo), by_hand)
    plain = Preprocess(image_size=40, crop=False, source_side=24).pixels(photo)
    assert np.abs(plain.astype(int) - by_hand.astype(int)).max() > 0  # the JPEG step does change the input


def test_the_squash_filter_is_the_one_recorded():
    photo = _photo(300, 200)
    lanczos = Preprocess(image_size=24, crop=False, source_side=24, squash_filter="lanczos").pixels(photo)
    assert np.array_equal(lanczos, np.array(photo.resize((24, 24), Image.Resampling.LANCZOS)))
    assert not np.array_equal(lanczos, Preprocess(image_size=24, crop=False, source_side=24).pixels(photo))


def test_a_photo_of_the_training_size_is_untouched_by_the_jpeg_step(tmp_path):
    copy = Image.open(_save(_photo(24, 24), tmp_path / "c.jpg", quality=90, subsampling="4:2:0"))
    with_step = Preprocess(40, False, source_side=24, jpeg_quality=90, jpeg_subsampling="4:2:0")
    torch.testing.assert_close(with_step(copy), Preprocess(40, False)(copy), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"jpeg_quality": 90, "jpeg_subsampling": "4:2:0"}, "jpeg_quality needs source_side"),
        ({"source_side": 24, "jpeg_quality": 90}, "given together"),
        ({"source_side": 24, "jpeg_quality": 0, "jpeg_subsampling": "4:2:0"}, "from 1 to 100"),
        ({"source_side": 24, "jpeg_quality": 90, "jpeg_subsampling": "4:1:1"}, "must be one of 4:4:4"),
        ({"source_side": 24, "squash_filter": "nearest"}, "squash_filter must be one of bicubic"),
    ],
)
def test_bad_settings_are_refused_in_one_line(options, message):
    with pytest.raises(ValueError, match=message):
        Preprocess(**options)


def test_auto_takes_the_step_of_photos_at_the_source_side_and_a_contradicting_value_is_refused(tmp_path):
    jpeg = photo_format([_save(_photo(24, 24, seed=i), tmp_path / f"{i}.jpg", quality=75, subsampling="4:4:4")
                         for i in range(3)])  # fmt: skip
    step, line = settle_jpeg_step(24, AUTO, AUTO, jpeg)
    assert step == JpegStep(75, "4:4:4") and line.startswith("the training photos are 24 x 24 JPEG files of quality 75")
    step, line = settle_jpeg_step(32, AUTO, AUTO, jpeg)  # at another side: never recompressed at the source size
    assert step is None and line.startswith("the training photos are 24 x 24, not the source side 32 x 32: no JPEG")
    with pytest.raises(ValueError, match=r"say 90, 4:2:0, but the training photos are 24 x 24 JPEG files of quality "
                       r"75, 4:4:4 .*: leave both auto .*, or set 75 and '4:4:4'"):  # fmt: skip
        settle_jpeg_step(24, 90, "4:2:0", jpeg)
    with pytest.raises(ValueError, match="say none, but .* or set 75 and '4:4:4'"):
        settle_jpeg_step(24, None, None, jpeg)
    none = photo_format([_photo()])
    with pytest.raises(ValueError, match=r"say 90, 4:2:0, but the training photos are not JPEG files and 90 x 60 "
                       r"\(not square\), so they went through no JPEG step at 24 x 24: leave both auto"):  # fmt: skip
        settle_jpeg_step(24, 90, "4:2:0", none)
    assert settle_jpeg_step(24, 75, "4:4:4", jpeg) == (JpegStep(75, "4:4:4"), "")  # agrees: nothing to say
    assert settle_jpeg_step(24, None, None, none) == (None, "")
    assert settle_jpeg_step(None, AUTO, AUTO, jpeg) == (None, "")  # no squash: no step after it
    with pytest.raises(ValueError, match="given together, or both left auto"):
        settle_jpeg_step(24, 90, AUTO, jpeg)


def test_caption_train_refuses_a_jpeg_step_on_the_shapes_scenes(capsys, cli_run_in_tmp):
    args = ["fit", "--config", str(TINY), "--model.encoder.source_side", "64", "--model.encoder.jpeg_quality", "90"]
    with pytest.raises(SystemExit) as exc:
        caption_train_cli([*args, "--model.encoder.jpeg_subsampling", "4:2:0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and "the training photos are not JPEG files" in err[-1] and "leave both auto" in err[-1]


def test_model_files_record_the_step_and_older_files_load_without_it(tmp_path):
    old = tiny_model_file(tmp_path / "old.pt")  # written without the fields: no squash, no JPEG step
    assert "jpeg_quality" not in torch.load(old, weights_only=True)["encoder"]
    pre = Captioner.load(old).preprocess
    assert (pre.jpeg_quality, pre.jpeg_subsampling, pre.squash_filter) == (None, None, "bicubic")
    step = {"source_side": 48, "jpeg_quality": 80, "jpeg_subsampling": "4:4:4"}
    update_info(old, {}, merge={"preprocess": step, "encoder": step})
    loaded = Captioner.load(old)
    loaded.save(tmp_path / "again.pt")  # written again (as caption-export does): the step travels with it
    again = Captioner.load(tmp_path / "again.pt").preprocess
    assert again == loaded.preprocess and (again.jpeg_quality, again.jpeg_subsampling) == (80, "4:4:4")
    data = torch.load(BUNDLED_MODEL, weights_only=True, mmap=True)
    recorded = {"source_side": 224, "squash_filter": "bicubic", "jpeg_quality": 90, "jpeg_subsampling": "4:2:0"}
    assert {k: data["preprocess"].get(k) for k in recorded} == recorded
    assert Captioner.load().preprocess.jpeg_quality == 90


@pytest.mark.long
@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the shared Flickr8k copy is not at {SHARED}")
def test_auto_on_the_shared_copies_gives_the_bundled_models_preparation():
    from captioning.training.data import CaptionDataModule

    dm = CaptionDataModule(source="flickr8k", root=str(SHARED.parent))
    dm.setup()
    pre = Captioner.load().preprocess
    step, line = settle_jpeg_step(pre.source_side, AUTO, AUTO, dm.train_photo_format())
    assert step == JpegStep(pre.jpeg_quality, pre.jpeg_subsampling) == JpegStep(90, "4:2:0")
    assert "224 x 224 JPEG files of quality 90, 4:2:0" in line
