"""Command-line entry point ``caption``: caption images, folders and lists of paths, optionally with attention
overlays (``caption-export`` is in captioning/export.py).

Input: IMAGE arguments are files, folders (their image files, recursively, in sorted order), webdataset tar shards
as img2dataset writes them (``KEY.jpg|png|webp`` with ``KEY.txt`` and ``KEY.json``, read in place: captioning.shards;
a quoted ``'shards/{00000..00099}.tar'`` is expanded) or ``-`` (one path per line on stdin). Images are decoded and
preprocessed by DataLoader workers (``--workers``) while the model captions the previous batch (``--batch-size``);
memory stays bounded whatever the number of images. A progress bar is shown on stderr when there is more than one
batch.

``caption`` output. Plain: with one image, just its caption; with several, ``path<TAB>caption`` per image in input
order (like grep with one vs several files). ``--json``: one JSON list, one record per image. ``--jsonl FILE``: the
same records, one per line, written as each batch is done (nothing on stdout); with ``--resume`` the images FILE
already holds a caption for are skipped and the rest appended. A record:
    {"image": path, "caption": "a red circle ..." | null, "words": [...],
     "attention": [[L floats] per word]   (row t: step t's weights over the grid*grid regions, row-major, sum 1),
     "score": log-probability of the caption (beam: / length**length_penalty),
     "truncated": true when the caption hit --max-len before its end (it is cut off),
     "out_of_domain": true when the image looks unlike the model's training images (null: the model cannot tell),
     "note": what the model knows, when out_of_domain ("this photo looks unlike the Flickr8k photos ..."), else null,
     "grid": [g, g], "size": [W, H]        (the image as captioned: after its EXIF rotation),
     "crop_box": [x0, y0, x1, y1]          (the part of that image the network saw, pixels),
     "chosen": [region per word] | null (a hard-attention model's attended region, row-major; null for soft),
     "overlay": PNG path | null, "error": null | "one line"}
A shard member is named ``SHARD.tar/KEY.jpg`` and its record also has "key" (img2dataset's key) and "reference" (the
shard's KEY.txt, or null), after "image".
A failed image gets caption, score, truncated, grid, size, crop_box, chosen null and empty lists. Overlays of a
hard-attention model outline each word's chosen region. Every failure is also one line on stderr
(``caption: error: PATH: what is wrong``); the other images are still captioned, and the exit code is 1. Bad
options or an unusable model file: one line, exit code 2. Each overlay written is reported on stderr (``wrote PATH``);
captions cut off by --max-len, and images unlike the model's training images, are counted in one note each there.

``--html FILE`` also writes one self-contained interactive page (captioning/caption_page.py): per image its picture
and caption; hovering a word (or stepping with the arrow keys) shows that word's attention. It is written as images
are done, with any output mode above; an unwritable FILE is one line and exit code 2 before any image is read.

``--devices N [--num-nodes M]`` (with ``--jsonl OUT``): the same per-batch work on N processes a machine, on
Lightning's predict loop (captioning/caption_scale.py; docs/scale.md "Caption millions of photos").

``caption --demo`` captions the bundled CC0 and public-domain photographs (captioning/assets/photos) with the bundled
Flickr8k model and writes their overlays: three lines per photo, ``photo:``, ``caption:``, ``overlay:``.
``caption --demo shapes`` draws a synthetic scene for the shapes model and prints four lines, ``scene:``, ``caption:``,
``reference:`` (the scene's canonical caption) and ``overlay:``; with ``--json`` its one record also has "reference"
and "seed".
``caption --model-info`` prints what the model is, its training data and their terms, and its test scores.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from captioning.model.bundled import ASSETS, BUNDLED_MODEL, DEMO_PHOTOS, MODEL_NAMES, SHAPES_MODEL, model_path  # noqa: F401
from text_attn.core.errors import ArgumentParser, close_quietly, emit, fail, one_line
from text_attn.core.safe_files import (
    OutputRefused,
    atomic_output,
    inert,
    inert_output,
    open_stream,
    protecting,
    refuse_overlap,
    same_file,
)
from text_attn.core.search_options import (
    add_search_options,
    check_search_options,
    fill_decoding_defaults,
    search_options,
)

DEMO_DIR = "caption-demo"
BATCH = 16  # images encoded together (--batch-size)


# --- caption --------------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="caption",
        description="Caption images with a Show-Attend-Tell model file. IMAGE: a file, a folder (its images, "
        "recursively), a webdataset tar shard or - (paths on stdin). Plain output: the caption (one image) or "
        "path<TAB>caption per image (several). Without --model the bundled Flickr8k model captions photographs (try "
        "--demo; --model-info says what it was trained on and how well it scores).",
    )
    p.add_argument(
        "images",
        nargs="*",
        metavar="IMAGE",
        help="image files, folders, webdataset tar shards as img2dataset writes them (a quoted "
        "'shards/{00000..00099}.tar' is expanded), or - for paths on stdin",
    )
    p.add_argument(
        "--model",
        help="model file (from caption-train fit or caption-export), or a bundled model by name: flickr8k (the "
        "default: photographs) or shapes (synthetic shape scenes)",
    )
    p.add_argument("--model-info", action="store_true", help="print what the model is and was trained on, and exit")
    p.add_argument(
        "--beam-size", type=int, help="beam width; 1 = greedy (default: the model file's choice, else 3; --sample: 1)"
    )
    p.add_argument("--max-len", type=int, default=30, help="longest caption in words (default: 30)")
    p.add_argument(
        "--length-penalty",
        type=float,
        help="rank beams by score / length**this (default: the model file's choice, chosen on validation data, else 0)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON list with per-word attention (see docs)")
    p.add_argument("--jsonl", metavar="FILE", help="write one JSON record per line to FILE as images are done")
    p.add_argument("--resume", action="store_true", help="with --jsonl: skip the images FILE already holds")
    p.add_argument(
        "--overlay",
        metavar="DIR",
        help="write per image DIR/<name>-attention.png: the image, then "
        f"one attention panel per word (default with --demo: ./{DEMO_DIR}/)",
    )
    p.add_argument("--per-word", action="store_true", help="with --overlay: also one PNG per word")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write FILE: one self-contained interactive page, each image with its per-word attention",
    )
    p.add_argument(
        "--demo",
        nargs="?",
        const="photo",
        metavar="photo|shapes",
        help="photo (the default): caption the bundled CC0 and public-domain photographs and draw their overlays; "
        "shapes: a fresh synthetic scene with the shapes model",
    )
    p.add_argument("--seed", type=int, help="--demo shapes: the scene's seed (default: random; printed)")
    add_search_options(p)
    p.add_argument("--batch-size", type=int, default=BATCH, help=f"images captioned together (default: {BATCH})")
    p.add_argument("--workers", type=int, default=2, help="processes decoding images ahead of the model (default: 2)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice, one per core)")
    p.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    p.add_argument(
        "--devices",
        type=int,
        help="caption with N processes on Lightning's predict loop (N GPUs with --device cuda, else N CPU "
        "processes); needs --jsonl OUT: each process writes its part to OUT.parts/ and the first merges them into OUT, "
        "in input order, after the loop; progress: one bar on the first process counting every process's images (a "
        "line a minute when stderr is not a terminal). "
        "torchrun and SLURM launch it as they launch caption-train (docs/scale.md)",
    )
    p.add_argument("--num-nodes", type=int, default=1, help="with --devices: machines taking part (default: 1)")
    return p


def _load_captioner(args: argparse.Namespace):
    from captioning.model.captioner import Captioner
    from text_attn.core.modelfile import ModelFileError

    path = _model_file(args)
    if Path(path) in MODEL_NAMES.values() and not Path(path).is_file():
        fail(
            "caption",
            f"the bundled model {path} is not installed; pass --model FILE (a model file written by caption-train "
            "fit or caption-export)",
        )
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


def _record(name: str, error: str | None = None, item: dict[str, Any] | None = None) -> dict[str, Any]:
    """A record's fields, empty; a shard member's ``item`` adds its img2dataset key and the shard's caption."""
    keys = ("caption", "score", "truncated", "out_of_domain", "note", "grid", "size", "crop_box", "chosen", "overlay")
    member = {"key": item["key"], "reference": item["reference"]} if item is not None and "key" in item else {}
    return {"image": name, **member, **dict.fromkeys(keys), "words": [], "attention": [], "error": error}


