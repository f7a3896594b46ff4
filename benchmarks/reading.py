"""Does a model's reading of a given text say which text fits? (``caption --given``, ``translate --given``.)

    python benchmarks/reading.py --flickr8k-root ../shared/data/flickr8k --multi30k ../shared/data/multi30k \\
        --json docs/reading.json

Retrieval with the bundled models as scorers, on test sets they never saw. Captioning: the Flickr8k test photos and
the first of each photo's five captions; every caption is read against every photo (``Captioner.read_features``, as
``caption --given`` reads it). Translation: Multi30k's test_2016_flickr German sentences and their English
references, every reference read for every sentence (``Translator.read_tokens``, as ``translate --given``). Then:

- text -> image / source: for each caption (reference), the photos (sentences) ranked by how well it reads for each.
  The text is the same in every comparison, so the mean and the total log-probability rank alike.
- image / source -> text: for each photo (sentence), the captions (references) ranked, three ways: by the mean
  log-probability a token (``--given``'s score), by the total (which favours short texts), and by the mean minus
  the text's mean over all photos (sentences): what the photo adds to how likely the text is anyway, a pointwise
  mutual information, which stops generic texts ("a dog runs through the grass") from winning everywhere.

R@K: the share of queries whose own match ranks in the top K; chance is K / N. Median rank: 1 is best.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from text_attn.core.errors import new_file  # noqa: E402


def _ranks(scores, queries_on_rows: bool) -> list[int]:
    """scores (N, N), entry (i, j): image i with text j. The rank (1 = first) of each query's own match: a row's
    texts for an image (``queries_on_rows``), else a column's images for a text."""

    s = scores if queries_on_rows else scores.T
    own = s.diagonal().unsqueeze(1)  # (N, 1)
    return ((s > own).sum(dim=1) + 1).tolist()  # ties go to the match


def _row(what: str, ranks: list[int]) -> dict:
    import statistics

    n = len(ranks)
    at = {f"R@{k}": round(100 * sum(r <= k for r in ranks) / n, 1) for k in (1, 5, 10)}
    return {"direction": what, **at, "median_rank": statistics.median(ranks), "queries": n}


def _rows(mean, total) -> list[dict]:
    """The table's rows from the (N, N) mean and total log-probabilities."""
    pmi = mean - mean.mean(dim=0, keepdim=True)  # a text's mean over the images taken off
    return [
        _row("text -> image", _ranks(mean, queries_on_rows=False)),
        _row("image -> text, mean log-probability (--given's score)", _ranks(mean, queries_on_rows=True)),
        _row("image -> text, total log-probability", _ranks(total, queries_on_rows=True)),
        _row("image -> text, mean less the text's mean over the images", _ranks(pmi, queries_on_rows=True)),
    ]


def captions(root: Path, model: str, limit: int | None) -> tuple[list[dict], dict]:
    import torch
    from tqdm import tqdm

    from captioning.model.captioner import Captioner
    from captioning.training.readers import read_flickr8k

    items = read_flickr8k(root)["test"][:limit]
    texts = [" ".join(it.captions[0]) for it in items]
    captioner = Captioner.load(model)
    t0 = time.perf_counter()
    features = torch.cat([captioner.encode_photos([it.path for it in items[k : k + 32]])[1]
                          for k in range(0, len(items), 32)])  # fmt: skip
    encoded = time.perf_counter() - t0
    mean = torch.empty(len(items), len(items))
    total = torch.empty_like(mean)
    t0 = time.perf_counter()
    step = 8  # captions read together: the photos' first state is computed once for them (Captioner.read_texts)
    for start in tqdm(range(0, len(texts), step), desc="captions read", unit_scale=step, file=sys.stderr):
        for j, readings in enumerate(captioner.read_texts(features, texts[start : start + step]), start):
            for i, read in enumerate(readings):
                mean[i, j] = read.score
                total[i, j] = read.score * (len(read.words) + 1)
    seconds = time.perf_counter() - t0
    facts = {"photos": len(items), "encode_s": round(encoded, 1), "read_s": round(seconds, 1),
             "readings_per_s": round(len(items) ** 2 / seconds, 1)}  # fmt: skip
    return _rows(mean, total), facts


