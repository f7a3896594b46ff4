"""Do streamed chunks train as well as the folder? The same short run, several seeds, each reader (issue 59).

    python benchmarks/streaming_scores.py --out runs/stream_scores                      # about 40 minutes on 2 cores
    python benchmarks/streaming_scores.py --out /tmp/s --images 200 --seeds 0 1 --max-steps 20   # a smoke run
    python benchmarks/streaming_scores.py --flickr8k-root ../shared/data/flickr8k --out runs/sort_real --seeds 0 1

The rehearsal corpus (benchmarks/rehearse_flickr8k.py: Flickr8k-shaped shape scenes, Karpathy JSON + JPEGs) is
written once, then `caption-train optimize --features true` turns it into LitData chunks of the frozen encoder's
float16 features. For each seed, `caption-train fit` runs the shipped flickr8k config (rehearse_flickr8k.py's
overrides: EfficientNet-Lite0, 7 x 7 regions, CPU) with the same `--seed_everything` / `--data.seed` and the same
`--trainer.max_steps`, once per reader:
- folder: the Karpathy JSON and the feature cache, batches of similar caption length (the default);
- random: the same with `--data.sort_by_length false`: batches of pairs drawn at random;
- chunks: streaming the feature chunks (`--data.root`): batches of pairs drawn at random, by LitData.
The samples, vocabulary, features, steps and evaluation are the same (tests/cli/test_streaming.py checks the samples);
the same seed gives other batches in each. The table gives each run's last validation (greedy BLEU-4 and CIDEr on the
whole val split, at the same step), the mean and standard deviation over seeds per reader, and the difference of
the means against its standard error. A run finished by an earlier call is kept (the call adds what is missing).

``--flickr8k-root DIR``: real photos instead, for the question the rehearsal corpus leaves open (does batching by
caption length cost real captions what it cost the scenes?): the shipped configs/caption/flickr8k_lite2_soft.yaml as
it is (EfficientNet-Lite2, its photos encoded once into the shared feature cache), readers folder and random, 1,407
steps a run by default (3 epochs of Flickr8k's 30,000 pairs at batch 64: the last validation is the run's end), and
each run's training steps a second beside its scores (sorted batches hold less padding).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
from pathlib import Path

from rehearse_flickr8k import (
    CONFIG,
    StageError,
    console_script,
    fit_history,
    overrides,
    run_stage,
    split_sizes,
    write_corpus,
)

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text

# reader -> what it adds to the fit command (CHUNKS: the chunk folder; CACHE: the shared feature cache)
READERS = {
    "folder": ["--data.feature_cache_dir", "CACHE"],
    "random": ["--data.feature_cache_dir", "CACHE", "--data.sort_by_length", "false"],
    "chunks": ["--data.root", "CHUNKS"],
}
TITLES = {
    "folder": "folder + feature cache",
    "random": "the same, sort_by_length false",
    "chunks": "feature chunks",
}


REAL_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "caption" / "flickr8k_lite2_soft.yaml"
REAL_STEPS = 1407  # 3 epochs of Flickr8k's 30,000 train pairs at batch 64 (469 batches each)


def steps_a_second(run: Path, log: Path) -> float | None:
    """Training steps a second over a fit's logged training (TensorBoard's wall times of its first and last
    train_loss; validation and the feature cache's encoding fall outside them but for the validations between); a
    run too short to log two (fewer than 2 x log_every_n_steps steps): the rate of the fit's last progress line in
    ``log`` (from its first step, the validations included)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for version in sorted(run.glob("lightning_logs/version_*")):
        acc = EventAccumulator(str(version))
        acc.Reload()
        if "train_loss" in acc.Tags()["scalars"]:
            rows = acc.Scalars("train_loss")
            if len(rows) > 1 and rows[-1].wall_time > rows[0].wall_time:
                return (rows[-1].step - rows[0].step) / (rows[-1].wall_time - rows[0].wall_time)
    said = re.findall(r"([0-9.]+) steps/s", log.read_text(errors="replace")) if log.is_file() else []
    return float(said[-1]) if said else None


def validations(run: Path) -> list[dict[str, float]]:
    """Every validation a fit logged (metrics.csv rows holding val_Bleu_4), in order."""
    return [r for v in sorted(run.glob("**/metrics.csv")) for r in fit_history(v.parent) if "val_Bleu_4" in r]


