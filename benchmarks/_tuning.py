"""What the decoding tuners (tune_caption_decoding.py, tune_translation_decoding.py) and the benchmarks that run them
share: the grid of settings tried on validation data, recording the chosen one in the model file, and running a tuner
as a benchmark stage."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _runs import run_stage

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text

CHOSEN = ("beam", "length_penalty", "no_repeat_ngram")  # one row's decoding setting, as the tuners' JSON names it
# a hard-attention captioner's test-time decodings (captioning.model.decoder's hard_inference), as tables name them
HARD_NAMES = {"argmax": "one region a word", "expect": "expected context"}


def add_grid_options(
    p: argparse.ArgumentParser,
    beams: list[int],
    no_repeat_ngrams: list[int],
    length_penalties: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5),
) -> None:
    p.add_argument("--beams", type=int, nargs="+", default=beams,
                   help=f"beam widths tried (default: {' '.join(map(str, beams))}; 1: greedy)")  # fmt: skip
    penalties = " ".join(map(str, length_penalties))
    p.add_argument("--length-penalties", type=float, nargs="+", default=list(length_penalties),
                   help=f"length penalties tried with each beam above 1 (default: {penalties})")  # fmt: skip
    p.add_argument("--no-repeat-ngrams", type=int, nargs="+", default=no_repeat_ngrams, help="n-gram blocks (0: off)")
    p.add_argument("--json", type=new_file, help="also write the table to this file")
    p.add_argument("--write", action="store_true", help="record the chosen setting in the model file")


def settings(p: argparse.ArgumentParser, args: argparse.Namespace) -> list[tuple[int, float, int]]:
    """Every (beam, length penalty, n-gram block) to try; greedy has no beams to rank, so no penalty to choose."""
    if any(b < 1 for b in args.beams) or any(x < 0 for x in [*args.length_penalties, *args.no_repeat_ngrams]):
        p.error("--beams must be >= 1, --length-penalties and --no-repeat-ngrams >= 0")
    return [(b, lp, n) for n in args.no_repeat_ngrams for b in args.beams
            for lp in (args.length_penalties if b > 1 else [0.0])]  # fmt: skip


def finish(args: argparse.Namespace, rows: list[dict], best: dict, report: dict, rule: str) -> None:
    """``--json``: the rows and the choice; ``--write``: the choice (and ``rule``) into the model file's decoding."""
    if args.json:
        write_text(args.json, json.dumps({**report, "rows": rows, "chosen": best}, indent=1) + "\n")
    if args.write:
        from text_attn.core.modelfile import update_info

        decoding = {"beam_size": best["beam"], "length_penalty": best["length_penalty"],
                    "no_repeat_ngram": best["no_repeat_ngram"], "chosen_by": rule}  # fmt: skip
        merge, also = None, ""
        if best.get("hard_inference"):  # a hard-attention captioner reads it from its decoder's config
            decoding["hard_inference"] = best["hard_inference"]
            merge, also = {"decoder": {"hard_inference": best["hard_inference"]}}, f", {best['hard_inference']}"
        update_info(args.model, {"decoding": decoding}, merge=merge)
        print(f"wrote decoding beam {best['beam']}, length penalty {best['length_penalty']:g}, no-repeat n-gram "
              f"{best['no_repeat_ngram']}{also} into {args.model}")  # fmt: skip


def run_tuner(script: str, options: list[str], report: Path, logs: Path, stage: str, quick: list[str]) -> dict:
    """Run a tuner on a model file as a benchmark stage (``--write``: the file then carries the choice); returns the
    chosen setting (``CHOSEN``'s keys). ``quick``: a smaller grid for --quick runs."""
    cmd = [sys.executable, str(Path(__file__).with_name(script)), *options, "--json", str(report), "--write", *quick]
    run_stage(stage, cmd, logs)
    chosen = json.loads(report.read_text())["chosen"]
    return {k: chosen[k] for k in (*CHOSEN, "hard_inference") if k in chosen}