def translations(root: Path, model: str, limit: int | None) -> tuple[list[dict], dict]:
    import torch
    from _multi30k import read_pair
    from tqdm import tqdm

    from text_attn.translation.translator import Translator

    sources, refs = read_pair(root, "test_2016_flickr", "de", "en", limit)
    translator = Translator.load(model)
    toks = [translator.tokenize(s) for s in sources]
    mean = torch.empty(len(sources), len(sources))
    total = torch.empty_like(mean)
    t0 = time.perf_counter()
    step = 8  # references read together: the sentences are encoded once for them (Translator.read_texts)
    for start in tqdm(range(0, len(refs), step), desc=f"{model}: references read", unit_scale=step, file=sys.stderr):
        for j, readings in enumerate(translator.read_texts(toks, refs[start : start + step]), start):
            for i, read in enumerate(readings):
                mean[i, j] = read.score
                total[i, j] = read.score * (len(read.tokens) + 1)
    seconds = time.perf_counter() - t0
    return _rows(mean, total), {"sentences": len(sources), "read_s": round(seconds, 1),
                                "readings_per_s": round(len(sources) ** 2 / seconds, 1)}  # fmt: skip


def _named(rows: list[dict], image: str, text: str) -> list[dict]:
    """The rows with their directions in the family's words (a translator's "reference -> sentence": its JSON said
    "text -> image", as the captioner's rows are named)."""
    return [{**r, "direction": r["direction"].replace("image", image).replace("text", text)} for r in rows]


def _print(title: str, rows: list[dict], n: int) -> None:
    # chance: K of the n candidates, at most all of them (R@5 of 1 sentence was "500.0")
    chance = ", ".join(f"R@{k} {100 * min(k, n) / n:.1f}" for k in (1, 5, 10))
    print(f"\n{title}: {n} x {n} readings; chance: {chance}, median rank {(n + 1) / 2:g}")
    print("\n| direction | R@1 | R@5 | R@10 | median rank |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['direction']} | {r['R@1']} | {r['R@5']} | {r['R@10']} | {r['median_rank']:g} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--flickr8k-root", type=Path, help="Flickr8k (leave out to skip the captioner)")
    p.add_argument("--multi30k", type=Path, help="Multi30k (leave out to skip the translators)")
    p.add_argument("--caption-model", default="flickr8k",
                   help="the captioner measured: a model file or a bundled name (default: flickr8k)")  # fmt: skip
    p.add_argument("--text-model", action="append", default=None, help="default: transformer and bahdanau")
    p.add_argument("--limit", type=int, default=None, help="the first N photos and sentences only (a quick look)")
    p.add_argument("--json", type=new_file, default=None, help="also write every model's rows and facts here")
    args = p.parse_args(argv)
    if not (args.flickr8k_root or args.multi30k):  # it ran nothing and exited 0
        p.error("nothing to measure: give --flickr8k-root (the captioner), --multi30k (the translators) or both")
    if args.text_model and not args.multi30k:
        p.error("--text-model scores Multi30k's sentences: give --multi30k too")
    from _runs import check_corpus, check_flickr8k

    if args.multi30k:  # named by the option, before the work (it was the config key, data.root)
        check_corpus(p, "--multi30k", args.multi30k, "test_2016_flickr", "de", "en")
    if args.flickr8k_root:
        check_flickr8k(p, "--flickr8k-root", args.flickr8k_root)
    if args.limit is not None and args.limit < 1:
        p.error(f"--limit must be at least 1, got {args.limit}")
    out: dict = {}
    if args.flickr8k_root:
        rows, facts = captions(args.flickr8k_root, args.caption_model, args.limit)
        rows, data = _named(rows, "photo", "caption"), "Flickr8k test photos (real) and their first captions"
        out["caption"] = {"model": args.caption_model, "data": data, **facts, "rows": rows}
        _print(f"captioner {args.caption_model}, {data}", rows, facts["photos"])
        print(f"(photos encoded in {facts['encode_s']} s; {facts['readings_per_s']} readings/s)")
    for model in args.text_model or (["transformer", "bahdanau"] if args.multi30k else []):
        rows, facts = translations(args.multi30k, model, args.limit)
        rows = _named(rows, "sentence", "reference")
        data = "Multi30k test_2016_flickr German sentences (real) and their English references"
        out[f"translate {model}"] = {"model": model, "data": data, **facts, "rows": rows}
        _print(f"translator {model}, {data}", rows, facts["sentences"])
        print(f"({facts['readings_per_s']} readings/s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
