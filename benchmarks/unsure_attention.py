r"""Does attention explain the words a model was unsure of? For each word the bundled models write (the search's own
probability of it, as ``--unsure`` keeps it), what drives it is measured by leave-one-out (``--evidence``: the drop in
its probability as each source token, or photo region, is removed at its step), and compared with its attention: the
Kendall tau between the two rows (``agreement``), and whether the unit it attended most is the one whose removal costs
it most. Words binned by their probability, as ``benchmarks/word_confidence.py`` bins them.

    python benchmarks/unsure_attention.py --multi30k-root ../shared/data/multi30k --sentences 300 \
        --flickr8k-root ../shared/data/flickr8k --photos 300 --json docs/unsure_attention.json

The translators: Multi30k val's first N German sentences, each model's recorded decoding, every output token (a
subword piece) with its own probability. The captioner: Flickr8k test's first N photos (the shared 224 x 224 copies),
its recorded decoding, every word; a region removed is filled with the photo's mean feature (captioning.model.explain,
as ``caption --evidence``). A token whose evidence row is flat (nothing drives it: tau undefined) is counted apart.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
from _multi30k import read_pair
from _runs import check_corpus, check_flickr8k, markdown_table, record_json
from word_confidence import BINS

from text_attn.core.errors import new_file
from text_attn.core.safe_files import write_text


def bins(rows: list[tuple[float, float, bool]]) -> list[dict]:
    """Per probability bin (word_confidence.BINS): the words in it, the mean tau of those with one (``tau`` nan: a
    flat row, counted in ``flat``), and the share whose attention's top unit is evidence's top unit. ``rows``: per
    word (probability, tau, same top unit)."""
    out = []
    for k, (lo, hi) in enumerate(BINS):
        inside = [r for r in rows if lo <= r[0] < hi or (k == len(BINS) - 1 and r[0] == hi)]
        taus = [tau for _, tau, _ in inside if not math.isnan(tau)]
        out.append({"from": lo, "to": hi, "words": len(inside), "flat": len(inside) - len(taus),
                    "mean_tau": sum(taus) / len(taus) if taus else None,
                    "same_top": sum(top for _, _, top in inside) / len(inside) if inside else None})  # fmt: skip
    return out


def _word_rows(probs: list[float], found) -> list[tuple[float, float, bool]]:
    """Per word of one output: its probability, its agreement tau and whether attention's and evidence's arg-max unit
    are the same (``found``: an Evidence of that output, rows (T, U))."""
    same = (found.attention.argmax(dim=-1) == found.evidence.argmax(dim=-1)).tolist()  # (T,)
    return list(zip(probs, found.agreement, same, strict=True))


def translation_rows(translator, sentences: list[str]) -> list[tuple[float, float, bool]]:
    """Every output token of the sentences' translations (the model's recorded decoding): (probability, tau, same
    top unit)."""
    from text_attn.translation.explain import translation_evidence

    rows = []
    for start in range(0, len(sentences), 64):
        for tr in translator.translate(sentences[start : start + 64], probs=True):
            if tr.tokens:
                rows += _word_rows(tr.probs, translation_evidence(translator, list(tr.source), list(tr.tokens)))
    return rows


def caption_rows(captioner, images: list[torch.Tensor]) -> list[tuple[float, float, bool]]:
    """Every word of the photos' captions (the model's recorded decoding): (probability, tau, same top unit)."""
    rows = []
    decoding = captioner.decoding()
    for start in range(0, len(images), 32):
        features = captioner.encode(torch.stack(images[start : start + 32]))
        for k, caption in enumerate(captioner.caption_features(features, probs=True, **decoding)):
            if caption.words:
                rows += _word_rows(caption.probs, captioner.evidence(features[k : k + 1], caption.words))
    return rows


def _cell(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--multi30k-root", type=Path, help="Multi30k's folder (../shared/data/multi30k): the translators")
    p.add_argument("--sentences", type=int, default=300, help="val's first N German sentences (default 300)")
    p.add_argument("--flickr8k-root", type=Path, help="Flickr8k's folder (../shared/data/flickr8k): the captioner")
    p.add_argument("--photos", type=int, default=300, help="test's first N photos (default 300)")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--json", type=new_file, help="also write the numbers here")
    args = p.parse_args(argv)
    if min(args.sentences, args.photos, args.threads) < 1:
        p.error("--sentences, --photos and --threads must be at least 1")
    if not (args.multi30k_root or args.flickr8k_root):
        p.error("give --multi30k-root (the translators), --flickr8k-root (the captioner) or both")
    if args.multi30k_root:  # named by the option, before the work (it was the config key, data.root)
        check_corpus(p, "--multi30k-root", args.multi30k_root, "val", "de", "en")
    if args.flickr8k_root:
        check_flickr8k(p, "--flickr8k-root", args.flickr8k_root)
    torch.set_num_threads(args.threads)
    models = {}
    if args.multi30k_root:
        from text_attn.translation.translator import Translator

        sentences, _ = read_pair(args.multi30k_root, "val", "de", "en", args.sentences)
        for label, name in (("bundled Transformer", None), ("bundled Bahdanau GRU", "bahdanau")):
            models[label] = translation_rows(Translator.load(name), sentences)
    if args.flickr8k_root:
        from captioning.model.captioner import Captioner
        from captioning.photos.preprocess import prepared
        from captioning.training.readers import read_flickr8k

        captioner = Captioner.load()
        items = read_flickr8k(args.flickr8k_root)["test"][: args.photos]
        models["bundled captioner"] = caption_rows(captioner, [prepared(i.path, captioner.preprocess) for i in items])
    table, result = [], {}
    for label, rows in models.items():
        result[label] = bins(rows)
        for b in result[label]:
            table.append([label, f"{b['from']:g}-{b['to']:g}", f"{b['words']:,}", f"{b['flat']:,}",
                          _cell(b["mean_tau"], ".3f"), _cell(b["same_top"], ".1%")])  # fmt: skip
    print(f"attention against what drives each word, by the word's probability ({args.threads} thread(s); the "
          f"translators on Multi30k val's first {args.sentences} sentences, the captioner on Flickr8k test's first "
          f"{args.photos} photos)\n")  # fmt: skip
    print(markdown_table(["model", "probability", "words", "flat (no tau)", "mean tau", "same top unit"], table))
    if args.json:
        write_text(args.json, record_json({"sentences": args.sentences, "photos": args.photos, "rows": result}))
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
