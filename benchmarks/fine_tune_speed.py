"""What fine-tuning the encoder costs a training epoch on this machine (issue 72): seconds per Flickr8k epoch with the
encoder frozen, its last stage training, its last two, and all of it. Prints a markdown table; a few minutes.

    python benchmarks/fine_tune_speed.py                      # 2 threads, 3 repeats
    python benchmarks/fine_tune_speed.py --repeats 5 --json docs/flickr8k_fine_tune_speed.json

Each row times one training step as CaptionModule runs it (the shipped Flickr8k network: EfficientNet-Lite2 at 260 px,
9 x 9 regions of 1280 features, decoder 512 wide, the vocabulary's 2,540 words; teacher forcing, cross-entropy + the
doubly stochastic term, backward, fused Adam on the decoder and the encoder's trainable weights) on random inputs of
the real shapes: a batch of 13 photos with their 5 captions of 12 words (65 captions, data.photo_batches) from what
the run stores per photo (the region features when frozen; the frozen stages' map, ImageEncoder.frozen_map, when the
last stage or two train; the photo itself when all of it does), and a batch of 64 captions of 64 different photos as
batches were drawn before (every caption's photo through the trainable stages). Seconds per epoch: the step times the
batches of an epoch of Flickr8k's 30,000 training captions (462 of 65, 469 of 64); validation and the one-off storing
of the photos' maps are not in it. The rows are interleaved in each repeat, the medians reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import interleaved_times  # noqa: E402

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text  # noqa: E402

CAPTIONS = 30_000  # Flickr8k's 6,000 training photos x 5
VOCAB, WORDS, SIDE = 2540, 12, 260


def _model(fine_tune: str):
    from captioning.model.decoder import DecoderConfig
    from captioning.model.encoder import EncoderConfig
    from captioning.model.network import CaptionModel

    torch.manual_seed(0)
    enc = EncoderConfig("efficientnet_lite2", grid=9, image_size=SIDE, crop=False, fine_tune=fine_tune)
    dec = DecoderConfig(embed_dim=512, hidden_dim=512, attn_dim=512, dropout=0.5)
    return CaptionModel.build(VOCAB, enc, dec).train()


def step_fn(fine_tune: str, photos: int, captions_per_photo: int):
    """One training step's closure, and what it reads per photo."""
    from captioning.training.objective import caption_loss

    model = _model(fine_tune)
    enc = model.encoder
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-4, fused=True)
    images = torch.randn(photos, 3, SIDE, SIDE)
    if fine_tune == "none":
        stored = model.encode(images).detach()  # (P, L, D): the feature cache's
        what = "region features (81 x 1280)"
    elif enc.stage_cacheable:
        stored = enc.frozen_map(images)  # (P, C, h, w)
        what = f"frozen map ({' x '.join(map(str, stored.shape[1:]))})"
    else:
        stored, what = images, "the photo (3 x 260 x 260)"
    b = photos * captions_per_photo
    photo_of = torch.arange(photos).repeat_interleave(captions_per_photo)  # (B,)
    captions = torch.randint(4, VOCAB, (b, WORDS + 1))
    captions_in, targets = captions[:, :-1], captions[:, 1:]

    def step() -> None:
        if fine_tune == "none":
            feats = stored
        elif enc.stage_cacheable:
            feats = enc.from_frozen_map(stored)
        else:
            feats = model.encode(stored)
        out = model.decoder(feats[photo_of], captions_in)
        loss, _ = caption_loss(out.logits, targets, out.alphas, pad_id=0, ds_lambda=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, what, sum(p.numel() for p in params if p in set(enc.parameters()))


SETTINGS = {  # name -> (fine_tune, photos a batch, captions a photo)
    "frozen, photo batches": ("none", 13, 5),
    "last stage, photo batches": ("last", 13, 5),
    "last stage, 64 captions of 64 photos": ("last", 64, 1),
    "last two stages, photo batches": ("last2", 13, 5),
    "all stages, photo batches": ("all", 13, 5),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats per setting; the median is reported")
    p.add_argument("--only", nargs="+", choices=list(SETTINGS), metavar="SETTING", help="some rows only")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        p.error("--repeats and --threads must be at least 1")
    torch.set_num_threads(args.threads)
    chosen = {k: v for k, v in SETTINGS.items() if not args.only or k in args.only}
    steps, about = {}, {}
    for name, (fine_tune, photos, per) in chosen.items():
        steps[name], what, trained = step_fn(fine_tune, photos, per)
        about[name] = (what, trained, photos * per)
        print(f"... built {name}", file=sys.stderr, flush=True)
    times = interleaved_times(steps, args.repeats)
    rows = []
    for name, runs in times.items():
        what, trained, batch = about[name]
        t = statistics.median(runs)
        per_epoch = t * -(-CAPTIONS // batch)
        rows.append({"setting": name, "stored per photo": what, "encoder weights trained": trained,
                     "captions a step": batch, "step s": round(t, 3), "epoch s": round(per_epoch)})  # fmt: skip
    frozen = next((r["epoch s"] for r in rows if r["setting"].startswith("frozen")), None)
    print(f"\n{args.threads} threads, median of {args.repeats} repeats; an epoch: {CAPTIONS:,} captions\n")
    print("| encoder | stored per photo | encoder weights trained | captions a step | s a step | s an epoch |"
          + (" x frozen |" if frozen else ""))  # fmt: skip
    print("|---|---|---|---|---|---|" + ("---|" if frozen else ""))
    for r in rows:
        ratio = f" {r['epoch s'] / frozen:.1f} |" if frozen else ""
        print(f"| {r['setting']} | {r['stored per photo']} | {r['encoder weights trained'] / 1e6:.2f}M | "
              f"{r['captions a step']} | {r['step s']:.2f} | {r['epoch s']:,} |{ratio}")  # fmt: skip
    if args.json:
        write_text(args.json, json.dumps({"threads": args.threads, "repeats": args.repeats, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
