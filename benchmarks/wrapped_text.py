"""Text wrapped over lines (as copied from a PDF), translated a line at a time (``translate``'s default) against a
paragraph at a time (``translate --paragraphs``: text_attn/translation/paragraphs.py): Multi30k's test sentences joined
k to a paragraph, each paragraph wrapped at --width columns (a word that does not fit broken by a hyphen where both its
halves keep 3 characters, as a typesetter breaks it; a hyphenated word at its hyphen), each paragraph's references
joined the same way. sacreBLEU and chrF of each paragraph's translation (a line at a time: its lines' translations
joined by spaces) against them, and how many paragraphs --paragraphs joins back exactly as they were typed (with the
model's words, as translate asks them, and without).

    python benchmarks/wrapped_text.py --data-root ../shared/data/multi30k --json docs/wrapped_text.json

The third column translates each paragraph unwrapped, one line as typed: what the best joining could reach. Both
bundled models by default (``--models``); the model file's recorded decoding, batches of 64.
"""

from __future__ import annotations

import argparse
import sys
import time

from _multi30k import check_corpus_options, corpus_options, each_model, read_pair
from paragraphs import grouped

from text_attn.core.errors import new_file, positive_int
from text_attn.core.metrics import sacre_scores
from text_attn.translation.paragraphs import join_wrapped
from text_attn.translation.translator import Translator

SHORTEST_HALF = 3  # characters each half of a word broken at a line's end keeps


def wrapped(text: str, width: int) -> tuple[list[str], int]:
    """``text`` wrapped at ``width`` columns, and how many of its words were broken by a hyphen at a line's end. A word
    that does not fit goes to the next line, unless a hyphen can break it with :data:`SHORTEST_HALF` characters each
    side (a hyphenated word at its last hyphen that fits; another where a run of letters allows); what is left of a
    word longer than a line stays whole on a line of its own."""
    lines, line, broken = [], "", 0
    for word in text.split():
        if not line or len(line) + 1 + len(word) <= width:
            line = f"{line} {word}" if line else word
            continue
        head = _head(word, width - len(line) - 1)  # the columns left after a space
        if head:
            lines.append(f"{line} {head}")
            own = word.startswith(head)  # broken at its own hyphen, else at one added
            line, broken = word[len(head) if own else len(head) - 1 :], broken + 1
        else:
            lines.append(line)
            line = word
    return [*lines, line] if line else lines, broken


def _head(word: str, room: int) -> str:
    """``word``'s first part with the hyphen that ends the line, in ``room`` columns ("" where it cannot break): at
    its own last hyphen that fits, else after ``room - 1`` of its letters."""
    own = [i + 1 for i, c in enumerate(word) if c == "-" and SHORTEST_HALF <= i < room]
    if own and len(word) - own[-1] >= SHORTEST_HALF:
        return word[: own[-1]]
    cut = room - 1  # the hyphen takes a column
    if cut < SHORTEST_HALF or len(word) - cut < SHORTEST_HALF or not word[: cut + SHORTEST_HALF].isalpha():
        return ""
    return word[:cut] + "-"


def measure(translator: Translator, sources: list[str], refs: list[str], k: int, width: int) -> dict:
    paragraphs, joined_refs = grouped(sources, k), grouped(refs, k)
    wraps = [wrapped(p, width) for p in paragraphs]
    broken = sum(b for _, b in wraps)
    read = [join_wrapped(lines, translator.word_logp) for lines, _ in wraps]  # as translate --paragraphs joins
    alone = [join_wrapped(lines) for lines, _ in wraps]  # nothing asked: a lowercase half joined whole
    same = {"with_model": sum(a == b for a, b in zip(read, paragraphs, strict=True)),
            "without": sum(a == b for a, b in zip(alone, paragraphs, strict=True))}  # fmt: skip
    row: dict = {"sentences_a_paragraph": k, "paragraph_count": len(paragraphs), "width": width,
                 "wrapped_lines": sum(len(w) for w, _ in wraps), "broken_words": broken,
                 "broken_paragraphs": sum(b > 0 for _, b in wraps), "same_as_typed": same}  # fmt: skip
    flat = [line for w, _ in wraps for line in w]
    for way in ("lines", "paragraphs", "unwrapped"):
        start = time.perf_counter()
        if way == "lines":
            outs = _translated(translator, flat)
            hyps, at = [], 0
            for w, _ in wraps:
                hyps.append(" ".join(outs[at : at + len(w)]))
                at += len(w)
        else:
            hyps = _translated(translator, read if way == "paragraphs" else paragraphs)
        scores = sacre_scores(joined_refs, hyps)
        words = sum(len(h.split()) for h in hyps) / sum(len(r.split()) for r in joined_refs)
        row[way] = {"sacrebleu": round(scores["sacrebleu"], 2), "chrf": round(scores["chrf"], 2),
                    "length_ratio": round(words, 3), "seconds": round(time.perf_counter() - start, 1)}  # fmt: skip
        print(f"  {k} a paragraph, {way}: sacreBLEU {row[way]['sacrebleu']:.2f} ({row[way]['seconds']:.0f} s)",
              flush=True)  # fmt: skip
    return row


def _translated(translator: Translator, lines: list[str]) -> list[str]:
    return [t.text for i in range(0, len(lines), 64) for t in translator.translate(lines[i : i + 64])]


def table(name: str, rows: list[dict]) -> str:
    out = [f"{name}:", "| sentences a paragraph | width | lines | words broken | paragraphs joined as typed, with the "
           "model's words / without | sacreBLEU, a line at a time (default) | `--paragraphs` | unwrapped | chrF, "
           "lines / paragraphs / unwrapped |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        a, b, c = r["lines"], r["paragraphs"], r["unwrapped"]
        same = r["same_as_typed"]
        out.append(f"| {r['sentences_a_paragraph']} | {r['width']} | {r['wrapped_lines']:,} | {r['broken_words']:,} | "
                   f"{same['with_model']:,} / {same['without']:,} of {r['paragraph_count']:,} | {a['sacrebleu']:.2f} | "
                   f"{b['sacrebleu']:.2f} | {c['sacrebleu']:.2f} | {a['chrf']:.2f} / {b['chrf']:.2f} / "
                   f"{c['chrf']:.2f} |")  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus_options(p)
    p.add_argument("--per-paragraph", type=positive_int, default=4, help="sentences joined a paragraph (default: 4)")
    p.add_argument("--width", type=positive_int, default=60, help="columns a line is wrapped at (default: 60)")
    p.add_argument("--limit", type=positive_int, help="only the first N sentences")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    args = p.parse_args(argv)
    check_corpus_options(p, args)
    if args.width < 2 * SHORTEST_HALF + 2:
        p.error(f"--width: at least {2 * SHORTEST_HALF + 2} columns, got {args.width}")
    sources, refs = read_pair(args.data_root, args.split, args.src_lang, args.tgt_lang, args.limit)
    k, width = args.per_paragraph, args.width
    return each_model(args, sources, lambda translator: [measure(translator, sources, refs, k, width)], table)


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
