"""Two or more translators as one ensemble (``translate --ensemble``, text_attn.translation.ensemble: the mean of their
next-token probabilities) against each alone, on Multi30k: sacreBLEU, chrF and BLEU (tok.) per split, sentences a
second.

    python benchmarks/translate_ensemble.py --data-root ../shared/data/multi30k --json docs/translate_ensemble.json

Each member alone translates at its own recorded decoding (what ``translate --model M`` gives); the ensemble at the
first member's (the bundled Transformer's: beam 5, length penalty 1, chosen on val for it alone), so nothing is chosen
on test. The members: the bundled Transformer first (its target vocabulary holds every piece of the GRU's), then the
bundled Bahdanau GRU. About 8 minutes on 2 cores for val and test; ``--limit N`` takes the first N lines of each split.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from _multi30k import read_pair
from _runs import check_corpus, text_models

from text_attn.core.errors import new_file, positive_int
from text_attn.core.metrics import text_scores
from text_attn.core.modelfile import ModelFileError
from text_attn.core.safe_files import write_text
from text_attn.translation.ensemble import EnsembleTranslator
from text_attn.translation.translator import Translator

BATCH = 64


def row(what: str, decoding: dict, translate, sources: list[str], refs: list[str]) -> dict:
    """Scores and speed of ``translate(sources) -> texts``."""
    start = time.perf_counter()
    hyps = translate(sources)
    seconds = time.perf_counter() - start
    scores = text_scores(refs, hyps)
    return {"model": what, "beam_size": decoding["beam_size"], "length_penalty": decoding["length_penalty"],
            "sacrebleu": round(scores["sacrebleu"], 2), "chrf": round(scores["chrf"], 2),
            "bleu_tok": round(scores["bleu_tok"], 2), "sentences_per_s": round(len(sources) / seconds, 1)}  # fmt: skip


def alone(t: Translator):
    return lambda lines: [x.text for i in range(0, len(lines), BATCH) for x in t.translate(lines[i : i + BATCH])]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, required=True, help="the corpus: <split>.<lang>[.gz] files (Multi30k)")
    p.add_argument("--models", type=text_models, default="transformer,bahdanau",
                   help="comma-separated model files or bundled names, the largest target vocabulary first "
                   "(default: transformer,bahdanau)")  # fmt: skip
    p.add_argument("--splits", default="val,test_2016_flickr", help="comma-separated (default: val,test_2016_flickr)")
    p.add_argument("--src-lang", default="de", help="the models' source language (default: de)")
    p.add_argument("--tgt-lang", default="en", help="the references' language (default: en)")
    p.add_argument("--limit", type=positive_int, help="only the first N lines of each split")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    args = p.parse_args(argv)
    for split in args.splits.split(","):  # each split's files before the first is translated
        check_corpus(p, "--data-root", args.data_root, split, args.src_lang, args.tgt_lang, split_option="--splits")
    names = args.models.split(",")
    try:
        members = [Translator.load(name) for name in names]
        both = EnsembleTranslator(members)
    except (ModelFileError, ValueError) as err:
        sys.exit(f"translate_ensemble: error: {err}")
    decoding = members[0].decoding()
    rows = []
    for split in args.splits.split(","):
        sources, refs = read_pair(args.data_root, split, args.src_lang, args.tgt_lang, args.limit)
        print(f"{split}: {len(sources):,} sentences", flush=True)
        for name, t in zip(names, members, strict=True):
            rows.append({"split": split, **row(name, t.decoding(), alone(t), sources, refs)})
            print(f"  {rows[-1]}", flush=True)
        rows.append({"split": split, **row(" + ".join(names), decoding, alone(both), sources, refs)})
        print(f"  {rows[-1]}", flush=True)
    print(
        "\n| split | model | decoding | sacreBLEU | chrF | BLEU (tok.) | sentences/s |\n|---|---|---|---|---|---|---|"
    )
    for r in rows:
        searched = f"beam {r['beam_size']}, length penalty {r['length_penalty']:g}"
        print(f"| {r['split']} | {r['model']} | {searched} | {r['sacrebleu']:.2f} | {r['chrf']:.2f} | "
              f"{r['bleu_tok']:.2f} | {r['sentences_per_s']:.1f} |")  # fmt: skip
    if args.json:
        write_text(args.json, json.dumps({"models": names, "limit": args.limit, "rows": rows}, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
