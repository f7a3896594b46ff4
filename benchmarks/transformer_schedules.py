"""Choose the Multi30k Transformer's learning-rate schedule on VALIDATION data: train a few schedules for the same
number of epochs and compare their greedy val BLEU (tok.) after each epoch (never test).

    python benchmarks/transformer_schedules.py --data-root ../shared/data/multi30k --epochs 16          # all four
    python benchmarks/transformer_schedules.py --data-root ../shared/data/multi30k --parallel 4         # on a GPU
    python benchmarks/transformer_schedules.py --data-root ../shared/data/multi30k --epochs 1 -- --data.train_size 500

Each schedule is ``text-train fit --config configs/text/multi30k_de_en_transformer.yaml`` with the overrides below,
for --epochs epochs (the shipped config's time cap lifted), its runs in OUT/<name>/. A 2-core CPU takes about 9
minutes an epoch with validation, so comparing at equal epochs is comparing at equal CPU time; the comparison runs
as well on a GPU (``--parallel``: that many fits at once), where it takes minutes. Prints val BLEU (tok.) x 100 after
epochs 5, 10, 13 and 16 and the best within --epochs; ``--json`` writes every curve.
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
CONFIG = ROOT / "configs" / "text" / "multi30k_de_en_transformer.yaml"
SCHEDULES = {  # name -> (what it is, overrides of the shipped config)
    "warm1000_lr7e-4": ("peak 7e-4 after 1,000 warm-up steps, batch 128", ["--model.lr", "0.0007",
                        "--model.warmup_steps", "1000"]),
    "warm1000_lr1e-3_prenorm": ("peak 1e-3 after 1,000 steps, pre-norm layers", ["--model.lr", "0.001",
                                "--model.warmup_steps", "1000", "--model.network.norm_first", "true"]),
    "warm2000_lr5e-4_batch64": ("peak 5e-4 after 2,000 steps, batch 64", ["--model.lr", "0.0005",
                                "--model.warmup_steps", "2000", "--data.batch_size", "64"]),
    "warm500_lr1e-3": ("peak 1e-3 after 500 steps, batch 128 (shipped)", ["--model.lr", "0.001",
                       "--model.warmup_steps", "500"]),
}  # fmt: skip
REPORTED = (5, 10, 13, 16)  # epochs whose val BLEU the table shows


def command(name: str, args: argparse.Namespace) -> list[str]:
    cmd = [console_script("text-train"), "fit", "--config", str(CONFIG), "--data.root", str(args.data_root)]
    cmd += [
        "--trainer.default_root_dir",
        str(args.out / name),
        "--model.export_path",
        str(args.out / name / "model.pt"),
    ]
    cmd += ["--trainer.max_epochs", str(args.epochs), "--trainer.max_time", "null", "--trainer.enable_progress_bar"]
    return [*cmd, "false", *SCHEDULES[name][1], *args.fit_args]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, required=True, help="Multi30k: <split>.<lang>[.gz] files")
    p.add_argument("--out", type=Path, default=Path("runs/transformer_schedules"), help="one run folder a schedule")
    p.add_argument("--epochs", type=int, default=16, help="epochs each schedule trains (default: 16)")
    p.add_argument("--schedules", default=",".join(SCHEDULES), help=f"comma-separated: {', '.join(SCHEDULES)}")
    p.add_argument("--parallel", type=int, default=1, help="fits at once (a GPU holds several)")
    p.add_argument("--json", type=Path, help="also write every val curve to this file")
    p.add_argument("fit_args", nargs="*", help="after --: more text-train fit options for every schedule")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.schedules.split(",") if n.strip()]
    if not names or any(n not in SCHEDULES for n in names) or args.epochs < 1 or args.parallel < 1:
        p.error(f"--schedules: choose from {', '.join(SCHEDULES)}; --epochs and --parallel must be >= 1")
    args.out.mkdir(parents=True, exist_ok=True)
    waiting, running = list(names), []
    while waiting or running:
        while waiting and len(running) < args.parallel:
            name = waiting.pop(0)
            (args.out / name).mkdir(exist_ok=True)
            log = (args.out / f"{name}.log").open("w")
            print(f"[{name}] {SCHEDULES[name][0]}: {args.epochs} epochs, log {args.out / name}.log", flush=True)
            running.append((name, subprocess.Popen(command(name, args), stdout=log, stderr=subprocess.STDOUT)))
        time.sleep(5)
        for name, proc in [r for r in running if r[1].poll() is not None]:
            running.remove((name, proc))
            if proc.returncode != 0:
                print(f"transformer schedules: error: {name} failed (exit {proc.returncode}): {args.out / name}.log",
                      file=sys.stderr)  # fmt: skip
                return 1
            print(f"[{name}] done", flush=True)
    curves = {n: logged_curve(args.out / n, "val_bleu") for n in names}
    shown = [e for e in REPORTED if e <= args.epochs]
    print(f"\nval BLEU (tok.), greedy, Multi30k val, after the epochs named ({args.epochs} trained):")
    print("| schedule | " + " | ".join(f"epoch {e}" for e in shown) + f" | best within {args.epochs} |")
    print("|---|" + "---|" * (len(shown) + 1))
    for n in names:
        by_epoch = {e + 1: 100 * v for e, _, v in curves[n]}
        cells = [f"{by_epoch[e]:.1f}" if e in by_epoch else "–" for e in shown]
        print(
            f"| {SCHEDULES[n][0]} | " + " | ".join(cells) + f" | {max(by_epoch.values(), default=float('nan')):.1f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"epochs": args.epochs, "curves": curves}, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
