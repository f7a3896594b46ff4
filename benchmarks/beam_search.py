r"""Beam search as it runs now against two things it no longer does, on the bundled models with their recorded
decoding, in one process, the ways taking turns round by round (ratios carry to other machines, absolute rates do not):

- **whole vocabulary**: each step's choice over every row's whole distribution (``beam_search(...,
  whole_vocabulary=True)``: a (rows, vocabulary) block filled, masked and added, the banned ids written into a copy),
  where now each row's K best tokens are taken first and the K best of the K*K candidates after;
- **memory per beam**: the encoder's memory (the Transformer's cross-attention keys and values, Bahdanau's and
  Luong's keys) expanded to a row per beam and copied whenever sentences leave the batch, where now it stays one row
  per sentence (``one_row_per_source_state``; the captioner has kept its regions that way since before: no such row
  for it);
- **both**: the search as it ran until 2026-12-04.

    python benchmarks/beam_search.py --multi30k-root ../shared/data/multi30k --flickr8k-root ../shared/data/flickr8k \
        --threads 2 --json docs/beam_search.json

- translation: the bundled Transformer and GRU (bahdanau) on Multi30k's test set (test_2016_flickr.de), German ->
  English, as ``translate`` runs it (batches of 64; tokenizing and detokenizing included), sentences/s; and any
  German -> English model file given with ``--translator`` (none is bundled with Luong attention: a model from
  ``text-train fit --config configs/text/multi30k_de_en_luong.yaml``);
- captioning: the bundled captioner's search alone on Flickr8k test photos' features (encoded once beforehand, not
  timed), batches of 16 as ``caption`` makes them, images/s.

Each row says whether every way wrote the same words for every input (they should: the scores are the same sums;
only exact ties may order differently).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from text_attn.core import decoding
from text_attn.core.errors import new_file, positive_int
from text_attn.core.safe_files import write_text


@contextlib.contextmanager
def whole_vocabulary():
    """Every search in the block chooses its beams as before (decoding.search looks beam_search up at each call)."""
    original = decoding.beam_search
    decoding.beam_search = functools.partial(original, whole_vocabulary=True)
    try:
        yield
    finally:
        decoding.beam_search = original


@contextlib.contextmanager
def memory_per_beam():
    """The text models' memory expanded to every beam in the block, as before (their one-row-per-sentence entries
    become plain source-constant ones)."""
    from text_attn.translation.seq2seq import Seq2Seq
    from text_attn.translation.transformer import Transformer

    saved = {cls: cls.__dict__["one_row_per_source_state"] for cls in (Seq2Seq, Transformer)}
    try:
        for cls in saved:
            cls.one_row_per_source_state = ()
        yield
    finally:
        for cls, value in saved.items():
            cls.one_row_per_source_state = value


@contextlib.contextmanager
def both():
    """Both as before: the search as it ran until 2026-12-04."""
    with whole_vocabulary(), memory_per_beam():
        yield


WAYS = {
    "now": contextlib.nullcontext,
    "whole_vocabulary": whole_vocabulary,
    "memory_per_beam": memory_per_beam,
    "both": both,
}


def alternate(run, rounds: int, ways: list[str]) -> dict:
    """``run()`` -> outputs, timed ``rounds`` times each way, the ways' order turning by one each round."""
    run()  # warm-up: first-call allocations
    seconds = {w: [] for w in ways}
    outputs = {}
    for r in range(rounds):
        for way in ways[r % len(ways) :] + ways[: r % len(ways)]:
            with WAYS[way]():
                t0 = time.perf_counter()
                outputs[way] = run()
                seconds[way].append(time.perf_counter() - t0)
    now = outputs["now"]
    return {
        "seconds": {w: statistics.median(s) for w, s in seconds.items()},
        "differing": {w: sum(a != b for a, b in zip(now, o, strict=True)) for w, o in outputs.items() if w != "now"},
    }


def translation_rows(
    root: Path, rounds: int, limit: int | None, batch: int = 64, files: list[Path] = (), bundled: bool = True
) -> list[dict]:
    """The bundled translators' rows (``bundled``) and one for each model file in ``files`` (German -> English)."""
    from text_attn.translation.bundled import MODEL_NAMES
    from text_attn.translation.corpora import corpus_file, read_lines
    from text_attn.translation.translator import Translator

    lines = read_lines(corpus_file(root, "test_2016_flickr", "de"))  # a missing file: a TaskError naming both names
    sentences = [line.strip() for line in lines if line.strip()][:limit]
    models = [(f"bundled {n}", MODEL_NAMES[n]) for n in ("transformer", "bahdanau") if bundled]
    rows = []
    for label, path in models + [(None, f) for f in files]:
        translator = Translator.load(path)
        if label is None:  # a file of the user's: its name and its attention, which the row is about
            label = f"{Path(path).name} ({getattr(translator.net.cfg, 'attention', 'transformer')})"
        d = translator.decoding()
        if d["beam_size"] < 2:
            d["beam_size"] = 5  # a greedy recorded decoding has no beams to choose: the translate default's width
        print(f"beam_search: {label} on {len(sentences)} test sentences, {d}", file=sys.stderr, flush=True)

        def run(t=translator, d=d):
            return [x.text for i in range(0, len(sentences), batch) for x in t.translate(sentences[i : i + batch], **d)]

        found = alternate(run, rounds, list(WAYS))
        rows.append(_row(f"translate, {label}, Multi30k test, batch {batch}", d, len(sentences), "sentences/s",
                         found))  # fmt: skip
    return rows


TEST_SPLIT = "Flickr8k_text/Flickr_8k.testImages.txt"


