r"""Beam search's choice in two stages (each row's K best tokens, then the K best of the K*K candidates; the banned
ids and repeated n-grams dropped from those few) against the choice over every row's whole distribution it replaced
(``beam_search(..., whole_vocabulary=True)``: each step's (N, V) filled, masked and added, the banned ids written
into a copy), on the bundled models with their recorded decoding, in one process, the two ways alternating round by
round (ratios carry to other machines, absolute rates do not).

    python benchmarks/beam_choice.py --multi30k-root ../shared/data/multi30k --flickr8k-root ../shared/data/flickr8k \
        --threads 2 --json docs/beam_choice.json

- translation: the bundled Transformer and GRU (bahdanau) on Multi30k's test set (test_2016_flickr.de), German ->
  English, as ``translate`` runs it (batches of 64; tokenizing and detokenizing included), sentences/s;
- captioning: the bundled captioner's search alone on Flickr8k test photos' features (encoded once beforehand, not
  timed), batches of 16 as ``caption`` makes them, images/s.

Each row says whether both ways wrote the same words for every input (they should: the scores are the same sums;
only exact ties may order differently).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from text_attn.core import decoding
from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text


@contextmanager
def whole_vocabulary():
    """Every search in the block chooses its beams as before (decoding.search looks beam_search up at each call)."""
    original = decoding.beam_search
    decoding.beam_search = functools.partial(original, whole_vocabulary=True)
    try:
        yield
    finally:
        decoding.beam_search = original


def alternate(run, rounds: int) -> dict:
    """``run()`` -> outputs, timed ``rounds`` times each way, two-stage first in odd rounds and second in even ones."""
    run()  # warm-up: first-call allocations
    seconds = {"two": [], "whole": []}
    outputs = {}
    for r in range(rounds):
        for way in ("two", "whole") if r % 2 == 0 else ("whole", "two"):
            t0 = time.perf_counter()
            if way == "whole":
                with whole_vocabulary():
                    outputs[way] = run()
            else:
                outputs[way] = run()
            seconds[way].append(time.perf_counter() - t0)
    return {
        "two_stage_s": statistics.median(seconds["two"]),
        "whole_vocabulary_s": statistics.median(seconds["whole"]),
        "same": outputs["two"] == outputs["whole"],
        "differing": sum(a != b for a, b in zip(outputs["two"], outputs["whole"], strict=True)),
    }


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def translation_rows(root: Path, rounds: int, limit: int | None, batch: int = 64) -> list[dict]:
    from text_attn.translation.bundled import MODEL_NAMES
    from text_attn.translation.translator import Translator

    found = [root / n for n in ("test_2016_flickr.de.gz", "test_2016_flickr.de")]
    source = next((p for p in found if p.is_file()), None)
    if source is None:
        raise SystemExit(f"beam_choice: no test_2016_flickr.de[.gz] in {root}: give --multi30k-root")
    sentences = _lines(source)[:limit]
    rows = []
    for name in ("transformer", "bahdanau"):
        translator = Translator.load(MODEL_NAMES[name])
        d = translator.decoding()
        if d["beam_size"] < 2:
            d["beam_size"] = 5  # a greedy recorded decoding has no beams to choose: the translate default's width
        print(f"beam_choice: {name} on {len(sentences)} test sentences, {d}", file=sys.stderr, flush=True)

        def run(t=translator, d=d):
            return [x.text for i in range(0, len(sentences), batch) for x in t.translate(sentences[i : i + batch], **d)]

        found = alternate(run, rounds)
        rows.append(_row(f"translate, bundled {name}, Multi30k test, batch {batch}", d, len(sentences), "sentences/s",
                         found))  # fmt: skip
    return rows


def caption_rows(root: Path, rounds: int, limit: int, batch: int = 16) -> list[dict]:
    from captioning.model.bundled import BUNDLED_MODEL
    from captioning.model.captioner import Captioner
    from captioning.photos.preprocess import prepared

    names = (root / "Flickr8k_text" / "Flickr_8k.testImages.txt").read_text().split()[:limit]
    photos = [root / "Flicker8k_Dataset" / n for n in names]
    missing = [p for p in photos if not p.is_file()]
    if missing:
        raise SystemExit(f"beam_choice: {len(missing)} Flickr8k test photos missing (first {missing[0]})")
    captioner = Captioner.load(BUNDLED_MODEL)
    print(f"beam_choice: encoding {len(photos)} Flickr8k test photos", file=sys.stderr, flush=True)
    with torch.no_grad():
        features = [
            captioner.encode(torch.stack([prepared(p, captioner.preprocess) for p in photos[i : i + batch]]))
            for i in range(0, len(photos), batch)
        ]
    d = {**captioner.decoding(), "max_len": 30}
    print(f"beam_choice: captioner's search, {d}", file=sys.stderr, flush=True)

    def run():
        return [" ".join(c.words) for f in features for c in captioner.caption_features(f, **d)]

    found = alternate(run, rounds)
    return [_row(f"caption, bundled captioner's search alone, Flickr8k test, batch {batch}", d, len(photos),
                 "images/s", found)]  # fmt: skip


def _row(what: str, decoding_used: dict, n: int, unit: str, found: dict) -> dict:
    shown = {k: v for k, v in decoding_used.items() if k in ("beam_size", "length_penalty", "no_repeat_ngram") and v}
    return {
        "what": what,
        "decoding": ", ".join(f"{k} {v}" for k, v in shown.items()),
        "inputs": n,
        "unit": unit,
        "two_stage": round(n / found["two_stage_s"], 1),
        "whole_vocabulary": round(n / found["whole_vocabulary_s"], 1),
        "speedup": round(found["whole_vocabulary_s"] / found["two_stage_s"], 2),
        "same_output": found["same"],
        "differing": found["differing"],
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| what | decoding | inputs | two stages (now) | whole vocabulary (before) | speed-up | same words |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        same = "yes" if r["same_output"] else f"no ({r['differing']} differ)"
        lines.append(f"| {r['what']} | {r['decoding']} | {r['inputs']} | {r['two_stage']} {r['unit']} | "
                     f"{r['whole_vocabulary']} {r['unit']} | {r['speedup']:.2f}x | {same} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--multi30k-root", type=Path, help="Multi30k folder (test_2016_flickr.de[.gz]); none: no rows")
    ap.add_argument("--flickr8k-root", type=Path, help="Flickr8k folder (Flicker8k_Dataset, Flickr8k_text)")
    ap.add_argument("--sentences", type=int, default=None, help="first N test sentences (default: all 1,000)")
    ap.add_argument("--photos", type=int, default=500, help="first N Flickr8k test photos (default 500)")
    ap.add_argument("--rounds", type=int, default=3, help="timed runs each way, alternating (default 3; median)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--json", type=new_file, help="also write the rows here")
    args = ap.parse_args(argv)
    if args.multi30k_root is None and args.flickr8k_root is None:
        ap.error("give --multi30k-root and/or --flickr8k-root: the data to search on")
    if args.rounds < 1 or args.photos < 1 or (args.sentences is not None and args.sentences < 1):
        ap.error("--rounds, --photos and --sentences must be at least 1")
    torch.set_num_threads(args.threads)
    rows = []
    if args.multi30k_root is not None:
        rows += translation_rows(args.multi30k_root, args.rounds, args.sentences)
    if args.flickr8k_root is not None:
        rows += caption_rows(args.flickr8k_root, args.rounds, args.photos)
    print(f"torch {torch.__version__}, {args.threads} threads, {args.rounds} rounds each way (median)")
    print(table(rows))
    if args.json is not None:
        write_text(args.json, json.dumps({"threads": args.threads, "rounds": args.rounds, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
