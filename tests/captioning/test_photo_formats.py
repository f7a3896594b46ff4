"""HEIC / HEIF photos (what iPhones save; read with pi-heif) and AVIF (Pillow's own): found in folders, decoded to the
photo they hold with their stored rotation applied, captioned as the same pixels in a PNG, sent to the server; and
without pi-heif, one line naming the photo and the package. Fixtures: tests/fixtures/photo_formats/README.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, features

from captioning.photos.image_paths import image_paths
from captioning.photos.jpeg_step import header_of
from captioning.photos.preprocess import ImageReadError, load_photo

FIX = Path(__file__).parent.parent / "fixtures"
FORMATS = FIX / "photo_formats"
ASTRONAUT = np.asarray(Image.open(FIX / "images" / "astronaut.png").convert("RGB"), dtype=np.float32)
COFFEE = Image.open(FIX / "images" / "coffee.png").convert("RGB")


# Pillow reads AVIF from 11.3 on; pyproject allows older ones, which say so in one line (test below)
AVIF_READ = "avif" in features.modules and features.check_module("avif")
needs_avif = pytest.mark.skipif(not AVIF_READ, reason=f"this Pillow ({Image.__version__}) reads no AVIF: 11.3 does")


def _gap(a: Image.Image | np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a, dtype=np.float32) - b).mean())


@pytest.mark.parametrize("name", ["astronaut.heic", pytest.param("astronaut.avif", marks=needs_avif)])
def test_a_heic_and_an_avif_photo_decode_to_the_photo_they_hold(name):
    image, size = load_photo(FORMATS / name)
    assert (image.mode, image.size, size) == ("RGB", (256, 256), (256, 256))
    assert _gap(image, ASTRONAUT) < 4  # quality 80: a lossy copy of the same picture
    assert _gap(image, ASTRONAUT[::-1]) > 30  # which a mirrored picture is not
    assert header_of(FORMATS / name) == (None, (256, 256))  # what training records of its photos: not a JPEG


def test_the_rotation_a_heic_file_stores_is_applied():
    image, size = load_photo(FORMATS / "coffee_turned.heic")
    assert image.size == size == (171, 256)
    upright = np.asarray(COFFEE.transpose(Image.Transpose.ROTATE_270), dtype=np.float32)  # turned clockwise
    assert _gap(image, upright) < 5 and _gap(image, upright[::-1, ::-1]) > 20


def test_folders_hold_them_in_any_case_of_extension(tmp_path):
    for name in ("a.heic", "b.HEIC", "c.heif", "d.avif", "e.jfif", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert [Path(p).name for p in image_paths([str(tmp_path)])] == ["a.heic", "b.HEIC", "c.heif", "d.avif", "e.jfif"]


@pytest.mark.long
@needs_avif  # (its AVIF photo)
def test_caption_captions_them_as_the_same_pixels_in_a_png(tmp_path, capsys):
    from captioning.commands.caption import caption_main

    photos = tmp_path / "photos"
    photos.mkdir()
    for name in ("astronaut.heic", "astronaut.avif", "coffee_turned.heic"):
        (photos / name).write_bytes((FORMATS / name).read_bytes())
        load_photo(FORMATS / name)[0].save(photos / f"{name}.png")  # the decoded pixels, as a PNG
    assert caption_main([str(photos), "--json"]) == 0
    records = {Path(r["image"]).name: r for r in json.loads(capsys.readouterr().out)}
    assert len(records) == 6
    for name in ("astronaut.heic", "astronaut.avif", "coffee_turned.heic"):
        assert records[name]["caption"] == records[f"{name}.png"]["caption"], name
        assert records[name]["size"] == records[f"{name}.png"]["size"]


def _upload(name: str, preprocess=None) -> dict:
    """The server's HTTP side on an upload of the fixture ``name`` (a path: any file)."""
    from attention_serve.front import prepare_photo
    from attention_serve.models import Served
    from captioning.photos.preprocess import Preprocess

    class Limits:
        max_pixels = 89_478_485

    served = Served(Path("m.pt"), "m", {}, {}, {"preprocess": preprocess or Preprocess(32, crop=False)})
    return prepare_photo((FORMATS / name).read_bytes(), served, Limits())


