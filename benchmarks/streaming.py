"""Streaming from LitData chunks against the folder reader (issue 59), in one run on one machine.

    python benchmarks/streaming.py --data ../shared/data/flickr8k --multi30k ../shared/data/multi30k --out runs/stream

Writes Flickr8k (the first --train-images train photos, val and test capped likewise) as chunks twice with
`caption-train optimize` (the JPEG bytes; the frozen EfficientNet-Lite0's float16 features with --features true) and
Multi30k de-en with `text-train optimize`, timing each; then draws --batches training batches of 64 from each reader in
this process (no loader workers, as the CPU configs train) and prints samples/s:
- photos: the folder reader (files decoded and prepared) against the chunks (the same bytes decoded and prepared);
- features: the feature cache (all train photos encoded into memory first, that time shown apart) against the
  feature chunks;
- sentences: the folder reader against the chunks.
Every batch is checked to be the shape its reader promises; the first --warmup batches are not timed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _runs import check_corpus, check_flickr8k, check_new_folder, run_main

from text_attn.core.errors import at_least, positive_int

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CAPTION_CONFIG = ROOT / "configs/caption/flickr8k_lite2_soft.yaml"
TEXT_CONFIG = ROOT / "configs/text/multi30k_de_en_bahdanau.yaml"
LITE0 = {"backbone": "efficientnet_lite0", "image_size": 224, "grid": 7}


def timed(cmd: list[str]) -> float:
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"streaming benchmark: {cmd[0]} failed: {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - start


def throughput(loader, batches: int, warmup: int, key: str) -> tuple[float, int]:
    """(samples/s over the timed batches, samples timed), drawing warmup + batches batches."""
    it = iter(loader)
    for _ in range(warmup):
        next(it)
    start, n = time.perf_counter(), 0
    for _ in range(batches):
        batch = next(it)
        assert batch[key].dim() >= 2, key
        n += batch[key].size(0)
    return n / (time.perf_counter() - start), n


def caption_modules(args, chunks: Path, features: bool):
    from captioning.training.data import CaptionDataModule

    cfg = yaml.safe_load(CAPTION_CONFIG.read_text())
    data = {**cfg["data"], "root": str(args.data), "train_size": args.train_images, "val_size": args.eval_images,
            "test_size": args.eval_images, "feature_cache_dir": None}  # fmt: skip
    folder, streamed = CaptionDataModule(**data), CaptionDataModule(**{**data, "root": str(chunks)})
    folder.setup()
    streamed.setup()
    return folder, streamed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="Flickr8k in its own layout")
    ap.add_argument("--multi30k", type=Path, help="Multi30k (train/val/test_2016_flickr .de/.en.gz); omit to skip text")
    ap.add_argument("--out", type=Path, required=True, help="where the chunks go (kept: a second run reuses them)")
    ap.add_argument("--train-images", type=positive_int, default=1000, help="Flickr8k train photos (x5 captions)")
    ap.add_argument("--eval-images", type=positive_int, default=100, help="val and test photos each")
    ap.add_argument("--batches", type=positive_int, default=40, help="timed batches per reader (default 40)")
    ap.add_argument("--warmup", type=at_least(0), default=3, help="batches drawn before timing (default 3; 0: none)")
    args = ap.parse_args(argv)
    # each read after minutes of optimizing: checked first, named by the option
    check_new_folder(ap, "--out", args.out)
    check_flickr8k(ap, "--data", args.data)
    if args.multi30k is not None:
        for split in ("train", "val", "test_2016_flickr"):
            check_corpus(ap, "--multi30k", args.multi30k, split, "de", "en")
    import torch

    from captioning.model.encoder import EncoderConfig
    from captioning.training.streaming import frozen_encoder

    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = yaml.safe_load(CAPTION_CONFIG.read_text())
    cfg["model"]["encoder"].update(LITE0)
    cfg_path = args.out / "caption.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    sizes = ["--data.root", str(args.data), "--data.train_size", str(args.train_images),
             "--data.val_size", str(args.eval_images), "--data.test_size", str(args.eval_images)]  # fmt: skip
    optimize = [str(BIN / "caption-train"), "optimize", "--config", str(cfg_path), *sizes]
    rows = []
    t_jpeg = timed([*optimize, "--out", str(args.out / "jpeg")])
    t_feat = timed([*optimize, "--out", str(args.out / "features"), "--features", "true"])
    encoder, _ = frozen_encoder(EncoderConfig(**cfg["model"]["encoder"]))

    folder, streamed = caption_modules(args, args.out / "jpeg", False)
    for dm in (folder, streamed):
        dm.set_preprocess(encoder.preprocess)
    n_pairs = len(folder._train_pairs)
    a, n = throughput(folder.train_dataloader(), args.batches, args.warmup, "images")
    b, _ = throughput(streamed.train_dataloader(), args.batches, args.warmup, "images")
    size = sum(f.stat().st_size for f in (args.out / "jpeg").rglob("*.bin")) / 2**20
    rows.append(("photos (JPEG), folder reader", f"{a:.0f}", "-", f"{n} of {n_pairs} pairs"))
    rows.append(("photos (JPEG), chunks", f"{b:.0f}", f"optimize {t_jpeg:.0f} s, {size:.0f} MiB", f"{b / a:.2f}x"))

    folder, streamed = caption_modules(args, args.out / "features", True)
    start = time.perf_counter()
    with torch.no_grad():
        folder.fill_feature_cache(encoder, encoder.preprocess, ["train"], progress=False)
    t_cache = time.perf_counter() - start
    a, n = throughput(folder.train_dataloader(), args.batches, args.warmup, "features")
    b, _ = throughput(streamed.train_dataloader(), args.batches, args.warmup, "features")
    size = sum(f.stat().st_size for f in (args.out / "features").rglob("*.bin")) / 2**20
    rows.append(
        ("features, feature cache (memory)", f"{a:.0f}", f"encoding {t_cache:.0f} s", f"{n} of {n_pairs} pairs")
    )
    rows.append(("features, chunks", f"{b:.0f}", f"optimize {t_feat:.0f} s, {size:.0f} MiB", f"{b / a:.2f}x"))

    if args.multi30k:
        from text_attn.translation.data import TranslationDataModule

        tcfg = yaml.safe_load(TEXT_CONFIG.read_text())
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump(tcfg, f)
        t_text = timed([str(BIN / "text-train"), "optimize", "--config", f.name, "--data.root", str(args.multi30k),
                        "--out", str(args.out / "text")])  # fmt: skip
        data = {**tcfg["data"], "root": str(args.multi30k)}
        folder, streamed = (
            TranslationDataModule(**data),
            TranslationDataModule(**{**data, "root": str(args.out / "text")}),
        )
        folder.setup()
        streamed.setup()
        a, n = throughput(folder.train_dataloader(), args.batches, args.warmup, "src")
        b, _ = throughput(streamed.train_dataloader(), args.batches, args.warmup, "src")
        size = sum(p.stat().st_size for p in (args.out / "text").rglob("*.bin")) / 2**20
        rows.append(("sentence pairs, folder reader", f"{a:.0f}", "-", f"{n} of {len(folder.splits['train'])} pairs"))
        rows.append(("sentence pairs, chunks", f"{b:.0f}", f"optimize {t_text:.0f} s, {size:.0f} MiB", f"{b / a:.2f}x"))

    print(f"\n{args.batches} timed batches per reader, 1 torch thread, no loader workers ({torch.__version__})\n")
    print("| reader | samples/s | one-time cost | note |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    # bad input (a data root, a failed optimize) as one line, never a traceback
    raise SystemExit(run_main(main))
