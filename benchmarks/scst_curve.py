r"""The greedy val scores of a self-critical run over its steps: a table, a JSON file and a plot (issue 66).

    python benchmarks/scst_curve.py --run runs/scst_long --json docs/flickr8k_scst_long.json \
        --png docs/flickr8k_scst_long.png
    python benchmarks/scst_curve.py --run runs/scst_long --then runs/f8k_long/scst --from-step 669 \
        --label "from the best: lr 2e-4 -> 0" ...

``--run``: a fit's root dir; every ``lightning_logs/version_*/metrics.csv`` in it is read, in order (a resumed fit
writes a new version: its steps continue the earlier ones'). ``--then`` (any number, each with its ``--from-step``
and ``--label``): a fit started from the first's checkpoint at that step (its steps are counted on from there, drawn
in another colour). Scores x 100.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from text_attn.core.errors import new_file  # noqa: E402
from text_attn.core.safe_files import write_bytes, write_text  # noqa: E402

KEYS = ("val_Bleu_1", "val_Bleu_2", "val_Bleu_3", "val_Bleu_4", "val_ROUGE_L", "val_CIDEr")


def curve(run: Path, offset: int = 0) -> list[dict]:
    """Each validation of the fit under ``run`` (all its versions): {"step", the six scores x 100}, by step."""
    points = {}
    files = sorted((run / "lightning_logs").glob("version_*/metrics.csv"), key=lambda p: int(p.parent.name[8:]))
    for path in files:
        for row in csv.DictReader(path.open()):
            if row.get("val_CIDEr"):
                step = int(row["step"]) + 1 + offset  # Lightning logs the step before the one counted
                points[step] = {"step": step, **{k: round(100 * float(row[k]), 2) for k in KEYS if row.get(k)}}
    return [points[s] for s in sorted(points)]


def table(points: list[dict]) -> str:
    lines = ["| SCST step | " + " | ".join(str(p["step"]) for p in points) + " |", "|---" * (len(points) + 1) + "|"]
    for key, name in (("val_Bleu_4", "greedy val BLEU-4"), ("val_CIDEr", "greedy val CIDEr-D")):
        lines.append(f"| {name} | " + " | ".join(f"{p[key]:.2f}" for p in points) + " |")
    return "\n".join(lines)


def plot(first: list[dict], thens: list[tuple[str, list[dict]]], start: float | None, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.6), dpi=110)
    FigureCanvasAgg(fig)
    for ax, key, name in zip(fig.subplots(1, 2), ("val_Bleu_4", "val_CIDEr"), ("BLEU-4", "CIDEr-D"), strict=True):
        ax.plot([p["step"] for p in first], [p[key] for p in first], "o-", label="lr 2e-4, constant")
        for (label, then), marker in zip(thens, "s^vD", strict=False):
            ax.plot([p["step"] for p in then], [p[key] for p in then], f"{marker}-", label=label)
        if start is not None and key == "val_CIDEr":
            ax.axhline(start, color="grey", linestyle=":", label="before SCST")
        ax.set_xlabel("SCST step (64 photos x 5 samples)")
        ax.set_title(f"greedy val {name}")
        ax.grid(alpha=0.3)
    fig.axes[1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    buffer = __import__("io").BytesIO()
    fig.savefig(buffer, format="png")
    write_bytes(path, buffer.getvalue())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, required=True, help="the SCST fit's root dir")
    p.add_argument("--then", type=Path, action="append", default=[], help="a fit started from the first's checkpoint")
    p.add_argument("--from-step", type=int, action="append", default=[], help="each --then: the step it started from")
    p.add_argument("--label", action="append", default=[], help="each --then: its name in the plot")
    p.add_argument("--start", type=float, help="greedy val CIDEr-D before SCST (a line in the plot)")
    p.add_argument("--json", type=new_file, help="write the curves here")
    p.add_argument("--png", type=new_file, help="draw them here")
    args = p.parse_args(argv)
    first = curve(args.run)
    if not first:
        p.error(f"--run {args.run}: no validation scores in its lightning_logs/version_*/metrics.csv")
    if not len(args.then) == len(args.from_step) == len(args.label):
        p.error("give each --then its --from-step and --label")
    thens = [(label, curve(run, step)) for run, step, label in zip(args.then, args.from_step, args.label, strict=True)]
    print(table(first))
    for (label, then), step in zip(thens, args.from_step, strict=True):
        print(f"\n{label} (from step {step}):\n" + table(then))
    if args.json:
        data = {"start_val_CIDEr": args.start, "curve": first,
                "then": [{"label": label, "from_step": step, "curve": then}
                         for (label, then), step in zip(thens, args.from_step, strict=True)]}  # fmt: skip
        write_text(args.json, json.dumps(data, indent=1) + "\n")
    if args.png:
        plot(first, thens, args.start, args.png)
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
