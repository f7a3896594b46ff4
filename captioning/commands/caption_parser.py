"""``caption``'s options: the argument parser (``caption --help``), and the defaults it names."""

from __future__ import annotations

import argparse
import os
import sys

from captioning.commands.caption_unsure import add_caption_unsure_options
from text_attn.core.devices import add_device_options
from text_attn.core.errors import ArgumentParser
from text_attn.core.search_options import add_search_options
from text_attn.core.version import add_version

DEMO_DIR = "caption-demo"
OVERLAY_FORMATS = ("png", "jpg", "webp")  # --overlay-format: captioning.views.overlay.FORMATS
BATCH = 16  # images encoded together (--batch-size)
MAX_LEN = 30  # words a caption may have (--max-len)


# --- caption --------------------------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="caption",
        description="Caption images with a Show-Attend-Tell model file. IMAGE: a file, a folder (its images, "
        "recursively), a webdataset tar shard or - (paths on stdin). Plain output: the caption (one file named) or "
        "path<TAB>caption per image (several files, a folder, a shard or -). Without --model the bundled Flickr8k "
        "model captions photographs (try --demo; --model-info says what it was trained on and how well it scores).",
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
    add_version(p)
    p.add_argument(
        "--beam-size", type=int, help="beam width; 1 = greedy (default: the model file's choice, else 3; --sample: 1)"
    )
    # default None, 30 once the options are checked: --given refuses it typed (caption_given.check_given)
    p.add_argument("--max-len", type=int, help=f"longest caption in words (default: {MAX_LEN})")
    p.add_argument(
        "--length-penalty",
        type=float,
        help="rank beams by score / length**this (default: the model file's choice, chosen on validation data, else 0)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON list with per-word attention (the --jsonl records: docs/captioning.md)",
    )
    p.add_argument("--jsonl", metavar="FILE", help="write one JSON record per line to FILE as images are done, in "
                   "place of the plain lines (nothing on stdout; - : the records on stdout; ./- for a file named "
                   "-)")  # fmt: skip
    p.add_argument(
        "--resume",
        action="store_true",
        help="with --jsonl: skip the images FILE already holds (refused with another model or decoding than "
        "FILE.run.json records)",
    )
    p.add_argument(
        "--overlay",
        metavar="DIR",
        help="write per image DIR/<name>-attention.png (.jpg or .webp: --overlay-format): the image, then "
        f"one attention panel per word (default with --demo: ./{DEMO_DIR}/)",
    )
    p.add_argument(
        "--overlay-format",
        choices=OVERLAY_FORMATS,
        help="with --overlay: the pictures' format (default png: every pixel kept, 0.6-1.2 MB a Flickr8k photo's "
        "overlay; jpg (quality 90) 4.2x smaller, webp (quality 90) 6.6x, measured on 50 Flickr8k photos; the names end "
        "-attention.jpg or .webp)",
    )
    p.add_argument("--per-word", action="store_true", help="with --overlay: also one picture per word")
    p.add_argument(
        "--evidence",
        action="store_true",
        help="with --overlay, --html, --json or --jsonl: also what drives each word, the regions whose removal at its "
        "step lowers its probability most (leave-one-out: one decoder step of L + 1 rows a word), drawn below the "
        "attention (--html: beside it, on hover) with the word's agreement (Kendall tau), and in the records as "
        "'evidence' and 'agreement'. Measured on the bundled model (benchmarks/evidence_cost.py, 1 thread): "
        "+0.5-0.6 s a photo, 2.5-2.7x the time of captioning it",
    )
    add_caption_unsure_options(p)
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
    p.add_argument(
        "--given",
        action="append",
        metavar="CAPTION",
        help="read this caption instead of writing one: per image, each word's probability given the words before it, "
        "and where the model looked for each word (--overlay, --html, --json); repeat it to rank several captions of "
        "each image, best first. The score is the mean log-probability of the words and the end (higher: fits "
        "better). Plain output: score<TAB>caption<TAB>each word's probability, then the end's (path<TAB> first with "
        "several images, a folder or -). Words the model does not know are read as <unk> (one note names them)",
    )
    p.add_argument(
        "--given-file",
        metavar="FILE",
        help="as --given, each image reading its own captions: FILE holds name<TAB>caption lines, read as "
        "caption-train reads its folder's (a CSV, a header line, Flickr30k's numbered captions, gzipped; Flickr8k's "
        "token file too), an image's captions found by its file name; an image FILE has "
        "none for is one error line (-: stdin, when the images are not on it)",
    )
    p.add_argument(
        "--references",
        metavar="FILE",
        help="score the captions written against people's: FILE holds name<TAB>caption lines (read as --given-file "
        "reads them), a photo's found by its file name. At the end, on stderr: coco-caption's BLEU-1 "
        "to 4, METEOR, ROUGE-L and CIDEr-D of the photos FILE names (with Java: its PTB tokenizer and METEOR, as "
        "published scores are computed; -: stdin, when the images are not on it)",
    )
    p.add_argument(
        "--scores",
        metavar="OUT",
        help="with --references: also write OUT, a JSON file of the scores and each photo's caption, references, "
        "BLEU-4 and CIDEr-D, the lowest CIDEr-D first",
    )
    p.add_argument("--seed", type=int, help="--demo shapes: the scene's seed (default: random; printed)")
    add_search_options(p)
    p.add_argument(
        "--batch-size",
        type=int,
        help=f"images captioned together (default: {BATCH}, fewer where this process may use under ~1.1 GiB of "
        "memory, a container's limit or what the machine has free: said in a note; with --device cuda, from the GPU's "
        "memory: 128 from 40 GiB, 64 from 16 GiB, else 32, not yet measured on a GPU); at most 65,536, and no more "
        "than the images to caption",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="processes decoding images ahead of the model (default: 2; with --device cuda, the cores less 2 shared "
        "by the --devices processes, 2 to 14, not yet measured on a GPU); no more than the batches to read",
    )
    add_device_options(p, "caption", "the batch and workers then suit it")
    p.add_argument(
        "--devices",
        type=int,
        help="caption with N processes on Lightning's predict loop (N GPUs with --device cuda, else N CPU "
        "processes; at most twice the machine's cores); needs --jsonl OUT: each process writes its part to OUT.parts/ "
        "and the first merges them into OUT, "
        "in input order, after the loop; progress: one bar on the first process counting every process's images (a "
        "line a minute when stderr is not a terminal). "
        "torchrun and SLURM launch it as they launch caption-train (docs/scale.md)",
    )
    p.add_argument("--num-nodes", type=int, default=1, help="with --devices: machines taking part (default: 1)")
    p.add_argument(
        "--decode-on-device",
        action="store_true",
        help="the loader's workers only read each baseline JPEG; the batch is decoded on --device (nvjpeg on a GPU) "
        "and squashed, JPEG-stepped and resized there, giving the CPU path's pixels (on a CPU, exactly: tested); "
        "other photos are prepared as usual. Not with --overlay or --html. Never measured on a GPU yet: off by "
        "default (docs/speed.md); on a CPU it is slower than the default",
    )
    p.add_argument(
        "--cuda-graphs",
        action="store_true",
        help="with --device cuda: search at fixed shapes (every beam stepped to the end) and replay each chunk of "
        "steps as a CUDA graph captured once per batch shape, instead of launching every step's kernels; the same "
        "captions (tested on the CPU). Never measured on a GPU yet: off by default (docs/speed.md)",
    )
    return p


