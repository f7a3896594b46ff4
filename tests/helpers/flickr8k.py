"""A Flickr8k-shaped folder for tests, written from the four fixture photos (Flickr8k's own never enter the
repository)."""

from __future__ import annotations

import shutil
from pathlib import Path

from PIL import Image

IMAGES = Path(__file__).resolve().parents[1] / "fixtures" / "images"
NAMES = ["coffee.png", "chelsea.png", "rocket.jpg", "astronaut.png"]


def write_original(
    root: Path, token_lines: list[str] | None = None, splits: dict | None = None, copies: bool = False
) -> Path:
    """A Flickr8k-shaped folder in the dataset's own layout: 4 images, 2 captions each, junk lines like the real
    file's (a ``.jpg.1`` name, a name not in the folder, a line without a tab). ``copies``: each photo as the shared
    copy holds its photos, squashed to 224 x 224 and saved as JPEG quality 90, 4:2:0 (under the same name), which the
    shipped Flickr8k configs' JPEG step expects (fit checks it)."""
    (root / "Flicker8k_Dataset").mkdir(parents=True)
    for n in NAMES:
        if copies:
            with Image.open(IMAGES / n) as img:
                square = img.convert("RGB").resize((224, 224), Image.Resampling.BICUBIC)
            square.save(root / "Flicker8k_Dataset" / n, "JPEG", quality=90, subsampling="4:2:0")
        else:
            shutil.copy(IMAGES / n, root / "Flicker8k_Dataset" / n)
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
