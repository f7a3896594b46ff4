"""Multi30k pairs read as training reads them and translations scored (BLEU tok., sacreBLEU, chrF, by length): what
multi30k.py, checkpoint_averaging.py and tune_translation_decoding.py share, below all three; the options of a
benchmark that translates one split with a few models (casing.py, paragraphs.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from _runs import StageError, check_corpus, text_models


def corpus_options(p: argparse.ArgumentParser) -> None:
    """--data-root, --models, --split, --src-lang, --tgt-lang: one split of a corpus, translated by a few models."""
    p.add_argument("--data-root", type=Path, required=True, help="the corpus: <split>.<lang>[.gz] files (Multi30k)")
    p.add_argument("--models", type=text_models, default="transformer,bahdanau",
                   help="comma-separated model files or bundled names (default: transformer,bahdanau)")  # fmt: skip
    p.add_argument("--split", default="test_2016_flickr", help="the split translated (default: test_2016_flickr)")
    p.add_argument("--src-lang", default="de", help="the models' source language (default: de)")
    p.add_argument("--tgt-lang", default="en", help="the references' language (default: en)")


def check_corpus_options(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--data-root's split in both languages, before any model runs; named by the option, not data.root."""
    check_corpus(p, "--data-root", args.data_root, args.split, args.src_lang, args.tgt_lang)


def each_model(args: argparse.Namespace, sources: list[str], rows_of: Callable, table: Callable) -> int:
    """--models' rows, each model loaded in turn (``rows_of(translator)``: its rows), then each model's table
    (``table(title, rows)``) printed and --json written: paragraphs.py's and wrapped_text.py's runs."""
    import json

    from text_attn.core.safe_files import write_text
    from text_attn.translation.translator import Translator

    found = {}
    for name in args.models.split(","):
        translator = Translator.load(name)  # a missing file: one line (run_main)
        print(f"{name}: {len(sources):,} sentences of {args.split}.{args.src_lang}", flush=True)
        found[name] = rows_of(translator)
    for name, rows in found.items():
        print()
        print(table(f"{name} ({len(sources):,} sentences of {args.split}; sacreBLEU against {args.tgt_lang})", rows))
    if args.json:
        write_text(args.json, json.dumps({"split": args.split, "sentences": len(sources), "models": found}, indent=1))
        print(f"wrote {args.json}")
    return 0


def read_pair(root: Path, split: str, src: str, tgt: str, n: int | None = None) -> tuple[list[str], list[str]]:
    """The first n (all: None) sentence pairs of ``<root>/<split>.<src|tgt>[.gz]`` as (sources, references), read
    as training reads them (misaligned files: a StageError naming the file and line)."""
    from text_attn.translation.corpora import corpus_file, read_parallel_text
    from text_attn.translation.pairs import TaskError

    try:
        pairs = read_parallel_text(corpus_file(root, split, src), corpus_file(root, split, tgt), max_pairs=n)
    except TaskError as err:
        raise StageError(str(err)) from err
    return [s for s, _ in pairs], [t for _, t in pairs]


def by_length(refs: list[str], hyps: list[str], sources: list[str]) -> dict:
    """BLEU (tok.) x 100 and sentence count per source-length bucket (words: 1-10, 11-15, 16-20, 21-30, 31+)."""
    from text_attn.core.metrics import REAL_BUCKET_LABELS, REAL_BUCKETS, bleu_by_length, bucket_label
    from text_attn.core.vocab import tokenize

    ref_tok = [[tokenize(r, lower=True)] for r in refs]
    hyp_tok = [tokenize(h, lower=True) for h in hyps]
    by_len = bleu_by_length([len(s.split()) for s in sources], ref_tok, hyp_tok, REAL_BUCKETS)
    return {
        label: {"bleu": 100 * by_len[bucket_label(lo, hi)]["bleu"], "count": by_len[bucket_label(lo, hi)]["count"]}
        for (lo, hi), label in zip(REAL_BUCKETS, REAL_BUCKET_LABELS, strict=True)
    }


def score(refs: list[str], hyps: list[str], sources: list[str]) -> dict:
    """BLEU (tok.), sacreBLEU, chrF (x 100), BLEU (tok.) by source words, outputs with <unk>."""
    from text_attn.core.metrics import text_scores

    return {
        **text_scores(refs, hyps),
        "unk": sum("<unk>" in h for h in hyps),
        "by_length": by_length(refs, hyps, sources),
    }