def caption_items(
    captioner,
    items: list[dict[str, Any]],
    args: argparse.Namespace,
    options: dict[str, Any],
    used: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Caption preprocessed images (captioning.collection items: name, tensor, size, image) as one batch; per image a
    JSON-able record (see the module doc), with its overlay written when args.overlay is set. ``options``: the
    decoding options of the run (search_options: one seeded sampler for all batches). ``used``: overlay names taken
    so far in this run."""
    import torch

    from captioning.photos.photo_check import photo_stats
    from captioning.views.overlay import draw_overlay, draw_word_panels

    g = captioner.grid
    used = set() if used is None else used
    features = captioner.encode(torch.stack([it["tensor"] for it in items]))  # (B, L, D)
    results = captioner.caption_features(features, args.beam_size, args.max_len, args.length_penalty, **options)
    stats = [it.get("photo_stats") or photo_stats(it["image"]) for it in items]
    far = captioner.out_of_domain(features, stats) or [None] * len(items)
    out = []
    for item, result, unfamiliar in zip(items, results, far, strict=True):
        words, alphas, score, truncated, nbest = (
            result.words,
            result.alphas,
            result.score,
            result.truncated,
            result.nbest,
        )
        name = item["name"]
        box = captioner.preprocess.crop_box(*item["size"])
        rec = _record(name, item=item)
        rec.update(caption=" ".join(words), words=words, grid=[g, g], size=list(item["size"]), crop_box=list(box))
        rec.update(score=round(score, 6), truncated=truncated, out_of_domain=unfamiliar)
        rec["note"] = captioner.note() if unfamiliar else None
        if nbest is not None:
            rec["n_best"] = [{"caption": " ".join(w), "score": round(sc, 6)} for w, sc in nbest]
        rec["attention"] = [[round(float(v), 6) for v in row] for row in alphas]  # (T, L)
        rec["chosen"] = chosen = captioner.chosen_regions(alphas)  # hard attention's region per word, else None
        if args.overlay:
            stem = item.get("stem") or _unique_stem(Path(name).stem or "image", used)
            image = item["image"]
            try:
                png = Path(args.overlay) / f"{stem}-attention.png"
                seen = captioner.preprocess.crop_box(*image.size)  # the box in the decoded image's pixels
                path = draw_overlay(image, words, alphas, g, seen, png, chosen=chosen)
                extra = ""
                if args.per_word:
                    n = len(draw_word_panels(image, words, alphas, g, seen, args.overlay, stem, chosen=chosen))
                    extra = f" (+ {n} per-word PNGs)"
            except OSError as err:
                rec["error"] = f"{name}: cannot write its overlay ({one_line(err)})"
                print(f"caption: error: {rec['error']}", file=sys.stderr)
            else:
                rec["overlay"] = str(path)
                print(f"wrote {path}{extra}", file=sys.stderr)
        out.append(rec)
    return out


class OverlayNames:
    """The overlay names of a run, the same whichever process draws a photo: a file's from the whole input list (in
    order, as :func:`_outputs` checks them), a shard member's from its image member, made unique against them."""

    def __init__(self, sources: Sequence[str]):
        from captioning.photos.shards import is_shard

        self.used: set[str] = set()
        self.files = {s: _unique_stem(Path(n).stem or "image", self.used) for s, n in enumerate(sources) if not
                      is_shard(n)}  # fmt: skip

    def stem(self, item: dict[str, Any]) -> str:
        return self.files.get(item["id"][0]) or _unique_stem(Path(item["name"]).stem or "image", self.used)


