"""Image preprocessing: any PIL image -> the normalised tensor a backbone expects, and the crop it saw.

A :class:`Preprocess` is a small JSON-able dataclass, so model files store exactly what training used.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, Any

import numpy as np
import PIL
import torch
from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

from captioning.photos.colour import in_srgb
from text_attn.core.errors import missing, one_line
from text_attn.core.safe_files import name_refused

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# EfficientNet-Lite was trained (in TensorFlow) on (pixel - 127) / 128 with pixels in 0..255,
# "inception-style" scaling to about [-1, 1]; in ToTensor units that is mean 127/255, std 128/255.
LITE_MEAN = (127 / 255,) * 3
LITE_STD = (128 / 255,) * 3
SQUASH_FILTERS = {
    "bicubic": Image.Resampling.BICUBIC,
    "bilinear": Image.Resampling.BILINEAR,
    "lanczos": Image.Resampling.LANCZOS,
}
SUBSAMPLINGS = ("4:4:4", "4:2:2", "4:2:0")  # Pillow's names, in the order of JpegImagePlugin.get_sampling's 0, 1, 2


@dataclass(frozen=True)
class Preprocess:
    """PIL image -> normalised (3, image_size, image_size) tensor, as the backbone expects it."""

    image_size: int = 224  # side of the square the network sees
    crop: bool = True  # True: centre square of side min(w, h); False: whole image, aspect not kept
    mean: tuple[float, float, float] = IMAGENET_MEAN  # per channel, in 0..1 pixel units
    std: tuple[float, float, float] = IMAGENET_STD
    # The side of the square photos the model was trained on, when they all had one (the shared Flickr8k copy: 224,
    # squashed from about 500 x 375): every photo is first squashed to it (bicubic), so a sharp full-size photo looks
    # like a training photo (the check: 6 CIDEr-D points lost without). None: photos go straight to
    # image_size. A photo already of that size is unchanged, so training on those copies is too.
    source_side: int | None = None
    # How the training copies were squashed (bicubic, bilinear or lanczos): issue 57's table, 125 full-size Flickr8k
    # test photos, bicubic and bilinear equal within noise, Lanczos 2-3 CIDEr-D points worse (docs/captioning.md).
    squash_filter: str = "bicubic"
    # The JPEG step of the training copies (the shared Flickr8k copy: quality 90, "4:2:0"; read from their own
    # quantization tables, captioning.photos.jpeg_step): a squashed photo is saved at that quality and chroma
    # subsampling in memory and decoded again, so it carries the artifacts the encoder learned on (the check: 13
    # of 125 of its own world's photos called foreign without, 1 with). None: photos that were not recompressed (PNGs,
    # the shapes scenes). Like the squash, never applied to a photo already of source_side.
    jpeg_quality: int | None = None
    jpeg_subsampling: str | None = None  # "4:4:4", "4:2:2" or "4:2:0"; given with jpeg_quality

    def __post_init__(self) -> None:
        # JSON round trips give lists; keep tuples so instances stay hashable and compare equal.
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))
        if int(self.image_size) != self.image_size or self.image_size < 1:
            raise ValueError(f"image_size must be a positive integer, got {self.image_size!r}")
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError(f"mean and std need 3 values (std > 0), got {self.mean}, {self.std}")
        if self.source_side is not None and (int(self.source_side) != self.source_side or self.source_side < 1):
            raise ValueError(f"source_side must be a positive integer or None, got {self.source_side!r}")
        if self.squash_filter not in SQUASH_FILTERS:
            raise ValueError(f"squash_filter must be one of {', '.join(SQUASH_FILTERS)}, got {self.squash_filter!r}")
        if self.jpeg_quality is not None:
            if self.source_side is None:
                raise ValueError("jpeg_quality needs source_side: the JPEG step follows the squash to that size")
            if int(self.jpeg_quality) != self.jpeg_quality or not 1 <= self.jpeg_quality <= 100:
                raise ValueError(f"jpeg_quality must be an integer from 1 to 100 or None, got {self.jpeg_quality!r}")
        if (self.jpeg_quality is None) != (self.jpeg_subsampling is None):
            raise ValueError("jpeg_quality and jpeg_subsampling are given together (or neither)")
        if self.jpeg_subsampling is not None and self.jpeg_subsampling not in SUBSAMPLINGS:
            raise ValueError(
                f"jpeg_subsampling must be one of {', '.join(SUBSAMPLINGS)}, got {self.jpeg_subsampling!r}"
            )

    def __repr__(self) -> str:
        # The fields added after feature caches were keyed by this repr are named only when set: a cache written
        # for a model without a JPEG step keeps its key (captioning.training.feature_cache).
        later = {"squash_filter": "bicubic", "jpeg_quality": None, "jpeg_subsampling": None}
        shown = [(f.name, getattr(self, f.name)) for f in fields(self)]
        return f"Preprocess({', '.join(f'{k}={v!r}' for k, v in shown if k not in later or v != later[k])})"

    @property
    def decode_side(self) -> int:
        """The least side a photo is decoded at (:func:`load_photo`): twice the network's input, so the resize to it
        still averages two or more decoded pixels a side into each input pixel. The input then differs from a full
        decode's by a few of 255 grey levels at sharp edges and about 0.2 on average (tests/captioning/
        test_photo_decoding.py; on 12-megapixel copies of Flickr8k photos the bundled model's captions stay the
        same: docs/speed.md)."""
        return 2 * int(self.image_size)

    def crop_box(self, width: int, height: int) -> tuple[float, float, float, float]:
        """(x0, y0, x1, y1) of the original image that the network sees, in pixels (with ``source_side``: all of
        it, squashed to a square first, whose centre square is the whole)."""
        if not self.crop or self.source_side is not None:
            return (0.0, 0.0, float(width), float(height))
        side = min(width, height)
        x0, y0 = (width - side) / 2, (height - side) / 2
        return (x0, y0, x0 + side, y0 + side)

    def __call__(self, img: Image.Image) -> torch.Tensor:
        return self.normalise(self.pixels(img))

    def pixels(self, img: Image.Image) -> np.ndarray:
        """The (S, S, 3) uint8 square the network sees, before normalising (what the server sends its workers: a
        quarter of the float tensor's bytes)."""
        rgb = to_rgb(img)
        if self.source_side is not None and rgb.size != (self.source_side, self.source_side):
            side = (self.source_side, self.source_side)
            rgb = rgb.resize(side, SQUASH_FILTERS[self.squash_filter])  # as the training copies were
            if self.jpeg_quality is not None:
                rgb = jpeg_round_trip(rgb, self.jpeg_quality, str(self.jpeg_subsampling))
        size = (self.image_size, self.image_size)
        # Resampling straight from the crop box (instead of resize, then crop on whole pixels)
        # makes crop_box exactly the region seen (PIL's antialiasing filter still blends the
        # edge pixels with their neighbours just outside, as resize-then-crop would).
        return np.array(rgb.resize(size, Image.Resampling.BILINEAR, box=self.crop_box(*rgb.size)), dtype=np.uint8)

    def normalise(self, pixels: np.ndarray) -> torch.Tensor:
        """(S, S, 3) uint8 from :meth:`pixels` -> the normalised (3, S, S) float tensor."""
        x = torch.from_numpy(np.ascontiguousarray(pixels)).permute(2, 0, 1).float().div_(255.0)  # (3, S, S)
        mean = torch.tensor(self.mean).view(3, 1, 1)
        std = torch.tensor(self.std).view(3, 1, 1)
        return (x - mean) / std


def jpeg_round_trip(rgb: Image.Image, quality: int, subsampling: str) -> Image.Image:
    """``rgb`` saved as a JPEG at this quality and chroma subsampling, in memory, and decoded again (8-bit RGB)."""
    buffer = io.BytesIO()
    rgb.save(buffer, "JPEG", quality=int(quality), subsampling=subsampling)
    buffer.seek(0)
    with Image.open(buffer, formats=["JPEG"]) as decoded:
        return decoded.convert("RGB")


def to_rgb(img: Image.Image) -> Image.Image:
    """Any PIL mode -> 8-bit RGB. Transparency is composited onto white; 16-bit grey is scaled.

    PIL's own convert("RGB") clips 16-bit values at 255 (a mostly white image), hence the scaling.
    Modes "I;16" and "I" (32-bit int) are read as 16-bit when they hold values above 255, else as 8-bit (Pillow's
    convert("I;16") of an 8-bit image keeps its 0..255: scaled, it was captioned nearly black); "F" as 0..1 when its
    finite maximum is at most 1, else as 0..255, a NaN or an infinity as 0. "La" (premultiplied alpha) is
    un-premultiplied first (Pillow converts it to "LA" alone).
    """
    mode = img.mode
    if mode == "RGB":
        return img
    if mode == "La":
        img, mode = img.convert("LA"), "LA"
    if mode.startswith("I;16") or mode in ("I", "F"):
        arr = np.asarray(img, dtype=np.float64)
        if mode == "F":  # one NaN or infinity made the maximum NaN and the whole photo black: they read as 0, and
            finite = np.isfinite(arr)  # the range is judged on the finite values
            arr = np.where(finite, arr, 0.0)
            if finite.any() and arr[finite].max() <= 1.0:
                arr = arr * 255.0
        elif arr.size and arr.max() > 255:
            arr = arr / 257.0  # 65535 -> 255
        grey = np.clip(np.rint(arr), 0, 255).astype(np.uint8)
        return Image.fromarray(grey, mode="L").convert("RGB")
    has_alpha = mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in img.info
    if has_alpha:
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return img.convert("RGB")  # L, 1, P, CMYK, YCbCr, ...


# The photo formats read (Pillow's others are not photos, and some hand the bytes to outside programs: EPS to
# Ghostscript): a file in another format is "not an image file in a photo format". Two more are added for a file that is
# one (:func:`photo_formats`): HEIF, iPhones' HEIC photos, read by pi-heif's opener; AVIF, Pillow's own from 11.3 on.
PHOTO_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF", "PPM", "ICO")  # JPEG covers MPO (phones)
# an ISO media file's major brand (bytes 8-12, after "ftyp"): HEVC-coded HEIF; AV1 (AVIF) names itself there or among
# the compatible brands after it
HEIF_BRANDS = frozenset({b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"hevm", b"hevs", b"mif1", b"msf1"})
HEAD = 32  # the bytes photo_formats looks at


# The scans a progressive JPEG may hold; more are refused before decoding (ImageReadError "too_large"). Each scan is a
# pass over every block of the picture, so thousands of tiny repeated scans (a "scan bomb": 10,000 scans of 31 bytes,
# a 373 KB file of 16 megapixels) decoded for minutes. Encoders write about 10 (libjpeg's progressive script: 10 in
# colour, 6 in grey); libjpeg-turbo's djpeg refuses such files with -maxscans. 100 is ten times a real photo's.
MAX_SCANS = 100
# a marker: in a scan's coded data an 0xFF byte is followed by 0 (a stuffed byte) or a restart marker (0xD0-0xD7)
JPEG_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")


# raster formats of Pillow's that are no photo format read here: a file in one is named so ("a TGA image") instead of
# "not an image file"; their headers alone are read, by Pillow's own parsers (nothing decoded, no outside program)
OTHER_FORMATS = ("TGA", "PCX", "SGI", "DDS", "ICNS", "JPEG2000", "PSD", "QOI", "SUN", "XBM", "XPM", "IM", "MSP")


def _other_format(p: Path | io.BytesIO) -> str | None:
    """The format (OTHER_FORMATS) a file that is no photo format is a picture in; None for none of them."""
    Image.init()
    try:
        if isinstance(p, io.BytesIO):
            p.seek(0)
        with Image.open(p, formats=[f for f in OTHER_FORMATS if f in Image.ID]) as img:
            return img.format
    except Exception:  # noqa: BLE001 - any opener's failure: no picture it knows
        return None


def jpeg_scans(data: bytes | memoryview, most: int = MAX_SCANS) -> int:
    """The scans (SOS markers) of the first picture of the JPEG file ``data``, counted up to ``most`` + 1 by walking
    its segments: the bytes of a marker inside a segment (an EXIF thumbnail's) are not counted. Cheap: the coded data
    is searched for markers in C, the other segments skipped by their length."""
    scans, at = 0, 2
    while (found := JPEG_MARKER.search(data, at)) is not None:
        code, at = data[found.start() + 1], found.end()
        if code == 0xD9:  # the end of the picture (an MPO's next one follows)
            break
        if code in (0x01, 0xD8):  # markers without a segment
            continue
        if code == 0xDA:
            scans += 1
            if scans > most:
                break
        if at + 2 > len(data):
            break
        at += int.from_bytes(data[at : at + 2], "big")  # the segment's length counts its own two bytes
    return scans


class ImageReadError(ValueError):
    """An input image that cannot be used; the message is one line naming it. ``kind``: "missing", "not_image",
    "too_large" (the decompression-bomb and scan guards) or "damaged" (what the server answers 404/415/413/422
    with)."""

    def __init__(self, message: str, kind: str = "damaged") -> None:
        super().__init__(message)
        self.kind = kind


def photo_formats(head: bytes, name: object) -> tuple[str, ...]:
    """The formats Pillow may open a photo whose first :data:`HEAD` bytes are ``head`` as: PHOTO_FORMATS, and for a
    HEIC / HEIF photo (what iPhones save) pi-heif's opener, registered the first time one is met (its import costs
    ~0.05 s, which no other photo should pay), or for an AVIF photo Pillow's own. (Image.open raises KeyError for a
    format name it has no opener for.) A missing pi-heif, or a Pillow without AVIF, is an ImageReadError naming the
    photo and what reads it, not "not an image file"."""
    if head[4:8] != b"ftyp":
        return PHOTO_FORMATS
    if b"avif" in head[8:HEAD] or b"avis" in head[8:HEAD]:
        from PIL import features

        # before Pillow 11.2 "avif" is no module it knows (check_module raised ValueError: a traceback, the batch lost)
        if "avif" not in features.modules or not features.check_module("avif"):
            raise ImageReadError(f"{name}: an AVIF photo: this Pillow ({PIL.__version__}) cannot read it; Pillow 11.3 "
                                 "or later can (pip install -U pillow)", "not_image")  # fmt: skip
        Image.init()  # the AVIF plugin is not among the few Image.open loads first
        return (*PHOTO_FORMATS, "AVIF")
    if head[8:12] not in HEIF_BRANDS:
        return PHOTO_FORMATS
    if "HEIF" not in Image.OPEN:
        try:
            import pi_heif
        except ImportError:
            raise ImageReadError(f"{name}: a HEIC/HEIF photo (iPhones save them): reading it needs the pi-heif "
                                 "package (pip install pi-heif)", "not_image") from None  # fmt: skip
        pi_heif.register_heif_opener()  # 10- and 12-bit photos come as 8-bit; the rotation it stores is applied
    return (*PHOTO_FORMATS, "HEIF")


def headed_format(formats: tuple[str, ...]) -> str | None:
    """The format a photo's header named where :func:`photo_formats` added its opener (AVIF, HEIC), else None."""
    return {"AVIF": "AVIF", "HEIF": "HEIC"}.get(formats[-1]) if len(formats) > len(PHOTO_FORMATS) else None


def photo_source(image: Any, where: str) -> Any:
    """``image`` when it is a photo the public calls read (a PIL image, a file path, a file's bytes; a file opened in
    binary mode, or an io.BytesIO, is read to its bytes, as PIL.Image.open reads one); else one TypeError naming
    ``where`` (a numpy array reached pathlib's "expected str, bytes or os.PathLike", bytes a crash after the work)."""
    if isinstance(image, (Image.Image, str, os.PathLike, bytes, bytearray)):
        return image
    if isinstance(image, memoryview):  # a buffer's view (an mmap's, a numpy byte array's): its bytes
        return image.tobytes()
    if hasattr(image, "read"):
        if getattr(image, "closed", False):  # "read of closed file", without the photo's number
            raise TypeError(f"{where}: a closed file: give an open file, or the photo's path or bytes")
        if isinstance(image, io.TextIOBase):  # a text file's read fails on a JPEG
            raise TypeError(f"{where}: a file opened as text; open the photo with open(path, 'rb')")
        at = image.tell() if _seekable(image) else None
        data = image.read()
        if at is not None:  # left where it was: read again, given twice in one list, a photo at an offset (review)
            image.seek(at)
            if data == b"" and at > 0:  # read to its end before (by the caller): its bytes from the start
                image.seek(0)
                data = image.read()
                image.seek(at)
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"{where}: a file opened as text; open the photo with open(path, 'rb')")
        return bytes(data)
    # an array (numpy's, OpenCV's) or a tensor: which of its layouts and ranges it holds is a guess this will not
    # make; say how to pass it
    if isinstance(image, torch.Tensor):
        hint = ("; a (3, H, W) tensor of 0-1 values: torchvision.transforms.functional.to_pil_image(tensor) (a "
                "prepared, normalized tensor: captioner.caption_features(captioner.encode(batch)))")  # fmt: skip
    elif hasattr(image, "__array_interface__"):
        hint = "; an H x W x 3 uint8 RGB array: PIL.Image.fromarray(array) (OpenCV's BGR: array[..., ::-1] first)"
    else:
        hint = ""
    raise TypeError(f"{where}: expected a PIL image, a file path or a file's bytes, got {type(image).__name__}{hint}")


