"""Choose a text model's decoding (beam width, length penalty) on Multi30k's VALIDATION split, never on test.

    python benchmarks/tune_translation_decoding.py --data-root ../shared/data/multi30k               # bundled de->en
    python benchmarks/tune_translation_decoding.py --data-root ../shared/data/multi30k --model runs/x/model.pt \\
        --src de --tgt en --beams 1 3 5 8 --length-penalties 0 0.5 1 --write

Every (beam, length penalty) pair translates the val sources in-process (as ``translate`` does) and is scored like
``benchmarks/multi30k.py`` scores test: BLEU (tok.) (lowercased, tokenized: the PyTorch seq2seq tutorials' measure,
which the goals use), sacreBLEU and chrF, and the length ratio (output words / reference words, sacreBLEU's).
The chosen setting has the highest val BLEU (tok.); ``--write`` records it in the model file (``decoding``), and
``translate`` uses it when --beam-size / --length-penalty are not given.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main(argv: list[str] | None = None) -> int:
    import torch
    from _multi30k import read_pair, score
    from _runs import check_corpus, existing_file
    from _tuning import add_grid_options, finish, settings

    from text_attn.core.errors import positive_int
    from text_attn.translation.translator import Translator

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, required=True, help="Multi30k: <split>.<lang>[.gz] files")
    bundled = ROOT / "text_attn" / "translation" / "assets" / "multi30k_de_en.pt"
    p.add_argument("--model", type=existing_file, default=bundled,
                   help="the text model file tuned (default: the bundled Transformer, multi30k_de_en.pt)")  # fmt: skip
    p.add_argument("--src", default="de", help="the source language: <split>.<src>[.gz] is translated (default: de)")
    p.add_argument("--tgt", default="en", help="the references' language (default: en)")
    p.add_argument("--split", default="val", help="the split tuned on (never the test split)")
    p.add_argument("--limit", type=positive_int, help="only the first N sentences of the split")
    add_grid_options(p, beams=[1, 3, 5, 8], no_repeat_ngrams=[0])
    args = p.parse_args(argv)
    if args.split.startswith("test"):
        p.error("--split: decoding is chosen on validation data, never on a test split")
    check_corpus(p, "--data-root", args.data_root, args.split, args.src, args.tgt)
    grid = settings(p, args)
    try:
        translator = Translator.load(args.model)
        sources, refs = read_pair(args.data_root, args.split, args.src, args.tgt, args.limit)
    except Exception as err:  # noqa: BLE001 - one line for any unreadable input (gzip and zlib raise many kinds)
        print(f"tune_translation_decoding: error: {err}", file=sys.stderr)
        return 1
    torch.set_grad_enabled(False)
    rows = []
    for beam, lp, ngram in grid:
        start = time.perf_counter()
        hyps = []
        for i in range(0, len(sources), 64):
            hyps += [t.text for t in translator.translate(sources[i : i + 64], beam, lp, no_repeat_ngram=ngram)]
        seconds = time.perf_counter() - start
        s = score(refs, hyps, sources)
        ratio = sum(len(h.split()) for h in hyps) / max(1, sum(len(r.split()) for r in refs))
        row = {"beam": beam, "length_penalty": lp, "no_repeat_ngram": ngram, "bleu_tok": s["bleu_tok"],
               "sacrebleu": s["sacrebleu"], "chrf": s["chrf"], "ratio": ratio, "seconds": seconds}  # fmt: skip
        rows.append(row)
        print(f"beam {beam} lp {lp} no-repeat {ngram}: BLEU (tok.) {row['bleu_tok']:.2f}, sacreBLEU "
              f"{row['sacrebleu']:.2f}, chrF {row['chrf']:.2f}, ratio {ratio:.3f}", file=sys.stderr,
              flush=True)  # fmt: skip
    best = max(rows, key=lambda r: r["bleu_tok"])
    print(f"\n{args.model.name} on Multi30k {args.split} ({len(sources)} sentences); chosen: the highest BLEU (tok.)")
    print("| beam | length penalty | no-repeat n-gram | BLEU (tok.) | sacreBLEU | chrF | length ratio | seconds | |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        mark = "chosen" if r is best else ""
        print(f"| {r['beam']} | {r['length_penalty']:g} | {r['no_repeat_ngram']} | {r['bleu_tok']:.2f} | "
              f"{r['sacrebleu']:.2f} | {r['chrf']:.2f} | {r['ratio']:.3f} | {r['seconds']:.1f} | {mark} |")  # fmt: skip
    report = {"model": str(args.model), "split": args.split, "sentences": len(sources)}
    finish(args, rows, best, report, f"highest BLEU (tok.) on Multi30k {args.split} ({len(sources)} sentences)")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