def no_test_split(root: Path) -> str:
    return f"no {TEST_SPLIT} in {root}: give Flickr8k's folder as --flickr8k-root"


def caption_rows(root: Path, rounds: int, limit: int, batch: int = 16) -> list[dict]:
    from captioning.model.bundled import BUNDLED_MODEL
    from captioning.model.captioner import Captioner
    from captioning.photos.preprocess import prepared

    split = root / TEST_SPLIT
    if not split.is_file():
        raise FileNotFoundError(no_test_split(root))
    photos = [root / "Flicker8k_Dataset" / n for n in split.read_text().split()[:limit]]
    missing = [p for p in photos if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} Flickr8k test photos are missing (the first: {missing[0]})")
    captioner = Captioner.load(BUNDLED_MODEL)
    print(f"beam_search: encoding {len(photos)} Flickr8k test photos", file=sys.stderr, flush=True)
    with torch.no_grad():
        features = [
            captioner.encode(torch.stack([prepared(p, captioner.preprocess) for p in photos[i : i + batch]]))
            for i in range(0, len(photos), batch)
        ]
    d = {**captioner.decoding(), "max_len": 30}
    print(f"beam_search: captioner's search, {d}", file=sys.stderr, flush=True)

    def run():
        return [" ".join(c.words) for f in features for c in captioner.caption_features(f, **d)]

    found = alternate(run, rounds, ["now", "whole_vocabulary"])
    return [_row(f"caption, bundled captioner's search alone, Flickr8k test, batch {batch}", d, len(photos),
                 "images/s", found)]  # fmt: skip


def _row(what: str, decoding_used: dict, n: int, unit: str, found: dict) -> dict:
    shown = {k: v for k, v in decoding_used.items() if k in ("beam_size", "length_penalty", "no_repeat_ngram") and v}
    now = found["seconds"]["now"]
    row = {"what": what, "decoding": ", ".join(f"{k} {v}" for k, v in shown.items()), "inputs": n, "unit": unit,
           "now": round(n / now, 1)}  # fmt: skip
    for way, seconds in found["seconds"].items():
        if way != "now":
            row[way] = {"rate": round(n / seconds, 1), "speedup": round(seconds / now, 2),
                        "differing": found["differing"][way]}  # fmt: skip
    return row


def table(rows: list[dict]) -> str:
    lines = [
        "| what | decoding | inputs | now | whole vocabulary (before) | memory per beam (before) | both (before) "
        "| same words |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = []
        for way in ("whole_vocabulary", "memory_per_beam", "both"):
            w = r.get(way)
            cells.append("(no such way)" if w is None else f"{w['rate']} ({w['speedup']:.2f}x the time)")
        differ = [
            f"{r[w]['differing']} differ ({w.replace('_', ' ')})"
            for w in WAYS
            if w != "now" and r.get(w, {}).get("differing")
        ]
        lines.append(f"| {r['what']} | {r['decoding']} | {r['inputs']} | {r['now']} {r['unit']} | {cells[0]} | "
                     f"{cells[1]} | {cells[2]} | {'; '.join(differ) or 'yes'} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--multi30k-root", type=Path, help="Multi30k folder (test_2016_flickr.de[.gz]); none: no rows")
    ap.add_argument("--flickr8k-root", type=Path, help="Flickr8k folder (Flicker8k_Dataset, Flickr8k_text)")
    ap.add_argument("--sentences", type=positive_int, default=None, help="first N test sentences (default: all 1,000)")
    ap.add_argument("--photos", type=positive_int, default=500, help="first N Flickr8k test photos (default 500)")
    ap.add_argument("--rounds", type=positive_int, default=3, help="timed runs each way, in turn (default 3; median)")
    ap.add_argument("--threads", type=positive_int, default=2, help="torch threads (default 2)")
    ap.add_argument("--translator", type=Path, action="append", default=[], metavar="FILE",
                    help="also a row for this German -> English model file (e.g. a Luong model from text-train;\n"
                         "repeatable; with --multi30k-root)")  # fmt: skip
    ap.add_argument("--no-bundled", action="store_true",
                    help="only the --translator files' rows (no bundled translator or captioner)")  # fmt: skip
    ap.add_argument("--json", type=new_file, help="also write the rows here")
    args = ap.parse_args(argv)
    if args.multi30k_root is None and args.flickr8k_root is None:
        ap.error("give --multi30k-root and/or --flickr8k-root: the data to search on")
    if args.translator and args.multi30k_root is None:
        ap.error("--translator needs --multi30k-root: the sentences to translate")
    for f in args.translator:
        if not f.is_file():
            ap.error(f"--translator {f}: no such file")
    # the data each part reads, before any part runs (the captioner's came after minutes of translation rows)
    if args.multi30k_root is not None:
        from _runs import check_corpus  # benchmarks/ is on sys.path when run as a script

        check_corpus(ap, "--multi30k-root", args.multi30k_root, "test_2016_flickr", "de")
    if args.flickr8k_root is not None and not args.no_bundled and not (args.flickr8k_root / TEST_SPLIT).is_file():
        ap.error(no_test_split(args.flickr8k_root))
    torch.set_num_threads(args.threads)
    rows = []
    if args.multi30k_root is not None:
        rows += translation_rows(args.multi30k_root, args.rounds, args.sentences, files=args.translator,
                                 bundled=not args.no_bundled)  # fmt: skip
    if args.flickr8k_root is not None and not args.no_bundled:
        rows += caption_rows(args.flickr8k_root, args.rounds, args.photos)
    print(f"torch {torch.__version__}, {args.threads} threads, {args.rounds} rounds each way (median)")
    print(table(rows))
    if args.json is not None:
        write_text(args.json, json.dumps({"threads": args.threads, "rounds": args.rounds, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
