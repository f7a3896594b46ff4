"""Calibrate a caption model's domain check (the note on photos unlike its training photos) and measure it.

    python benchmarks/domain_check.py captioning/assets/flickr8k_soft.pt --flickr8k ../shared/data/flickr8k \\
        --cache runs/domain_features.pt --write --json docs/domain_check.json
    python benchmarks/domain_check.py captioning/assets/shapes_soft.pt --shapes 500 --domain "synthetic shapes" --write

Flickr8k: the encoder's features of --train training photos (spread over the split) give the prototypes, all 1,000
val photos set the threshold (at most 2% of them flagged), and the measure is reported on the 1,000 test photos (held
out: the share flagged there is the honest false-alarm rate) and on photos outside Flickr8k's world: the bundled CC0 and
public-domain photos (captioning/assets/photos) and the photographs scikit-image's data module ships (when installed:
``pip install scikit-image``), each named with its novelty and whether the pixel check or the feature check flags it.
Every photo is read and prepared as ``caption`` reads it. The older centre-and-radius check (model files before the
prototypes) is scored beside it on the same photos. --cache keeps the features (a rerun skips the ~3 minutes of
encoding). --write records the check, with --domain and --about (what the training photos show, for the note), in the
model file (float16 kept as it is).
Shapes: prototypes of --shapes training scenes (seed 0), the threshold on --held-out (200) val scenes (seed 1),
measured on as many held-out scenes (seed 2).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from captioning.model.bundled import DEMO_PHOTOS  # noqa: E402
from captioning.model.captioner import Captioner  # noqa: E402
from captioning.photos.domain import MIN_HELD_OUT, domain_check, far_from_domain, novelty  # noqa: E402
from captioning.photos.photo_check import photo_stats, unlike_a_photo  # noqa: E402
from text_attn.core.errors import new_file, positive_int  # noqa: E402
from text_attn.core.safe_files import write_bytes, write_text  # noqa: E402

# scikit-image's data photographs (its drawings, test patterns and silhouettes are left out: not photographs)
SKIMAGE_PHOTOS = ("astronaut.png", "brick.png", "camera.png", "cell.png", "chelsea.png", "clock_motion.png",
                  "coffee.png", "coins.png", "grass.png", "gravel.png", "hubble_deep_field.jpg", "ihc.png",
                  "microaneurysms.png", "moon.png", "motorcycle_left.png", "page.png", "retina.jpg", "rocket.jpg",
                  "text.png")  # fmt: skip


@torch.no_grad()
def encode(captioner: Captioner, images: list, label: str = "") -> tuple[torch.Tensor, list[tuple]]:
    """Images (files or PIL) -> (their region features (N, L, D) float16, their photo_stats), read and prepared as
    ``caption`` does, 32 at a time."""
    from tqdm import tqdm

    feats, stats = [], []
    for i in tqdm(range(0, len(images), 32), desc=f"encoding {label}".strip(), unit="batch", disable=len(images) < 64):
        loaded, features = captioner.encode_photos(images[i : i + 32])
        stats += [photo_stats(im) for im in loaded]
        feats.append(features.half().cpu())
    return torch.cat(feats), stats


def flickr8k_features(captioner: Captioner, args: argparse.Namespace) -> dict:
    """{"train" | "val" | "test": (features, stats)}, from --cache when it holds them."""
    from captioning.training.readers import read_flickr8k

    if args.cache and args.cache.is_file():
        print(f"features from {args.cache}")
        return torch.load(args.cache, weights_only=True)
    splits = read_flickr8k(args.flickr8k)
    train = splits["train"][:: max(1, len(splits["train"]) // args.train)][: args.train]
    out = {}
    for name, items in (("train", train), ("val", splits["val"]), ("test", splits["test"])):
        out[name] = encode(captioner, [it.path for it in items], name)
    if args.cache:
        args.cache.parent.mkdir(parents=True, exist_ok=True)
        save(out, args.cache)
    return out


def save(obj: object, path: Path) -> None:
    """torch.save through safe_files (a fresh file, renamed: never through a planted link, never half-written)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_bytes(path, buffer.getbuffer())


