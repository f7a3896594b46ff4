"""What a line typed without capitals costs a translation model, and what reading it with the training text's capitals
gives back (text_attn/core/casing.py): sacreBLEU of a split's source lines as written, lowercased, in capitals
and in sentence case (only the first letter capital), each translated as typed (``translate --keep-case``) and as
``translate`` reads it by default, with the model file's recorded decoding.

    python benchmarks/casing.py --data-root ../shared/data/multi30k                       # both bundled models
    python benchmarks/casing.py --data-root ../shared/data/multi30k --models M.pt --src-lang de --tgt-lang en

A model file without a casing (from before it, or trained on lowercase text) is measured as typed only. "read back":
how many of the changed lines the casing turns back into the line as written, letter for letter. Time: the bundled
Transformer's capitals row typed as is runs to the length cap (its outputs do not end): ~9 minutes of the ~13 on 2
cores; ``--limit`` takes the first N lines, ``--forms "as written,lowercased"`` the forms named.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from _multi30k import check_corpus_options, corpus_options

from text_attn.core.casing import capitalised
from text_attn.core.errors import new_file, positive_int
from text_attn.core.metrics import sacre_scores
from text_attn.core.modelfile import ModelFileError
from text_attn.core.safe_files import write_text
from text_attn.translation.corpora import corpus_file, read_lines
from text_attn.translation.pairs import TaskError
from text_attn.translation.translator import Translator


def sentence_case(line: str) -> str:
    """``line`` lowercased but for its first letter: German typed as English is."""
    return capitalised(line.lower())


FORMS = {"as written": str, "lowercased": str.lower, "in capitals": str.upper, "sentence case": sentence_case}


def measure(translator: Translator, sources: list[str], refs: list[str], forms: list[str] | None = None) -> list[dict]:
    """One row per form of the lines (``forms``: their names; None: all of FORMS): sacreBLEU typed as is and read with
    the casing (None: the file has none)."""
    has_casing = translator.casing is not None
    rows = []
    for name, form in FORMS.items():
        if forms is not None and name not in forms:
            continue
        lines = [form(s) for s in sources]
        row: dict = {"form": name}
        for keep, key in ((True, "typed"), (False, "recased")):
            if not keep and not has_casing:
                row[key] = None
                continue
            translator.keep_case = keep
            start = time.perf_counter()
            hyps = [t.text for i in range(0, len(lines), 64) for t in translator.translate(lines[i : i + 64])]
            row[key] = round(sacre_scores(refs, hyps)["sacrebleu"], 2)
            row[f"{key}_seconds"] = round(time.perf_counter() - start, 1)
            print(f"  {name}, {key}: sacreBLEU {row[key]:.2f} ({row[f'{key}_seconds']:.0f} s)", flush=True)
        translator.keep_case = False
        read = [translator.read_as(line) for line in lines]
        row["changed"] = sum(r != line for r, line in zip(read, lines, strict=True))
        row["read_back"] = sum(r == s != line for r, s, line in zip(read, sources, lines, strict=True))
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus_options(p)
    p.add_argument("--limit", type=positive_int, help="only the first N lines")
    p.add_argument("--forms", help=f"comma-separated forms to measure (default: all: {', '.join(FORMS)})")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    args = p.parse_args(argv)
    if args.forms is not None and not args.forms.strip():  # an empty shell variable: it ran every form (~13 min)
        p.error(f"--forms is empty: give one or more of {', '.join(FORMS)}, or leave it out for all")
    check_corpus_options(p, args)
    forms = args.forms.split(",") if args.forms else None
    if forms and not set(forms) <= set(FORMS):
        p.error(f"--forms: each of {', '.join(FORMS)}, got {args.forms}")
    try:
        sources = read_lines(corpus_file(args.data_root, args.split, args.src_lang))[: args.limit]
        refs = read_lines(corpus_file(args.data_root, args.split, args.tgt_lang))[: args.limit]
        if len(sources) != len(refs) or not sources:
            raise ValueError(f"{args.split}: {len(sources)} source lines against {len(refs)} references")
        found = {}
        for name in args.models.split(","):
            print(f"{name}: {len(sources):,} lines of {args.split}.{args.src_lang}", flush=True)
            found[name] = measure(Translator.load(name), sources, refs, forms)
    except (ModelFileError, TaskError, ValueError) as err:
        sys.exit(f"casing: error: {err}")
    for name, rows in found.items():
        print(f"\n{name} ({len(sources):,} lines of {args.split}; sacreBLEU against {args.tgt_lang}):")
        print("| the German typed | as typed (`--keep-case`) | read with the training text's capitals (default) | "
              "lines changed | read back exactly |\n|---|---|---|---|---|")  # fmt: skip
        for r in rows:
            recased = "-" if r["recased"] is None else f"{r['recased']:.2f}"
            print(f"| {r['form']} | {r['typed']:.2f} | {recased} | {r['changed']:,} | {r['read_back']:,} |")
    if args.json:
        write_text(
            args.json, json.dumps({"split": args.split, "lines": len(sources), "models": found}, indent=1) + "\n"
        )
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
