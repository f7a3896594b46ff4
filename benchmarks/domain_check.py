"""Record in a caption model file what it was trained on and where its training images lie, so that ``caption`` can
say when an image looks unlike them. ``caption-train fit`` does this itself when it caches features; this adds it to
a model file made otherwise (the bundled shapes model was given its check with this command):

    python benchmarks/domain_check.py captioning/assets/shapes_soft.pt --shapes 500 --domain "synthetic shapes" --half

The check: the centre of the training images' mean region features, and 1.5 x the distance from it that 99% of
them stay within (captioning.domain.domain_check). It prints how many of 200 held-out scenes it flags.
"""

from __future__ import annotations

import argparse

import torch

from captioning.captioner import Captioner
from captioning.domain import domain_check
from captioning.shapes import make_scenes


@torch.no_grad()
def encode(captioner: Captioner, images: list) -> torch.Tensor:
    return torch.cat(
        [captioner.model.encode(torch.stack([captioner.preprocess(im) for im in images[i : i + 100]]))
         for i in range(0, len(images), 100)]
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="caption model file, rewritten in place")
    p.add_argument("--shapes", type=int, default=500, help="training scenes (seed 0, 128 px, up to 3 objects)")
    p.add_argument("--domain", default="synthetic shapes", help="what the model was trained on, in words")
    p.add_argument("--half", action="store_true", help="store float16 parameters (as caption-export --half)")
    args = p.parse_args(argv)
    captioner = Captioner.load(args.model)
    captioner.domain = args.domain
    captioner.domain_check = domain_check(encode(captioner, [s.image for s in make_scenes(args.shapes, 0, 128, 3)]))
    held_out = encode(captioner, [s.image for s in make_scenes(200, 2, 128, 3)])
    print(f"radius {captioner.domain_check['radius']:.2f}; held-out scenes flagged: "
          f"{sum(captioner.out_of_domain(held_out))} of 200")  # fmt: skip
    captioner.save(args.model, half=args.half)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