def last_validation(run: Path) -> dict[str, float] | None:
    """The last row of a fit's metrics.csv that holds validation scores (None: no validation logged)."""
    rows = validations(run)
    if not rows:
        return None
    return {k[4:]: v for k, v in rows[-1].items() if k.startswith("val_")} | {"step": rows[-1].get("step", -1)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="streaming_scores.py",
        description="Train the shipped flickr8k config on the rehearsal corpus from its folder and from feature "
        "chunks, with the same seeds and steps, and compare the val scores against the seed-to-seed spread.",
    )
    p.add_argument("--out", default="runs/stream_scores", help="corpus, chunks, runs and logs (default: %(default)s)")
    p.add_argument("--images", type=int, default=800, help="corpus images, 75/12.5/12.5%% (default: %(default)s)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3], help="training seeds (default: 0 1 2 3)")
    p.add_argument(
        "--readers", nargs="+", choices=list(READERS), default=list(READERS), help="default: all (%(default)s)"
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=141,
        help="optimizer steps a run (141: 3 epochs at 800 images) (default: %(default)s)",
    )
    p.add_argument("--cpu-threads", type=int, default=1, help="model.cpu_threads (default: %(default)s)")
    p.add_argument(
        "--flickr8k-root",
        metavar="DIR",
        help="real Flickr8k photos (Flicker8k_Dataset/ and Flickr8k_text/) instead of the rehearsal corpus: the "
        f"shipped flickr8k_lite2_soft config, readers folder and random, {REAL_STEPS} steps a run unless "
        "--max-steps",
    )
    p.add_argument("--json", metavar="FILE", type=new_file, help="also write the numbers as JSON")
    args = p.parse_args(argv)
    if args.flickr8k_root is not None:
        if not (Path(args.flickr8k_root) / "Flickr8k_text").is_dir():
            p.error(f"--flickr8k-root {args.flickr8k_root}: no Flickr8k_text/ there (Flickr8k as downloaded)")
        if "chunks" in args.readers:  # the default: all; chunks of real photos are not what this asks
            args.readers = [r for r in args.readers if r != "chunks"]
        if not args.readers:
            p.error("--flickr8k-root compares the folder's readers: give --readers folder random")
        if "--max-steps" not in (argv if argv is not None else sys.argv[1:]):
            args.max_steps = REAL_STEPS
    # what rehearse_flickr8k.overrides reads besides these
    args.image_size, args.grid, args.num_workers, args.max_time = 224, 7, 0, "00:12:00:00"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out).resolve()
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    chunks = out / "chunks"
    if args.flickr8k_root is not None:  # the shipped config as it is, on the photos given
        common = ["--config", str(REAL_CONFIG), "--data.root", str(Path(args.flickr8k_root).resolve()),
                  "--trainer.max_time", "null", "--model.cpu_threads", str(args.cpu_threads)]  # fmt: skip
        print(f"[corpus] {args.flickr8k_root}: Flickr8k's photos, the shipped {REAL_CONFIG.name}", flush=True)
    else:
        sizes = split_sizes(args.images)
        print(f"[corpus] {out}: {sum(sizes)} images, train/val/test {sizes}", flush=True)
        write_corpus(out, sizes, 0, 224, 3)
        common = ["--config", str(CONFIG), *overrides(args, out)]
    try:
        if "chunks" in args.readers:
            cmd = [console_script("caption-train"), "optimize", *common, "--out", str(chunks), "--features", "true"]
            run_stage("optimize", cmd, logs)
        results: dict[str, list[dict]] = {r: [] for r in args.readers}
        for seed in args.seeds:
            for reader in args.readers:
                run = out / f"{reader}_seed{seed}"
                done = last_validation(run)
                if done is not None and done["step"] >= args.max_steps - 1:  # finished by an earlier call: kept
                    print(f"[fit_{reader}_seed{seed}] finished earlier: kept ({run})")
                    rate = steps_a_second(run, logs / f"fit_{reader}_seed{seed}.log")
                    results[reader].append(done | {"seed": seed, "steps_s": rate})
                    continue
                shutil.rmtree(run, ignore_errors=True)
                cmd = [console_script("caption-train"), "fit", *common, "--model.val_meteor", "false"]
                cmd += ["--seed_everything", str(seed), "--data.seed", str(seed)]
                cmd += ["--trainer.max_steps", str(args.max_steps), "--trainer.default_root_dir", str(run)]
                cmd += ["--model.export_path", str(run / "model.pt")]
                # one feature cache for every folder run: the images are encoded once
                paths = {"CHUNKS": str(chunks), "CACHE": str(out / "feature_cache")}
                cmd += [paths.get(a, a) for a in READERS[reader]]
                run_stage(f"fit_{reader}_seed{seed}", cmd, logs)
                scores = last_validation(run)
                if scores is None:
                    raise StageError(f"{run}: the fit logged no validation (raise --max-steps)")
                rate = steps_a_second(run, logs / f"fit_{reader}_seed{seed}.log")
                results[reader].append(scores | {"seed": seed, "steps_s": rate})
    except StageError as err:
        print(f"streaming_scores: error: {err}", file=sys.stderr)
        if getattr(err, "tail", ""):
            print(err.tail[-3000:], file=sys.stderr)
        return 1
    print_table(results, args)
    if args.json:
        said = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}  # --json is a Path (new_file)
        write_text(args.json, json.dumps({"args": said, "results": results}, indent=1) + "\n")
    return 0


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _spread(xs: list[float]) -> str:
    sd = statistics.stdev(xs) if len(xs) > 1 else float("nan")
    return f"{statistics.mean(xs):.3f} ± {sd:.3f}"


