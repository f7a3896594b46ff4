"""How often a translation model's source check flags real sentences, per language and split of a corpus laid out as
``<split>.<lang>[.gz]`` (Multi30k): the model's own source language should pass, other languages should not. With
``--write``, first give the check to a model file that has none (the bundled model was given its check so), from the
corpus's train and val source lines, as ``text-train fit`` makes it; the weights stay as they are.

    python benchmarks/source_check.py --data-root ../shared/data/multi30k
    python benchmarks/source_check.py --data-root ../shared/data/multi30k --model M.pt --write --src-lang de

The check (text_attn/translation/source_check.py): a character-trigram profile of the training source side; a line
whose mean trigram log-probability is below what 99% of the val source lines reach, less a margin, is flagged.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from text_attn.translation.corpora import corpus_file, read_lines
from text_attn.translation.source_check import source_check, unlike_source
from text_attn.translation.translate_cli import BUNDLED_MODEL
from text_attn.translation.translator import Translator

EXAMPLES = [  # written for this table: in and out of Multi30k's domain (image descriptions), and English
    "Ein Mann fährt mit seinem Fahrrad eine Straße entlang.",
    "Die Katze schläft auf dem Sofa.",
    "Wo ist der Bahnhof?",
    "A man is riding a bike down the street.",
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, required=True, help="the corpus: <split>.<lang>[.gz] files")
    p.add_argument("--model", type=Path, default=BUNDLED_MODEL, help="text model file (default: the bundled one)")
    p.add_argument("--langs", default="de,en,fr,cs", help="comma-separated languages to score (default: de,en,fr,cs)")
    p.add_argument("--splits", default="val,test_2016_flickr", help="comma-separated splits to score")
    p.add_argument("--write", action="store_true", help="first give the model file a check made from the corpus")
    p.add_argument("--src-lang", help="with --write: the model's source language in the corpus (e.g. de)")
    p.add_argument("--json", type=Path, help="also write the table to this file")
    args = p.parse_args(argv)
    translator = Translator.load(args.model)
    if args.write:
        if not args.src_lang:
            p.error("--write needs --src-lang (the model's source language in the corpus)")
        train = read_lines(corpus_file(args.data_root, "train", args.src_lang))
        val = read_lines(corpus_file(args.data_root, "val", args.src_lang))
        translator.source_check = source_check(train, val, args.src_lang)
        half = any(v.dtype.is_floating_point and v.element_size() == 2 for v in translator.net.parameters())
        translator.save(args.model, half=half or args.model == BUNDLED_MODEL)
        print(f"wrote the check ({len(train):,} train and {len(val):,} val lines of {args.src_lang}) into {args.model}")
        translator = Translator.load(args.model)
    check = translator.source_check
    if check is None:
        sys.exit(f"source check: {args.model} has no source check (give it one with --write)")
    langs, splits = args.langs.split(","), args.splits.split(",")
    table = {}
    for lang in langs:
        for split in splits:
            lines = [line for line in read_lines(corpus_file(args.data_root, split, lang)) if line.strip()]
            table[f"{lang} {split}"] = (sum(unlike_source(check, line) for line in lines), len(lines))
    print(f"\n{args.model.name}: source check of a {check.get('lang', '?')} model; lines flagged (threshold "
          f"{check['threshold']}):")  # fmt: skip
    print("| language | " + " | ".join(splits) + " |")
    print("|---|" + "---|" * len(splits))
    for lang in langs:
        cells = [table[f"{lang} {split}"] for split in splits]
        print(f"| {lang} | " + " | ".join(f"{k:,} of {n:,} ({100 * k / n:.1f}%)" for k, n in cells) + " |")
    print("\nexamples:")
    for line in EXAMPLES:
        print(f"  {'flagged' if unlike_source(check, line) else 'passes '}  {line}")
    if args.json:
        args.json.write_text(json.dumps({"threshold": check["threshold"], "flagged": table}, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
