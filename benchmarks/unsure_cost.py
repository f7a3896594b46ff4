r"""What ``translate --unsure`` costs and finds: the bundled translators translating Multi30k sentences with each
token's probability kept by the search (``translate_tokens(probs=True)``, what ``--unsure`` does) against without, and
against reading the translations back instead (``Translator.with_probs``, what ``--unsure`` did before 2026-12-04), in
one process, batches of 64 as ``translate`` makes them, each batch timed every way in turn, the first two in
alternating order (ratios carry to other machines, seconds do not); the largest difference between the kept and the
read-back word probabilities; and how many of the translations hold a word under the threshold, and the chrF of those
translations against that of the others (sacreBLEU's chrF on each group, the split's English side as references).

    python benchmarks/unsure_cost.py --multi30k-root ../shared/data/multi30k --split val --threads 2 \
        --json docs/unsure_cost.json

Each model translates with its file's recorded decoding (``translate``'s default: the Transformer's beam 5, the
GRU's its own). What a low probability says about a word (how often it is not in the reference) is
``benchmarks/word_confidence.py``'s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from _multi30k import read_pair
from _runs import check_corpus, markdown_table, record_json

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text
from text_attn.core.unsure import UNSURE, check_threshold

BATCH = 64  # translate's default --batch-size


def cost(translator, sentences: list[str], below: float, references: list[str] | None = None) -> dict:
    """Seconds to translate without and with the probabilities kept, and to read back instead, summed over the
    batches; the largest difference of a kept word probability from the read-back one; translations and words under
    ``below``; with ``references`` (one per sentence), the chrF of the translations that hold such a word and of the
    others."""
    decoding = translator.decoding()
    extra = {"no_repeat_ngram": decoding["no_repeat_ngram"]} if decoding.get("no_repeat_ngram") else {}
    toks = [translator.codec.encode(translator.read_as(s), "source") for s in sentences]
    translator.translate_tokens(toks[:2], decoding["beam_size"], decoding["length_penalty"])  # warm-up
    seconds = {False: 0.0, True: 0.0}  # translating without / with probs
    read, differs, outs = 0.0, 0.0, []
    for n, start in enumerate(range(0, len(toks), BATCH)):
        part = toks[start : start + BATCH]
        for probs in (n % 2 == 0, n % 2 == 1):  # alternating which goes first: neither always meets a warm cache
            t0 = time.perf_counter()
            done = translator.translate_tokens(part, decoding["beam_size"], decoding["length_penalty"], probs=probs,
                                               **extra)  # fmt: skip
            seconds[probs] += time.perf_counter() - t0
            if probs:
                kept = done
            else:
                plain_done = done
        t1 = time.perf_counter()
        translator.with_probs(part, plain_done)
        read += time.perf_counter() - t1
        for a, b in zip(kept, plain_done, strict=True):
            if a.tokens != b.tokens:
                raise RuntimeError(f"probs=True changed a translation: {a.text!r} against {b.text!r}")
            gaps = [abs(x - y) for x, y in zip(a.word_probs, b.word_probs, strict=True)]
            differs = max(differs, *gaps)
        outs += kept
    plain = seconds[False]
    words = sum(len(tr.words) for tr in outs)
    found = [tr.unsure(below) for tr in outs]
    split = {}
    if references is not None:
        from sacrebleu.metrics import CHRF

        for name, keep in (("chrf_unsure", True), ("chrf_sure", False)):
            pairs = [(tr.text, ref) for tr, ref, f in zip(outs, references, found, strict=True) if bool(f) == keep]
            split[name] = CHRF().corpus_score([h for h, _ in pairs], [[r for _, r in pairs]]).score if pairs else None
    return split | {
        "sentences": len(outs),
        "beam_size": decoding["beam_size"],
        "translate_ms": 1000 * plain / len(outs),
        "with_probs_ms": 1000 * seconds[True] / len(outs),
        "kept_ratio": seconds[True] / plain,
        "read_back_ms": 1000 * read / len(outs),
        "ratio": read / plain,
        "largest_difference": differs,
        "translations_unsure": sum(bool(f) for f in found),
        "words": words,
        "words_unsure": sum(len(f) for f in found),
    }


def _chrf(score: float | None) -> str:
    return "–" if score is None else f"{score:.2f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--multi30k-root", type=Path, required=True, help="Multi30k's folder (../shared/data/multi30k)")
    p.add_argument("--split", default="val", help="which German side: val (default), test_2016_flickr, train")
    p.add_argument("--sentences", type=int, help="the first N of the split (default: all)")
    p.add_argument("--below", type=float, default=UNSURE, help=f"the threshold (default {UNSURE:g})")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--json", type=new_file, help="also write the numbers here")
    args = p.parse_args(argv)
    if args.threads < 1 or (args.sentences is not None and args.sentences < 1):
        p.error("--threads and --sentences must be at least 1")
    try:
        check_threshold(args.below, "--below")
    except ValueError as err:
        p.error(str(err))
    # before the models load, named by the options typed (it said "ROOT: found neither nope.de nor nope.de.gz")
    check_corpus(p, "--multi30k-root", args.multi30k_root, args.split, "de", "en", split_option="--split")
    torch.set_num_threads(args.threads)
    from text_attn.translation.translator import Translator

    sentences, references = read_pair(args.multi30k_root, args.split, "de", "en", args.sentences)
    rows = {}
    for label, name in (("Transformer", None), ("Bahdanau GRU", "bahdanau")):
        rows[f"bundled {label}"] = cost(Translator.load(name), sentences, args.below, references)
    print(f"translate --unsure on Multi30k {args.split} (German -> English), {args.threads} thread(s), batches of "
          f"{BATCH}, the models' recorded decoding; words under p = {args.below:g}\n")  # fmt: skip
    table = [[name, str(r["beam_size"]), f"{r['sentences']:,}", f"{r['translate_ms']:.1f}",
              f"{r['with_probs_ms']:.1f} ({r['kept_ratio']:.2f}x)", f"{r['read_back_ms']:.1f} (+{r['ratio']:.2f}x)",
              f"{r['largest_difference']:.1e}",
              f"{r['translations_unsure']:,} ({r['translations_unsure'] / r['sentences']:.1%})",
              f"{r['words_unsure']:,} of {r['words']:,} ({r['words_unsure'] / r['words']:.1%})",
              _chrf(r["chrf_unsure"]), _chrf(r["chrf_sure"])]
             for name, r in rows.items()]  # fmt: skip
    header = ["model", "beam", "sentences", "translate, ms each", "with the probabilities kept", "read back instead",
              "kept - read back, largest",
              "translations with a word under it", "words under it", "their chrF", "the others' chrF"]  # fmt: skip
    print(markdown_table(header, table))
    if args.json:
        write_text(args.json, record_json({"split": args.split, "threads": args.threads, "below": args.below,
                                           "rows": rows}))  # fmt: skip
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