def print_equal_time(results: dict[str, list[dict]], out: Path) -> None:
    """Per seed, random batches at the training time the sorted run took: the step their speed reaches in it, and
    their validation nearest that step (validations come once an epoch)."""
    print("\nat the sorted run's training time (random batches are slower: fewer steps in it):")
    for sorted_run, random_run in zip(results["folder"], results["random"], strict=True):
        if not (sorted_run.get("steps_s") and random_run.get("steps_s")):
            continue
        step = round(sorted_run["step"] * random_run["steps_s"] / sorted_run["steps_s"])
        rows = validations(out / f"random_seed{random_run['seed']}")
        near = min(rows, key=lambda r: abs(r["step"] - step)) if rows else None
        if near is None:
            continue
        print(f"- seed {random_run['seed']}: sorted BLEU-4 / CIDEr {sorted_run['Bleu_4']:.3f} / "
              f"{sorted_run['CIDEr']:.3f} at step {sorted_run['step']:.0f}; random reach step {step} in that time, "
              f"their validation nearest it (step {near['step']:.0f}): {near['val_Bleu_4']:.3f} / "
              f"{near['val_CIDEr']:.3f}")  # fmt: skip


def print_table(results: dict[str, list[dict]], args: argparse.Namespace) -> None:
    readers = list(results)
    real = args.flickr8k_root is not None
    corpus = "Flickr8k's photos (real)" if real else f"rehearsal corpus, {args.images} images"
    print(f"\n{corpus}; {args.max_steps} steps a run; val split, greedy, last validation")
    speed = " / steps a second" if real else ""
    print("\n| seed | " + " | ".join(f"{TITLES[r]}: BLEU-4 / CIDEr{speed}" for r in readers) + " |")
    print("|---|" + "---|" * len(readers))
    for i, seed in enumerate(args.seeds):
        cells = [f"{results[r][i]['Bleu_4']:.3f} / {results[r][i]['CIDEr']:.3f}" for r in readers]
        if real:
            cells = [f"{c} / {_rate(results[r][i].get('steps_s'))}" for c, r in zip(cells, readers, strict=True)]
        print(f"| {seed} | " + " | ".join(cells) + " |")
    for metric in ("Bleu_4", "CIDEr"):
        print(f"| mean ± sd {metric} | " + " | ".join(_spread([x[metric] for x in results[r]]) for r in readers) + " |")
    if real and {"folder", "random"} <= set(results):
        print_equal_time(results, Path(args.out).resolve())
    if len(args.seeds) < 2:
        return
    # the chunks against each folder reader; without chunks, random batches against length-sorted ones
    base = "chunks" if "chunks" in results else "random" if {"folder", "random"} <= set(results) else None
    if base is None:
        return
    for other in (r for r in readers if r != base):
        for metric in ("Bleu_4", "CIDEr"):
            a = [x[metric] for x in results[other]]
            b = [x[metric] for x in results[base]]
            # the standard error of a difference of two means of n runs each
            se = ((statistics.variance(a) + statistics.variance(b)) / len(a)) ** 0.5
            diff = statistics.mean(b) - statistics.mean(a)
            print(f"{metric}: {TITLES[base]} - {TITLES[other]} = {diff:+.3f}, standard error {se:.3f} "
                  f"({abs(diff) / se if se else float('inf'):.1f} of them)")  # fmt: skip


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