def outside_photos() -> list[tuple[str, Path]]:
    """(name, file) of the photographs outside Flickr8k's world: the bundled ones, then scikit-image's."""
    photos = [(f"bundled/{p.name}", p) for p in DEMO_PHOTOS]
    try:
        import skimage.data

        folder = Path(skimage.data.__file__).parent
        photos += [(f"skimage/{n}", folder / n) for n in SKIMAGE_PHOTOS if (folder / n).is_file()]
    except ImportError:
        print("scikit-image is not installed: only the bundled photos are measured (pip install scikit-image)")
    return photos


def rates(check: dict, old: dict | None, feats: torch.Tensor, stats: list) -> dict:
    far = far_from_domain({k: v for k, v in check.items() if k != "photos"}, feats)
    row = {
        "n": len(feats),
        "feature_check": sum(far) / len(far),
        "with_pixel_check": sum(far_from_domain(check, feats, stats)) / len(far),
    }
    if old:
        row["centre_radius"] = sum(far_from_domain({**old, "photos": False}, feats)) / len(far)
    return row


def sweep(args: argparse.Namespace, sets: dict, photos: list | None, report: dict) -> None:
    """The check made with other numbers of prototypes: the share of test flagged and the outside photos noted."""
    outside = encode(Captioner.load(args.model), [f for _, f in photos]) if photos else None
    print("\n| prototypes | threshold | val flagged | test flagged | outside noted (features) | missed |")
    print("|---|---|---|---|---|---|")
    report["sweep"] = []
    for k in (int(v) for v in args.sweep.split(",")):
        check = domain_check(
            sets["train"][0],
            sets["val"][0],
            photos=photos is not None,
            k=k,
            held_out_stats=sets["val"][1],
            min_held_out=args.min_held_out,
        )
        if check is None or "prototypes" not in check:  # too few held out: said by main before the sweep
            continue
        val, test = (sum(far_from_domain(check, sets[s][0])) / len(sets[s][0]) for s in ("val", "test"))
        row = {"prototypes": k, "threshold": check["threshold"], "val": val, "test": test}
        if outside is not None:
            far = far_from_domain(check, outside[0])
            row["outside"], row["missed"] = sum(far), [n for (n, _), f in zip(photos, far, strict=True) if not f]
        report["sweep"].append(row)
        noted = f"{row['outside']} of {len(photos)}" if photos else "-"
        missed = ", ".join(row.get("missed", []))
        print(f"| {k} | {check['threshold']:.4f} | {val:.1%} | {test:.1%} | {noted} | {missed} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=Path, help="caption model file (rewritten in place with --write)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--flickr8k", type=Path, help="the Flickr8k folder the model was trained on")
    source.add_argument("--shapes", type=positive_int, help="this many synthetic training scenes (seed 0)")
    p.add_argument("--train", type=positive_int, default=3000, help="Flickr8k training photos for the prototypes")
    p.add_argument("--held-out", type=positive_int, default=200, help="shapes: val and test scenes (seeds 1 and 2)")
    p.add_argument("--cache", type=Path, help="keep the Flickr8k features here and reuse them")
    p.add_argument("--domain", help="what the model was trained on, in words (default: as recorded)")
    p.add_argument("--about", help="what its training photos show, for the note (e.g. 'people, dogs, outdoor scenes')")
    p.add_argument("--write", action="store_true", help="record the check (and --domain, --about) in the model file")
    p.add_argument("--sweep", help="also compare these prototype counts (comma-separated, e.g. 32,64,128,256,512)")
    p.add_argument("--min-held-out", type=int, default=MIN_HELD_OUT,
                   help=f"the fewest held-out images a threshold is set on (default: {MIN_HELD_OUT}, as training "
                   "sets it; fewer: a tenth of train joins them, then no check)")  # fmt: skip
    p.add_argument("--json", type=new_file, help="also write the numbers here")
    args = p.parse_args(argv)
    captioner = Captioner.load(args.model)
    old = captioner.domain_check if captioner.domain_check and "centre" in captioner.domain_check else None
    if args.shapes is not None:
        from captioning.training.shapes import make_scenes

        counts = (("train", args.shapes, 0), ("val", args.held_out, 1), ("test", args.held_out, 2))  # (split, n, seed)
        sets = {
            name: encode(captioner, [s.image for s in make_scenes(n, seed, 128, 3)], name) for name, n, seed in counts
        }
    else:
        sets = flickr8k_features(captioner, args)
    check = domain_check(
        sets["train"][0],
        sets["val"][0],
        photos=bool(args.flickr8k),
        held_out_stats=sets["val"][1],
        min_held_out=args.min_held_out,
    )
    if check is None or "prototypes" not in check:  # too few to set a threshold (domain.MIN_HELD_OUT): pixels alone
        held, train = len(sets["val"][0]), len(sets["train"][0])
        print(f"domain_check.py: error: {held} held-out and {train} training images set no threshold (at least "
              f"{MIN_HELD_OUT} held out are needed): give more", file=sys.stderr)  # fmt: skip
        return 2
    print(f"{len(check['prototypes'])} prototypes; threshold (cosine distance) {check['threshold']:.4f}")
    report: dict = {"threshold": check["threshold"], "prototypes": len(check["prototypes"]), "splits": {}}
    print(
        "\n| images | n | flagged: features | features or pixels | centre and radius (before) |\n|---|---|---|---|---|"
    )
    for name in ("val", "test"):
        row = report["splits"][name] = rates(check, old, *sets[name])
        old_cell = f"{row['centre_radius']:.1%}" if old else "-"
        print(f"| {name} | {row['n']} | {row['feature_check']:.1%} | {row['with_pixel_check']:.1%} | {old_cell} |")
    photos = None
    if args.flickr8k:
        photos = outside_photos()
        feats, stats = encode(captioner, [f for _, f in photos])
        score = novelty(check, feats).tolist()
        feature = far_from_domain({**check, "photos": False}, feats)
        before = far_from_domain({**old, "photos": False}, feats) if old else [None] * len(photos)
        print(f"\nOutside Flickr8k's world ({len(photos)} photos; threshold {check['threshold']:.4f}):\n")
        print("| photo | novelty | feature check | pixel check | noted | centre and radius (before) |")
        print("|---|---|---|---|---|---|")
        rows = []
        for (name, _), s, f, st, b in zip(photos, score, feature, stats, before, strict=True):
            pixel = unlike_a_photo(st)
            rows.append({"photo": name, "novelty": round(s, 4), "feature": f, "pixel": pixel, "noted": f or pixel,
                         "centre_radius": b})  # fmt: skip
            mark = lambda v: "-" if v is None else ("yes" if v else "no")  # noqa: E731
            print(f"| {name} | {s:.4f} | {mark(f)} | {mark(pixel)} | **{mark(f or pixel)}** | {mark(b)} |")
        noted = sum(r["noted"] for r in rows)
        missed = ", ".join(r["photo"] for r in rows if not r["noted"]) or "none"
        print(f"\nnoted: {noted} of {len(rows)}; missed: {missed}")
        report["outside"] = rows
    if args.sweep:
        sweep(args, sets, photos if args.flickr8k else None, report)
    if args.json:
        write_text(args.json, json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.write:  # the file's other entries (its float16 weights included) are written back as they were
        data = torch.load(args.model, weights_only=True)
        data["domain_check"] = check
        data["domain"] = args.domain or data.get("domain")
        if args.about:
            data["domain_about"] = args.about
        save(data, args.model)
        print(f"wrote the check into {args.model}")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
