"""Lines of several sentences, translated sentence by sentence (``translate``'s default since 2026-12-05:
text_attn/translation/sentences.py) against whole, as before (``translate --no-split``): Multi30k's test sentences
joined k to a line (1,000 sentences: 1,000 lines of one, 500 of two, ...), each line's references joined the same way,
sacreBLEU and chrF of the lines against them, and the output's length against the references' (words).

    python benchmarks/paragraphs.py --data-root ../shared/data/multi30k --json docs/paragraphs.json

The row of one sentence a line checks that splitting changes nothing there (no test sentence is cut by
``split_sentences``: the same translations both ways). Both bundled models by default (``--models``); the model file's
recorded decoding, batches of 64.
"""

from __future__ import annotations

import argparse
import sys
import time

from _multi30k import check_corpus_options, corpus_options, each_model, read_pair

from text_attn.core.errors import new_file, positive_int
from text_attn.core.metrics import sacre_scores
from text_attn.translation.sentences import split_sentences
from text_attn.translation.translator import Translator


def grouped(lines: list[str], k: int) -> list[str]:
    """``lines`` joined ``k`` to a line (the last line may hold fewer)."""
    return [" ".join(lines[i : i + k]) for i in range(0, len(lines), k)]


def measure(translator: Translator, sources: list[str], refs: list[str], k: int) -> dict:
    lines, joined_refs = grouped(sources, k), grouped(refs, k)
    row: dict = {"sentences_a_line": k, "lines": len(lines),
                 "cut_into": sum(len(split_sentences(s)) for s in lines)}  # fmt: skip
    outputs = {}
    for way, split in (("split", True), ("whole", False)):
        start = time.perf_counter()
        hyps = [t.text for i in range(0, len(lines), 64) for t in translator.translate(lines[i : i + 64], split=split)]
        scores = sacre_scores(joined_refs, hyps)
        words = sum(len(h.split()) for h in hyps) / sum(len(r.split()) for r in joined_refs)
        row[way] = {"sacrebleu": round(scores["sacrebleu"], 2), "chrf": round(scores["chrf"], 2),
                    "length_ratio": round(words, 3), "seconds": round(time.perf_counter() - start, 1)}  # fmt: skip
        outputs[way] = hyps
        print(f"  {k} a line, {way}: sacreBLEU {row[way]['sacrebleu']:.2f} ({row[way]['seconds']:.0f} s)", flush=True)
    row["same_translations"] = sum(a == b for a, b in zip(outputs["split"], outputs["whole"], strict=True))
    return row


def table(name: str, rows: list[dict]) -> str:
    out = [f"{name}:", "| sentences a line | lines | sentences found | sacreBLEU, each sentence on its own (default) | "
           "sacreBLEU, whole (`--no-split`) | chrF, own / whole | output words / reference words, own / whole | "
           "same translation |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        s, w = r["split"], r["whole"]
        out.append(f"| {r['sentences_a_line']} | {r['lines']:,} | {r['cut_into']:,} | {s['sacrebleu']:.2f} | "
                   f"{w['sacrebleu']:.2f} | {s['chrf']:.2f} / {w['chrf']:.2f} | {s['length_ratio']:.2f} / "
                   f"{w['length_ratio']:.2f} | {r['same_translations']:,} of {r['lines']:,} |")  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus_options(p)
    p.add_argument("--per-line", default="1,2,4", help="sentences joined a line, comma-separated (default: 1,2,4)")
    p.add_argument("--limit", type=positive_int, help="only the first N sentences")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    args = p.parse_args(argv)
    check_corpus_options(p, args)
    try:
        ks = [int(k) for k in args.per_line.split(",")]
        if not ks or min(ks) < 1:
            raise ValueError
    except ValueError:
        p.error(f"--per-line: whole numbers from 1, comma-separated, got {args.per_line!r}")
    sources, refs = read_pair(args.data_root, args.split, args.src_lang, args.tgt_lang, args.limit)
    return each_model(args, sources, lambda translator: [measure(translator, sources, refs, k) for k in ks], table)


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
