"""Rehearse the paper path without the dataset: a Flickr8k-shaped corpus, then fit -> test -> export -> caption.

    python benchmarks/rehearse_flickr8k.py --out runs/rehearsal            # about 10 minutes on a 2-core CPU
    python benchmarks/rehearse_flickr8k.py --out runs/rehearsal --json rehearsal.json
    python benchmarks/rehearse_flickr8k.py --out /tmp/r --images 120 --max-time 00:00:01:00   # a smoke run

1. Corpus. Synthetic shape scenes (captioning.training.shapes) saved the way Flickr8k ships: JPEG files in
   OUT/Flicker8k_Dataset/ (Flickr8k's own folder name) and OUT/dataset_flickr8k.json in Karpathy's format
   ({"images": [{"filename", "split", "sentences": [{"tokens", "raw"}] x 5, ...}], "dataset": "flickr8k"}; Flickr
   entries have no "filepath"). Flickr8k's 6000 / 1000 / 1000 split, scaled: 75% / 12.5% / 12.5% of --images.
   A scene has 3 to 5 references; like Flickr8k every image gets 5 (cycling through the scene's). The corpus is
   written once: a second run with the same settings reuses it (and so the feature cache, keyed on the files).
2. The shipped configs/caption/flickr8k_resnet101_soft.yaml through the installed console scripts, exactly what a
   user types (each command is printed before it runs; its output goes to OUT/logs/<stage>.log):
     caption-train fit    the config with only paths, sizes, backbone, CPU and a time cap overridden (see
                          `overrides` below for each one and why)
     caption-train test   the best checkpoint (best-*.ckpt, highest val_Bleu_4) on the test split, beam 3
     caption-export       best checkpoint -> OUT/exported.pt
     caption              --json on --samples test images copied to OUT/sample_images/
   With --streaming, `caption-train optimize --features true` first writes the corpus as LitData chunks of the frozen
   encoder's features (OUT/chunks/), and fit and test stream them (--data.root OUT/chunks).
3. A markdown summary (stage, wall time, key numbers) and, with --json FILE, the same numbers as JSON.

Any stage that fails ends the rehearsal with one line naming it, then the last lines of its output; exit code 1.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _runs  # noqa: E402
from _runs import console_script  # noqa: E402

from text_attn.core.errors import new_file  # noqa: E402
from text_attn.core.safe_files import write_bytes, write_text  # noqa: E402

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "caption" / "flickr8k_resnet101_soft.yaml"
FLICKR_DIR = "Flicker8k_Dataset"  # sic: the folder name of the Flickr8k download
JSON_NAME = "dataset_flickr8k.json"
STAMP = "corpus_settings.json"  # written last: the corpus is complete and was made with these settings
SENTENCES = 5  # per image, as in Flickr8k
TAIL = 25  # lines of a failed stage's output shown


class StageError(_runs.StageError):
    """A stage failed; the message is one line, ``tail`` the end of its output."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        lines = [ln for ln in output.replace("\r", "\n").splitlines() if ln.strip()]  # progress bars use \r
        self.tail = "\n".join(lines[-TAIL:])


# --- the corpus -------------------------------------------------------------------------------------------------------
def split_sizes(n: int, val: int | None = None, test: int | None = None) -> tuple[int, int, int]:
    """(train, val, test) for n images: Flickr8k's 6000 / 1000 / 1000 proportions unless val / test are given."""
    val = round(n / 8) if val is None else val
    test = round(n / 8) if test is None else test
    if min(val, test) < 1 or n - val - test < 1:
        raise ValueError(f"{n} images cannot make train, val ({val}) and test ({test}) splits")
    return n - val - test, val, test


