"""Choose Multi30k settings on VALIDATION data: train a few variants of a shipped config for the same number of epochs
(or minutes) and compare their greedy val BLEU (tok.) after each epoch (never test).

    python benchmarks/multi30k_variants.py --data-root ../shared/data/multi30k --family transformer --epochs 16
    python benchmarks/multi30k_variants.py --data-root ../shared/data/multi30k --family bahdanau --epochs 6
    python benchmarks/multi30k_variants.py --data-root ../shared/data/multi30k --family bahdanau --minutes 25 \
        --variants shipped,wide
    python benchmarks/multi30k_variants.py --data-root ../shared/data/multi30k --parallel 4         # on a GPU
    python benchmarks/multi30k_variants.py --data-root ../shared/data/multi30k --epochs 1 -- --data.train_size 500

``--family transformer``: configs/text/multi30k_de_en_transformer.yaml's learning-rate schedules (peak rate,
warm-up, batch size, pre-norm); ``--family bahdanau``: configs/text/multi30k_de_en_bahdanau.yaml's RNN settings (GRU or
LSTM, sizes, dropout, label smoothing, subword vocabulary). Each variant is ``text-train fit --config CONFIG`` with
its overrides (below), for --epochs epochs (the shipped config's time cap lifted) or --minutes minutes, its run in
OUT/<name>/. Variants of one size take the same time an epoch, so equal epochs are equal CPU time; a larger network
(``wide``) is fairly compared at equal --minutes (the table also prints each variant's minutes an epoch). On a GPU,
``--parallel`` runs that many fits at once. Prints val BLEU (tok.) x 100 after the reported epochs and the best
within the budget; ``--json`` writes every curve. A variant whose run folder already holds a fit of at least
--epochs epochs (one command's runs cut short, or a table of fewer epochs from longer runs) is not trained again: its
logged curve up to --epochs is reused (``--retrain`` trains it again). Minutes come from each fit's own files (its
config written at the start, its metrics at the end), so reused runs report theirs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _runs import console_script, logged_curve

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "transformer": ROOT / "configs" / "text" / "multi30k_de_en_transformer.yaml",
    "bahdanau": ROOT / "configs" / "text" / "multi30k_de_en_bahdanau.yaml",
}
TRANSFORMER = {  # name -> (what it is, overrides of the shipped config)
    "warm1000_lr7e-4": ("peak 7e-4 after 1,000 warm-up steps, batch 128", ["--model.lr", "0.0007",
                        "--model.warmup_steps", "1000"]),
    "warm1000_lr1e-3_prenorm": ("peak 1e-3 after 1,000 steps, pre-norm layers", ["--model.lr", "0.001",
                                "--model.warmup_steps", "1000", "--model.network.norm_first", "true"]),
    "warm2000_lr5e-4_batch64": ("peak 5e-4 after 2,000 steps, batch 64", ["--model.lr", "0.0005",
                                "--model.warmup_steps", "2000", "--data.batch_size", "64"]),
    "warm500_lr1e-3": ("peak 1e-3 after 500 steps, batch 128 (shipped)", ["--model.lr", "0.001",
                       "--model.warmup_steps", "500"]),
    # The shipped schedule with nothing shared: a source embedding, a target embedding and an output layer of their
    # own (the shipped model uses one matrix for all three). The same work a step, so equal epochs are equal time.
    "untied": ("the shipped schedule, untied: separate source and target embeddings and output layer",
               ["--model.lr", "0.001", "--model.warmup_steps", "500", "--model.network.share_embeddings", "false",
                "--model.network.tie_output", "false"]),
}  # fmt: skip
BAHDANAU = {  # name -> (what it is, overrides of the shipped config)
    "shipped": ("GRU, embed 256, encoder 256 a direction, decoder 512, dropout 0.3, label smoothing 0.1, BPE 8,000",
                []),
    "lstm": ("LSTM instead of GRU", ["--model.network.rnn", "lstm"]),
    "dropout0.5": ("dropout 0.5", ["--model.network.dropout", "0.5"]),
    "no_smoothing": ("no label smoothing", ["--model.objective.label_smoothing", "0"]),
    "bpe16k": ("a BPE vocabulary of 16,000", ["--data.subword_vocab", "16000"]),
    "bpe4k": ("a BPE vocabulary of 4,000", ["--data.subword_vocab", "4000"]),
    "wide": ("embed 512, encoder 512 a direction, decoder 1024, attention 512 (compare at equal --minutes)",
             ["--model.network.embed_dim", "512", "--model.network.enc_hidden", "512", "--model.network.dec_hidden",
              "1024", "--model.network.attn_dim", "512"]),
}  # fmt: skip
VARIANTS = {"transformer": TRANSFORMER, "bahdanau": BAHDANAU}
REPORTED = (1, 2, 3, 5, 10, 13, 16)  # epochs whose val BLEU the table shows


def command(name: str, args: argparse.Namespace) -> list[str]:
    config = CONFIGS[args.family]
    cmd = [console_script("text-train"), "fit", "--config", str(config), "--data.root", str(args.data_root)]
    cmd += [
        "--trainer.default_root_dir",
        str(args.out / name),
        "--model.export_path",
        str(args.out / name / "model.pt"),
    ]
    if args.minutes:  # equal time: as many epochs as fit
        budget = f"00:{int(args.minutes) // 60:02d}:{int(args.minutes) % 60:02d}:00"
        cmd += ["--trainer.max_epochs", "1000", "--trainer.max_time", budget]
    else:
        cmd += ["--trainer.max_epochs", str(args.epochs), "--trainer.max_time", "null"]
    return [*cmd, "--trainer.enable_progress_bar", "false", *VARIANTS[args.family][name][1], *args.fit_args]


def fit_minutes(run: Path) -> float:
    """Wall minutes of the fits under ``run``: from each fit's config.yaml (written as it starts) to its
    metrics.csv's last write."""
    total = 0.0
    for metrics in run.glob("lightning_logs/version_*/metrics.csv"):
        start = metrics.with_name("config.yaml")
        total += (metrics.stat().st_mtime - (start if start.is_file() else metrics).stat().st_mtime) / 60
    return total


