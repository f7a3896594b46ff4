r"""``caption --unsure`` on Flickr8k: what a caption word's probability says, and what keeping it costs. The bundled
captioner captions the first N test photos with its recorded decoding (``caption``'s default), each word's probability
kept by the search (``caption_features(probs=True)``, what ``--unsure`` does), and its words binned by that
probability, with the share of each bin's words that none of the photo's five reference captions holds. In one
process, batch by batch: the photos' encoding and search timed without the probabilities and with them (in
alternating order), and reading the captions back instead (``Captioner.with_probs``, what ``--unsure`` did before
2026-12-04), with the largest difference between the kept and the read-back probabilities (ratios carry to other
machines, seconds do not).

    python benchmarks/caption_unsure.py --flickr8k-root ../shared/data/flickr8k --photos 1000 --threads 2 \
        --json docs/caption_unsure.json

"Not in any reference" is a rough mark of a wrong word (a synonym counts as one), the same for every bin: the bins are
compared with each other, not taken as error rates. The photos are decoded before the clock starts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from _runs import markdown_table, record_json
from word_confidence import bin_words, plain

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text
from text_attn.core.unsure import CAPTION_UNSURE, check_threshold

BATCH = 32


def binned(captions: list[list[str]], probs: list[list[float]], references: list[list[list[str]]]) -> list[dict]:
    """Per bin (word_confidence.BINS): the caption words in it, and how many of them no reference of their photo
    holds (lowercased, punctuation stripped)."""
    held = [{plain(w) for ref in refs for w in ref} for refs in references]
    return bin_words(zip(captions, probs, held, strict=True))


def run(captioner, images: list[torch.Tensor]) -> tuple[list, dict[str, float]]:
    """Each photo's caption with its words' probabilities kept by the search; seconds encoding and searching without
    them and with them, seconds reading back instead, and the largest difference of a kept probability (a word's or
    the end's) from the read-back one."""
    decoding = captioner.decoding()
    captioner.caption_features(captioner.encode(images[0][None]), **decoding)  # warm-up: first-call allocations
    took = {"encode": 0.0, "plain": 0.0, "kept": 0.0, "read": 0.0, "differs": 0.0}
    out = []
    for n, start in enumerate(range(0, len(images), BATCH)):
        batch = torch.stack(images[start : start + BATCH])
        t0 = time.perf_counter()
        features = captioner.encode(batch)
        took["encode"] += time.perf_counter() - t0
        found = {}
        for probs in (n % 2 == 0, n % 2 == 1):  # alternating which goes first: neither always meets a warm cache
            t0 = time.perf_counter()
            found[probs] = captioner.caption_features(features, probs=probs, **decoding)
            took["kept" if probs else "plain"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        read = captioner.with_probs(features, found[False])
        took["read"] += time.perf_counter() - t0
        for a, b in zip(found[True], read, strict=True):
            if a.words != b.words:
                raise RuntimeError(f"probs=True changed a caption: {a.words} against {b.words}")
            gaps = [abs(x - y) for x, y in zip([*a.probs, a.end_prob], [*b.probs, b.end_prob], strict=True)]
            took["differs"] = max(took["differs"], *gaps)
        out += found[True]
    return out, took


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flickr8k-root", type=Path, required=True, help="Flickr8k's folder (../shared/data/flickr8k)")
    p.add_argument("--photos", type=int, default=1000, help="the first N test photos (default 1000: all)")
    p.add_argument("--below", type=float, default=CAPTION_UNSURE,
                   help=f"caption --unsure's threshold (default {CAPTION_UNSURE:g})")  # fmt: skip
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--json", type=new_file, help="also write the numbers here")
    args = p.parse_args(argv)
    if min(args.photos, args.threads) < 1:
        p.error("--photos and --threads must be at least 1")
    try:
        check_threshold(args.below, "--below")
    except ValueError as err:
        p.error(str(err))
    torch.set_num_threads(args.threads)
    from captioning.model.captioner import Captioner
    from captioning.photos.preprocess import prepared
    from captioning.training.readers import read_flickr8k

    captioner = Captioner.load()
    items = read_flickr8k(args.flickr8k_root)["test"][: args.photos]
    images = [prepared(item.path, captioner.preprocess) for item in items]
    captions, took = run(captioner, images)
    plain_s, kept_s = took["encode"] + took["plain"], took["encode"] + took["kept"]
    rows = binned([c.words for c in captions], [c.probs for c in captions], [it.captions for it in items])
    total = sum(r["words"] for r in rows)
    unsure = [[w for w, q in zip(c.words, c.probs, strict=True) if q < args.below] for c in captions]
    summary = {"photos": len(captions), "words": total, "encode_and_search_ms": 1000 * plain_s / len(captions),
               "with_probs_ms": 1000 * kept_s / len(captions), "kept_ratio": kept_s / plain_s,
               "read_back_ms": 1000 * took["read"] / len(captions), "ratio": took["read"] / plain_s,
               "largest_difference": took["differs"],
               "captions_unsure": sum(map(bool, unsure)), "words_unsure": sum(map(len, unsure))}  # fmt: skip
    print(f"caption --unsure on Flickr8k test, {len(captions):,} photos, the bundled captioner at its recorded "
          f"decoding, {args.threads} thread(s), batches of {BATCH}\n")  # fmt: skip
    cells = [[f"{r['from']:g}-{r['to']:g}", f"{r['words']:,}", f"{r['words'] / max(total, 1):.1%}",
              f"{r['share']:.1%}" if r["words"] else "–"] for r in rows]  # fmt: skip
    print(markdown_table(["probability", "words", "share of the words", "in no reference"], cells))
    s = summary
    print(f"\nencode + search {s['encode_and_search_ms']:.1f} ms a photo, with the probabilities kept "
          f"{s['with_probs_ms']:.1f} ms ({s['kept_ratio']:.2f}x); reading back instead {s['read_back_ms']:.1f} ms "
          f"(+{s['ratio']:.2f}x), kept - read back at most {s['largest_difference']:.1e}; captions with a word under "
          f"{args.below:g}: {s['captions_unsure']:,} "
          f"({s['captions_unsure'] / len(captions):.1%}), words: {s['words_unsure']:,} of {total:,}")  # fmt: skip
    if args.json:
        write_text(args.json, record_json({"photos": len(captions), "threads": args.threads, "below": args.below,
                                           "summary": summary, "rows": rows}))  # fmt: skip
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
