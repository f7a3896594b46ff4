"""Small webdataset tar shards as img2dataset writes them, for the tests: per sample KEY.jpg (or .png), KEY.txt and
KEY.json, members of a sample next to each other, written with the standard library's tarfile."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from PIL import Image


def photo_bytes(i: int, fmt: str = "JPEG", side: int = 40) -> bytes:
    """A small picture that differs with ``i`` (colour and a square's place), encoded as ``fmt``."""
    image = Image.new("RGB", (side, side), ((i * 37) % 256, (i * 91) % 256, (i * 13) % 256))
    x = (i * 7) % (side // 2)
    image.paste((255 - (i * 37) % 256, 40, 200), (x, x, x + side // 3, x + side // 3))
    buf = io.BytesIO()
    image.save(buf, fmt)
    return buf.getvalue()


def plain_pngs(folder: Path, n: int = 3) -> list[str]:
    """``n`` small PNG files ``p0.png``... of different reds in ``folder``: the plain files beside a test's shards."""
    files = []
    for i in range(n):
        Image.new("RGB", (30, 20), (i * 60, 10, 10)).save(folder / f"p{i}.png")
        files.append(str(folder / f"p{i}.png"))
    return files


def add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_shard(path: Path, first: int, n: int, ext: str = "jpg", extra: dict[str, bytes] | None = None) -> Path:
    """A shard of ``n`` samples with keys ``first``.. (9 digits, as img2dataset names them); ``extra``: further
    members (name -> bytes) written after them (a damaged one, a sample without image)."""
    fmt = {"jpg": "JPEG", "png": "PNG", "webp": "WEBP"}[ext]
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(first, first + n):
            key = f"{i:09d}"
            add_member(tar, f"{key}.{ext}", photo_bytes(i, fmt))
            add_member(tar, f"{key}.txt", f"a photo number {i}".encode())
            meta = {"key": key, "url": f"https://example.org/{i}.jpg", "status": "success"}
            add_member(tar, f"{key}.json", json.dumps(meta).encode())
        for name, data in (extra or {}).items():
            add_member(tar, name, data)
    return path
