r"""Flickr8k benchmark: train the shipped configs on the real data, score the model files on the 1,000 test photos.

    python benchmarks/flickr8k.py --data-root ../shared/data/flickr8k   # the table of docs/results.md
    python benchmarks/flickr8k.py --data-root ../shared/data/flickr8k --json docs/flickr8k.json --bundle
    python benchmarks/flickr8k.py --data-root ../shared/data/flickr8k --quick --out /tmp/f8k   # a smoke run (~5 min)
    python benchmarks/flickr8k.py --data-root ../shared/data/flickr8k --out runs/f8k_lite0 -- \
        --model.encoder.backbone efficientnet_lite0 --model.encoder.image_size 224 --model.encoder.grid 7

Stages, each a console script a user would type (printed before it runs; output in OUT/logs/<stage>.log):
  soft       caption-train fit configs/caption/flickr8k_lite2_soft.yaml       cross-entropy, soft attention
  scst       caption-train fit configs/caption/flickr8k_lite2_soft_scst.yaml  self-critical (CIDEr-D + BLEU-4) from soft
  hard       caption-train fit configs/caption/flickr8k_lite2_hard.yaml       cross-entropy + REINFORCE, hard attention
  hard_scst  caption-train fit configs/caption/flickr8k_lite2_hard_scst.yaml  the same self-critical stage, from hard
  finetune   caption-train fit configs/caption/flickr8k_lite2_finetune.yaml   the encoder's last stage too, from soft
  finetune_scst  ... flickr8k_lite2_finetune_scst.yaml                         self-critical, that encoder frozen
A stage whose fit saved its weights every few steps (scst, hard_scst) then gets checkpoint averaging, chosen on val
(benchmarks/checkpoint_averaging.py: the best checkpoint or the mean of the last 2 / 3 / 4 / 6; its minutes count in
the stage's). A stage whose model file OUT/<stage>/model.pt exists is not trained again (or --retrain). All stages share
one feature cache (OUT/feature_cache): the photos are encoded once. Then per model:
  caption-export --half --encoder-from-package      the model file a user gets (float16; the encoder from its package)
  caption - --beam-size 1 / 3 / 5 --jsonl ...       the 1,000 test photos captioned as a user would, timed (images/s)
and the coco-caption metrics of those captions against the 5 references (pycocoevalcap: its PTB tokenizer, BLEU,
METEOR, ROUGE-L, CIDEr; METEOR and the tokenizer run in Java). Test photos are never used for training or selection:
checkpoints are chosen on val. ``--tune``: each model's beam width and length penalty are chosen on the val photos
(benchmarks/tune_caption_decoding.py, recorded in the model file, so ``caption`` uses them by default), and the test
photos are captioned with them too (the "tuned" rows: ``caption`` without --beam-size).

Prints the table with Xu et al. (2015)'s Flickr8k rows, the stage times and images/s; ``--json`` writes the numbers;
``--bundle`` copies the chosen model (of soft and scst, the one with the higher validation CIDEr: never chosen on
test) with its scores into captioning/assets/flickr8k_soft.pt.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _runs import StageError, best_logged, console_script, run_stage
from _tuning import HARD_NAMES, run_tuner

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_bytes, write_text

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs" / "caption"
BUNDLED = ROOT / "captioning" / "assets" / "flickr8k_soft.pt"
STAGES = {  # stage -> (config, first stage it starts from)
    "soft": ("flickr8k_lite2_soft.yaml", None),
    "scst": ("flickr8k_lite2_soft_scst.yaml", "soft"),
    "hard": ("flickr8k_lite2_hard.yaml", None),
    "hard_scst": ("flickr8k_lite2_hard_scst.yaml", "hard"),
    "finetune": ("flickr8k_lite2_finetune.yaml", "soft"),
    "finetune_scst": ("flickr8k_lite2_finetune_scst.yaml", "finetune"),
}
METRICS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr")
# Xu et al. 2015, Table 1, Flickr8k (BLEU and METEOR x 100; CIDEr not reported).
PAPER = {
    "Xu et al. 2015, soft attention": {"Bleu_1": 67, "Bleu_2": 44.8, "Bleu_3": 29.9, "Bleu_4": 19.5, "METEOR": 18.93},
    "Xu et al. 2015, hard attention": {"Bleu_1": 67, "Bleu_2": 45.7, "Bleu_3": 31.4, "Bleu_4": 21.3, "METEOR": 20.30},
}
# --quick: a few minutes end to end, to check that every stage runs (its scores mean nothing).
QUICK = [
    "--data.train_size", "300", "--data.val_size", "50", "--trainer.max_time", "00:00:01:30",
    "--trainer.val_check_interval", "1.0",
]  # fmt: skip
QUICK_TEST = 100


def train(stage: str, args: argparse.Namespace, out: Path, logs: Path) -> tuple[Path, float | None]:
    """The stage's model file, trained now unless it exists; (file, training minutes or None when reused)."""
    config, first = STAGES[stage]
    model = out / stage / "model.pt"
    if model.is_file() and not args.retrain:
        minutes = recorded_minutes(out, stage)
        print(f"[{stage}] {model} exists: not trained again (--retrain to train it)", flush=True)
        return model, minutes
    cmd = [console_script("caption-train"), "fit", "--config", str(CONFIGS / config)]
    cmd += ["--data.root", str(args.data_root), "--trainer.default_root_dir", str(out / stage)]
    cmd += ["--model.export_path", str(model), "--data.feature_cache_dir", str(out / "feature_cache")]
    if first is not None:
        cmd += ["--model.init_from", str(out / first / "model.pt")]
    if args.quick:
        cmd += QUICK
    cmd += args.fit_args  # last: they win (another encoder for every stage, say)
    seconds = run_stage(f"fit-{stage}", cmd, logs)
    seconds += average(stage, model, args, out, logs)
    (out / stage / "train_minutes.txt").write_text(f"{seconds / 60:.2f}\n")
    return model, seconds / 60