def write_corpus(out: Path, sizes: tuple[int, int, int], seed: int, scene_size: int, max_objects: int) -> bool:
    """Write (or keep) the Flickr8k-shaped corpus under out; True when it was written, False when reused."""
    from captioning.training.shapes import make_scenes

    settings = {
        "splits": dict(zip(("train", "val", "test"), sizes, strict=True)),
        "seed": seed,
        "scene_size": scene_size,
        "max_objects": max_objects,
        "sentences": SENTENCES,
    }
    stamp, json_path, image_dir = out / STAMP, out / JSON_NAME, out / FLICKR_DIR
    if stamp.is_file() and json_path.is_file():
        try:
            same = json.loads(stamp.read_text()) == settings
        except json.JSONDecodeError:
            same = False
        if same:
            names = [im["filename"] for im in json.loads(json_path.read_text())["images"]]
            if all((image_dir / name).is_file() for name in names):
                return False
    stamp.unlink(missing_ok=True)
    if image_dir.exists():
        shutil.rmtree(image_dir)  # only what an earlier rehearsal wrote here: no stale images stay behind
    image_dir.mkdir(parents=True)
    split_of = ["train"] * sizes[0] + ["val"] * sizes[1] + ["test"] * sizes[2]
    images, sent_id = [], 0
    for i, scene in enumerate(make_scenes(len(split_of), seed, scene_size, max_objects)):
        name = f"{1000000 + i}_shapes{seed}.jpg"  # Flickr8k-like names: <number>_<id>.jpg
        scene.image.save(image_dir / name, "JPEG", quality=90)
        sentences = []
        for k in range(SENTENCES):  # the scene's 3 to 5 references, cycled to Flickr8k's 5 per image
            tokens = scene.captions[k % len(scene.captions)]
            raw = " ".join(tokens).capitalize() + " ."  # Flickr's raw sentences: capitalised, spaced full stop
            sentences.append({"tokens": tokens, "raw": raw, "imgid": i, "sentid": sent_id})
            sent_id += 1
        images.append(
            {
                "filename": name,
                "imgid": i,
                "split": split_of[i],
                "sentids": [s["sentid"] for s in sentences],
                "sentences": sentences,
            }
        )
    json_path.write_text(json.dumps({"images": images, "dataset": "flickr8k"}))
    stamp.write_text(json.dumps(settings))
    return True


# --- running the console scripts --------------------------------------------------------------------------------------
def run_stage(stage: str, cmd: list[str], logs: Path, stdout: Path | None = None) -> tuple[str, float]:
    """Run cmd (printed first, as a user would type it) with its output in logs/<stage>.log, or only its stderr
    there when its stdout goes to the file `stdout`; returns (that log's or that file's text, seconds)."""
    shown = [Path(cmd[0]).name, *cmd[1:]]
    print(f"\n[{stage}] $ {shlex.join(shown)}", flush=True)
    log = logs / f"{stage}.log"
    t0 = time.perf_counter()
    with log.open("w") as err:  # written as it runs: `tail -f` it to watch
        if stdout is None:
            code = subprocess.run(cmd, stdout=err, stderr=subprocess.STDOUT).returncode
        else:
            with stdout.open("w") as out:
                code = subprocess.run(cmd, stdout=out, stderr=err).returncode
    seconds = time.perf_counter() - t0
    text = log.read_text(errors="replace")
    if code != 0:
        raise StageError(f"stage {stage!r} failed (exit code {code} after {seconds:.0f} s); full output: {log}", text)
    print(f"[{stage}] done in {_duration(seconds)} (output: {stdout or log})", flush=True)
    return (stdout.read_text() if stdout else text), seconds


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


# --- reading what the stages left ------------------------------------------------------------------------------------
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


def printed_metrics(text: str, prefix: str) -> dict[str, float]:
    """Metrics from Lightning's printed results table (rich box or plain text): {"Bleu_4": 0.61, ...}."""
    found = {}
    for m in re.finditer(rf"\b{prefix}_([A-Za-z0-9_]+)[\s│┃|]+{_NUMBER}", text):
        found[m.group(1)] = float(m.group(2))
    return found


