"""How often a translation model's source check flags real sentences, per language and split of a corpus laid out as
``<split>.<lang>[.gz]`` (Multi30k): the model's own source language should pass, other languages should not. With
``--write``, first give the model file a check made from the corpus's train and val source lines, as ``text-train fit``
makes it (one it has is replaced, and said so; the bundled model was given its check so); the weights stay as they
are, float16 ones too.

    python benchmarks/source_check.py --data-root ../shared/data/multi30k
    python benchmarks/source_check.py --data-root ../shared/data/multi30k --model M.pt --write --src-lang de

The check (text_attn/translation/source_check.py): a character-trigram profile of the training source side (a line
whose mean trigram log-probability is below what 99% of the val source lines reach, less a margin, is flagged: another
language) and a word profile (a line whose words are on average more surprising than at most 2% of the val lines,
both parts together, is flagged: text from outside the training text's world). --outside FILE (default: German news
and everyday speech written for this project, benchmarks/data/german_outside_multi30k.txt) is scored too, each line
named with its verdict. --about says what the training text is, for the note (e.g. "descriptions of everyday pictures,
Multi30k's").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from text_attn.core.errors import new_file
from text_attn.core.modelfile import ModelFileError, load_model_file
from text_attn.core.safe_files import write_text
from text_attn.translation.corpora import corpus_file, read_lines
from text_attn.translation.pairs import TaskError
from text_attn.translation.source_check import line_score, source_check, unlike_source, word_score
from text_attn.translation.translate_cli import BUNDLED_MODEL
from text_attn.translation.translator import KIND, Translator

EXAMPLES = [  # written for this table: in and out of Multi30k's domain (image descriptions), and English
    "Ein Mann fährt mit seinem Fahrrad eine Straße entlang.",
    "Die Katze schläft auf dem Sofa.",
    "Wo ist der Bahnhof?",
    "A man is riding a bike down the street.",
]


OUTSIDE = Path(__file__).parent / "data" / "german_outside_multi30k.txt"


def write_check(model: Path, root: Path, lang: str, about: str | None = None) -> dict:
    """Give the model file ``model`` a source check made from ``root``'s train and val lines of ``lang``, in place,
    and return it; its weights are kept as stored (float16 stays float16)."""
    data = load_model_file(model, KIND)  # read once: the stored dtypes, then the translator built from them
    half = any(v.dtype == torch.float16 for v in data["state_dict"].values())
    translator = Translator.from_data(data, model)
    train = read_lines(corpus_file(root, "train", lang))
    val = read_lines(corpus_file(root, "val", lang))
    replaced = translator.source_check is not None
    translator.source_check = source_check(train, val, lang)
    if translator.source_check is None:
        raise ValueError(f"{root}: train.{lang} or val.{lang} has no text to make a check from")
    if about:
        translator.source_check["about"] = about
    translator.save(model, half=half)
    what = "replaced its check with one" if replaced else "wrote the check"
    print(f"{what} ({len(train):,} train and {len(val):,} val lines of {lang}) into {model}")
    return translator.source_check


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, required=True, help="the corpus: <split>.<lang>[.gz] files")
    p.add_argument("--model", type=Path, default=BUNDLED_MODEL, help="text model file (default: the bundled one)")
    p.add_argument("--langs", default="de,en,fr,cs", help="comma-separated languages to score (default: de,en,fr,cs)")
    p.add_argument("--splits", default="val,test_2016_flickr", help="comma-separated splits to score")
    p.add_argument("--write", action="store_true", help="first give the model file a check made from the corpus")
    p.add_argument("--src-lang", help="with --write: the model's source language in the corpus (e.g. de)")
    p.add_argument("--about", help="with --write: what the training text is, in words, for the note")
    p.add_argument("--outside", type=Path, default=OUTSIDE, help="lines from outside the training text's world")
    p.add_argument("--json", type=new_file, help="also write the table to this file")
    args = p.parse_args(argv)
    if args.write and not args.src_lang:
        p.error("--write needs --src-lang (the model's source language in the corpus)")
    try:
        check = (write_check(args.model, args.data_root, args.src_lang, args.about) if args.write
                 else Translator.load(args.model).source_check)  # fmt: skip
        if check is None:
            raise ValueError(f"{args.model} has no source check (give it one with --write)")
        langs, splits = args.langs.split(","), args.splits.split(",")
        table = {}
        for lang in langs:
            for split in splits:
                lines = [line for line in read_lines(corpus_file(args.data_root, split, lang)) if line.strip()]
                table[f"{lang} {split}"] = (sum(unlike_source(check, line) for line in lines), len(lines))
    except (ModelFileError, TaskError, ValueError) as err:  # TaskError: a missing or unreadable corpus file
        sys.exit(f"source check: error: {err}")
    words = f", words {check['words']['threshold']}" if check.get("words") else " (no word part: an older file)"
    print(f"\n{args.model.name}: source check of a {check.get('lang', '?')} model; lines flagged (thresholds: "
          f"language {check['threshold']}{words}):")  # fmt: skip
    print("| language | " + " | ".join(splits) + " |")
    print("|---|" + "---|" * len(splits))
    for lang in langs:
        cells = [table[f"{lang} {split}"] for split in splits]
        print(f"| {lang} | " + " | ".join(f"{k:,} of {n:,} ({100 * k / max(n, 1):.1f}%)" for k, n in cells) + " |")
    print("\nexamples:")
    for line in EXAMPLES:
        print(f"  {'flagged' if unlike_source(check, line) else 'passes '}  {line}")
    outside = []
    if args.outside and args.outside.is_file():
        lines = [line.strip() for line in args.outside.read_text(encoding="utf-8").splitlines() if line.strip()]
        print(f"\n{args.outside.name}: {len(lines)} lines from outside the training text's world")
        print("| line | language part | word part (surprisal) | flagged |\n|---|---|---|---|")
        for line in lines:
            language = line_score(check, line) < check["threshold"]
            words = check.get("words")
            surprise = word_score(words, line) if words else None
            by_words = surprise is not None and surprise > words["threshold"]
            outside.append({"line": line, "language": language, "words": by_words, "flagged": language or by_words})
            cell = "-" if surprise is None else f"{'yes' if by_words else 'no'} ({surprise:.2f})"
            print(
                f"| {line} | {'yes' if language else 'no'} | {cell} | **{'yes' if language or by_words else 'no'}** |"
            )
        caught = sum(r["flagged"] for r in outside)
        print(
            f"\nflagged {caught} of {len(outside)}; missed: "
            + ("; ".join(r["line"] for r in outside if not r["flagged"]) or "none")
        )
    if args.json:
        numbers = {"threshold": check["threshold"], "word_threshold": check.get("words", {}).get("threshold"),
                   "flagged": table, "outside": outside}  # fmt: skip
        write_text(args.json, json.dumps(numbers, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
