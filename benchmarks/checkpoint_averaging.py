"""Checkpoint averaging, chosen on Multi30k's VALIDATION split: does the mean of a run's last epochs' weights
translate better than its best single epoch?

    python benchmarks/checkpoint_averaging.py --run runs/m30k/transformer --data-root ../shared/data/multi30k \\
        --counts 2 3 5 8 --write runs/m30k/transformer/model.pt

The run must have saved each epoch's weights (``epoch-epoch=N.ckpt``: the ModelCheckpoint with ``save_top_k: -1``
in configs/text/multi30k_de_en_transformer.yaml). Rows: the fit's own model file (the best epoch by val BLEU), then
the mean of the last k epochs for each k of --counts (as ``text-export LAST.ckpt OUT --average ...`` writes it).
Each is scored on val with greedy decoding (what fit's val_bleu measures): BLEU (tok.), sacreBLEU, chrF.
``--write`` writes the row with the highest val BLEU (tok.) as a model file.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

EPOCH_FILE = re.compile(r"epoch-epoch=(\d+)\.ckpt$")


def epoch_checkpoints(run: Path) -> list[Path]:
    """The run's per-epoch checkpoints, oldest first."""
    found = [(int(m.group(1)), p) for p in run.rglob("*.ckpt") if (m := EPOCH_FILE.search(p.name))]
    return [p for _, p in sorted(found)]


def main(argv: list[str] | None = None) -> int:
    import torch
    from multi30k import StageError, read_pair, score

    from text_attn.core.modelfile import ModelFileError
    from text_attn.translation.export import average_sources, read_source, write_model_file
    from text_attn.translation.translator import Translator

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, required=True, help="the fit's root dir (its per-epoch checkpoints)")
    p.add_argument("--data-root", type=Path, required=True, help="Multi30k: <split>.<lang>[.gz] files")
    p.add_argument("--model", type=Path, help="the fit's model file (default: RUN/model.pt)")
    p.add_argument("--src", default="de")
    p.add_argument("--tgt", default="en")
    p.add_argument("--split", default="val", help="the split chosen on (never a test split)")
    p.add_argument("--counts", type=int, nargs="+", default=[2, 3, 5, 8], help="average the last k epochs, each k")
    p.add_argument("--limit", type=int, help="only the first N sentences of the split")
    p.add_argument("--write", type=Path, help="write the best row here as a model file (may be the fit's own)")
    p.add_argument("--json", type=Path, help="write the rows here")
    args = p.parse_args(argv)
    if args.split.startswith("test"):
        p.error("--split: averaging is chosen on validation data, never on a test split")
    model = args.model or args.run / "model.pt"
    ckpts = epoch_checkpoints(args.run)
    counts = sorted({k for k in args.counts if 2 <= k <= len(ckpts)})
    if not model.is_file() or not counts:
        print(f"checkpoint_averaging: error: need {model} and >= 2 epoch checkpoints under {args.run} "
              f"(found {len(ckpts)})", file=sys.stderr)  # fmt: skip
        return 1
    try:
        sources, refs = read_pair(args.data_root, args.split, args.src, args.tgt, args.limit)
    except StageError as err:
        print(f"checkpoint_averaging: error: {err}", file=sys.stderr)
        return 1
    torch.set_grad_enabled(False)

    def evaluate(translator: Translator) -> dict:
        start = time.perf_counter()
        hyps = []
        for i in range(0, len(sources), 64):
            hyps += [t.text for t in translator.translate(sources[i : i + 64], 1)]
        s = score(refs, hyps, sources)
        seconds = time.perf_counter() - start
        return {"bleu": s["bleu_tok"], "sacrebleu": s["sacrebleu"], "chrf": s["chrf"], "seconds": seconds}

    rows, contents = [], {}
    print(f"{args.split}: {len(sources)} sentences; {len(ckpts)} epoch checkpoints under {args.run}", flush=True)
    candidates = [("fit's model file (best epoch)", None)] + [(f"mean of the last {k} epochs", k) for k in counts]
    for label, k in candidates:
        try:
            if k is None:
                translator = Translator.load(model)
            else:
                last = ckpts[-k:]
                content, _ = read_source(last[-1])
                contents[label] = (average_sources(content, last[-1], [str(c) for c in last[:-1]]), last[-1])
                translator = Translator.from_data(contents[label][0], last[-1], "averaged checkpoints")
        except ModelFileError as err:
            print(f"checkpoint_averaging: error: {err}", file=sys.stderr)
            return 1
        epochs = "" if k is None else ", ".join(EPOCH_FILE.search(c.name).group(1) for c in ckpts[-k:])
        rows.append({"variant": label, "epochs": epochs, **evaluate(translator)})
        print(f"  {label}: BLEU (tok.) {rows[-1]['bleu']:.2f}", flush=True)
    best = max(rows, key=lambda r: r["bleu"])
    print(f"\n| variant | epochs (0-based) | {args.split} BLEU (tok.), greedy | sacreBLEU | chrF |")
    print("|---|---|---|---|---|")
    for r in rows:
        mark = "**" if r is best else ""
        print(f"| {mark}{r['variant']}{mark} | {r['epochs'] or '-'} | {r['bleu']:.2f} | {r['sacrebleu']:.2f} | "
              f"{r['chrf']:.2f} |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"split": args.split, "rows": rows, "chosen": best["variant"]}, indent=1))
    if args.write:
        if best["variant"] in contents:
            content, src = contents[best["variant"]]
            write_model_file(content, args.write, src=src)
            print(f"wrote {args.write}: {best['variant']}")
        elif args.write.resolve() != model.resolve():
            shutil.copyfile(model, args.write)
            print(f"wrote {args.write}: a copy of {model}, the best on {args.split}")
        else:
            print(f"{model} is the best on {args.split}: left as it is")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
