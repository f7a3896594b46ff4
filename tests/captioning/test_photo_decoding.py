"""Large JPEGs decode at a reduced scale (captioning.photos.preprocess.load_photo): the network's input stays within a
few grey levels of a full decode's, the full image's size and crop box are what a caption record reports, EXIF rotation
still applies, and anything else (PNG, small JPEGs) decodes in full."""

import io
import json

import numpy as np
import pytest
import torch
from helpers.attacks import scan_bomb
from helpers.tiny_captioner import tiny_model_file
from PIL import Image

from captioning.commands.caption import caption_main
from captioning.photos.preprocess import (
    LITE_MEAN,
    LITE_STD,
    ImageReadError,
    Preprocess,
    jpeg_scans,
    load_image,
    load_photo,
)

W, H = 2080, 1560  # 3.2 megapixels; at a least side of 520 the decoder scales by 1/2 (1560 // 520 = 3 -> 2)


def _photo(width: int = W, height: int = H) -> Image.Image:
    """A photo-like picture: smooth light, a few objects with edges, sensor noise (JPEG's DCT scaling meets all)."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.stack([80 + 100 * x / width, 60 + 120 * y / height, 140 - 60 * x / width], axis=-1)
    for cx, cy, r, colour in ((0.3, 0.4, 0.15, (220, 40, 30)), (0.7, 0.6, 0.2, (30, 160, 60))):
        disc = (x - cx * width) ** 2 + (y - cy * height) ** 2 < (r * height) ** 2
        img[disc] = colour
    img[int(0.8 * height) :, : width // 2] = (20, 20, 20)  # a dark band with a hard edge
    img += rng.normal(0, 6, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


@pytest.fixture(scope="module")
def big_jpeg(tmp_path_factory):
    path = tmp_path_factory.mktemp("photos") / "big.jpg"
    _photo().save(path, quality=92)
    return path


@pytest.mark.parametrize("crop", [False, True])
def test_a_large_jpeg_decodes_smaller_with_the_same_network_input(big_jpeg, crop):
    pre = Preprocess(260, crop, LITE_MEAN, LITE_STD)
    assert pre.decode_side == 520
    small, size = load_photo(big_jpeg, pre.decode_side)
    assert size == (W, H) and small.size == (W // 2, H // 2)
    full = load_image(big_jpeg)  # no least side: decoded in full
    assert full.size == (W, H)
    # the input the network sees, in grey levels of 0..255: a few at sharp edges, a fraction of one on average
    diff = (pre(small) - pre(full)).abs() * torch.tensor(LITE_STD).view(3, 1, 1) * 255
    assert diff.max() <= 6 and diff.mean() <= 0.4, (diff.max(), diff.mean())


def test_scale_is_chosen_so_both_sides_stay_at_least_the_decode_side(big_jpeg):
    assert load_photo(big_jpeg, 390)[0].size == (W // 4, H // 4)  # 1560 // 390 = 4
    assert load_photo(big_jpeg, 190)[0].size == (W // 8, H // 8)  # 1/8 is the decoder's smallest scale
    assert load_photo(big_jpeg, 800)[0].size == (W, H)  # 1560 // 800 = 1: no reduction
    assert load_photo(big_jpeg, None)[0].size == (W, H)


def test_exif_rotation_still_applies_and_the_full_size_is_the_rotated_one(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to display
    path = tmp_path / "phone.jpg"
    _photo().save(path, quality=92, exif=exif)
    small, size = load_photo(path, 520)
    assert size == (H, W) and small.size == (H // 2, W // 2)  # portrait, as displayed
    full = np.asarray(load_image(path).resize(small.size, Image.Resampling.BOX), dtype=np.float32)
    assert np.abs(np.asarray(small, dtype=np.float32) - full).mean() < 3  # the same picture, the same way up


def test_a_pil_image_of_a_phone_photo_is_turned_as_its_file_is(tmp_path):
    # Python callers pass Image.open(path): its EXIF orientation applies as it does to the file
    exif = Image.Exif()
    exif[0x0112] = 6
    path = tmp_path / "phone.jpg"
    _photo().save(path, quality=92, exif=exif)
    from_file, size = load_photo(path)
    opened = Image.open(path)
    from_pil, pil_size = load_photo(opened)
    assert size == pil_size == (H, W) and from_pil.size == from_file.size == (H, W)
    assert np.array_equal(np.asarray(from_pil), np.asarray(from_file))
    turned = load_photo(from_pil)[0]  # an image already turned (no orientation left) is not turned again
    assert turned.size == (H, W) and np.array_equal(np.asarray(turned), np.asarray(from_file))
    assert opened.size == (W, H)  # the caller's image is left as it was


def test_a_nearly_square_photo_keeps_its_own_size(tmp_path):
    # 1000 x 999 decoded at 1/8 is 125 x 125: the reported size comes from the file and its EXIF tag, not from the
    # decoded picture's shape
    path = tmp_path / "nearly_square.jpg"
    _photo(1000, 999).save(path, quality=92)
    small, size = load_photo(path, 120)
    assert small.size == (125, 125) and size == (1000, 999)


def test_other_formats_and_pil_images_decode_in_full(tmp_path):
    png = tmp_path / "big.png"
    _photo(1200, 1100).save(png)
    image, size = load_photo(png, 260)
    assert image.size == size == (1200, 1100)
    pil = _photo(300, 200)
    image, size = load_photo(pil, 64)
    assert image.size == size == (300, 200)


def test_caption_reports_the_full_image_and_draws_on_the_decoded_one(tmp_path, big_jpeg, capsys):
    model = tiny_model_file(tmp_path / "tiny.pt")
    overlays = tmp_path / "attn"
    args = [str(big_jpeg), "--model", str(model), "--json", "--max-len", "4", "--overlay", str(overlays)]
    code = caption_main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    (rec,) = json.loads(out)
    assert rec["size"] == [W, H]  # the photo's own size, not the decoded one (1/8: 260 x 195)
    side = H  # the centre square, in the full image's pixels
    assert rec["crop_box"] == [(W - side) / 2, 0.0, (W + side) / 2, float(H)]
    assert Image.open(rec["overlay"]).size[0] > 0


def test_a_progressive_jpeg_of_too_many_scans_is_refused_before_it_is_decoded(tmp_path, capsys):
    """A scan bomb: each scan is a pass over every block, and 10,000 tiny repeated ones (373 KB, 16 megapixels)
    decoded for minutes. More than MAX_SCANS (100; a photo has about 10) are refused from the file's segments, as an
    upload (the server: 413) and as a file (`caption`: one line)."""
    bomb = scan_bomb(64, 200)
    assert jpeg_scans(bomb, 10**6) == 200
    with pytest.raises(ImageReadError) as err:
        load_photo(bomb, 64)
    assert err.value.kind == "too_large" and "more than 100 scans" in str(err.value)
    path = tmp_path / "bomb.jpg"
    path.write_bytes(bomb)
    with pytest.raises(ImageReadError, match=r"bomb\.jpg: a progressive JPEG of more than 100 scans"):
        load_photo(path)
    code = caption_main([str(path), "--model", str(tiny_model_file(tmp_path / "tiny.pt"))])
    err = capsys.readouterr().err
    assert code != 0 and "more than 100 scans" in err and "Traceback" not in err
    assert load_photo(scan_bomb(64, 100))[0].size == (64, 64)  # at the limit: decoded


def test_scans_are_counted_by_the_files_segments_not_its_bytes():
    """A real progressive JPEG has about 10 scans; the bytes of a scan's marker inside another segment (an EXIF
    thumbnail's, an ICC profile's) are not scans, and MPO's later pictures are not the one decoded."""
    buf = io.BytesIO()
    _photo(320, 240).save(buf, "JPEG", progressive=True)
    photo = buf.getvalue()
    assert 6 <= jpeg_scans(photo) <= 12
    app = b"\xff\xda" * 300  # an APP15 segment full of marker bytes
    planted = photo[:2] + b"\xff\xef" + (len(app) + 2).to_bytes(2, "big") + app + photo[2:]
    assert jpeg_scans(planted) == jpeg_scans(photo) and load_photo(planted)[0].size == (320, 240)
    assert jpeg_scans(photo + scan_bomb(64, 200)) == jpeg_scans(photo)  # after the end of the first picture
    baseline = io.BytesIO()
    _photo(320, 240).save(baseline, "JPEG")
    assert jpeg_scans(baseline.getvalue()) == 1


@pytest.mark.parametrize("suffix", [".jpg", ".tif", ".png", ".webp"])
def test_a_turned_photo_reports_its_shown_size_in_every_format(tmp_path, suffix):
    # Pillow 12+ opens a TIFF whose Orientation turns it with its sides already swapped (a JPEG's stay as stored):
    # the full size and crop box must be the portrait's either way
    exif = Image.Exif()
    exif[0x0112] = 6
    path = tmp_path / f"turned{suffix}"
    _photo(400, 240).save(path, exif=exif)
    for side in (None, 100):
        image, size = load_photo(path, side)
        assert size == (240, 400) and image.size[0] < image.size[1]
