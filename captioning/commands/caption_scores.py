"""``caption --references FILE [--scores OUT]``: the captions a run writes, scored against people's captions of the
same photos: coco-caption's BLEU-1..4, METEOR, ROUGE-L and CIDEr-D of the whole run on stderr, and with ``--scores``
a JSON file with each photo's sentence BLEU-4 and CIDEr-D, worst first (where the model fails, to look at)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from captioning.commands.caption_given import photo_key, read_caption_file
from text_attn.core.errors import fail
from text_attn.core.metrics import COCO_NAMES, reads_as_english
from text_attn.core.safe_files import inert
from text_attn.core.score_options import check_score_options, write_scores


def check_references(args: argparse.Namespace) -> None:
    """--references / --scores, before the model loads (text_attn.core.score_options): FILE read
    (``args.references_by_name``: file name -> its captions)."""
    args.references_by_name = None
    if check_score_options("caption", args, "photo", "captions", "photos", "captions its own"):
        args.references_by_name = read_caption_file(Path(args.references), "--references")[0]


def check_names(args: argparse.Namespace, paths: list[str]) -> None:
    """Photos (not shards: their members are named as they are read) none of which --references names: said now,
    before any photo is captioned."""
    from captioning.photos.shards import is_shard

    by_name = getattr(args, "references_by_name", None)
    if by_name is None or any(is_shard(p) for p in paths):
        return
    if not any(photo_key(p) in by_name for p in paths):  # FILE's names are UTF-8 (NFC), whatever the locale
        fail("caption", f"--references {args.references} names none of the {len(paths)} photo(s) given (a photo is "
             f"found by its file name, e.g. {Path(paths[0]).name})")  # fmt: skip


def records_of(jsonl: str | Path) -> dict[str, str]:
    """The captions a --jsonl FILE holds (image -> caption; with --resume, the earlier runs' too); a torn last line
    (a run stopped while writing) is left out, as --resume leaves it."""
    out = {}
    with open(jsonl, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and rec.get("caption") is not None:
                out[str(rec["image"])] = rec["caption"]
    return out


def score_run(args: argparse.Namespace, captions: dict[str, str]) -> None:
    """The run's captions (image -> caption) against --references: the scores on stderr, --scores written. Photos
    without a caption in FILE are counted in one note; failed photos (no caption) are not scored."""
    by_name = getattr(args, "references_by_name", None)
    if by_name is None:
        return
    scored = {image: cap for image, cap in captions.items() if photo_key(image) in by_name}
    if len(scored) < len(captions):
        # the first of them named: a photo captioned under a link's name (found first) was not found by its own
        left = [image for image in captions if image not in scored]
        named = ", ".join(inert(Path(image).name) for image in left[:3]) + (", ..." if len(left) > 3 else "")
        print(f"caption: note: --references {inert(args.references)} has no caption for {len(left)} of the photos "
              f"captioned ({named}): they are not scored", file=sys.stderr)  # fmt: skip
    if not scored:
        unwritten = f"; --scores {inert(args.scores)} is not written" if args.scores else ""
        why = "no photo was captioned" if not captions else "no photo captioned has a caption in --references"
        print(f"caption: note: {why}: nothing scored{unwritten}", file=sys.stderr)
        return
    shared = _shared_names(scored)
    if shared:  # found by file name: another folder's photo of that name is read against these captions
        print(f"caption: note: {len(shared)} photo(s) share a file name with another photo of the run, and each is "
              f"scored against --references' captions of that name (e.g. {inert(shared[0])})",
              file=sys.stderr)  # fmt: skip
    result = scores(scored, {image: by_name[photo_key(image)] for image in scored})
    for line in summary(args.references, result):
        print(f"caption: {line}", file=sys.stderr)
    if args.scores:
        write_scores("caption", args.scores, result)


def _shared_names(images) -> list[str]:
    """The images (paths) whose file name another image of the run has too (as --references finds them)."""
    keys: dict[str, list[str]] = {}
    for image in images:
        keys.setdefault(photo_key(image), []).append(image)
    return [image for same in keys.values() if len(same) > 1 for image in same]


def scores(captions: dict[str, str], references: dict[str, list[str]]) -> dict[str, Any]:
    """coco-caption's scores x 100 of ``captions`` (image -> caption) against ``references`` (image -> captions, read
    as training reads them: lowercased, ’ and ‘ read as ', punctuation dropped), as benchmarks/flickr8k.py scores the
    test split: with Java, coco-caption's PTB tokenizer and METEOR; without it, the captions' words read the same way,
    no METEOR. METEOR is English: not run where the references are in another language (:func:`reads_as_english`).
    Each photo's CIDEr-D (coco-caption's) and sentence BLEU-4, lowest CIDEr-D first."""
    from captioning.model.reading import caption_tokens
    from text_attn.core.metrics import coco_scores, java_available

    java = java_available()
    english = reads_as_english(r for rs in references.values() for r in rs)
    refs, hyps = scored_texts(captions, references, ptb=java)
    corpus, per = coco_scores(refs, hyps, meteor=java and english, ptb=java)
    photos = [{"image": image, "caption": captions[image], "references": references[image],
               "sentence BLEU-4": sentence_bleu4(caption_tokens(captions[image]), refs[image]),
               "CIDEr-D": round(100 * per[image]["CIDEr"], 2)}
              for image in captions]  # fmt: skip
    values = {COCO_NAMES[k]: round(100 * v, 2) for k, v in corpus.items()}
    if len(captions) == 1:  # CIDEr-D weighs n-grams by how few photos' references hold them: one photo's, all: 0
        values["CIDEr-D"] = photos[0]["CIDEr-D"] = None  # undefined, not a score of 0 (summary says so)
    photos.sort(key=lambda p: (p["CIDEr-D"] or 0.0, p["sentence BLEU-4"]))
    how = "coco-caption, its PTB tokenizer"
    if not java:
        how = "coco-caption on the words as training reads them (no Java: no PTB tokenizer, no METEOR)"
    elif not english:
        how += "; no METEOR (it scores English)"
    return {
        "photos": len(captions),
        "references": sum(len(rs) for rs in references.values()),
        "how": how,
        "scores": values,
        "per_photo": photos,
    }


def scored_texts(
    captions: dict[str, str], references: dict[str, list[str]], ptb: bool
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """What coco-caption is given (``ptb``: its PTB tokenizer runs after): the references read as training reads
    captions, as benchmarks/flickr8k.py scores the test split (the PTB tokenizer over the raw text moves METEOR and
    CIDEr-D by about 0.01); the captions as written for the PTB tokenizer (it folds ’ ‘ too), else read the same way."""
    from captioning.model.reading import caption_tokens

    refs = {k: [" ".join(caption_tokens(r)) for r in rs] for k, rs in references.items()}
    hyps = captions if ptb else {k: " ".join(caption_tokens(c)) for k, c in captions.items()}
    return refs, hyps


def sentence_bleu4(words: list[str], references: list[str]) -> float:
    """One caption's BLEU-4 x 100 against its photo's references (each a string of words as training reads them),
    smoothed as ``translate --scores`` scores a sentence (sacreBLEU's sentence score: effective order, exponential
    smoothing): coco-caption's per-photo BLEU-4 is unsmoothed, 0 for any caption without a 4-gram in a reference (728
    of the bundled model's 1,000 Flickr8k test photos, docs/captioning.md), which ranks nothing."""
    from sacrebleu.metrics import BLEU

    return round(BLEU(tokenize="none", effective_order=True).sentence_score(" ".join(words), references).score, 2)


def summary(path: str, result: dict[str, Any]) -> list[str]:
    """The lines on stderr: what was scored and how, then the scores in one line."""
    n = result["photos"]
    head = (f"scores against --references {inert(path)}: {n:,} photo(s), {result['references']:,} reference "
            f"caption(s) ({result['how']})")  # fmt: skip
    values = {k: v for k, v in result["scores"].items() if v is not None}
    if n == 1:  # CIDEr-D weighs n-grams by how few references hold them: one photo's are in all (weight 0)
        head += "; no CIDEr-D for one photo (its weights come from many photos' references)"
    return [head, "  ".join(f"{k} {v:.2f}" for k, v in values.items())]
