"""A Flickr8k-shaped folder for tests, written from the four fixture photos (Flickr8k's own never enter the
repository)."""

from __future__ import annotations

import shutil
from pathlib import Path

from PIL import Image

IMAGES = Path(__file__).resolve().parents[1] / "fixtures" / "images"
NAMES = ["coffee.png", "chelsea.png", "rocket.jpg", "astronaut.png"]


# Flickr8k as people download it: full-size photos of many sizes; the camera's (or editor's) JPEG quality varies,
# and one is a PNG (what a user's own folder may hold). (size, how it is saved) per photo, in NAMES' order.
ORIGINALS = [  # the train split reads the first two (a JPEG and a PNG), val the third, test the fourth
    ((500, 375), {"format": "JPEG", "quality": 96, "subsampling": "4:4:4"}),
    ((375, 500), {"format": "PNG"}),
    ((640, 427), {"format": "JPEG", "quality": 85, "subsampling": "4:2:0"}),
    ((500, 333), {"format": "JPEG", "quality": 96, "subsampling": "4:4:4"}),
]
# What the photos are: the fixture files as they are; the shared copies (224 x 224, JPEG quality 90, 4:2:0); full-size
# originals (ORIGINALS); full-size photos saved with Pillow's defaults (JPEG quality 75, 4:2:0).
KINDS = ("fixtures", "copies", "originals", "pillow")


def _write_photo(name: str, index: int, out: Path, kind: str) -> None:
    if kind == "fixtures":
        shutil.copy(IMAGES / name, out)
        return
    with Image.open(IMAGES / name) as img:
        rgb = img.convert("RGB")
    if kind == "copies":  # squashed to 224 x 224 and saved as the shared copy's photos were
        rgb.resize((224, 224), Image.Resampling.BICUBIC).save(out, "JPEG", quality=90, subsampling="4:2:0")
        return
    size, saved = ORIGINALS[index]
    big = rgb.resize(size, Image.Resampling.BICUBIC)
    if kind == "pillow":
        big.save(out, "JPEG")  # Pillow's defaults: quality 75, 4:2:0
    else:
        big.save(out, **saved)


def write_original(
    root: Path,
    token_lines: list[str] | None = None,
    splits: dict | None = None,
    copies: bool = False,
    kind: str | None = None,
) -> Path:
    """A Flickr8k-shaped folder in the dataset's own layout: 4 images, 2 captions each, junk lines like the real
    file's (a ``.jpg.1`` name, a name not in the folder, a line without a tab). ``kind`` (KINDS) says what the photos
    are, each under its fixture's name; ``copies``: the shared copies' kind."""
    kind = kind or ("copies" if copies else "fixtures")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    (root / "Flicker8k_Dataset").mkdir(parents=True)
    for i, n in enumerate(NAMES):
        _write_photo(n, i, root / "Flicker8k_Dataset" / n, kind)
    text = root / "Flickr8k_text"
    text.mkdir()
    if token_lines is None:
        token_lines = []
        for n in NAMES:
            token_lines += [f"{n}#0\tA photo of {n.split('.')[0]} .", f"{n}#1\tThe {n.split('.')[0]}, up close!"]
        token_lines += ["chelsea.png.1#0\tjunk from the real file", "gone.jpg#0\tnot in the folder", "no tab here"]
    (text / "Flickr8k.token.txt").write_text("\n".join(token_lines) + "\n")
    splits = splits or {"train": ["coffee.png", "chelsea.png", "", "e_missing.png"], "dev": ["rocket.jpg"],
                        "test": ["astronaut.png"]}  # fmt: skip
    for s, names in splits.items():
        (text / f"Flickr_8k.{s}Images.txt").write_text("\n".join(names) + "\n")
    return root


def write_kaggle(root: Path, lines: list[str] | None = None) -> Path:
    """Kaggle's layout: Images/ and captions.txt (a CSV with a header; a quoted caption holds a comma), no split
    files; a line naming a photo not in the folder. ``lines``: captions.txt's lines instead."""
    (root / "Images").mkdir(parents=True)
    for n in NAMES:
        shutil.copy(IMAGES / n, root / "Images" / n)
    if lines is None:
        lines = ["image,caption"]
        for n in NAMES:
            lines += [f"{n},A photo of {n.split('.')[0]} .", f'{n},"The {n.split(".")[0]}, up close!"']
        lines += ["missing.jpg,a caption of nothing"]
    (root / "captions.txt").write_text("\n".join(lines) + "\n")
    return root
