r"""What ``--evidence`` costs (issue 73): per photo and per sentence, the time to caption or translate it as the CLI
does against the time to add what drives each word (leave-one-out over its regions or source tokens at its step), on the
bundled models, in one process and one run (ratios, not absolute times, carry to other machines).

    python benchmarks/evidence_cost.py --flickr8k-root ../shared/data/flickr8k --multi30k-root ../shared/data/multi30k \
        --threads 2 --json docs/evidence_cost.json

Captioning: each photo prepared, encoded and captioned with the model file's recorded decoding (``caption``'s default),
then ``Captioner.evidence`` on its features and words (what ``caption --evidence`` adds per photo). Translation: each
sentence translated with its recorded decoding, then ``translation_evidence`` (what ``translate --evidence`` adds).
Photo decoding from disk is left out of both: it is the same with or without the option.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def caption_cost(captioner, images: list[torch.Tensor]) -> dict:
    """Per photo: seconds to encode + caption it, seconds for its evidence, and its words."""
    decoding = captioner.decoding()
    captioner.caption_features(captioner.encode(images[0][None]), **decoding)  # warm-up: first-call allocations
    plain, extra, words = [], [], []
    for image in images:

        def caption(image=image):
            features = captioner.encode(image[None])
            return features, captioner.caption_features(features, **decoding)[0].words

        seconds, (features, said) = _timed(caption)
        plain.append(seconds)
        seconds, _ = _timed(lambda f=features, w=said: captioner.evidence(f, w))
        extra.append(seconds)
        words.append(len(said))
    return _summary(plain, extra, words, "photo")


def translate_cost(translator, sentences: list[str]) -> dict:
    from text_attn.translation.explain import translation_evidence

    translator.translate(sentences[:1])  # warm-up
    plain, extra, words = [], [], []
    for sentence in sentences:
        seconds, (tr,) = _timed(lambda s=sentence: translator.translate([s]))
        plain.append(seconds)
        seconds, _ = _timed(lambda t=tr: translation_evidence(translator, list(t.source), list(t.tokens)))
        extra.append(seconds)
        words.append(len(tr.tokens))
    return _summary(plain, extra, words, "sentence")


def _summary(plain: list[float], extra: list[float], words: list[int], unit: str) -> dict:
    n = len(plain)
    return {
        "unit": unit,
        "n": n,
        "plain_ms": 1000 * sum(plain) / n,
        "evidence_ms": 1000 * sum(extra) / n,
        "ratio": sum(extra) / sum(plain),
        "words": statistics.mean(words),
        "evidence_ms_per_word": 1000 * sum(extra) / max(sum(words), 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flickr8k-root", type=Path, help="Flickr8k: its first N test photos (the bundled captioner)")
    p.add_argument("--multi30k-root", type=Path, help="Multi30k: its first N test sentences (the bundled translators)")
    p.add_argument("--photos", type=int, default=20, help="test photos (default 20)")
    p.add_argument("--sentences", type=int, default=30, help="test sentences per translator (default 30)")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--json", type=new_file, help="also write the numbers here")
    args = p.parse_args(argv)
    if not args.flickr8k_root and not args.multi30k_root:
        p.error("nothing to time: give --flickr8k-root and/or --multi30k-root")
    if min(args.photos, args.sentences, args.threads) < 1:
        p.error("--photos, --sentences and --threads must be at least 1")
    from _runs import check_corpus, check_flickr8k  # benchmarks/ is on sys.path when run as a script

    # both read after the other's rows: checked first, named by the option
    if args.flickr8k_root:
        check_flickr8k(p, "--flickr8k-root", args.flickr8k_root)
    if args.multi30k_root:
        check_corpus(p, "--multi30k-root", args.multi30k_root, "test_2016_flickr", "de", "en")
    torch.set_num_threads(args.threads)
    rows: dict[str, dict] = {}
    if args.flickr8k_root:
        from faithfulness import flickr8k_photos

        from captioning.model.captioner import Captioner

        captioner = Captioner.load()
        images = flickr8k_photos(args.flickr8k_root, args.photos, captioner.preprocess)
        rows["caption (bundled Flickr8k captioner)"] = caption_cost(captioner, images)
    if args.multi30k_root:
        from _multi30k import read_pair

        from text_attn.translation.translator import Translator

        sentences = read_pair(args.multi30k_root, "test_2016_flickr", "de", "en", args.sentences)[0]
        for label, name in (("Transformer", None), ("Bahdanau GRU", "bahdanau")):
            rows[f"translate (bundled {label})"] = translate_cost(Translator.load(name), sentences)
    print(f"--evidence's cost, {args.threads} thread(s), one process, the models' recorded decoding\n")
    print("| command | inputs | without --evidence, ms each | --evidence adds, ms each | ratio | words each | "
          "ms a word |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for name, r in rows.items():
        print(f"| {name} | {r['n']} {r['unit']}s | {r['plain_ms']:.0f} | {r['evidence_ms']:.0f} | "
              f"{r['ratio']:.2f}x | {r['words']:.1f} | {r['evidence_ms_per_word']:.1f} |")  # fmt: skip
    if args.json:
        write_text(args.json, json.dumps({"threads": args.threads, "rows": rows}, indent=1) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
