"""Small photo corpora in the layouts caption-train reads, drawn from shapes scenes (JPEG files): a folder with a
captions TSV, a Karpathy-split JSON, Flickr8k's own layout. For the chunk tests (tests/cli/test_streaming.py)."""

from __future__ import annotations

import json
from pathlib import Path

from captioning.training.shapes import make_scenes


def write_images(folder: Path, n: int, seed: int = 0) -> list[tuple[str, list[str]]]:
    """n scenes as JPEG files in ``folder``: [(file name, captions as written)]."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, scene in enumerate(make_scenes(n, seed, size=64, max_objects=2)):
        name = f"scene_{i:03d}.jpg"
        scene.image.save(folder / name, quality=90)
        out.append((name, [" ".join(c) for c in scene.captions[:3]]))
    return out


def write_folder(root: Path, n: int = 40) -> tuple[Path, Path]:
    """``root/images/*.jpg`` and ``root/captions.tsv`` (filename<TAB>caption): (image folder, captions file)."""
    items = write_images(root / "images", n)
    tsv = root / "captions.tsv"
    tsv.write_text("".join(f"{name}\t{c}\n" for name, caps in items for c in caps))
    return root / "images", tsv


def write_karpathy(root: Path, n: int = 30) -> Path:
    """``root/imgs/*.jpg`` and ``root/dataset.json`` (Karpathy split: 3/5 train, 1/5 val, 1/5 test)."""
    items = write_images(root / "imgs", n)
    images = []
    for i, (name, caps) in enumerate(items):
        split = "train" if i < 3 * n // 5 else "val" if i < 4 * n // 5 else "test"
        images.append({"filepath": "imgs", "filename": name, "split": split,
                       "sentences": [{"raw": c, "tokens": c.split()} for c in caps]})  # fmt: skip
    path = root / "dataset.json"
    path.write_text(json.dumps({"images": images}))
    return path


def write_flickr8k(root: Path, n: int = 30) -> Path:
    """Flickr8k's own layout (Flicker8k_Dataset/, Flickr8k_text/ with the token file and the three split files)."""
    items = write_images(root / "Flicker8k_Dataset", n)
    text = root / "Flickr8k_text"
    text.mkdir()
    lines = [f"{name}#{k}\t{c}" for name, caps in items for k, c in enumerate(caps)]
    (text / "Flickr8k.token.txt").write_text("\n".join(lines) + "\n")
    names = [name for name, _ in items]
    cut = {"train": names[: 3 * n // 5], "dev": names[3 * n // 5 : 4 * n // 5], "test": names[4 * n // 5 :]}
    for s, v in cut.items():
        (text / f"Flickr_8k.{s}Images.txt").write_text("\n".join(v) + "\n")
    return root