def _seekable(stream: Any) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, ValueError, OSError):
        return False


def load_image(src: str | Path | Image.Image | bytes | IO[bytes], min_side: int | None = None) -> Image.Image:
    """8-bit RGB from an image file (EXIF orientation applied first: phones store rotated pixels plus a tag), a
    file's bytes, a file opened in binary or a PIL image (any mode). The one image loader of the project: training
    data and the ``caption`` command use it. ``min_side``: see :func:`load_photo` (a JPEG larger than needed decodes
    at a reduced scale). Anything else (an array, a tensor) is one TypeError saying how to pass it
    (:func:`photo_source`)."""
    return load_photo(photo_source(src, "load_image"), min_side, "load_image: the photo (its bytes)")[0]


def prepared(
    src: str | Path | Image.Image | bytes, preprocess: Callable[[Image.Image], torch.Tensor], name: str = "upload"
) -> torch.Tensor:
    """``preprocess`` of the image ``src``, decoded at the preprocess's ``decode_side`` when it has one (a
    :class:`Preprocess` does; any other callable gets the full image): training, the feature cache and ``caption``
    read a large JPEG alike. ``name``: bytes' name in the messages (:func:`load_photo`)."""
    return preprocess(load_photo(src, getattr(preprocess, "decode_side", None), name)[0])


