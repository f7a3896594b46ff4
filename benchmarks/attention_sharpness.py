"""How sharp is a captioner's attention? For each model, the photos are captioned at its recorded decoding, and each
word's α over the L regions is summed up three ways, averaged over the words, then over the photos:

- peak: the largest weight x L (1 = uniform: a map with nothing bright; 81 = all on one region of a 9 x 9 grid);
- top-9 mass: the share of the weight on the word's 9 heaviest regions (9 / L where uniform: 11% of 81);
- entropy in nats (log L where uniform: 4.39 for 81 regions).

A flatter map draws an overlay with less to see. Training choices move it: decoders distilled from the words of the
ensemble bundled before 2026-12-05 look at their photos far more broadly than the decoders they learned from; taught
its attention too (model.objective.distil_attention), as the bundled ones since were, about as sharply
(docs/bundled_captioner.md).

    python benchmarks/attention_sharpness.py --flickr8k ../shared/data/flickr8k --photos 200 \\
        --model bundled=flickr8k --model other=runs/x/model.pt --json docs/attention_sharpness.json

The photos: the first N of Flickr8k's val split (--flickr8k, either layout), or the files given with --photo.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import caption_model, check_flickr8k  # noqa: E402

from text_attn.core.errors import new_file, positive_int  # noqa: E402
from text_attn.core.safe_files import write_text  # noqa: E402

TOP = 9


def word_stats(alphas) -> dict[str, float]:
    """alphas (T, L): each word's map -> the means over the words of peak x L, top-9 mass and entropy (nats)."""
    from text_attn.core.attention import attention_entropy  # here: it imports torch (--help stays light)

    a = alphas.float()
    L = a.size(-1)
    top = a.topk(min(TOP, L), dim=-1).values.sum(-1)  # (T,)
    entropy = attention_entropy(a)  # (T,): a zero weight adds nothing
    return {"peak": float((a.max(-1).values * L).mean()), "top9": float(top.mean()), "entropy": float(entropy.mean()),
            "regions": L, "words": int(a.size(0))}  # fmt: skip


def model_stats(captioner, photos: list[Path]) -> dict:
    """One model over the photos at its recorded decoding: the means over the photos of :func:`word_stats`."""
    rows = [word_stats(c.alphas) for c in captioner.caption_images(photos) if c.alphas is not None and len(c.words)]
    if not rows:
        raise SystemExit("attention_sharpness: no caption with attention to measure (no photo read)")
    mean = {k: sum(r[k] for r in rows) / len(rows) for k in ("peak", "top9", "entropy")}
    return {**mean, "photos": len(rows), "regions": rows[0]["regions"]}


def val_photos(root: Path, n: int) -> list[Path]:
    """The first ``n`` val photos as every Flickr8k benchmark reads them (captioning.training.readers.read_flickr8k)."""
    from captioning.training.readers import read_flickr8k

    return [item.path for item in read_flickr8k(root)["val"][:n]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--model", action="append", required=True, metavar="NAME=FILE",
                   help="a captioner to measure (a model file or a bundled name); repeat for more")  # fmt: skip
    p.add_argument("--flickr8k", type=Path, help="Flickr8k (as downloaded, or Kaggle's copy): its val photos")
    p.add_argument("--photos", type=positive_int, default=200, help="how many val photos (default 200)")
    p.add_argument("--photo", type=Path, action="append", default=[], help="a photo file (instead of --flickr8k)")
    p.add_argument("--json", type=new_file, help="also write the numbers here")
    args = p.parse_args(argv)
    models = []
    for spec in args.model:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            p.error(f"--model {spec!r}: expected NAME=FILE")
        try:  # each loaded after the ones before it measured every photo: checked first
            caption_model(file)
        except argparse.ArgumentTypeError as err:
            p.error(f"--model {spec}: {err}")
        if name in dict(models):  # a second NAME replaced the first's model, both rows the second's numbers
            p.error(f"--model {spec}: the name {name!r} is given twice; give each model its own")
        models.append((name, file))
    if args.photo:
        photos = args.photo
    elif args.flickr8k:
        check_flickr8k(p, "--flickr8k", args.flickr8k)
        photos = val_photos(args.flickr8k, args.photos)
    else:
        p.error("give --flickr8k (its val photos) or --photo FILE")
    from captioning.model.captioner import Captioner
    from text_attn.core.modelfile import ModelFileError

    loaded = {}
    for name, file in models:  # every model read before the table starts: a bad one left half a table on stdout
        try:
            loaded[name] = Captioner.load(file)
        except (ModelFileError, ValueError) as err:
            p.error(f"--model {name}={file}: {err}")
    results = {}
    print(f"| model | photos | peak (x uniform) | top-{TOP} mass | entropy (nats) |")
    print("|---|---|---|---|---|")
    for name, file in models:
        stats = model_stats(loaded[name], photos)
        results[name] = {"model": file, **stats}
        uniform = math.log(stats["regions"])
        print(f"| {name} | {stats['photos']} | {stats['peak']:.2f} | {100 * stats['top9']:.1f}% | "
              f"{stats['entropy']:.2f} (uniform {uniform:.2f}) |")  # fmt: skip
    if args.json:
        write_text(args.json, json.dumps({"photos": [p.name for p in photos], "models": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