def average(stage: str, model: Path, args: argparse.Namespace, out: Path, logs: Path) -> float:
    """Checkpoint averaging, chosen on val: when the fit saved its weights every few steps (the SCST config does),
    benchmarks/checkpoint_averaging.py compares the fit's best checkpoint (kept as OUT/<stage>/model_best_step.pt)
    with the mean of its last 2, 3, 4 and 6 and writes the best of them as the model file. Returns its seconds (part
    of the stage's time: it is how the stage's model is made)."""
    from checkpoint_averaging import averaging_stage

    options = ["--limit", "50"] if args.quick else []
    return averaging_stage(stage, out / stage, model, args.data_root, [2, 3, 4, 6], logs, options)


def recorded_minutes(out: Path, stage: str) -> float | None:
    """The training minutes a stage's earlier run wrote beside its model file (None: not recorded)."""
    path = out / stage / "train_minutes.txt"
    return float(path.read_text()) if path.is_file() else None


def test_split(args: argparse.Namespace) -> tuple[list[str], dict[str, list[str]]]:
    """The test photos' paths and, per path, its references (token strings). A copy without the standard split files
    is refused: its random test photos are mostly standard train photos, which the bundled model (--recorded) and the
    published rows beside ours trained on."""
    from captioning.training.readers import SPLIT_FILES, CaptionDataError, has_standard_split, read_flickr8k

    if not has_standard_split(args.data_root):
        raise CaptionDataError(
            f"{args.data_root}: no standard split files ({', '.join(SPLIT_FILES.values())}): a random test split "
            "holds mostly photos the bundled model and the published models trained on, and scores high for them; "
            "put the three files in it"
        )
    items = read_flickr8k(args.data_root)["test"]
    if args.quick:
        items = items[:QUICK_TEST]
    return [str(it.path) for it in items], {str(it.path): [" ".join(c) for c in it.captions] for it in items}