def file_kind(path: str | Path) -> str | None:
    """None for a regular file (links followed); "missing" for none there; else what is wrong, for a message: a
    folder, a FIFO, socket or device (opening a FIFO waits for a writer: a run hung on one named like a photo), a
    symbolic link loop, a name the system refuses (too long, a NUL byte)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except ValueError:  # a NUL byte (a list on stdin can hold one)
        return "a file name with a NUL byte in it"
    except OSError as err:
        if refused := name_refused(err):  # too long, a link loop: as every command says them
            return refused
        if err.errno == errno.ENOTDIR:
            return "missing"
        return f"cannot be read ({err.strerror or err})"
    if stat.S_ISDIR(mode):
        return "is a directory, not an image"
    if not stat.S_ISREG(mode):
        return "not a regular file (a FIFO, socket or device): not read"
    return None


def file_head(path: str | Path) -> bytes:
    """The first :data:`HEAD` bytes of a file (what :func:`photo_formats` looks at); none when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(HEAD)
    except OSError:
        return b""  # unreadable: Image.open below says why, in its words


def _empty(path: Path) -> bool:
    try:
        return os.stat(path).st_size == 0
    except OSError:
        return False


def _list_hint(path: Path | io.BytesIO) -> str:
    """For a file of photo paths given as a photo (``caption photos.txt``): how to give it, when its first line names
    a file that exists; else nothing."""
    if not isinstance(path, Path):
        return ""
    try:
        with open(path, "rb") as f:
            first = f.read(4096).decode("utf-8-sig", errors="replace").splitlines()[0].strip()
        listed = bool(first) and Path(first).is_file()
    except (OSError, UnicodeDecodeError, IndexError, ValueError):
        return ""
    return f" (a list of photos, one a line? give it on stdin: caption - < {path})" if listed else ""


