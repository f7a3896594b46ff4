"""What the settings benchmarks share (multi30k_variants.py, flickr8k_variants.py): train variants of one shipped
config through its console script for the same epochs or minutes, each in its own run folder, then table a val metric
after each epoch from the fits' own logs (never test).

A variant is reused, not trained again, when its folder already holds what was asked for: at least --epochs
validated epochs (its curve is cut to them), or, with --minutes, a finished fit of exactly that many minutes (the
folder's ``budget.json``, written when a fit ends). ``--retrain`` trains every variant again."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _runs import console_script, logged_curve

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text

BUDGET = "budget.json"  # in a variant's folder once its fit ended: {"minutes": M} or {"epochs": E}


@dataclass(frozen=True)
class Family:
    """One shipped config and how its variants are trained and compared."""

    tool: str  # what its errors start with, e.g. "multi30k variants"
    name: str  # the family the JSON names, e.g. "bahdanau"
    config: Path
    script: str  # the console script that trains it (text-train, caption-train)
    metric: str  # the logged val metric the table shows (x 100)
    label: str  # the table's caption, e.g. "val BLEU (tok.), greedy, Multi30k val"
    variants: dict[str, tuple[str, list[str]]]  # name -> (what it is, overrides of the shipped config)
    reported: tuple[int, ...]  # epochs whose value the table shows
    extra: tuple[str, ...] = ()  # options every variant gets (a shared feature cache, say)
    # the file a fit writes when its clock starts: config.yaml at the command's start; hparams.yaml once the data is
    # ready (after a caption fit has encoded its photos, which the time budget does not count)
    clock_from: str = "config.yaml"


def command(family: Family, name: str, args: argparse.Namespace) -> list[str]:
    cmd = [console_script(family.script), "fit", "--config", str(family.config), "--data.root", str(args.data_root)]
    folder = args.out / name
    cmd += ["--trainer.default_root_dir", str(folder), "--model.export_path", str(folder / "model.pt")]
    if args.minutes:  # equal time: as many epochs as fit
        budget = f"00:{int(args.minutes) // 60:02d}:{int(args.minutes) % 60:02d}:00"
        cmd += ["--trainer.max_epochs", "1000", "--trainer.max_time", budget]
    else:  # equal epochs: a step cap in the config does not cut them short
        cmd += ["--trainer.max_epochs", str(args.epochs), "--trainer.max_time", "null", "--trainer.max_steps", "-1"]
    extra = [part.replace("{out}", str(args.out)) for part in family.extra]
    return [*cmd, *extra, *family.variants[name][1], *args.fit_args]


def fit_minutes(run: Path, clock_from: str = "config.yaml") -> float:
    """Wall minutes of the fits under ``run``: from each fit's ``clock_from`` file (Family) to its metrics.csv's last
    write."""
    total = 0.0
    for metrics in run.glob("lightning_logs/version_*/metrics.csv"):
        start = metrics.with_name(clock_from)
        total += (metrics.stat().st_mtime - (start if start.is_file() else metrics).stat().st_mtime) / 60
    return total


def reusable(family: Family, run: Path, args: argparse.Namespace) -> bool:
    """Whether ``run`` already holds the fit asked for (module doc)."""
    if args.minutes:
        stamp = run / BUDGET
        return stamp.is_file() and json.loads(stamp.read_text()).get("minutes") == args.minutes
    return len({e for e, _, _ in logged_curve(run, family.metric)}) >= args.epochs


def add_options(p: argparse.ArgumentParser, family_help: str) -> None:
    """The options every settings benchmark takes (its own: --data-root, --family, --out)."""
    p.add_argument("--epochs", type=int, default=16, help="epochs each variant trains (default: 16)")
    p.add_argument("--minutes", type=int, help="instead of --epochs: minutes each variant trains")
    p.add_argument("--variants", "--schedules", help=f"comma-separated (default: all): {family_help}")
    p.add_argument("--parallel", type=int, default=1, help="fits at once (a GPU holds several)")
    p.add_argument("--json", type=new_file, help="also write every val curve to this file")
    p.add_argument("--retrain", action="store_true", help="train every variant again, even one already trained")
    p.add_argument("fit_args", nargs="*", help="after --: more fit options for every variant (they win)")


def chosen(p: argparse.ArgumentParser, family: Family, args: argparse.Namespace) -> list[str]:
    """The variants asked for, in order; a usage error (exit 2) naming the known ones otherwise."""
    names = [n.strip() for n in (args.variants or ",".join(family.variants)).split(",") if n.strip()]
    if not names or any(n not in family.variants for n in names):
        p.error(f"--variants: choose from {', '.join(family.variants)} ({family.name})")
    if args.epochs < 1 or args.parallel < 1 or (args.minutes is not None and args.minutes < 1):
        p.error("--epochs, --minutes and --parallel must be >= 1")
    return names


def train(family: Family, names: list[str], args: argparse.Namespace) -> int:
    """Fit each variant not reused, --parallel at a time; 1 (a line on stderr) when one fails."""
    args.out.mkdir(parents=True, exist_ok=True)
    reused = [n for n in names if not args.retrain and reusable(family, args.out / n, args)]
    budget = f"{args.minutes} minutes" if args.minutes else f"{args.epochs} epochs"
    for name in reused:
        held = budget if args.minutes else f"{budget} or more"  # minutes: exactly that budget (reusable)
        print(f"[{name}] {args.out / name} holds {held}: not trained again", flush=True)
    waiting, running, started = [n for n in names if n not in reused], [], {}
    while waiting or running:
        while waiting and len(running) < args.parallel:
            name = waiting.pop(0)
            (args.out / name).mkdir(exist_ok=True)
            (args.out / name / BUDGET).unlink(missing_ok=True)  # a fit that does not finish leaves none
            log = (args.out / f"{name}.log").open("w")
            print(f"[{name}] {family.variants[name][0]}: {budget}, log {args.out / name}.log", flush=True)
            started[name] = time.monotonic()
            running.append((name, subprocess.Popen(command(family, name, args), stdout=log, stderr=subprocess.STDOUT)))
        time.sleep(5)
        for name, proc in [r for r in running if r[1].poll() is not None]:
            running.remove((name, proc))
            if proc.returncode != 0:
                print(f"{family.tool}: error: {name} failed (exit {proc.returncode}): {args.out / name}.log",
                      file=sys.stderr)  # fmt: skip
                return 1
            stamp = {"minutes": args.minutes} if args.minutes else {"epochs": args.epochs}
            (args.out / name / BUDGET).write_text(json.dumps(stamp) + "\n")
            print(f"[{name}] done in {(time.monotonic() - started[name]) / 60:.1f} minutes", flush=True)
    return 0


def report(family: Family, names: list[str], args: argparse.Namespace) -> dict:
    """Print the table of val curves (module doc); returns what --json writes."""
    logged = {n: logged_curve(args.out / n, family.metric) for n in names}  # every epoch each fit validated
    # a longer run reused: its curve up to --epochs
    curves = logged if args.minutes else {n: [row for row in c if row[0] < args.epochs] for n, c in logged.items()}
    minutes = {n: fit_minutes(args.out / n, family.clock_from) for n in names}
    ran = {n: max((step + 1 for _, step, _ in logged[n]), default=0) for n in names}  # the whole fit's steps
    steps = {n: max((step + 1 for _, step, _ in curves[n]), default=0) for n in names}  # within the budget shown
    trained = max((len(c) for c in curves.values()), default=0) if args.minutes else args.epochs
    shown = [e for e in family.reported if e <= trained]
    budget = f"{args.minutes} minutes each" if args.minutes else f"{args.epochs} epochs each"
    print(f"\n{family.label}, after the epochs named ({budget}):")
    columns = ["variant", *(f"epoch {e}" for e in shown), "best", "epochs", "steps", "minutes an epoch"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for n in names:
        by_epoch = {e + 1: 100 * v for e, _, v in curves[n]}
        cells = [f"{by_epoch[e]:.1f}" if e in by_epoch else "–" for e in shown]
        # a budget in minutes stops mid-epoch: the epochs done are the fit's steps over a whole first epoch's
        whole_first = any(e > 0 for e, _, _ in logged[n])
        first_epoch = max((step + 1 for e, step, _ in logged[n] if e == 0), default=0) if whole_first else 0
        done = ran[n] / first_epoch if first_epoch else len({e for e, _, _ in logged[n]})
        per_epoch = minutes[n] / max(done, 1e-9)
        best = max(by_epoch.values(), default=float("nan"))
        row = [family.variants[n][0], *cells, f"{best:.1f}", str(len(by_epoch)), str(steps[n]), f"{per_epoch:.1f}"]
        print("| " + " | ".join(row) + " |")
    return {"epochs": args.epochs, "minutes": args.minutes, "curves": curves, "minutes_per_variant": minutes}


def run(p: argparse.ArgumentParser, family: Family, args: argparse.Namespace) -> int:
    """Train what is missing, print the table, write --json; the benchmark's exit code."""
    names = chosen(p, family, args)
    if train(family, names, args):
        return 1
    data = report(family, names, args)
    if args.json:
        write_text(args.json, json.dumps({"family": family.name, **data}, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0