def finished(run: Path, epochs: int) -> bool:
    """Whether ``run`` already holds a fit that validated at least ``epochs`` epochs."""
    return len({e for e, _, _ in logged_curve(run, "val_bleu")}) >= epochs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, required=True, help="Multi30k: <split>.<lang>[.gz] files")
    p.add_argument("--family", choices=sorted(VARIANTS), default="transformer", help="which config's variants")
    p.add_argument("--out", type=Path, help="one run folder a variant (default: runs/multi30k_variants/FAMILY)")
    p.add_argument("--epochs", type=int, default=16, help="epochs each variant trains (default: 16)")
    p.add_argument("--minutes", type=int, help="instead of --epochs: minutes each variant trains")
    p.add_argument("--variants", "--schedules", help="comma-separated (default: all of the family's): "
                   + "; ".join(f"{f}: {', '.join(v)}" for f, v in VARIANTS.items()))  # fmt: skip
    p.add_argument("--parallel", type=int, default=1, help="fits at once (a GPU holds several)")
    p.add_argument("--json", type=Path, help="also write every val curve to this file")
    p.add_argument("--retrain", action="store_true", help="train every variant again, even one already trained")
    p.add_argument("fit_args", nargs="*", help="after --: more text-train fit options for every variant (they win)")
    args = p.parse_args(argv)
    variants = VARIANTS[args.family]
    args.out = args.out or Path("runs/multi30k_variants") / args.family
    names = [n.strip() for n in (args.variants or ",".join(variants)).split(",") if n.strip()]
    if not names or any(n not in variants for n in names):
        p.error(f"--variants: choose from {', '.join(variants)} (--family {args.family})")
    if args.epochs < 1 or args.parallel < 1 or (args.minutes is not None and args.minutes < 1):
        p.error("--epochs, --minutes and --parallel must be >= 1")
    args.out.mkdir(parents=True, exist_ok=True)
    reused = [n for n in names if not args.retrain and not args.minutes and finished(args.out / n, args.epochs)]
    for name in reused:
        print(f"[{name}] {args.out / name} holds {args.epochs} epochs or more: not trained again", flush=True)
    waiting, running, started = [n for n in names if n not in reused], [], {}
    while waiting or running:
        while waiting and len(running) < args.parallel:
            name = waiting.pop(0)
            (args.out / name).mkdir(exist_ok=True)
            log = (args.out / f"{name}.log").open("w")
            budget = f"{args.minutes} minutes" if args.minutes else f"{args.epochs} epochs"
            print(f"[{name}] {variants[name][0]}: {budget}, log {args.out / name}.log", flush=True)
            started[name] = time.monotonic()
            running.append((name, subprocess.Popen(command(name, args), stdout=log, stderr=subprocess.STDOUT)))
        time.sleep(5)
        for name, proc in [r for r in running if r[1].poll() is not None]:
            running.remove((name, proc))
            if proc.returncode != 0:
                print(f"multi30k variants: error: {name} failed (exit {proc.returncode}): {args.out / name}.log",
                      file=sys.stderr)  # fmt: skip
                return 1
            print(f"[{name}] done in {(time.monotonic() - started[name]) / 60:.1f} minutes", flush=True)
    logged = {n: logged_curve(args.out / n, "val_bleu") for n in names}  # every epoch each fit validated
    # a longer run reused: its curve up to --epochs
    curves = logged if args.minutes else {n: [row for row in c if row[0] < args.epochs] for n, c in logged.items()}
    minutes = {n: fit_minutes(args.out / n) for n in names}
    trained = max((len(c) for c in curves.values()), default=0) if args.minutes else args.epochs
    shown = [e for e in REPORTED if e <= trained]
    budget = f"{args.minutes} minutes each" if args.minutes else f"{args.epochs} epochs each"
    print(f"\nval BLEU (tok.), greedy, Multi30k val, after the epochs named ({budget}):")
    columns = ["variant", *(f"epoch {e}" for e in shown), "best", "epochs", "minutes an epoch"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for n in names:
        by_epoch = {e + 1: 100 * v for e, _, v in curves[n]}
        cells = [f"{by_epoch[e]:.1f}" if e in by_epoch else "–" for e in shown]
        per_epoch = minutes[n] / max(len({e for e, _, _ in logged[n]}), 1)
        best = max(by_epoch.values(), default=float("nan"))
        row = [variants[n][0], *cells, f"{best:.1f}", str(len(by_epoch)), f"{per_epoch:.1f}"]
        print("| " + " | ".join(row) + " |")
    if args.json:
        report = {"family": args.family, "epochs": args.epochs, "minutes": args.minutes, "curves": curves}
        args.json.write_text(json.dumps({**report, "minutes_per_variant": minutes}, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