def caption_test(
    model: Path, paths: list[str], beam: int | None, out: Path, logs: Path, stage: str
) -> tuple[dict, float]:
    """``caption -`` on the test photos at this beam (None: the model file's val-chosen decoding), as a user runs
    it: ({path: caption}, images/s)."""
    tag = "tuned" if beam is None else f"beam{beam}"
    jsonl = out / f"test-{tag}.jsonl"
    jsonl.unlink(missing_ok=True)
    cmd = [console_script("caption"), "-", "--model", str(model), "--jsonl", str(jsonl)]
    # a plain beam: no length penalty or n-gram block (else caption takes the file's val-chosen ones for the flags
    # not given)
    cmd += [] if beam is None else ["--beam-size", str(beam), "--length-penalty", "0", "--no-repeat-ngram", "0"]
    seconds = run_stage(f"caption-{stage}-{tag}", cmd, logs, stdin="\n".join(paths) + "\n")
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    bad = [r["image"] for r in records if r["error"]]
    if bad or len(records) != len(paths):
        raise StageError(f"caption {model}: {len(bad)} of {len(paths)} test photos failed (first: {bad[:1]})")
    return {r["image"]: r["caption"] for r in records}, len(paths) / seconds


def score(references: dict[str, list[str]], captions: dict[str, str]) -> dict[str, float]:
    """coco-caption scores x 100 (pycocoevalcap's PTB tokenizer first, as its own evaluation does)."""
    from text_attn.core.metrics import coco_metrics

    return {k: 100 * v for k, v in coco_metrics(references, captions, meteor=True, ptb=True).items()}


def export(model: Path, out: Path, logs: Path, stage: str, info: dict) -> Path:
    info_file = out / "info.json"
    info_file.write_text(json.dumps(info, indent=1))
    final = out / "final.pt"
    cmd = [console_script("caption-export"), str(model), str(final), "--half", "--encoder-from-package"]
    run_stage(f"export-{stage}", [*cmd, "--info", str(info_file)], logs)
    return final


def tune(model: Path, args: argparse.Namespace, out: Path, logs: Path, stage: str) -> dict:
    """Choose the model file's beam and length penalty on the val photos and record them in it; returns the choice."""
    options = ["--data-root", str(args.data_root), "--model", str(model)]
    quick = ["--limit", "50", "--beams", "1", "3", "--length-penalties", "0", "1"] if args.quick else []
    return run_tuner("tune_caption_decoding.py", options, out / "tune_val.json", logs, f"tune-{stage}", quick)


def model_facts(model: Path) -> dict:
    """The facts a model file records (its info)."""
    from captioning.model.captioner import Captioner

    return Captioner.load(model).info


def recorded(model: Path) -> dict:
    """The decoding the model file records (CHOSEN's keys, as a tuner's JSON names them); a StageError when it
    records none (then --tune chooses one)."""
    from captioning.model.captioner import Captioner

    captioner = Captioner.load(model)
    if not captioner.info.get("decoding"):
        raise StageError(f"--recorded: {model} records no decoding chosen on val; use --tune")
    made_for = captioner.info["decoding"].get("chosen_for")  # caption-export --average / --ensemble kept another's
    if made_for:
        raise StageError(f"--recorded: {model}'s decoding was chosen for {made_for}, not for this model; use --tune")
    d, hard = captioner.decoding(), captioner.info["decoding"].get("hard_inference")
    chosen = {"beam": d["beam_size"], "length_penalty": d["length_penalty"], "no_repeat_ngram": d["no_repeat_ngram"]}
    return chosen | ({"hard_inference": hard} if hard else {})