def load_photo(
    src: str | Path | Image.Image | bytes, min_side: int | None = None, name: str = "upload"
) -> tuple[Image.Image, tuple[int, int]]:
    """(8-bit RGB image, (width, height) of the full image after its EXIF rotation); see :func:`load_image`.
    ``name``: what the messages call ``src`` when it is bytes (the server's word, "upload", by default).

    With ``min_side`` a JPEG file decodes at 1/2, 1/4 or 1/8 of its size (the JPEG decoder's own DCT scaling) when
    both sides stay at least ``min_side``: a 12-megapixel phone photo decodes about 10x faster, and a network that sees
    a few hundred pixels a side sees the same picture (:attr:`Preprocess.decode_side`). Other files decode in full."""
    if isinstance(src, Image.Image):
        if 0 in src.size:  # captioned as if it were a photo, then its drawing failed (PIL cannot save it)
            width, height = src.size
            raise ImageReadError(f"a PIL image of {width} x {height} pixels: nothing to caption", "not_image")
        # its EXIF orientation applied, as for a file: Image.open of a phone photo leaves it sideways (an image
        # exif_transpose already turned carries no orientation, so it is not turned twice)
        try:  # Image.open reads the pixels only now: a closed image, or a damaged or cut-off file, fails here
            turned = ImageOps.exif_transpose(src)
            return in_srgb(to_rgb(turned), src.info), turned.size
        except (OSError, ValueError, SyntaxError) as err:  # PIL's for closed images, damaged and truncated data
            raise ImageReadError(f"a PIL image: cannot be read ({one_line(err)})", "not_image") from None
    if isinstance(src, (bytes, bytearray, memoryview)):  # an upload (the server), a caller's bytes: named ``name``
        formats = photo_formats(bytes(src[:HEAD]), name)
        p, src, raw = io.BytesIO(src), name, src
    else:
        p = Path(src)
        kind = file_kind(src)
        if kind == "missing":
            raise ImageReadError(missing(src), "missing")
        if kind is not None:
            raise ImageReadError(f"{src}: {kind}", "missing" if kind.startswith("a file name") else "not_image")
        head = file_head(p)
        if not head and _empty(p):  # a copy that failed, or a placeholder: said so, not "not an image file"
            raise ImageReadError(f"{src}: an empty file (0 bytes), not a photo", "not_image")
        formats = photo_formats(head, src)
        raw = None
    try:
        with Image.open(p, formats=formats) as img:
            width, height = img.size  # as stored, before the EXIF rotation
            if img.format in ("JPEG", "MPO") and img.info.get("progressive"):  # only these repeat scans (a scan bomb)
                if jpeg_scans(p.read_bytes() if raw is None else raw) > MAX_SCANS:
                    raise ImageReadError(f"{src}: a progressive JPEG of more than {MAX_SCANS} scans (a photo has "
                                         "about 10): not decoded, a guard against scan bombs", "too_large")  # fmt: skip
            # orientations 5-8 turn the picture by 90 degrees (exif_transpose below): the full size's sides swap
            turned = img.getexif().get(ExifTags.Base.Orientation) in (5, 6, 7, 8)
            if min_side is not None and img.format == "JPEG":
                img.draft(img.mode, (int(min_side), int(min_side)))  # no-op unless both sides stay >= min_side
            # exif_transpose returns a loaded copy; colours stored in another RGB space than sRGB: as a viewer shows
            rgb = in_srgb(to_rgb(ImageOps.exif_transpose(img)), img.info)
            # a JPEG decoded at 1/2-1/8 reports the full size from its header, turned as it is shown; any other photo
            # from what was decoded: Pillow 12+ opens a turned TIFF with its sides already swapped, and swapping them
            # again reported a portrait as a landscape
            size = ((height, width) if turned else (width, height)) if img.size != (width, height) else rgb.size
    except UnidentifiedImageError:
        named = headed_format(formats)
        if named:  # its header says AVIF or HEIC, yet its opener cannot read it: cut off or damaged, not another kind
            raise ImageReadError(f"{src}: a damaged {named} photo (cut off?): it cannot be read") from None
        if other := _other_format(p):  # a picture all the same (a TGA, a PCX): "not an image file" was not true
            article = "an" if other in ("SGI", "ICNS", "XBM", "XPM", "IM", "MSP") else "a"  # as the letters are said
            raise ImageReadError(f"{src}: {article} {other} image, not a photo format read here (JPEG, PNG, WebP, GIF, "
                                 "BMP, TIFF, PPM, ICO, HEIC, AVIF): save it as PNG or JPEG",
                                 "not_image") from None  # fmt: skip
        raise ImageReadError(f"{src}: not an image file in a photo format (JPEG, PNG, WebP, GIF, BMP, TIFF, PPM, ICO, "
                             f"HEIC, AVIF){_list_hint(p)}", "not_image") from None  # fmt: skip
    except ImageReadError:
        raise
    except Image.DecompressionBombError:
        raise ImageReadError(
            f"{src}: more than {2 * Image.MAX_IMAGE_PIXELS / 1e6:.0f} megapixels, which Pillow refuses to decode (a "
            "guard against decompression bombs); scale it down first",
            "too_large",
        ) from None
    except Exception as err:  # noqa: BLE001 - Pillow's decoders raise many types for damaged files
        raise ImageReadError(f"{src}: cannot read image ({one_line(err)})") from None
    return rgb, size