def caption_batch(
    captioner, items: list[dict[str, Any]], args: argparse.Namespace, options: dict[str, Any], names: OverlayNames
) -> list[dict[str, Any]]:
    """The per-batch work of a run, one function for one process and for many (caption_scale's predict_step calls
    it too): each item's error or note as one line on stderr, the readable photos captioned (:func:`caption_items`:
    encode, search, record, overlays) and every item's record, in item order. ``items``: a batch of
    captioning.photo_stream items (read and prepared in the loader's workers)."""
    for it in items:
        if it["error"] is not None:
            print(f"caption: error: {it['error']}", file=sys.stderr)
        elif it["note"] is not None:
            print(f"caption: note: {it['note']}", file=sys.stderr)
    good = [it for it in items if it["error"] is None]
    if args.overlay:
        for it in good:
            it["stem"] = names.stem(it)
    captioned = iter(caption_items(captioner, good, args, options, names.used) if good else [])
    return [next(captioned) if it["error"] is None else _record(it["name"], it["error"], it) for it in items]


def _open_html(captioner, args: argparse.Namespace):
    """The --html page, started (None without --html); an unwritable FILE ends the run here, before any work."""
    if not args.html:
        return None
    from captioning.views.caption_page import open_caption_page

    try:
        return open_caption_page(args.html, str(args.model or f"bundled ({BUNDLED_MODEL.name})"), captioner.grid)
    except OSError as err:
        fail("caption", f"cannot write --html {args.html}: {one_line(err)}")


