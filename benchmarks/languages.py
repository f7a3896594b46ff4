"""Captions in German (French, Czech): how good a captioner trained on Multi30k's one sentence a photo is, on the
Flickr8k test photos that have one, beside the bundled English model scored on the same photos against the one
English sentence Multi30k translated (the same one-reference scale) and against Flickr8k's five.

    python benchmarks/languages.py --flickr8k-root ../shared/data/flickr8k --multi30k ../shared/data/multi30k \\
        --model "from nothing=runs/de_scratch/model.pt" --model "from the English decoder=runs/de_start/model.pt" \\
        --json docs/languages.json

Each model captions the photos as ``caption`` does (its recorded decoding, else beam 3) and is scored with
coco-caption's BLEU and CIDEr-D on lowercased words (a German caption is written with capitals; its references are
lowercased tokens). The models are trained by ``caption-train fit --config configs/caption/flickr8k_de_lite2_soft.yaml``
(docs/captioning.md, "Captions in German, French or Czech").
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


def _photos(flickr8k: Path, multi30k: Path, lang: str) -> tuple[list[tuple[Path, list, list, list]], set[str]]:
    """The test photos with a ``lang`` sentence: (photo, its sentences in lang, Flickr8k's five, the English
    sentence(s) Multi30k translated); and the words of the train sentences."""
    from captioning.training.multi30k import in_language, multi30k_sentences
    from captioning.training.readers import caption_tokens, read_flickr8k

    items = read_flickr8k(flickr8k)
    english = {it.path.name: it.captions for it in items["test"]}
    translated = in_language(items, multi30k, lang)
    own = {" ".join(caption_tokens(theirs)): caption_tokens(en) for en, theirs, _ in multi30k_sentences(multi30k, lang)}
    said = {w for it in translated.items["train"] for c in it.captions for w in c}
    return [(it.path, it.captions, english[it.path.name], [own[" ".join(c)] for c in it.captions])
            for it in translated.items["test"]], said  # fmt: skip


def _score(refs: list[list[list[str]]], hyps: list[str]) -> dict:
    from text_attn.core.metrics import coco_metrics

    scores = coco_metrics({i: [" ".join(r) for r in rs] for i, rs in enumerate(refs)},
                          {i: h.lower() for i, h in enumerate(hyps)}, meteor=False)  # fmt: skip
    return {k: round(100 * scores[k], 2) for k in ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "ROUGE_L", "CIDEr")}


def _caption(model: str, photos: list[Path]) -> tuple[list[str], float, dict]:
    from captioning.model.captioner import Captioner

    captioner = Captioner.load(model)
    decoding = captioner.decoding()
    t0 = time.perf_counter()
    said = []
    for k in range(0, len(photos), 32):
        said += [" ".join(c.words) for c in captioner.caption_images(photos[k : k + 32])]
    return said, time.perf_counter() - t0, decoding


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--flickr8k-root", type=Path, required=True, help="Flickr8k (either layout): its test photos")
    p.add_argument("--multi30k", type=Path, required=True,
                   help="Multi30k: the test photos' sentences in --language and English (the references)")  # fmt: skip
    p.add_argument("--language", default="de", choices=["de", "fr", "cs"],
                   help="the captioners' language, scored against its Multi30k sentence (default: de)")  # fmt: skip
    p.add_argument("--model", action="append", default=[], metavar="NAME=FILE", help="a captioner in --language")
    p.add_argument("--english", default="flickr8k", help="the English model to score beside them (default: bundled)")
    p.add_argument("--limit", type=int, default=None, help="the first N photos only (a quick look)")
    p.add_argument("--json", type=new_file, default=None, help="also write the rows and the first captions here")
    args = p.parse_args(argv)
    for spec in args.model:  # said before the data is read
        if not spec.partition("=")[0] or not spec.partition("=")[2]:
            p.error(f"--model: expected NAME=FILE, got {spec!r}")
    if args.limit is not None and args.limit < 1:
        p.error(f"--limit must be at least 1, got {args.limit}")
    photos, train_words = _photos(args.flickr8k_root, args.multi30k, args.language)
    photos = photos[: args.limit]
    files = [ph for ph, *_ in photos]
    rows, examples = [], {}
    for spec in args.model:
        name, _, path = spec.partition("=")
        said, seconds, decoding = _caption(path, files)
        rows.append({"model": name, "language": args.language, "references": f"Multi30k's {args.language} sentence",
                     **_score([r for _, r, _, _ in photos], said), "decoding": decoding,
                     "photos_per_second": round(len(files) / seconds, 1),
                     # a start's words the train sentences never use (an English word in a German caption)
                     "foreign": sum(any(w not in train_words for w in h.lower().split()) for h in said)})  # fmt: skip
        examples[name] = said[:5]
        print(f"{name}: done ({seconds:.0f} s)", file=sys.stderr)
    said, seconds, decoding = _caption(args.english, files)
    for refs, what in (([m for *_, m in photos], "Multi30k's English sentence (the one translated)"),
                       ([e for _, _, e, _ in photos], "Flickr8k's five English captions")):  # fmt: skip
        rows.append({"model": f"English: {args.english}", "language": "en", "references": what,
                     **_score(refs, said), "decoding": decoding,
                     "photos_per_second": round(len(files) / seconds, 1)})  # fmt: skip
    examples["English"] = said[:5]
    print(f"{len(files)} Flickr8k test photos with a sentence in {args.language} (Multi30k); coco-caption scores x 100")
    print(
        "\n| model | scored against | BLEU-1 | BLEU-2 | BLEU-3 | BLEU-4 | ROUGE-L | CIDEr-D | captions with a word "
        "the train sentences never use | photos/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = " | ".join(f"{r[k]:.2f}" for k in ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "ROUGE_L", "CIDEr"))
        foreign = f"{r['foreign']} of {len(files)}" if "foreign" in r else "–"
        print(f"| {r['model']} | {r['references']} | {cells} | {foreign} | {r['photos_per_second']} |")
    print("\nthe first photos:")
    for i, ph in enumerate(files[:5]):
        print(f"  {ph.name}: " + " / ".join(f"{n}: {e[i]}" for n, e in examples.items() if i < len(e)))
        print(f"    references: {' '.join(photos[i][1][0])} / {' '.join(photos[i][3][0])}")
    if args.json:
        args.json.write_text(json.dumps({"photos": len(files), "rows": rows, "examples": examples,
                                         "files": [f.name for f in files[:5]]}, indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
