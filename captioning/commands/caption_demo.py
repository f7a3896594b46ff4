"""``caption --demo``: the bundled photos (or a fresh shapes scene) captioned and drawn."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from captioning.commands.caption_batch import (
    _add_html,
    _close_html,
    _closing_notes,
    _open_html,
    caption_items,
    plain_lines,
)
from captioning.commands.caption_parser import DEMO_DIR
from captioning.model.bundled import ASSETS, DEMO_PHOTOS
from text_attn.core.errors import emit, fail, one_line
from text_attn.core.safe_files import atomic_output
from text_attn.core.search_options import search_options
from text_attn.core.unsure_options import count_unsure


def _demo_photos(captioner, args: argparse.Namespace) -> int:
    """Caption the bundled photos (assets/photos) and draw their overlays: per photo, its caption and overlay."""
    from captioning.photos.preprocess import load_photo

    if not DEMO_PHOTOS:
        fail("caption", f"the demo photos are not installed ({ASSETS / 'photos'} holds none)")
    out_dir = Path(args.overlay or DEMO_DIR)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        fail("caption", f"cannot create the demo folder {out_dir}: {one_line(err)}")
    args.overlay = str(out_dir)
    items = []
    for path in DEMO_PHOTOS:
        image, size = load_photo(path, captioner.preprocess.decode_side)
        items.append({"name": str(path), "tensor": captioner.preprocess(image), "size": size, "image": image})
    report = _open_html(captioner, args)
    records = caption_items(captioner, items, args, search_options(args))
    if report is not None:
        _add_html(report, items, records, getattr(args, "unsure", None))
        _close_html(report, 0)
    if args.json:
        emit("caption", json.dumps(records))
    else:
        for rec in records:
            note = f"\nnote:    {rec['note']}" if rec.get("note") else ""
            said = f"caption: {rec['caption']}"
            if "given" in rec:  # --given: each caption read, best first, with its score and words' probabilities
                said = "\n".join(f"given:   {line}" for line in plain_lines(rec, False))
            elif "n_best" in rec:  # --n-best: the beam's best captions under it, as caption writes them
                said += "".join(f"\nn-best:  {line}" for line in plain_lines(rec, False))
            emit("caption", f"photo:   {rec['image']}\n{said}{note}\noverlay: {rec['overlay']}")
    _unsure_note(captioner, args, records)
    return 1 if any(rec["error"] for rec in records) else 0


def _unsure_note(captioner, args: argparse.Namespace, records: list[dict]) -> None:
    """--unsure's closing note, as a run over photos says it (the demo drew the words' probabilities and said
    nothing)."""
    if getattr(args, "unsure", None) is None:
        return
    unsure: dict = {}
    for rec in records:
        count_unsure(unsure, rec["image"], rec.get("unsure") or ())
    _closing_notes(captioner, args, {}, unsure)


def _demo_shapes(captioner, args: argparse.Namespace) -> int:
    from captioning.training.shapes import make_scene

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    size = min(max(captioner.preprocess.image_size, 64), 512)  # the canvas the shapes model was trained on
    scene = make_scene(random.Random(seed), size=size)
    out_dir = Path(args.overlay or DEMO_DIR)
    name = str(out_dir / f"scene-{seed}.png")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with atomic_output(name) as tmp:
            scene.image.save(tmp, format="PNG")
    except OSError as err:
        fail("caption", f"cannot write the demo scene to {out_dir}: {one_line(err)}")
    args.overlay = str(out_dir)
    item = {"name": name, "tensor": captioner.preprocess(scene.image), "size": scene.image.size, "image": scene.image}
    report = _open_html(captioner, args)
    (rec,) = caption_items(captioner, [item], args, search_options(args))
    if report is not None:
        _add_html(report, [item], [rec], getattr(args, "unsure", None))
        _close_html(report, 0)
    if args.json:
        rec["reference"] = " ".join(scene.captions[0])
        rec["seed"] = seed
        emit("caption", json.dumps([rec]))
    else:
        best = "".join(f"\nn-best:    {line}" for line in plain_lines(rec, False)) if "n_best" in rec else ""
        emit(
            "caption",
            f"scene:     {name} (seed {seed}; repeat with --demo shapes --seed {seed})\n"
            f"caption:   {rec['caption']}{best}\nreference: {' '.join(scene.captions[0])}\noverlay:   {rec['overlay']}",
        )
    _unsure_note(captioner, args, [rec])
    return 1 if rec["error"] else 0