def encoding_note(text: str) -> str | None:
    """'N images in MM:SS' from the last finished 'caching image features' progress bar in a log, if any."""
    bars = re.findall(r"caching image features: 100%\|[^|]*\| (\d+)/\d+ \[([\d:]+)<", text)
    if not bars:
        return None
    n, elapsed = bars[-1]
    return f"{n} images encoded in {elapsed}"


def fit_history(version_dir: Path) -> list[dict[str, float]]:
    """The rows of a run's metrics.csv (written by the default loggers, text_attn.core.lightning_cli), as floats."""
    path = version_dir / "metrics.csv"
    if not path.is_file():
        return []
    rows = []
    with path.open() as f:
        for row in csv.DictReader(f):
            vals = {k: float(v) for k, v in row.items() if v not in ("", None)}
            rows.append(vals)
    return rows


def new_checkpoints(run_dir: Path, pattern: str, since: float) -> list[Path]:
    """Checkpoints matching pattern under run_dir written after `since` (a rehearsal may reuse OUT), newest last."""
    found = [p for p in run_dir.glob(f"**/checkpoints/{pattern}") if p.stat().st_mtime >= since]
    return sorted(found, key=lambda p: p.stat().st_mtime)


def _progress(path: Path) -> tuple[int | None, int | None]:
    """(global step, epoch) stored in a checkpoint."""
    import torch

    ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    return ckpt.get("global_step"), ckpt.get("epoch")


def fit_numbers(best: Path, log: str) -> dict:
    """Steps and epochs reached (last.ckpt: the config saves it at the end), the best validation scores (the fit's
    metrics.csv, else the checkpoint's name) and the encoding time (the progress bar in the log)."""
    out = {"best_checkpoint": str(best)}
    out["best_step"], out["best_epoch"] = _progress(best)
    last = best.parent / "last.ckpt"
    out["steps"], epoch = _progress(last) if last.is_file() else (None, None)
    rows = fit_history(best.parent.parent)
    val = [r for r in rows if "val_Bleu_4" in r]
    out["validations"] = len(val)
    # Epochs as a fraction (max_time stops mid-epoch): the first validation comes at the end of epoch 0.
    first = [r["step"] for r in val if r.get("epoch") == 0]
    out["steps_per_epoch"] = int(first[0]) + 1 if first else None
    out["epochs"] = out["steps"] / out["steps_per_epoch"] if out["steps"] and first else epoch
    if val:
        top = max(val, key=lambda r: r["val_Bleu_4"])
        out["val"] = {k[4:]: v for k, v in top.items() if k.startswith("val_")}
    else:
        m = re.search(r"val_Bleu_4=" + _NUMBER, best.name)
        out["val"] = {"Bleu_4": float(m.group(1))} if m else {}
    out["features"] = encoding_note(log) or "features loaded from the cache"
    return out


# --- the rehearsal ----------------------------------------------------------------------------------------------------
def overrides(args: argparse.Namespace, out: Path) -> list[str]:
    """What changes from the shipped config, each for a reason; everything else is the config's."""
    run = out / "run"
    return [
        # paths: the corpus just written, and where this run's logs, checkpoints, feature cache and model go
        *("--data.karpathy_json", str(out / JSON_NAME), "--data.image_root", str(out / FLICKR_DIR)),
        *("--trainer.default_root_dir", str(run), "--model.export_path", str(run / "model.pt")),
        # sizes: min_freq 5 trims Flickr8k's long tail; the scenes' 25 words have none, but a small --images
        # corpus may see a word fewer than 5 times and would turn it into <unk>. 2 loader workers for 2 cores, not 8
        *("--data.min_freq", "1", "--data.num_workers", str(args.num_workers)),
        # backbone: ResNet-101's ImageNet weights cannot be downloaded here; EfficientNet-Lite0's ship offline.
        # At 224 px its stride-32 map is 7 x 7 (the config's 448 px ResNet gives 14 x 14). The config's grid 14
        # would only replicate every cell 2 x 2 (adaptive pooling): 4x the regions, the cache and the attention
        # work with no new information, so the grid follows the map: 7 x 7 = 49 regions of 1280 features.
        *("--model.encoder.backbone", "efficientnet_lite0", "--model.encoder.weights", "imagenet"),
        *("--model.encoder.image_size", str(args.image_size), "--model.encoder.grid", str(args.grid)),
        # CPU: on 2 cores shared with other work one torch thread is faster than two (module doc of cpu_threads)
        *("--trainer.accelerator", "cpu", "--model.cpu_threads", str(args.cpu_threads)),
        # time cap: the config's 30 epochs would take hours here (the Timer starts after feature caching)
        *("--trainer.max_time", args.max_time),
    ]