def _add_html(report, items: list[dict[str, Any]], records: list[dict[str, Any]]) -> None:
    from captioning.views.caption_page import image_section

    for item, rec in zip(items, records, strict=True):
        report.add(image_section(report.sections + 1, rec, item.get("image")))


def _close_html(report, failed: int) -> None:
    bad = f", {failed} failed" if failed else ""
    print(f"wrote {report.close(f'{report.sections} image(s){bad}')}", file=sys.stderr)


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
        _add_html(report, items, records)
        _close_html(report, 0)
    if args.json:
        emit("caption", json.dumps(records))
    else:
        for rec in records:
            note = f"\nnote:    {rec['note']}" if rec.get("note") else ""
            emit("caption", f"photo:   {rec['image']}\ncaption: {rec['caption']}{note}\noverlay: {rec['overlay']}")
    return 1 if any(rec["error"] for rec in records) else 0


def model_info(captioner, path: str | Path) -> list[str]:
    """``caption --model-info``: what the model is, what it was trained on (and under which terms), its scores."""
    model = captioner.model
    enc, dec = model.encoder, model.decoder.cfg
    pre = captioner.preprocess
    resize = "centre square crop" if pre.crop else "whole image squashed to a square (no crop)"
    if pre.source_side:  # the training photos' own size, which every photo passes through first
        resize = f"squashed to {pre.source_side} x {pre.source_side} ({pre.squash_filter}) first"
        if pre.jpeg_quality is not None:  # and recompressed, as the training copies were (captioning.jpeg_step)
            resize += f", then JPEG quality {pre.jpeg_quality} ({pre.jpeg_subsampling})"
        resize += ", as its training photos were"
    lines = [
        f"model:          {path}",
        f"attention:      {dec.attention} (Show-Attend-Tell), {enc.grid} x {enc.grid} regions",
        f"encoder:        {enc.backbone} (frozen: {enc.fine_tune == 'none'}), {pre.image_size} px, {resize}",
        f"decoder:        LSTM {dec.hidden_dim}, embedding {dec.embed_dim}, attention {dec.attn_dim}",
        f"vocabulary:     {len(captioner.vocab)} words",
        f"trained on:     {captioner.domain or 'not recorded'}",
    ]
    from text_attn.core.modelfile import info_lines

    return lines + info_lines(captioner.info)


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
        _add_html(report, [item], [rec])
        _close_html(report, 0)
    if args.json:
        rec["reference"] = " ".join(scene.captions[0])
        rec["seed"] = seed
        emit("caption", json.dumps([rec]))
    else:
        emit(
            "caption",
            f"scene:     {name} (seed {seed}; repeat with --demo shapes --seed {seed})\n"
            f"caption:   {rec['caption']}\nreference: {' '.join(scene.captions[0])}\noverlay:   {rec['overlay']}",
        )
    return 1 if rec["error"] else 0


