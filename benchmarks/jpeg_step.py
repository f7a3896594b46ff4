"""Read the JPEG step of a folder of training photos from their own quantization tables; record it in a model file.

    python benchmarks/jpeg_step.py ../shared/data/flickr8k/Flicker8k_Dataset
    python benchmarks/jpeg_step.py ../shared/data/flickr8k/Flicker8k_Dataset --write captioning/assets/flickr8k_soft.pt

Every file of the folder is opened (headers only: its quantization tables and chroma subsampling, no pixels) and
matched to the quality whose Pillow ``save(quality=q)`` writes the same tables (captioning.photos.jpeg_step). Prints how
many photos have each (quality, subsampling, size). ``--write``: the model file's preprocessing (and its encoder
settings) record the step when every photo shares one, and no step otherwise; the file's other entries, its weights
included, are written back as they were (through safe_files: never half a file).
"""

from __future__ import annotations

import argparse
import io
import sys
from collections import Counter
from pathlib import Path

import torch
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from captioning.photos.jpeg_step import jpeg_step_of, one_step  # noqa: E402
from text_attn.core.safe_files import write_bytes  # noqa: E402


def _size(path: Path) -> str:
    try:
        with Image.open(path) as img:
            return f"{img.size[0]} x {img.size[1]}"
    except (OSError, ValueError, SyntaxError):
        return "not an image"


def record(model: Path, step) -> None:
    """The model file with ``step`` (a JpegStep, or None: no JPEG step) in its preprocessing and encoder settings."""
    data = torch.load(model, weights_only=True)
    for block in ("preprocess", "encoder"):
        data[block] = {k: v for k, v in data[block].items() if k not in ("jpeg_quality", "jpeg_subsampling")}
        if step is not None:
            data[block] |= {"jpeg_quality": step.quality, "jpeg_subsampling": step.subsampling}
    # the squash before it, named (files before the filter was recorded squashed bicubic, as issue 57's table chose)
    data["preprocess"]["squash_filter"] = data["preprocess"].get("squash_filter", "bicubic")
    buffer = io.BytesIO()
    torch.save(data, buffer)
    write_bytes(model, buffer.getbuffer())


def check_model(p: argparse.ArgumentParser, model: Path) -> None:
    """--write's model file, refused by name before every photo is read (it was found missing, or no caption model
    file, after the whole folder)."""
    if not model.is_file():
        p.error(f"--write {model}: {'a folder, not a file' if model.is_dir() else 'no such file'}")
    try:
        data = torch.load(model, weights_only=True)
        squashed = data["preprocess"].get("source_side")
    except Exception as err:  # anything torch.load or a file of another kind raises: not a caption model file
        p.error(f"--write {model}: not a caption model file ({type(err).__name__})")
    if not squashed:
        p.error(f"--write {model}: records no source_side: the JPEG step follows that squash")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, help="the training photos (every file in it is read)")
    p.add_argument("--write", type=Path, metavar="MODEL", help="record what was found in this caption model file")
    args = p.parse_args(argv)
    if args.write is not None:
        check_model(p, args.write)
    if not args.folder.is_dir():
        print(f"jpeg_step: error: {args.folder}: not a folder", file=sys.stderr)
        return 2
    photos = sorted(f for f in args.folder.iterdir() if f.is_file())
    if not photos:  # nothing to read: no step to record either
        print(f"jpeg_step: error: {args.folder}: no files in it", file=sys.stderr)
        return 2
    steps = [jpeg_step_of(f) for f in photos]
    counts = Counter((s, _size(f)) for s, f in zip(steps, photos, strict=True))
    print(f"{len(photos)} files in {args.folder}\n")
    print("| JPEG quality | chroma subsampling | size | photos |\n|---|---|---|---|")
    for (s, size), n in counts.most_common():
        quality, sub = ("not a JPEG of the standard tables", "-") if s is None else (s.quality, s.subsampling)
        print(f"| {quality} | {sub or 'greyscale'} | {size} | {n} |")
    step = one_step(steps)
    found = "no one JPEG step" if step is None else f"one JPEG step: quality {step.quality}, {step.subsampling}"
    print(f"\n{found}")
    if args.write:
        record(args.write, step)
        print(f"recorded in {args.write}")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