def model_info(stage: str, minutes: dict[str, float | None], scores: dict | None, noted: bool = False) -> dict:
    """The facts the scored file gets. ``noted``: it records a data note (its train captions are not the
    annotators' five, e.g. a distillation teacher's): the training data then points to it."""
    from captioning.training.data import FLICKR8K_TERMS  # here: the data module imports torch

    trained = ", ".join(f"{s} {m:.0f} min" for s, m in minutes.items() if m is not None) or "not recorded"
    captions = ", their captions as the data note says" if noted else " x 5 captions"
    info = {
        "training_data": f"Flickr8k, the standard split: 6,000 train photos{captions}; chosen on the 1,000 val photos",
        "terms": FLICKR8K_TERMS,
        "training": f"{stage} ({' then '.join(minutes)}) on a 2-core CPU: {trained}",
    }
    if scores:
        decoding = {"beam": scores.get("beam", 3)} | {
            k: scores[k] for k in ("length_penalty", "no_repeat_ngram", "hard_inference") if k in scores
        }
        info["test_scores"] = {k: round(v, 2) for k, v in scores.items() if k in METRICS} | decoding
    return info


def table(results: dict, minutes: dict) -> str:
    head = "| model | beam | " + " | ".join(m.replace("_", "-") for m in METRICS) + " | images/s |"
    lines = [head, "|" + "---|" * (len(METRICS) + 3)]
    for name, row in PAPER.items():
        cells = [f"{row[m]:.2f}" if m in row else "–" for m in METRICS]
        lines.append(f"| {name} | – | " + " | ".join(cells) + " | – |")
    for stage, per_beam in results.items():
        for beam, r in per_beam.items():
            cells = [f"{r[m]:.2f}" if m in r else "–" for m in METRICS]
            if beam == "tuned":
                block = f", no repeated {r['no_repeat_ngram']}-gram" if r.get("no_repeat_ngram") else ""
                context = f", {HARD_NAMES[r['hard_inference']]}" if r.get("hard_inference") else ""
                beam = f"{r['beam']}, length penalty {r['length_penalty']:g}{block}{context} (chosen on val)"
            lines.append(f"| ours, {stage} | {beam} | " + " | ".join(cells) + f" | {r['images_per_s']:.1f} |")
    lines.append("")
    lines.append("| stage | training minutes (2 CPU cores; encoding the photos and checkpoint averaging included) |")
    lines.append("|---|---|")
    for stage, m in minutes.items():
        lines.append(f"| {stage} | {'reused' if m is None else f'{m:.1f}'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, required=True, help="Flickr8k (original or Kaggle layout)")
    p.add_argument("--out", type=Path, default=Path("runs/flickr8k_benchmark"), help="runs, logs and model files")
    p.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated: {', '.join(STAGES)} (default: all)")
    p.add_argument("--retrain", action="store_true", help="train stages whose model file exists again")
    p.add_argument("--quick", action="store_true", help="a smoke run: 300 train photos, 90 s a stage, 100 test")
    p.add_argument("--json", type=new_file, help="also write the numbers to this file")
    p.add_argument("--bundle", action="store_true", help=f"copy the chosen model with its scores to {BUNDLED}")
    p.add_argument("--tune", action="store_true", help="choose each model's beam and length penalty on val, score too")
    p.add_argument(
        "--recorded",
        action="store_true",
        help="score test with the decoding the model file already records (chosen on val by an earlier --tune), "
        "without tuning again: e.g. the bundled model copied in as OUT/scst/model.pt",
    )
    p.add_argument(
        "fit_args",
        nargs="*",
        help="after --: more caption-train fit options for every stage's fit (they "
        "win), e.g. -- --model.encoder.backbone efficientnet_lite0 --model.encoder.image_size 224 "
        "--model.encoder.grid 7",
    )
    p.add_argument("--beams", default="1,3,5", help="comma-separated beam widths to score test at (default: 1,3,5)")
    args = p.parse_args(argv)
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    try:
        beams = [int(b) for b in args.beams.split(",") if b.strip()]
    except ValueError:
        p.error(f"--beams: expected comma-separated integers, got {args.beams!r}")
    if not beams or min(beams) < 1:
        p.error(f"--beams: expected widths of at least 1, got {args.beams!r}")
    unknown = [s for s in stages if s not in STAGES]
    if unknown or not stages:
        p.error(f"--stages: unknown {unknown}; choose from {', '.join(STAGES)}")
    for s in stages:
        first = STAGES[s][1]
        trained = (args.out / s / "model.pt").is_file() and not args.retrain
        if first and first not in stages and not trained and not (args.out / first / "model.pt").is_file():
            p.error(f"--stages: {s} starts from {first}'s model file, which is neither there nor in --stages")
    logs = args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        paths, references = test_split(args)
        minutes: dict[str, float | None] = {}
        results: dict[str, dict] = {}
        finals: dict[str, Path] = {}
        for stage in stages:
            model, minutes[stage] = train(stage, args, args.out, logs)
            # a second stage's model file names both stages' minutes; the first's from its file when it was
            # trained in another run
            first = STAGES[stage][1]
            chain = {first: minutes.get(first, recorded_minutes(args.out, first))} if first else {}
            chain[stage] = minutes[stage]
            noted = bool(model_facts(model).get("data_note"))
            final = export(model, args.out / stage, logs, stage, model_info(stage, chain, None, noted))
            results[stage] = {}
            for beam in beams:
                captions, speed = caption_test(final, paths, beam, args.out / stage, logs, stage)
                results[stage][beam] = {**score(references, captions), "images_per_s": speed}
                print(f"[{stage}] beam {beam}: " + ", ".join(f"{m} {results[stage][beam][m]:.2f}" for m in METRICS
                                                              if m in results[stage][beam]), flush=True)  # fmt: skip
            if args.tune or args.recorded:
                chosen = tune(final, args, args.out / stage, logs, stage) if args.tune else recorded(final)
                captions, speed = caption_test(final, paths, None, args.out / stage, logs, stage)
                results[stage]["tuned"] = {**chosen, **score(references, captions), "images_per_s": speed}
                r = results[stage]["tuned"]
                print(f"[{stage}] tuned: " + ", ".join(f"{m} {r[m]:.2f}" for m in METRICS if m in r), flush=True)
            from text_attn.core.modelfile import update_info

            # the test scores join the model file's info (beside the val-chosen decoding --tune recorded)
            finals[stage] = final
            update_info(final, model_info(stage, chain, results[stage].get("tuned", results[stage].get(3)), noted))
    except StageError as err:
        print(f"flickr8k benchmark: error: {err}", file=sys.stderr)
        return 1
    print()
    print(f"Flickr8k test split ({len(paths)} photos){' -- QUICK smoke run' if args.quick else ''}")
    print(table(results, minutes))
    if args.json:
        numbers = {"test_photos": len(paths), "quick": args.quick, "paper": PAPER, "minutes": minutes,
                   "results": {s: {str(b): r for b, r in v.items()} for s, v in results.items()}}  # fmt: skip
        write_text(args.json, json.dumps(numbers, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.bundle:
        # chosen on val, never on test: the stage whose best validation CIDEr (greedy, logged by fit) is higher
        candidates = {s: best_logged(args.out / s, "val_CIDEr") for s in ("soft", "scst") if s in finals}
        if not candidates:
            print("flickr8k benchmark: error: --bundle needs the soft or scst stage", file=sys.stderr)
            return 1
        chosen = max(candidates, key=lambda s: candidates[s])
        print("val CIDEr (best of each fit): " + ", ".join(f"{s} {v:.4f}" for s, v in candidates.items()))
        write_bytes(BUNDLED, Path(finals[chosen]).read_bytes())  # a fresh file renamed
        print(f"bundled {finals[chosen]} ({chosen}) as {BUNDLED} ({BUNDLED.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