@inert_output
def caption_main(argv: list[str] | None = None) -> int:
    """``caption IMAGE [IMAGE ...]`` / ``caption --demo``; returns the exit code (0 ok, 1 an image failed)."""
    args = _parser().parse_args(argv)
    if args.beam_size is not None and args.beam_size < 1:  # before loading the model: fail fast
        fail("caption", f"--beam-size must be at least 1, got {args.beam_size}")
    if args.max_len < 1:
        fail("caption", f"--max-len must be at least 1, got {args.max_len}")
    if args.demo not in (None, "photo", "shapes"):  # `--demo x.png`: an image after --demo, not a kind of demo
        if not Path(args.demo).exists():
            fail("caption", f"--demo takes photo (the default: the bundled photos) or shapes, got {args.demo!r}")
        args.images.insert(0, args.demo)
        args.demo = "photo"
    if args.demo and args.images:
        fail("caption", "--demo captions its own images; give either --demo or IMAGE files, not both")
    if args.model_info and (args.images or args.demo):
        fail("caption", "--model-info describes the model and exits: give it without images or --demo")
    if not args.demo and not args.images and not args.model_info:
        fail("caption", "no input: give IMAGE files, or --demo to caption the bundled photos")
    if args.per_word and not args.overlay and not args.demo:
        fail("caption", "--per-word needs --overlay DIR")
    if args.seed is not None and args.demo != "shapes":
        fail("caption", "--seed only applies to --demo shapes")
    if args.resume and not args.jsonl:
        fail("caption", "--resume needs --jsonl FILE (the file to continue)")
    if args.resume and args.html and Path(args.html).is_file() and Path(args.html).stat().st_size:
        fail("caption", f"--html {args.html} exists, and --resume would replace it with a page of this run's images "
             "only; give a new --html file (the old page stays as it is)")  # fmt: skip
    if args.jsonl and args.json:
        fail("caption", "give --json (one list on stdout) or --jsonl FILE (one record per line), not both")
    _check_processes(args)
    if args.n_best > 1 and not (args.json or args.jsonl):  # plain lines hold one caption
        fail("caption", "--n-best lists are part of the --json / --jsonl records; add one of them")
    for flag, value in (("--batch-size", args.batch_size), ("--threads", 1 if args.threads is None else args.threads)):
        if value < 1:
            fail("caption", f"{flag} must be at least 1, got {value}")
    if args.workers < 0:
        fail("caption", f"--workers must be 0 or more, got {args.workers}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.html and args.jsonl and same_file(args.html, args.jsonl):
        fail("caption", "--html and --jsonl name the same file; give two files")
    try:  # the files given and the model, before it loads (folders and stdin's list are checked once expanded)
        refuse_overlap(_outputs(args), [*_model_files(args), *(i for i in args.images if i != "-")],
                       stdin="-" in args.images)  # fmt: skip
    except OutputRefused as err:
        fail("caption", str(err))
    captioner = _load_captioner(args)
    fill_decoding_defaults(args, captioner.info)
    check_search_options("caption", args)
    if args.model_info:
        emit("caption", "\n".join(model_info(captioner, args.model or BUNDLED_MODEL)))
        return 0
    if args.demo:
        with protecting(_model_files(args)):  # no --html or --overlay file may replace the model or a demo photo
            return _demo_shapes(captioner, args) if args.demo == "shapes" else _demo_photos(captioner, args)
    return _caption_collection(captioner, args)


def _check_processes(args: argparse.Namespace) -> None:
    """--devices / --num-nodes: what a run over several processes needs, checked before the model loads."""
    if args.devices is None:
        if args.num_nodes != 1:
            fail("caption", "--num-nodes needs --devices N (the processes on each machine)")
        parts = Path(f"{args.jsonl}.parts") if args.jsonl else None
        if args.resume and parts is not None and parts.is_dir():
            fail("caption", f"{parts} holds the parts of a run with --devices: resume it with --devices (any "
                 "number of processes)")  # fmt: skip
        return
    for flag, value in (("--devices", args.devices), ("--num-nodes", args.num_nodes)):
        if value < 1:
            fail("caption", f"{flag} must be at least 1, got {value}")
    if not args.jsonl:
        fail("caption", "--devices writes its records to --jsonl OUT (each process its part, merged into OUT): "
             "give --jsonl FILE")  # fmt: skip
    from text_attn.core.safe_files import check_output

    try:  # OUT is written at the end, after all the work: refuse a link or a folder now
        check_output(args.jsonl)
    except OutputRefused as err:
        fail("caption", f"cannot use --jsonl {args.jsonl}: {err}")
    if args.html:
        fail("caption", "--html draws one page as one process captions: give it to a run without --devices (the "
             "records in OUT hold what the page shows)")  # fmt: skip
    if args.demo or args.model_info:
        fail("caption", "--devices captions IMAGE inputs: give it without --demo or --model-info")


def _model_file(args: argparse.Namespace) -> Path:
    """The model file this run reads: --model (a path or a bundled name), else the bundled one --demo asks for."""
    return model_path(args.model if args.model is not None or args.demo != "shapes" else "shapes")


def _model_files(args: argparse.Namespace) -> list[str]:
    """The model file this run reads (an input too: no output may replace it) and, for --demo, its photos."""
    files = [str(_model_file(args))]
    if args.demo == "photo":
        files += [str(p) for p in DEMO_PHOTOS]
    return files


def _outputs(args: argparse.Namespace, paths: Sequence[str] = ()) -> dict[str, str | None]:
    """The files this run writes, by label: --jsonl, --html, and each image's overlay (named as caption_items will
    name them; the per-word PNGs, named by the caption's words, are checked as written: safe_files.protecting)."""
    out = {f"--jsonl {args.jsonl}": args.jsonl, f"--html {args.html}": args.html}
    used: set[str] = set()
    for name in paths if args.overlay else ():
        png = str(Path(args.overlay) / f"{_unique_stem(Path(name).stem or 'image', used)}-attention.png")
        out[f"the overlay {png}"] = png
    return out


def _first_process() -> bool:
    """Whether this is the first (or only) process of a run: Lightning's launcher and torchrun set these before the
    other processes run this same command."""
    if "RANK" in os.environ:
        return os.environ["RANK"] == "0"
    return os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"


def _caption_collection(captioner, args: argparse.Namespace, stdin: IO[str] | None = None) -> int:
    from captioning.photos.collection import image_paths
    from captioning.photos.shards import expand_braces, is_shard

    empty: list[str] = []  # folders without image files: each is a failed input, named in a note
    outputs = [args.overlay] if args.overlay else []  # an --overlay folder inside an input folder: not an input
    given = [p for arg in args.images for p in (expand_braces(arg) if "{" in arg and not Path(arg).exists() else [arg])]
    # strings: images and shards are read batch by batch
    paths = list(image_paths(given, stdin, empty, skip=outputs))
    if not paths:
        fail("caption", "no images: the folders hold no image files and stdin gave no paths")
    for folder in empty if _first_process() else ():  # --devices: each process finds them; the first names them
        print(f"caption: note: {folder}: no image files", file=sys.stderr)
    try:  # every input, found in folders and read from stdin too, against every output: before anything is written
        files = [p for p in paths if not is_shard(p)]  # a shard's members are named as drawn (protecting)
        refuse_overlap(_outputs(args, files), [*_model_files(args), *paths], stdin="-" in args.images)
    except OutputRefused as err:
        fail("caption", str(err))
    with protecting(
        [*_model_files(args), *paths], stdin="-" in args.images
    ):  # and each file written as the run goes (per-word PNGs)
        if args.devices is not None:
            from captioning.commands.caption_scale import caption_on_processes

            return caption_on_processes(captioner, args, paths, empty)
        return _caption_paths(captioner, args, paths, empty)


def _caption_paths(captioner, args: argparse.Namespace, paths: list[str], empty: list[str]) -> int:
    from tqdm.auto import tqdm

    from captioning.photos.collection import ResumeError, image_key, read_done
    from captioning.photos.photo_stream import PhotoStream, photo_batches
    from captioning.photos.shards import is_shard

    if args.overlay:
        try:
            Path(args.overlay).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            fail("caption", f"cannot create --overlay directory {args.overlay}: {one_line(err)}")
        try:  # a folder that exists but cannot be written: one line now, not one error an image later
            tempfile.TemporaryFile(dir=args.overlay).close()
        except OSError as err:
            fail("caption", f"cannot write into --overlay directory {args.overlay}: {one_line(err)}")
    report = _open_html(captioner, args)  # before --jsonl: a bad --html must not have emptied FILE
    out, done = None, set()
    shards = any(is_shard(p) for p in paths)
    if args.jsonl:
        jsonl = Path(args.jsonl)
        # a rerun without --resume starts FILE afresh, as a shell's > would; say so, as a forgotten --resume loses work
        replacing = not args.resume and jsonl.is_file() and jsonl.stat().st_size > 0
        try:
            done = read_done(jsonl) if args.resume else set()
            out = open_stream(jsonl, append=args.resume)  # a link, FIFO or device is refused (safe_files)
        except (OSError, UnicodeDecodeError, ResumeError) as err:
            if report is not None:
                report.close()
            fail("caption", f"cannot use --jsonl {jsonl}: {one_line(err, 300)}")
        if replacing:
            print(f"caption: --jsonl {jsonl} existed and is started afresh (--resume continues a file instead)",
                  file=sys.stderr)  # fmt: skip
        held = _done_in(paths, done)
        if held:
            print(f"caption: {held} image(s) already in {jsonl}: skipped", file=sys.stderr)
    todo = None if shards else sum(image_key(p) not in done for p in paths)  # a shard's size is known once read
    several = len(paths) > 1 or shards
    batches = -(-todo // args.batch_size) if todo is not None else 2
    workers = args.workers if batches > 1 else 0  # starting processes is not worth it for one batch
    keep = bool(args.overlay or args.html)  # the decoded images, for overlays and the page's pictures
    skip = (lambda item, name: image_key(name) in done) if done else None
    loader = photo_batches(PhotoStream(paths, captioner.preprocess, args.batch_size, keep, skip=skip), workers)
    quiet = batches <= 1 or not sys.stderr.isatty()  # a bar is for a person watching, not for a log file
    bar = tqdm(total=todo, unit="img", desc="captioning", disable=quiet, file=sys.stderr)
    names = OverlayNames(paths)
    options = search_options(args)
    records, failed, cut, far, finished, interrupted = [], 0, 0, 0, 0, False
    if workers:
        _drop_handover_noise()
    try:
        for items in loader:
            batch = caption_batch(captioner, items, args, options, names)
            failed += sum(bool(rec["error"]) for rec in batch)
            if report is not None:
                try:
                    _add_html(report, items, batch)
                except OSError as err:  # disk full, the file or its folder gone: what was written stays readable
                    report = None
                    fail("caption", f"cannot write --html {args.html}: {one_line(err)}")
            if out is not None:
                try:
                    out.write("".join(json.dumps(rec) + "\n" for rec in batch))
                    out.flush()
                except OSError as err:  # the records before stay whole; a torn last line is dropped by --resume
                    close_quietly(out)
                    out = None
                    fail("caption", f"cannot write --jsonl {args.jsonl}: {one_line(err)}; --resume continues after "
                         "the images it holds")  # fmt: skip
            elif args.json:
                records += batch
            else:
                for rec in batch:
                    if rec["caption"] is not None:
                        line = f"{inert(rec['image'])}\t{inert(rec['caption'])}" if several else inert(rec["caption"])
                        emit("caption", line)  # a name or word with a line break or tab cannot forge a line
            finished += len(items)  # written: what the notes and the interrupted line count
            cut += sum(bool(rec["truncated"]) for rec in batch)
            far += sum(bool(rec["out_of_domain"]) for rec in batch)
            bar.update(len(items))
    except KeyboardInterrupt:  # Ctrl-C: what is written stays whole (each batch is flushed), one line, exit 130
        # The loader's workers already stopped as this unwound; a broken handover's thread traceback is dropped by
        # the hook _drop_handover_noise set before the loop (a thread's error never reaches sys.excepthook).
        interrupted = True
    finally:
        bar.close()
        if out is not None:
            close_quietly(out)
        if report is not None:
            try:
                _close_html(report, failed)
            except OSError as err:
                print(f"caption: error: cannot finish --html {args.html}: {one_line(err)}", file=sys.stderr)
    if interrupted:
        if args.jsonl or not args.json:  # --json alone prints its records at the end: none were printed
            _closing_notes(captioner, args, cut, far)  # about the captions that were written
        where = f" in {args.jsonl}; --resume continues after them" if args.jsonl else ""
        print(f"caption: interrupted after {finished} image(s){where}", file=sys.stderr)
        if workers:
            # The outputs are closed and flushed; leave now. A normal exit would tear down the loader's worker
            # processes while multiprocessing's fd-sharing thread may be mid-handshake with one of them, and that
            # thread then prints a traceback (seen once in three CI runs of the SIGINT test).
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        raise SystemExit(130)
    if args.json:
        emit("caption", json.dumps(records))
    _closing_notes(captioner, args, cut, far)
    return 1 if failed or empty else 0


def _done_in(paths: list[str], done: set[str]) -> int:
    """How many of the inputs (files, and shard members by their ``SHARD.tar/MEMBER`` names) ``done`` holds."""
    from captioning.photos.collection import image_key
    from captioning.photos.shards import is_shard

    shards = {image_key(p) for p in paths if is_shard(p)}
    files = sum(image_key(p) in done for p in paths if not is_shard(p))
    members = 0
    for key in done if shards else ():
        parent = os.path.dirname(key)
        while parent and parent not in shards and parent != os.path.dirname(parent):  # a member in a tar's folder
            parent = os.path.dirname(parent)
        members += parent in shards
    return files + members


def _closing_notes(captioner, args: argparse.Namespace, cut: int, far: int) -> None:
    """The notes on the captions written: ``cut`` reached --max-len, ``far`` are out of the model's domain."""
    if cut:
        print(f"caption: note: {cut} caption(s) reached --max-len {args.max_len} and are cut off", file=sys.stderr)
    if far:
        print(f"caption: note: {_domain_note(captioner, args, far)}", file=sys.stderr)


def _drop_handover_noise() -> None:
    """A loader worker stopped by Ctrl-C while handing a batch over leaves multiprocessing's fd-sharing thread
    (resource_sharer._serve) with a broken connection, and its traceback would be printed as the loop unwinds, before
    the ``except KeyboardInterrupt`` runs. Only that thread's connection errors are dropped; any other goes on. Set
    once a process (a second caption_main in the same process keeps the one hook)."""
    import threading
    import traceback

    previous = threading.excepthook
    if getattr(previous, "drops_handover_noise", False):
        return

    def hook(args) -> None:
        # the thread's own target is gone by now (Thread.run deletes it): its traceback names the file
        frames = traceback.walk_tb(args.exc_traceback)
        sharer = any(frame.f_code.co_filename.endswith("resource_sharer.py") for frame, _ in frames)
        if not (sharer and isinstance(args.exc_value, (ConnectionError, EOFError))):
            previous(args)

    hook.drops_handover_noise = True
    threading.excepthook = hook


def _domain_note(captioner, args: argparse.Namespace, far: int) -> str:
    note = f"{far} image(s) look unlike {captioner.known()}: their captions may be wrong"
    if args.model is None:
        note += (
            "; for other images train a model with caption-train (docs/captioning.md: Train a captioner) and pass it "
            "with --model"
        )
    return note