def rehearse(args: argparse.Namespace) -> dict:
    if not Path(args.config).is_file():
        raise ValueError(f"config {args.config} does not exist")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    logs = out / "logs"
    logs.mkdir(exist_ok=True)
    if args.fresh and (out / "run").exists():
        shutil.rmtree(out / "run")
    summary: dict = {"out": str(out), "config": str(args.config), "stages": {}}
    stages = summary["stages"]
    t_all = time.perf_counter()

    # 1. corpus
    sizes = split_sizes(args.images, args.val, args.test)
    t0 = time.perf_counter()
    print(f"[corpus] {out / JSON_NAME} + {out / FLICKR_DIR}/: {sum(sizes)} images, train/val/test {sizes}", flush=True)
    written = write_corpus(out, sizes, args.seed, args.scene_size, args.max_objects)
    seconds = time.perf_counter() - t0
    print(f"[corpus] {'written' if written else 'already there with these settings: reused'} ({seconds:.0f} s)")
    stages["corpus"] = {
        "seconds": seconds,
        "images": sum(sizes),
        "splits": dict(zip(("train", "val", "test"), sizes, strict=True)),
        "written": written,
    }

    common = ["--config", str(args.config), *overrides(args, out)]
    if args.streaming:
        # 1b. the corpus as LitData chunks holding the frozen encoder's features (the same options as fit); fit and
        # test then stream them (--data.root: a chunk folder is recognised by its streaming.json)
        chunks = out / "chunks"
        cmd = [console_script("caption-train"), "optimize", *common, "--out", str(chunks), "--features", "true"]
        log, seconds = run_stage("optimize", cmd, logs)
        stages["optimize"] = {"seconds": seconds, "chunks": str(chunks),
                              "mib": sum(f.stat().st_size for f in chunks.rglob("*.bin")) / 2**20}  # fmt: skip
        common += ["--data.root", str(chunks)]

    # 2a. fit
    started = time.time() - 1  # file times may be coarse
    # METEOR's Java start costs ~9 s per validation: off in validation (the checkpoint monitors val_Bleu_4),
    # on in test, once.
    cmd = [console_script("caption-train"), "fit", *common, "--model.val_meteor", "false"]
    log, seconds = run_stage("fit", cmd, logs)
    best = new_checkpoints(out / "run", "best-*.ckpt", started)
    if not best:
        raise StageError(
            "stage 'fit' wrote no best-*.ckpt: no validation finished within --max-time (raise it or lower --images)",
            log,
        )
    best = best[-1]
    stages["fit"] = {"seconds": seconds, "max_time": args.max_time, **fit_numbers(best, log)}
    if args.streaming:
        stages["fit"]["features"] = "features streamed from the chunks"

    # 2b. test with beam 3 (METEOR on: once is affordable)
    cmd = [console_script("caption-train"), "test", *common, "--ckpt_path", str(best)]
    cmd += ["--model.val_beam_size", str(args.beam_size), "--model.val_meteor", "true"]
    log, seconds = run_stage("test", cmd, logs)
    test = printed_metrics(log, "test")
    if "Bleu_4" not in test:
        raise StageError("stage 'test' printed no test_Bleu_4 in its results table", log)
    stages["test"] = {"seconds": seconds, "beam_size": args.beam_size, "metrics": test}
    note = encoding_note(log)
    if note:
        stages["test"]["features"] = note

    # 2c. export
    exported = out / "exported.pt"
    log, seconds = run_stage("export", [console_script("caption-export"), str(best), str(exported)], logs)
    params = re.search(r"([\d.]+)M parameters", log)
    stages["export"] = {
        "seconds": seconds,
        "file": str(exported),
        "mib": exported.stat().st_size / 2**20,
        "parameters_m": float(params.group(1)) if params else None,
    }

    # 2d. caption a folder of test images (caption takes files, not a folder: the shell's glob, spelled out)
    corpus = json.loads((out / JSON_NAME).read_text())["images"]
    refs = {im["filename"]: [" ".join(s["tokens"]) for s in im["sentences"]] for im in corpus}
    samples = out / "sample_images"
    if samples.exists():
        shutil.rmtree(samples)
    samples.mkdir()
    chosen = [im["filename"] for im in corpus if im["split"] == "test"][: args.samples]
    for name in chosen:
        write_bytes(samples / name, (out / FLICKR_DIR / name).read_bytes())
    files = [str(samples / name) for name in chosen]
    cmd = [console_script("caption"), *files, "--model", str(exported), "--json"]
    found = logs / "caption.json"
    text, seconds = run_stage("caption", cmd, logs, stdout=found)
    try:
        records = json.loads(text)
    except json.JSONDecodeError:
        raise StageError(f"stage 'caption' printed no JSON list (its output: {found})", text) from None
    captioned = [r for r in records if r.get("caption")]
    exact = sum(r["caption"] in set(refs[Path(r["image"]).name]) for r in captioned)
    stages["caption"] = {
        "seconds": seconds,
        "images": len(files),
        "captioned": len(captioned),
        "exact_match": exact,
        "examples": [
            {"image": r["image"], "caption": r["caption"], "references": sorted(set(refs[Path(r["image"]).name]))}
            for r in captioned
        ],
    }
    if len(captioned) != len(files):
        raise StageError(f"stage 'caption' captioned {len(captioned)} of {len(files)} images", text)
    summary["total_seconds"] = time.perf_counter() - t_all
    return summary


