"""``caption``'s pipeline with the model's work replaced by nothing: what is left to feed a GPU.

    python benchmarks/pipeline.py                            # 512 photos, workers 1 and 2, the table of docs/speed.md
    python benchmarks/pipeline.py --photos 256 --workers 2 --profile   # and where the main process spends its time

On a GPU the model is cheap and everything around it is the cost (issue 65): reading and decoding the photos and
preparing them (the loader's workers), handing them to the main process, and building and writing the records (the
main process, in Python, per photo). This runs the real ``caption FOLDER --jsonl OUT`` (the bundled model's
preprocessing: full-size photos squashed to 224, JPEG step, 260 px) with ``Captioner.encode`` returning zeros and the
search returning a fixed 12-word caption with its (12, 81) attention at once, and measures per run:
- images/s over the whole run, and per loader worker (photos per second of the workers' own CPU time);
- the main process's CPU milliseconds a photo (everything but the model: the handover from the workers, the records,
  the attention rounded to 6 decimals, JSON, the file), from the difference between the whole folder and its first
  two batches alone (so what a run costs once, the model file loaded and the workers started, is left out). Goal:
  at most 0.3 ms (it could then feed 3,000 images/s).
The photos: the bundled demo photos, resized to 500 x 375 (Flickr8k's usual size) and saved as JPEG quality 96, 4:4:4,
with a little noise each so no two are the same file.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _runs import int_list  # noqa: E402

from captioning.commands.caption import caption_main  # noqa: E402
from captioning.model.bundled import DEMO_PHOTOS  # noqa: E402
from captioning.model.captioner import Caption, Captioner  # noqa: E402
from text_attn.core.errors import new_file, positive_int  # noqa: E402
from text_attn.core.safe_files import write_text  # noqa: E402

WORDS = "a dog runs through the grass with a ball in its mouth".split()  # 12 words: Flickr8k's mean is ~11


def write_photos(folder: Path, n: int) -> None:
    rng = np.random.default_rng(0)
    bases = []
    for path in DEMO_PHOTOS:
        with Image.open(path) as img:
            bases.append(np.asarray(img.convert("RGB").resize((500, 375), Image.Resampling.BICUBIC), dtype=np.int16))
    for i in range(n):
        noisy = bases[i % len(bases)] + rng.integers(-3, 4, size=bases[0].shape)
        Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(
            folder / f"{i:05d}.jpg", "JPEG", quality=96, subsampling="4:4:4"
        )


@contextmanager
def no_model(regions: int):
    """Captioner.encode -> zeros (B, L, 8); the search -> the same caption for every photo, at once."""
    alphas = torch.softmax(torch.randn(len(WORDS), regions, generator=torch.Generator().manual_seed(0)), dim=-1)

    def encode(self, images):
        return torch.zeros(images.size(0), regions, 8)

    def caption_features(self, features, *args, **kwargs):
        return [Caption(list(WORDS), alphas, -7.25, False) for _ in range(features.size(0))]

    with (
        mock.patch.object(Captioner, "encode", encode),
        mock.patch.object(Captioner, "caption_features", caption_features),
        mock.patch.object(Captioner, "out_of_domain", lambda self, features, stats=None: None),
    ):
        yield


def _timed(folder: Path, out: Path, workers: int, batch: int, prof: cProfile.Profile | None) -> tuple:
    """(records, wall seconds, the main process's CPU seconds, the workers' CPU seconds) of one caption run."""
    args = [str(folder), "--jsonl", str(out), "--workers", str(workers), "--batch-size", str(batch)]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu, wall = time.process_time(), time.perf_counter()
    if prof:
        prof.enable()
    code = caption_main(args)
    if prof:
        prof.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    n = sum(1 for _ in out.open())
    if code != 0 or n == 0:
        raise SystemExit(f"pipeline: error: caption exited {code} with {n} records")
    return n, wall, cpu, worker_cpu


def run(folders: tuple[Path, Path], out: Path, workers: int, batch: int, profile: bool) -> dict:
    """The whole folder, and its first two batches alone: what a run costs once (the model file loaded, the workers
    started) is the first's; the per-photo costs are the difference between the two."""
    n0, _, cpu0, wcpu0 = _timed(folders[0], out.with_suffix(".few"), workers, batch, None)
    prof = cProfile.Profile() if profile else None
    n, wall, cpu, wcpu = _timed(folders[1], out, workers, batch, prof)
    row = {"workers": workers, "batch": batch, "photos": n, "images_s": n / wall}
    row["main_ms"] = 1000 * (cpu - cpu0) / (n - n0)
    row["per_worker_images_s"] = (n - n0) / (wcpu - wcpu0) if workers and wcpu > wcpu0 else None
    if prof:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
        row["profile"] = buf.getvalue()
    return row


def measure(folder: Path, tmp: Path, workers: list[int], batch: int, profile: bool = False) -> list[dict]:
    """A row of :func:`run` per loader-worker count, on ``folder``'s photos (its first two batches hard-linked into
    ``tmp``), the model replaced by nothing and the command's stderr silenced; the imports paid once before."""
    regions = Captioner.load().grid ** 2
    few = tmp / "first_batches"
    few.mkdir()
    for photo in sorted(folder.iterdir())[: 2 * batch]:  # two batches: caption reads one in-process
        os.link(photo, few / photo.name)
    with no_model(regions), open(os.devnull, "w") as null, mock.patch.object(sys, "stderr", null):
        _timed(few, tmp / "warm.jsonl", 0, batch, None)  # the imports, once
        return [run((few, folder), tmp / f"w{w}.jsonl", w, batch, profile) for w in workers]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # --photos 0: caption refused the empty folder with its stderr silenced (exit 2, no line at all)
    p.add_argument("--photos", type=positive_int, default=512, help="photos in the folder (default 512)")
    p.add_argument("--workers", type=int_list(0), default=[1, 2], help="loader workers to run with, comma-separated; "
                   "0: in the main process (default 1,2)")  # fmt: skip
    p.add_argument("--batch-size", type=positive_int, default=64, help="caption --batch-size (default 64)")
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads of the main process (default 1)")
    p.add_argument("--profile", action="store_true", help="print the main process's top functions per run")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp, "photos")
        folder.mkdir()
        write_photos(folder, args.photos)
        rows = measure(folder, Path(tmp), args.workers, args.batch_size, args.profile)
    print(f"caption FOLDER --jsonl OUT, the model replaced by nothing: {args.photos} photos of 500 x 375, "
          f"batch {args.batch_size}, {os.cpu_count()} cores\n")  # fmt: skip
    print("| loader workers | images/s | images/s per worker (its CPU time) | main process, ms a photo (goal <= 0.3) |")
    print("|---|---|---|---|")
    for r in rows:
        per = f"{r['per_worker_images_s']:.1f}" if r["per_worker_images_s"] else "-"
        print(f"| {r['workers']} | {r['images_s']:.1f} | {per} | {r['main_ms']:.2f} |")
    for r in rows:
        if "profile" in r:
            print(f"\n{r['workers']} worker(s): the main process's top functions\n{r.pop('profile')}")
    if args.json:
        write_text(args.json, json.dumps({"cores": os.cpu_count(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
