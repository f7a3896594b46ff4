"""Does reranking a beam's n best captions by what the photo adds help? (An experiment: nothing in ``caption`` uses it.)

    python benchmarks/rerank_captions.py --flickr8k-root ../shared/data/flickr8k --json docs/rerank_captions.json

The bundled model writes its five best captions of each photo (its recorded decoding: beam 5, length penalty 1.5, no
repeated trigram; ``--n-best 5``). Each candidate is then read (``caption --given``'s reading) against its photo and
against K background photos of the train split, and the candidates are ranked by

    (log-probability given the photo  -  lambda x  mean log-probability given the background photos) / length ** lp

(the totals normalised as the search normalises its scores: lp its length penalty), a pointwise mutual information
for lambda = 1 (the measure that nearly doubled the captioner's retrieval R@1 in
benchmarks/reading.py): generic captions, likely for any photo, lose to ones this photo makes likely. lambda = 0 ranks
as the search does; the search's own first caption is the baseline row. lambda is chosen on
the val split by CIDEr-D and the choice is scored on test (coco-caption with the PTB tokenizer, as benchmarks/
flickr8k.py scores; METEOR with Java on the final rows).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from text_attn.core.errors import new_file  # noqa: E402

LAMBDAS = [0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0]


def candidates(captioner, paths: list[Path], background, batch: int, log) -> list[dict]:
    """Per photo: its n best captions with the search's score, each one's mean log-probability given the photo and
    its mean over the background photos (of each one's mean log-probability)."""
    import torch

    d = captioner.decoding()
    out = []
    t0 = time.perf_counter()
    with torch.no_grad():
        for k in range(0, len(paths), batch):
            _, feats = captioner.encode_photos(paths[k : k + batch])
            results = captioner.caption_features(feats, d["beam_size"], 30, d["length_penalty"], n_best=5,
                                                 no_repeat_ngram=d["no_repeat_ngram"])  # fmt: skip
            for b, res in enumerate(results):
                texts = list(dict.fromkeys(" ".join(w) if isinstance(w, list) else w for w, *_ in res.nbest))
                # totals: a reading's score is its mean log-probability over the words and the end
                own = [r[0].score * (len(r[0].words) + 1) for r in captioner.read_texts(feats[b : b + 1], texts)]
                generic = [sum(c.score * (len(c.words) + 1) for c in r) / len(r)
                           for r in captioner.read_texts(background, texts)]  # fmt: skip
                out.append({"image": paths[k + b].name, "search": " ".join(res.words), "texts": texts,
                            "words": [len(t.split()) for t in texts], "own": own, "generic": generic})  # fmt: skip
            log(f"{min(k + batch, len(paths))}/{len(paths)} photos, {time.perf_counter() - t0:.0f} s")
    return out


def choose(rows: list[dict], lam: float | None, lp: float) -> dict[str, str]:
    """Each photo's caption: the search's first (None), else the best by (own - lam x generic) / (words + 1) ** lp,
    both log-probabilities totals, normalised as the search normalises its scores (its length penalty lp)."""
    if lam is None:
        return {r["image"]: r["search"] for r in rows}
    pick = {}
    for r in rows:
        scores = [(o - lam * g) / (n + 1) ** lp for o, g, n in zip(r["own"], r["generic"], r["words"], strict=True)]
        pick[r["image"]] = r["texts"][max(range(len(scores)), key=scores.__getitem__)]
    return pick


def score(refs: dict[str, list[str]], caps: dict[str, str], meteor: bool) -> dict[str, float]:
    from text_attn.core.metrics import coco_metrics

    got = coco_metrics({k: refs[k] for k in caps}, caps, meteor=meteor, ptb=True)
    return {k: round(100 * v, 2) for k, v in got.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--flickr8k-root", type=Path, required=True, help="Flickr8k (either layout): photos, captions")
    p.add_argument("--background", type=int, default=16, help="train photos the generic score is read against")
    p.add_argument("--limit", type=int, help="the first N photos of each split (default: all)")
    p.add_argument("--batch", type=int, default=16, help="photos encoded at a time (default 16)")
    p.add_argument("--json", type=new_file, help="write the scores and the choice here")
    p.add_argument("--rows", action="store_true", help="with --json: also every photo's candidates and their scores")
    args = p.parse_args(argv)
    for flag, value in (("--background", args.background), ("--limit", args.limit), ("--batch", args.batch)):
        if value is not None and value < 1:
            p.error(f"{flag} must be at least 1, got {value}")

    import torch

    from captioning.model.captioner import Captioner
    from captioning.training.readers import read_flickr8k

    torch.manual_seed(0)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    items = read_flickr8k(args.flickr8k_root)
    if args.background > len(items["train"]):
        p.error(f"--background {args.background}: the train split has {len(items['train'])} photos")
    captioner = Captioner.load()
    rng = random.Random(0)
    bg_paths = [it.path for it in rng.sample(items["train"], args.background)]
    with torch.no_grad():
        background = captioner.encode_photos(bg_paths)[1]
    result: dict = {"background": args.background, "decoding": captioner.decoding(), "lambdas": LAMBDAS}
    rows_of = {}
    for split in ("val", "test"):
        its = items[split][: args.limit] if args.limit is not None else items[split]
        refs = {it.path.name: [" ".join(c) for c in it.captions] for it in its}
        t0 = time.perf_counter()
        rows = candidates(captioner, [it.path for it in its], background, args.batch, log)
        rows_of[split] = (rows, refs)
        result[f"{split}_seconds"] = round(time.perf_counter() - t0, 1)
    val_rows, val_refs = rows_of["val"]
    lp = result["decoding"]["length_penalty"]
    sweep = {"search": score(val_refs, choose(val_rows, None, lp), meteor=False)}
    for lam in LAMBDAS:
        sweep[f"lambda {lam:g}"] = score(val_refs, choose(val_rows, lam, lp), meteor=False)
        log(f"val lambda {lam:g}: {sweep[f'lambda {lam:g}']}")
    best = max(LAMBDAS, key=lambda lam: sweep[f"lambda {lam:g}"]["CIDEr"])
    result["val"] = sweep
    result["chosen_lambda"] = best
    test_rows, test_refs = rows_of["test"]
    base, picked = choose(test_rows, None, lp), choose(test_rows, best, lp)
    result["test"] = {"search": score(test_refs, base, meteor=True), f"lambda {best:g}": score(test_refs, picked, True),
                      "changed": sum(base[k] != picked[k] for k in base) / len(base)}  # fmt: skip
    result["test_pmi"] = score(test_refs, choose(test_rows, 1.0, lp), meteor=True)
    cols = ["Bleu_1", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"]
    print("| split | ranking | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for name, s in sweep.items():
        print(f"| val | {name} | " + " | ".join(str(s.get(c, "–")) for c in cols) + " |")
    for name in ("search", f"lambda {best:g}"):
        print(f"| test | {name} | " + " | ".join(str(result["test"][name].get(c, "–")) for c in cols) + " |")
    print("| test | lambda 1 (PMI) | " + " | ".join(str(result["test_pmi"].get(c, "–")) for c in cols) + " |")
    print(f"chosen on val: lambda {best:g}; test captions changed from the search's: {result['test']['changed']:.1%}")
    for split, (rows, _) in rows_of.items():  # how much the ranking moves: captions changed, their length
        base = choose(rows, None, lp)
        for lam in LAMBDAS:
            picked = choose(rows, lam, lp)
            result.setdefault("moves", {}).setdefault(split, {})[f"lambda {lam:g}"] = {
                "changed": round(sum(base[k] != picked[k] for k in base) / len(base), 4),
                "mean_words": round(sum(len(c.split()) for c in picked.values()) / len(picked), 2),
            }
    if args.json:
        if args.rows:
            result["rows"] = {s: r for s, (r, _) in rows_of.items()}
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