def _f(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def print_summary(s: dict) -> None:
    st = s["stages"]
    print("\nExample captions (exported model, beam 3):")
    for ex in st["caption"]["examples"][:3]:
        print(f"  {Path(ex['image']).name}")
        print(f"    caption:    {ex['caption']}")
        for k, ref in enumerate(ex["references"]):
            print(f"    {'references:' if k == 0 else '':<11} {ref}")
    c, f, t, e, cap = st["corpus"], st["fit"], st["test"], st["export"], st["caption"]
    sp = c["splits"]
    val, tm = f.get("val", {}), t["metrics"]
    meteor = f", METEOR {_f(tm['METEOR'])}" if "METEOR" in tm else ""
    rows = [
        (
            "corpus",
            c["seconds"],
            f"{c['images']} JPEGs + Karpathy JSON, train/val/test {sp['train']}/{sp['val']}/{sp['test']}, "
            f"{SENTENCES} sentences each" + ("" if c["written"] else " (reused)"),
        ),
        (
            "fit",
            f["seconds"],
            f"{f['features']}; {f['steps']} steps ({_f(f['epochs'], 1)} epochs), {f['validations']} "
            f"validations in max_time {f['max_time']}; best (epoch {f['best_epoch']}): val BLEU-4 "
            f"{_f(val.get('Bleu_4'))}, CIDEr {_f(val.get('CIDEr'))} (greedy)",
        ),
        (
            "test",
            t["seconds"],
            f"beam {t['beam_size']}: BLEU-4 {_f(tm['Bleu_4'])}, CIDEr {_f(tm.get('CIDEr'))}{meteor}, "
            f"BLEU-1 {_f(tm.get('Bleu_1'))}, ROUGE-L {_f(tm.get('ROUGE_L'))}",
        ),
        *(
            [("optimize", st["optimize"]["seconds"], f"feature chunks, {st['optimize']['mib']:.0f} MiB (streamed)")]
            if "optimize" in st
            else []
        ),
        ("export", e["seconds"], f"exported.pt {e['mib']:.1f} MiB, {_f(e['parameters_m'], 2)}M parameters"),
        (
            "caption",
            cap["seconds"],
            f"{cap['captioned']}/{cap['images']} images captioned; {cap['exact_match']} word for word a reference",
        ),
    ]
    print("\n| stage | wall time | result |\n|---|---|---|")
    for name, seconds, text in rows:
        print(f"| {name} | {_duration(seconds)} | {text} |")
    print(f"| **total** | **{s['total_seconds'] / 60:.1f} min** | |")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="rehearse_flickr8k.py",
        description="Rehearse the Flickr8k paper path on a CPU without the dataset: write a Flickr8k-shaped corpus "
        "of shape scenes (Karpathy JSON + JPEGs), then run the shipped flickr8k config through caption-train fit, "
        "caption-train test (beam 3), caption-export and caption, and print a summary.",
    )
    p.add_argument(
        "--out", default="runs/rehearsal", help="folder for the corpus, the run and the logs (default: %(default)s)"
    )
    p.add_argument(
        "--images", type=int, default=1600, help="corpus images (train/val/test 75/12.5/12.5%%) (default: %(default)s)"
    )
    p.add_argument("--val", type=int, help="val images (default: images / 8)")
    p.add_argument("--test", type=int, help="test images (default: images / 8)")
    p.add_argument("--scene-size", type=int, default=224, help="JPEG side in pixels (default: %(default)s)")
    p.add_argument("--max-objects", type=int, default=3, help="shapes per scene, 1..4 (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="scene seed (default: %(default)s)")
    p.add_argument(
        "--max-time",
        default="00:00:04:00",
        help="fit's trainer.max_time (DD:HH:MM:SS), encoding excluded (default: %(default)s)",
    )
    p.add_argument(
        "--image-size",
        type=int,
        default=224,
        help="network input side (model.encoder.image_size) (default: %(default)s)",
    )
    p.add_argument(
        "--grid",
        type=int,
        default=7,
        help="model.encoder.grid: regions per side (7 = the 7 x 7 map at 224 px) (default: %(default)s)",
    )
    p.add_argument("--cpu-threads", type=int, default=1, help="model.cpu_threads (default: %(default)s)")
    p.add_argument("--num-workers", type=int, default=2, help="data.num_workers (default: %(default)s)")
    p.add_argument("--beam-size", type=int, default=3, help="beam width for test (default: %(default)s)")
    p.add_argument(
        "--samples", type=int, default=8, help="test images captioned with the exported model (default: %(default)s)"
    )
    p.add_argument("--config", type=Path, default=CONFIG, help="the config rehearsed (default: %(default)s)")
    p.add_argument("--fresh", action="store_true", help="delete OUT/run (checkpoints, feature cache) first")
    p.add_argument(
        "--streaming",
        action="store_true",
        help="write the corpus as LitData feature chunks (caption-train optimize --features true) and stream them "
        "in fit and test (docs/scale.md)",
    )
    p.add_argument("--json", metavar="FILE", type=new_file, help="also write the summary as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        summary = rehearse(args)
    except (_runs.StageError, ValueError) as err:  # a stage's (with its output's tail), or _runs.console_script's
        print(f"\nrehearsal: error: {err}", file=sys.stderr)
        if getattr(err, "tail", ""):
            print(err.tail, file=sys.stderr)
        return 1
    print_summary(summary)
    if args.json:
        write_text(args.json, json.dumps(summary, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
