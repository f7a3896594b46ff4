"""Which caption models make the best ensemble, chosen on Flickr8k's VALIDATION photos, never on test.

    python benchmarks/ensemble_choice.py --data-root ../shared/data/flickr8k --models A.pt B.pt C.pt \\
        --feature-cache runs/f8k/feature_cache --json docs/flickr8k_ensemble_choice.json --write both.pt

Every model alone, then every combination of 2 up to --max-members of them as one ensemble (``caption-export A.pt
OUT --ensemble B.pt ...``: one encoder, the decoders' next-word probabilities averaged; captioning/model/ensemble.py),
captions the val photos at one decoding (default beam 5, length penalty 1.5, no repeated trigram: the bundled model's)
and is scored with coco-caption (PTB tokenizer, METEOR in Java). The choice is the highest sum of BLEU-1..4, METEOR
and CIDEr, the decoding tuner's rule (benchmarks/tune_caption_decoding.py), which then chooses the chosen ensemble's
own decoding. The models must share vocabulary, settings and the frozen encoder's weights, so the photos are encoded
once (or read from --feature-cache, the fits' cache). --max-members bounds the model file: each decoder of the
bundled kind is ~20 MiB in float16. ``--write`` writes the chosen row as a model file (float32; export it with --half).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from checkpoint_averaging import CaptionFamily, check_caption_decoding  # noqa: E402

from text_attn.core.errors import new_file  # noqa: E402
from text_attn.core.modelfile import ModelFileError  # noqa: E402
from text_attn.core.safe_files import OutputRefused, check_output, write_text  # noqa: E402


def combine(models: list[Path]):
    """The models as one captioner: the first alone, or the first with the others as its ensemble's members."""
    from captioning.commands.export import ensemble_of, load_any

    captioner, _ = load_any(str(models[0]))
    if len(models) > 1:
        ensemble_of(captioner, str(models[0]), [str(m) for m in models[1:]], option="--models")
    return captioner


def main(argv: list[str] | None = None) -> int:
    import torch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, required=True, help="Flickr8k (original or Kaggle layout)")
    p.add_argument("--models", type=Path, nargs="+", required=True, help="caption model files (at least 2)")
    p.add_argument("--max-members", type=int, default=2, help="the largest ensemble tried (default 2)")
    p.add_argument("--split", default="val", help="the split chosen on (never a test split)")
    p.add_argument("--limit", type=int, help="only the first N photos of the split")
    p.add_argument("--feature-cache", type=Path, help="a fit's feature cache folder holding the split's features")
    p.add_argument("--beam-size", type=int, default=5, help="beam width (default 5)")
    p.add_argument("--length-penalty", type=float, default=1.5, help="length penalty (default 1.5)")
    p.add_argument("--no-repeat-ngram", type=int, default=3, help="n-gram blocking, 0: off (default 3)")
    p.add_argument("--json", type=new_file, help="write the rows here")
    p.add_argument("--write", type=Path, help="write the chosen row here as a model file")
    args = p.parse_args(argv)
    if args.split.startswith("test"):
        p.error("--split: an ensemble is chosen on validation data, never on a test split")
    if len(args.models) < 2 or args.max_members < 2:
        p.error("--models: give at least 2 model files, and --max-members at least 2")
    check_caption_decoding(p, args)
    for option, path in (("--json", args.json), ("--write", args.write)):  # said now, not after the scoring
        if path is None:
            continue
        if not path.parent.is_dir():
            p.error(f"{option} {path}: no folder {path.parent} to write it in")
        try:
            check_output(path)
        except OutputRefused as err:
            p.error(f"{option} {err}")
    family = CaptionFamily(args, caches=[args.feature_cache] if args.feature_cache else [], prog="ensemble_choice")
    sizes = range(1, min(args.max_members, len(args.models)) + 1)
    rows, chosen = [], None
    try:  # all of them as one ensemble first: a model that cannot join the others fails before any scoring
        combine(args.models)
    except ModelFileError as err:
        print(f"ensemble_choice: error: {err}", file=sys.stderr)
        return 1
    print(f"{args.split}: {family.what}; {len(args.models)} models", flush=True)
    for size in sizes:
        for combo in itertools.combinations(range(len(args.models)), size):
            captioner = combine([args.models[i] for i in combo])
            start = time.perf_counter()
            with torch.no_grad():
                scores = family.evaluate(captioner)
            row = {"models": [str(args.models[i]) for i in combo], **scores, "seconds": time.perf_counter() - start}
            rows.append(row)
            print(f"  {' + '.join(row['models'])}: {family.cells(row)}", flush=True)
            if chosen is None or row["chosen_by"] > chosen[0]["chosen_by"]:
                chosen = (row, captioner)
    head, rule = family.header(args.split)
    print(f"\n| models | {head} |\n|---|{rule}|")
    for r in rows:
        mark = "**" if r is chosen[0] else ""
        print(f"| {mark}{' + '.join(r['models'])}{mark} | {family.cells(r)} |")
    if args.json:
        decoding = {
            "beam": args.beam_size,
            "length_penalty": args.length_penalty,
            "no_repeat_ngram": args.no_repeat_ngram,
        }
        report = {"split": args.split, "photos": len(family.paths), "decoding": decoding, "rows": rows,
                  "chosen": chosen[0]["models"]}  # fmt: skip
        write_text(args.json, json.dumps(report, indent=1) + "\n")
    if args.write:
        from captioning.commands.export import export_model

        export_model(chosen[1], args.write)
        print(f"wrote {args.write}: {' + '.join(chosen[0]['models'])}")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
