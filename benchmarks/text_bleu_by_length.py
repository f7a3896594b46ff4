"""BLEU by source length on `reorder`: the no-attention bottleneck against Bahdanau and Luong attention, the
Transformer, and Bahdanau with attention supervision or a self-critical second stage (issue 15).

    python benchmarks/text_bleu_by_length.py                 # train what is missing (~15 min per model), evaluate
    python benchmarks/text_bleu_by_length.py --retrain       # train every model again
    python benchmarks/text_bleu_by_length.py --models none bahdanau --beam-size 3
    python benchmarks/text_bleu_by_length.py --models bahdanau bahdanau_supervised bahdanau_scst

Each model is trained by its config (configs/text/reorder_<name>.yaml, capped at 15 minutes by trainer.max_time) and
its model file kept under --runs. The test set is the config's test split (seed + 2: never seen in training). Prints
BLEU-4 per source-length bucket, the attention's alignment accuracy (arg-max source word == the true word), the
training time, writes the BLEU-by-length plot and, with --json, the numbers. A second stage (bahdanau_scst) starts
from its first stage's model file under --runs (trained first when missing); its "train min" is its own stage only.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
import yaml
from _runs import record_json, recorded_minutes, timed_fit

from text_attn.core.errors import new_file, positive_int
from text_attn.core.metrics import DEFAULT_BUCKETS, alignment_hits, bleu_by_length, bucket_label, corpus_bleu
from text_attn.core.safe_files import write_text
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.plots import plot_bleu_by_length
from text_attn.translation.train_cli import text_train_cli
from text_attn.translation.translator import Translator

ROOT = Path(__file__).resolve().parents[1]

MODELS = {
    "none": "configs/text/reorder_none.yaml",
    "bahdanau": "configs/text/reorder_bahdanau.yaml",
    "luong": "configs/text/reorder_luong_general.yaml",
    "transformer": "configs/text/reorder_transformer.yaml",
    "bahdanau_supervised": "configs/text/reorder_bahdanau_supervised.yaml",
    "bahdanau_scst": "configs/text/reorder_bahdanau_scst.yaml",
}
FIRST_STAGE = {"bahdanau_scst": "bahdanau"}  # second stages: the model whose file they start from (model.init_from)


def train(name: str, config: str, runs: Path) -> tuple[Path, float]:
    extra = []
    if name in FIRST_STAGE:
        first = runs / FIRST_STAGE[name] / "model.pt"
        if not first.exists():
            print(f"training {FIRST_STAGE[name]} first (the start of {name}) ...", file=sys.stderr)
            train(FIRST_STAGE[name], MODELS[FIRST_STAGE[name]], runs)
        extra = ["--model.init_from", str(first)]
    return timed_fit(text_train_cli, ROOT / config, runs / name, extra)


def evaluate(model: Path, config: str, beam_size: int, batch: int = 100) -> dict:
    data_cfg = yaml.safe_load((ROOT / config).read_text())["data"]
    dm = TranslationDataModule(**data_cfg)
    dm.setup("test")
    examples = dm.splits["test"].examples
    tr = Translator.load(model)
    hyps, hits, total = [], 0, 0
    for b in range(0, len(examples), batch):
        chunk = examples[b : b + batch]
        for ex, out in zip(chunk, tr.translate_tokens([e.src for e in chunk], beam_size=beam_size), strict=True):
            hyps.append(out.tokens)
            if out.attention is not None and ex.alignment is not None:
                h, n = alignment_hits(out.attention, ex.alignment, len(out.tokens))
                hits, total = hits + h, total + n
    refs = [[e.tgt] for e in examples]
    return {
        "bleu": corpus_bleu(refs, hyps)["bleu4"],
        "buckets": bleu_by_length([len(e.src) for e in examples], refs, hyps, DEFAULT_BUCKETS),
        "align_acc": hits / total if total else math.nan,
        "n": len(examples),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS), metavar="MODEL",
                   help=f"models trained (where missing) and evaluated (default: all: {' '.join(MODELS)})")  # fmt: skip
    p.add_argument("--runs", type=Path, default=ROOT / "runs" / "reorder", help="model files live here")
    p.add_argument("--retrain", action="store_true", help="train even when a model file exists")
    p.add_argument("--beam-size", type=positive_int, default=1, help="beam width of the test translations (default 1)")
    p.add_argument("--plot", type=new_file, default=ROOT / "docs" / "bleu_by_length.png",
                   help="the BLEU-by-length PNG to write (default: docs/bleu_by_length.png)")  # fmt: skip
    p.add_argument("--json", type=new_file, help="also write the results here")
    p.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's choice)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    results, minutes = {}, {}
    for name in args.models:
        model = args.runs / name / "model.pt"
        if args.retrain or not model.exists():
            print(f"training {name} ({MODELS[name]}) ...", file=sys.stderr)
            model, minutes[name] = train(name, MODELS[name], args.runs)
        else:
            minutes[name] = recorded_minutes(args.runs / name)
        results[name] = evaluate(model, MODELS[name], args.beam_size)
    labels = [bucket_label(lo, hi) for lo, hi in DEFAULT_BUCKETS]
    print(f"\nBLEU-4 by source length on reorder (test split, beam {args.beam_size})\n")
    print("| model | " + " | ".join(labels) + " | all | align acc | train min |")
    print("|---" * (len(labels) + 4) + "|")
    for name, r in results.items():
        cells = [f"{r['buckets'][lab]['bleu']:.3f}" for lab in labels]
        print(f"| {name} | " + " | ".join(cells) + f" | {r['bleu']:.3f} | {r['align_acc']:.3f} | {minutes[name]:.1f} |")
    counts = [str(results[next(iter(results))]["buckets"][lab]["count"]) for lab in labels]
    print("\nsentences per bucket: " + ", ".join(f"{lab}: {c}" for lab, c in zip(labels, counts, strict=True)))
    plot = plot_bleu_by_length({n: r["buckets"] for n, r in results.items()}, args.plot, "BLEU-4 by source length")
    print(f"plot: {plot}")
    if args.json:
        write_text(args.json, record_json({"results": results, "train_minutes": minutes}, indent=2))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