@needs_avif  # (its AVIF photo)
def test_the_server_reads_a_heic_upload_and_answers_a_preview_the_page_can_draw(tmp_path):
    """Browsers other than Safari draw no HEIC (nor TIFF): the page drew the words over an empty canvas. The answer
    now carries a JPEG of the photo for it, upright; a photo the browser draws gets none."""
    import base64
    import io

    from helpers.tiny_captioner import tiny_model_file

    from attention_serve.apis import CaptionAPI

    api = CaptionAPI(tiny_model_file(tmp_path / "m.pt"), "caption", 1, 4, 0.01, idle_wait=False)
    api.load("cpu")
    sent = _upload("coffee_turned.heic", api.captioner.preprocess)
    assert sent["size"] == [171, 256]
    shown = Image.open(io.BytesIO(base64.b64decode(sent["preview"])))
    assert (shown.format, shown.size) == ("JPEG", (171, 256))  # at most 480 a side: never enlarged
    upright = np.asarray(COFFEE.transpose(Image.Transpose.ROTATE_270), dtype=np.float32)
    assert _gap(shown.convert("RGB"), upright) < 6
    record = api.compute(api.decode({**sent, "options": {"beam_size": 1, "length_penalty": 0.0}}))
    assert record["preview"] == sent["preview"] and record["size"] == [171, 256]
    for name in ("astronaut.avif", "../images/astronaut.png"):  # what browsers draw themselves
        sent = _upload(name, api.captioner.preprocess)
        record = api.compute(api.decode({**sent, "options": {"beam_size": 1, "length_penalty": 0.0}}))
        assert "preview" not in sent and "preview" not in record
    from attention_serve.openapi import CAPTION_ANSWER

    assert "preview" in CAPTION_ANSWER["properties"]


def test_without_pi_heif_a_heic_photo_is_one_line_naming_the_package(monkeypatch, tmp_path):
    monkeypatch.delitem(Image.OPEN, "HEIF", raising=False)  # as before any HEIC photo was met
    monkeypatch.setitem(sys.modules, "pi_heif", None)  # import pi_heif: ImportError
    with pytest.raises(ImageReadError) as err:
        load_photo(FORMATS / "astronaut.heic")
    assert err.value.kind == "not_image" and str(err.value) == (
        f"{FORMATS / 'astronaut.heic'}: a HEIC/HEIF photo (iPhones save them): reading it needs the pi-heif package "
        "(pip install pi-heif)")  # fmt: skip
    with pytest.raises(ImageReadError, match="^upload: a HEIC/HEIF photo"):
        load_photo((FORMATS / "astronaut.heic").read_bytes())
    assert header_of(FORMATS / "astronaut.heic") == (None, None)  # unreadable: the data reader names it
    from attention_serve.limits import ClientError

    with pytest.raises(ClientError) as refused:
        _upload("astronaut.heic")
    assert (refused.value.status, refused.value.message) == (
        415, "the image: a HEIC/HEIF photo (iPhones save them): reading it needs the pi-heif package (pip install "
        "pi-heif)")  # fmt: skip
    load_photo(FIX / "images" / "rocket.jpg")  # every other photo as before


@pytest.mark.parametrize("modules", ["without avif", "avif unbuilt"])
def test_a_pillow_that_reads_no_avif_says_so_in_one_line(monkeypatch, modules):
    """Before Pillow 11.2 "avif" is no module it knows (check_module raised ValueError: a traceback, and the other
    photos of the batch lost); from 11.2 it is known but not built in before 11.3."""
    known = {k: v for k, v in features.modules.items() if k != "avif"}
    if modules == "avif unbuilt":
        known["avif"] = ("PIL._avif_not_built", "AVIF", None)
        monkeypatch.setattr(features, "check_module", lambda name: False)
    monkeypatch.setattr(features, "modules", known)
    with pytest.raises(ImageReadError) as err:
        load_photo(FORMATS / "astronaut.avif")
    assert err.value.kind == "not_image"
    said = f"an AVIF photo: this Pillow ({Image.__version__}) cannot read it; Pillow 11.3 or later can (pip install -U"
    assert str(err.value).endswith(f"{said} pillow)")


def test_the_servers_pixel_limit_is_the_one_it_says():
    """--max-pixels above Pillow's own guard (179 MP) took no effect, and the refusal named the server's limit for a
    photo Pillow had refused: a 400 MP photo was "more than 500 megapixels". Pillow's guard now follows the limit."""
    import struct
    import zlib

    import pytest

    from attention_serve.front import ClientError, prepare_photo
    from attention_serve.models import Served
    from captioning.photos.preprocess import Preprocess

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 20000, 20000, 8, 0, 0, 0, 0)  # claims 400 MP; its pixels are not there
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 100)) + chunk(b"IEND", b"")
    served = Served(Path("m.pt"), "m", {}, {}, {"preprocess": Preprocess(32, crop=False)})
    said = {}
    for most in (500e6, 300e6, 100e6):
        limits = type("Limits", (), {"max_pixels": int(most)})()
        with pytest.raises(ClientError) as err:
            prepare_photo(png, served, limits)
        said[most] = (err.value.status, str(err.value))
    assert said[500e6][0] == 422  # within the limit: read, and found damaged (its pixels are missing)
    assert said[300e6] == (413, "the image has 20000 x 20000 pixels, 400 megapixels; at most 300 (a guard against "
                                "decompression bombs)")  # fmt: skip
    # past Pillow's own guard (twice the limit) too: its sides, from its header (it was "more than 200.0 megapixels")
    assert said[100e6] == (413, "the image has 20000 x 20000 pixels, 400 megapixels; at most 100 (a guard against "
                                "decompression bombs)")  # fmt: skip