# What `caption` holds on the CPU with the bundled Flickr8k model (measured in a memory cgroup, its 2 workers
# included: batch 16 peaked at 928 MB, batch 4 at ~700): the model, ONNX Runtime and the rest; then each batch photo
CPU_BASE, CPU_PER_PHOTO = 650 * 2**20, 24 * 2**20


def machine_defaults(
    device: str, processes: int, cores: int, gpu_bytes: int | None, room: int | None = None
) -> tuple[int, int]:
    """(--batch-size, --workers) when not given. On the CPU: BATCH and 2 (the model is the cost; more workers only
    take its cores), the batch smaller where the memory this process may use (``room``: text_attn.core.memory_room,
    a container's limit) holds fewer photos beside the model (a 768-900 MB container's OOM killer ended the default
    run, 0 captions, where --batch-size 4 ran). On a GPU (issue 65: the defaults ran at half the rate of batch 128 and
    14 workers on a 16-core H200 machine): a batch by the GPU's memory (``gpu_bytes``), and the cores less 2 (the main
    processes' own work) shared by the ``processes`` of a --devices run, at most 14 each. Chosen from that one run,
    not measured since."""
    if not device.startswith("cuda"):
        if room is None:
            return BATCH, 2
        fits = int((0.9 * room - CPU_BASE) // CPU_PER_PHOTO)  # 10% kept for what the estimate misses
        return max(1, min(BATCH, fits)), 2
    gib = (gpu_bytes or 0) / 2**30
    batch = 128 if gib >= 40 else 64 if gib >= 16 else 32
    return batch, max(2, min(14, (cores - 2) // max(1, processes)))


def fill_machine_defaults(args: argparse.Namespace) -> None:
    """--batch-size and --workers left unset: :func:`machine_defaults` for this machine (imports torch on a GPU)."""
    from text_attn.core.devices import resolve_device

    args.device = resolve_device(args.device)
    if args.batch_size is not None and args.workers is not None:
        return
    gpu = None
    if args.device.startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            index = torch.device(args.device).index or 0
            gpu = torch.cuda.get_device_properties(index).total_memory
    processes = args.devices or 1
    room = None
    if not args.device.startswith("cuda") and args.batch_size is None:
        from text_attn.core.memory_room import memory_room

        room = memory_room()
    batch, workers = machine_defaults(args.device, processes, os.cpu_count() or 1, gpu, room)
    if args.batch_size is None and batch < BATCH:
        print(f"caption: note: --batch-size {batch}, not {BATCH}: this process may use {room / 2**30:.2f} GiB of "
              f"memory (a container's limit, or what the machine has free), and a batch of {BATCH} would not fit "
              "beside the model; give --batch-size to choose", file=sys.stderr)  # fmt: skip
    args.batch_size = batch if args.batch_size is None else args.batch_size
    args.workers = workers if args.workers is None else args.workers
