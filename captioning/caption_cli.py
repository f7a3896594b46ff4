"""Command-line entry point ``caption``: caption images, optionally with attention overlays (``caption-export`` is in
captioning/export.py).

``caption`` output. Plain: with one IMAGE argument, just its caption; with several, ``path<TAB>caption`` per image
in argument order (like grep with one vs several files). ``--json``: one JSON list, one record per IMAGE argument:
    {"image": path, "caption": "a red circle ..." | null, "words": [...],
     "attention": [[L floats] per word]   (row t: step t's weights over the grid*grid regions, row-major, sum 1),
     "grid": [g, g], "size": [W, H]        (the image as captioned: after its EXIF rotation),
     "crop_box": [x0, y0, x1, y1]          (the part of that image the network saw, pixels),
     "chosen": [region per word] | null (a hard-attention model's attended region, row-major; null for soft),
     "overlay": PNG path | null, "error": null | "one line"}
A failed image gets caption, grid, size, crop_box, chosen null and empty lists. Overlays of a hard-attention model
outline each word's chosen region. Every failure is also one line on stderr
(``caption: error: PATH: what is wrong``); the other images are still captioned, and the exit code is 1. Bad
options or an unusable model file: one line, exit code 2. Each overlay written is reported on stderr (``wrote PATH``).

``caption --demo`` prints four lines, ``scene:``, ``caption:``, ``reference:`` (the scene's canonical caption) and
``overlay:``; with ``--json`` its one record also has "reference" and "seed".
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from PIL import Image

from captioning.preprocess import ImageReadError, load_image
from text_attn.core.errors import fail, one_line
from text_attn.core.modelfile import ModelFileError

BUNDLED_MODEL = Path(__file__).parent / "assets" / "shapes_soft.pt"  # the default model (trained on shapes scenes)
DEMO_DIR = "caption-demo"
BATCH = 8  # images encoded together


# --- caption --------------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="caption",
        description="Caption images with a Show-Attend-Tell model file. Plain output: the caption (one image) or "
        "path<TAB>caption per image (several). Without --model the bundled shapes model is used: it only knows "
        "synthetic shape scenes (try --demo).",
    )
    p.add_argument("images", nargs="*", metavar="IMAGE", help="image files (any format and mode Pillow reads)")
    p.add_argument("--model", help="model file (from caption-train fit or caption-export; default: bundled model)")
    p.add_argument("--beam-size", type=int, default=3, help="beam width; 1 = greedy (default: 3)")
    p.add_argument("--max-len", type=int, default=30, help="longest caption in words (default: 30)")
    p.add_argument("--length-penalty", type=float, default=0.0, help="rank beams by score / length**this (default: 0)")
    p.add_argument("--json", action="store_true", help="print one JSON list with per-word attention (see docs)")
    p.add_argument(
        "--overlay",
        metavar="DIR",
        help="write per image DIR/<name>-attention.png: the image, then "
        f"one attention panel per word (default with --demo: ./{DEMO_DIR}/)",
    )
    p.add_argument("--per-word", action="store_true", help="with --overlay: also one PNG per word")
    p.add_argument("--demo", action="store_true", help="caption a fresh synthetic shapes scene and draw its overlay")
    p.add_argument("--seed", type=int, help="--demo: the scene's seed (default: random; printed)")
    p.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    return p


def _load_captioner(args: argparse.Namespace):
    from captioning.captioner import Captioner

    path = args.model
    if path is None:
        if not BUNDLED_MODEL.is_file():
            fail(
                "caption",
                f"no --model given and the bundled model {BUNDLED_MODEL} is not installed; pass "
                "--model FILE (a model file written by caption-train fit or caption-export)",
            )
        path = BUNDLED_MODEL
    try:
        captioner = Captioner.load(path)  # on the CPU: a device problem must not read as a broken file
    except ModelFileError as err:  # a caption-train checkpoint's message names the caption-export command
        fail("caption", str(err))
    try:
        return captioner.to(args.device)
    except (RuntimeError, AssertionError, ValueError) as err:  # unknown device name, no CUDA build, ...
        fail("caption", f"cannot use device {args.device!r}: {one_line(err)}")


def _unique_stem(name: str, used: set[str]) -> str:
    stem, k = name, 1
    while stem in used:  # a/x.png and b/x.png in one call must not overwrite each other's overlay
        k += 1
        stem = f"{name}-{k}"
    used.add(stem)
    return stem


def _chunks(items: list[str], n: int) -> Iterator[list[str]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _record(name: str, error: str | None = None) -> dict[str, Any]:
    keys = ("caption", "grid", "size", "crop_box", "chosen", "overlay")
    return {"image": name, **dict.fromkeys(keys), "words": [], "attention": [], "error": error}


def caption_images(
    captioner, named: list[tuple[str, Image.Image]], args: argparse.Namespace, used: set[str] | None = None
) -> list[dict[str, Any]]:
    """Caption (name, RGB image) pairs as one batch; per image a JSON-able record (see the module doc), with its
    overlay written when args.overlay is set. ``used``: overlay names taken so far in this run."""
    from captioning.overlay import draw_overlay, draw_word_panels

    g = captioner.grid
    preprocess = captioner.preprocess
    used = set() if used is None else used
    results = captioner.caption_images([im for _, im in named], args.beam_size, args.max_len, args.length_penalty)
    out = []
    for (name, image), (words, alphas) in zip(named, results, strict=True):
        box = preprocess.crop_box(*image.size)
        rec = _record(name)
        rec.update(caption=" ".join(words), words=words, grid=[g, g], size=list(image.size), crop_box=list(box))
        rec["attention"] = [[round(float(v), 6) for v in row] for row in alphas]  # (T, L)
        rec["chosen"] = chosen = captioner.chosen_regions(alphas)  # hard attention's region per word, else None
        if args.overlay:
            stem = _unique_stem(Path(name).stem or "image", used)
            try:
                png = Path(args.overlay) / f"{stem}-attention.png"
                path = draw_overlay(image, words, alphas, g, box, png, chosen=chosen)
                extra = ""
                if args.per_word:
                    n = len(draw_word_panels(image, words, alphas, g, box, args.overlay, stem, chosen=chosen))
                    extra = f" (+ {n} per-word PNGs)"
            except OSError as err:
                rec["error"] = f"{name}: cannot write its overlay ({one_line(err)})"
                print(f"caption: error: {rec['error']}", file=sys.stderr)
            else:
                rec["overlay"] = str(path)
                print(f"wrote {path}{extra}", file=sys.stderr)
        out.append(rec)
    return out


def _demo(captioner, args: argparse.Namespace) -> int:
    from captioning.shapes import make_scene

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    size = min(max(captioner.preprocess.image_size, 64), 512)  # the canvas the shapes model was trained on
    scene = make_scene(random.Random(seed), size=size)
    out_dir = Path(args.overlay or DEMO_DIR)
    name = str(out_dir / f"scene-{seed}.png")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        scene.image.save(name)
    except OSError as err:
        fail("caption", f"cannot write the demo scene to {out_dir}: {one_line(err)}")
    args.overlay = str(out_dir)
    (rec,) = caption_images(captioner, [(name, scene.image)], args)
    if args.json:
        rec["reference"] = " ".join(scene.captions[0])
        rec["seed"] = seed
        print(json.dumps([rec]))
    else:
        print(f"scene:     {name} (seed {seed}; repeat with --demo --seed {seed})")
        print(f"caption:   {rec['caption']}")
        print(f"reference: {' '.join(scene.captions[0])}")
        print(f"overlay:   {rec['overlay']}")
    return 1 if rec["error"] else 0


def caption_main(argv: list[str] | None = None) -> int:
    """``caption IMAGE [IMAGE ...]`` / ``caption --demo``; returns the exit code (0 ok, 1 an image failed)."""
    args = _parser().parse_args(argv)
    if args.beam_size < 1:
        fail("caption", f"--beam-size must be at least 1, got {args.beam_size}")
    if args.max_len < 1:
        fail("caption", f"--max-len must be at least 1, got {args.max_len}")
    if args.demo and args.images:
        fail("caption", "--demo draws its own scene; give either --demo or IMAGE files, not both")
    if not args.demo and not args.images:
        fail("caption", "no input: give IMAGE files, or --demo to caption a synthetic scene")
    if args.per_word and not args.overlay and not args.demo:
        fail("caption", "--per-word needs --overlay DIR")
    if args.seed is not None and not args.demo:
        fail("caption", "--seed only applies to --demo")
    captioner = _load_captioner(args)
    if args.demo:
        return _demo(captioner, args)
    if args.overlay:
        try:
            Path(args.overlay).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            fail("caption", f"cannot create --overlay directory {args.overlay}: {one_line(err)}")
    used: set[str] = set()
    records = []
    for chunk in _chunks(args.images, BATCH):  # read, caption and print a batch at a time: memory stays bounded
        batch: list[dict[str, Any]] = []
        good = []
        for name in chunk:
            try:
                good.append((name, load_image(name)))
                batch.append({})  # filled below, in argument order
            except ImageReadError as err:
                print(f"caption: error: {err}", file=sys.stderr)
                batch.append(_record(name, str(err)))
        done = iter(caption_images(captioner, good, args, used) if good else [])
        batch = [rec or next(done) for rec in batch]
        if not args.json:
            for rec in batch:
                if rec["caption"] is not None:
                    print(rec["caption"] if len(args.images) == 1 else f"{rec['image']}\t{rec['caption']}", flush=True)
        records += batch
    if args.json:
        print(json.dumps(records))
    return 1 if any(rec["error"] for rec in records) else 0