@needs_avif  # (its AVIF photo)
def test_a_cut_off_avif_or_heic_photo_is_damaged_not_another_format(tmp_path):
    """Half of a JPEG or PNG file is "damaged" (the server's 422); half of an AVIF or HEIC one was "not an image file"
    (415), though its header says what it is."""
    import pytest

    from attention_serve.front import ClientError
    from captioning.photos.preprocess import ImageReadError, load_photo

    for name, kind in (("astronaut.avif", "AVIF"), ("astronaut.heic", "HEIC")):
        data = (FORMATS / name).read_bytes()
        cut = tmp_path / name
        cut.write_bytes(data[: len(data) // 2])
        with pytest.raises(ImageReadError) as err:
            load_photo(cut)
        assert err.value.kind == "damaged", str(err.value)  # (HEIC: pi-heif's own words say where the file ends)
        assert kind == "HEIC" or "a damaged AVIF photo (cut off?)" in str(err.value)
        with pytest.raises(ClientError) as refused:
            _upload(cut)
        assert refused.value.status == 422 and "damaged" in str(refused.value)


@pytest.mark.parametrize("suffix, previewed", [(".jpg", False), (".png", False), (".webp", True), (".tif", True)])
def test_a_turned_upload_the_browser_draws_sideways_gets_an_upright_preview(tmp_path, suffix, previewed):
    """Chromium applies a JPEG's and a PNG's EXIF Orientation in an <img>, not a WebP's: the page drew a turned WebP
    sideways under the attention (the heat over the wrong part of it). Such an upload's answer carries an upright
    JPEG to draw; a JPEG or PNG none."""
    import base64
    import io

    exif = Image.Exif()
    exif[0x0112] = 6  # stored 400 x 240, shown (and captioned) 240 x 400
    path = tmp_path / f"turned{suffix}"
    COFFEE.resize((400, 240)).save(path, exif=exif)
    sent = _upload(str(path))
    assert sent["size"] == [240, 400]
    assert ("preview" in sent) == previewed
    if previewed:
        assert Image.open(io.BytesIO(base64.b64decode(sent["preview"]))).size[0] < 400  # upright: taller than wide


@pytest.mark.parametrize(("fmt", "said"), [("TGA", "a TGA image"), ("PCX", "a PCX image"), ("SGI", "an SGI image")])
def test_a_picture_in_a_format_not_read_is_named_not_called_no_image(tmp_path, fmt, said):
    """A TGA or PCX file was "not an image file in a photo format": it is an image, in a format not read here."""
    path = tmp_path / f"x.{fmt.lower()}"
    Image.new("RGB", (20, 20), "red").save(path, format=fmt)
    with pytest.raises(ImageReadError) as err:
        load_photo(path)
    assert str(err.value) == (f"{path}: {said}, not a photo format read here (JPEG, PNG, WebP, GIF, BMP, TIFF, PPM, "
                              "ICO, HEIC, AVIF): save it as PNG or JPEG")  # fmt: skip
    with pytest.raises(ImageReadError) as err:  # as an upload's bytes
        load_photo(path.read_bytes(), name="upload")
    assert str(err.value).startswith(f"upload: {said}, not a photo format")
    (tmp_path / "t.jpg").write_text("hello")  # no picture at all: as before
    with pytest.raises(ImageReadError, match="not an image file in a photo format"):
        load_photo(tmp_path / "t.jpg")


def test_a_cut_off_tiff_sent_to_the_server_is_refused_without_pillows_warning():
    """The refusal is one line in the server's log; Pillow's "Truncated File Read" warning (and the line of its
    source) was written there too."""
    import io
    import warnings

    from attention_serve.front import ClientError, prepare_photo
    from attention_serve.models import Served
    from captioning.photos.preprocess import Preprocess

    buf = io.BytesIO()
    Image.new("RGB", (64, 64)).save(buf, format="TIFF")
    served = Served(Path("m.pt"), "m", {}, {}, {"preprocess": Preprocess(32, crop=False)})
    limits = type("Limits", (), {"max_pixels": int(89.5e6)})()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ClientError) as err:
            prepare_photo(buf.getvalue()[:50], served, limits)
    assert err.value.status == 422 and "a TIFF photo that cannot be read" in str(err.value)
    assert [str(w.message) for w in caught] == []
