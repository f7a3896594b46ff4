"""Flickr8k's photos captioned in German, French or Czech: the translations Multi30k made of their English captions.

Multi30k (Elliott et al. 2016) took one English description of each Flickr30k photo and had it translated: German
first, French and Czech later. Flickr8k's photos are Flickr30k photos too, and their English descriptions there are
Flickr8k's own captions, so most Flickr8k photos have one sentence in each language (``data.language``, read from
``data.multi30k``; the data module keeps Flickr8k's train / val / test split, so nothing trained on crosses it).

How a Multi30k line finds its photo:

- by an image list, where one lies beside the text (Multi30k's ``image_splits/<split>.txt``, or
  ``<split>_images.txt``): its line k names line k's photo as Flickr30k names it, ``<flickr id>.jpg``, and a Flickr8k
  file is ``<flickr id>_<secret>.jpg``;
- else by its English sentence: a line whose English, lowercased and split into words, is one of Flickr8k's captions
  of exactly one photo is that photo's (in the copy at ../shared/data: 7,025 of the 8,000 photos of the split).

Photos with no such line are left out, said in one line. Multi30k's files: ``<split>.<lang>`` or ``<split>.<lang>.gz``
for every split that has an ``.en`` file too (train, val, test_2016_flickr, ...), one sentence a line, line-aligned
across languages. Multi30k is for non-commercial research and education, as Flickr8k is.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, replace
from pathlib import Path

from captioning.training.readers import SPLITS, CaptionDataError, ImageItem, caption_tokens
from text_attn.core.safe_files import inert, text_lines

LANGUAGES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech"}
_IMAGE_LISTS = ("image_splits/{split}.txt", "{split}_images.txt", "image_splits/{split}_images.txt")


@dataclass
class Translated:
    """Flickr8k's splits with their captions in another language, and the raw training sentences (their casing)."""

    items: dict[str, list[ImageItem]]
    train_text: list[str]  # the train photos' sentences as written: captioning learns the language's casing from them
    line: str  # what was read, in one line


def _read_lines(path: Path) -> list[str]:
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return text_lines(raw.decode("utf-8-sig"))
    except (OSError, EOFError, gzip.BadGzipFile) as err:
        why = getattr(err, "strerror", None) or err
        raise CaptionDataError(f"{inert(path)}: cannot read Multi30k sentences ({why})") from None
    except UnicodeDecodeError:
        raise CaptionDataError(f"{inert(path)}: not UTF-8 text (Multi30k sentences)") from None


def _text_file(root: Path, split: str, lang: str) -> Path | None:
    for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
        if (root / name).is_file():
            return root / name
    return None


def _splits(root: Path) -> list[str]:
    """Multi30k's splits in ``root``: every ``<split>.en[.gz]`` file's split."""
    names = {p.name.removesuffix(".gz").removesuffix(".en") for p in root.iterdir() if p.is_file()}
    return sorted(n for n in names if _text_file(root, n, "en") is not None)


def _image_list(root: Path, split: str) -> Path | None:
    for pattern in _IMAGE_LISTS:
        if (root / pattern.format(split=split)).is_file():
            return root / pattern.format(split=split)
    return None


def multi30k_sentences(root: str | Path, lang: str) -> list[tuple[str, str, str | None]]:
    """Every Multi30k line of ``root`` as (English, ``lang``, its photo's Flickr id or None without an image list)."""
    root = Path(root)
    if not root.is_dir():
        raise CaptionDataError(f"data.multi30k {inert(root)}: folder not found")
    splits = _splits(root)
    if not splits:
        raise CaptionDataError(f"data.multi30k {inert(root)}: no Multi30k English file (train.en.gz, val.en, ...)")
    out: list[tuple[str, str, str | None]] = []
    for split in splits:
        other = _text_file(root, split, lang)
        if other is None:
            continue
        english = _read_lines(_text_file(root, split, "en"))
        theirs = _read_lines(other)
        if len(english) != len(theirs):
            raise CaptionDataError(
                f"{inert(other)}: {len(theirs)} lines against {len(english)} in its English file: Multi30k's files are "
                "line-aligned"
            )
        ids: list[str | None] = [None] * len(english)
        listed = _image_list(root, split)
        if listed is not None:
            names = _read_lines(listed)
            if len(names) != len(english):
                raise CaptionDataError(f"{inert(listed)}: {len(names)} image names against {len(english)} sentences")
            ids = [Path(n.strip()).stem.split("_")[0] or None for n in names]
        out += zip(english, theirs, ids, strict=True)
    if not out:
        raise CaptionDataError(
            f"data.multi30k {inert(root)}: no {LANGUAGES[lang]} file beside its English ones "
            f"({splits[0]}.{lang}.gz or {splits[0]}.{lang})"
        )
    return out


def in_language(items: dict[str, list[ImageItem]], root: str | Path, lang: str) -> Translated:
    """Flickr8k's splits (``read_flickr8k``) with each photo's captions replaced by its Multi30k sentences in
    ``lang`` (module doc); photos without one are left out."""
    if lang not in LANGUAGES or lang == "en":
        raise CaptionDataError(f"data.language {lang!r}: Multi30k's are de, fr and cs")
    photos = {it.path.name: it for split in SPLITS for it in items[split]}
    by_id = {Path(name).stem.split("_")[0]: name for name in photos}  # <flickr id>_<secret>.jpg
    by_caption: dict[str, set[str]] = {}
    for name, it in photos.items():
        for caption in it.captions:
            by_caption.setdefault(" ".join(caption), set()).add(name)
    found: dict[str, list[tuple[list[str], str]]] = {}
    sentences = multi30k_sentences(root, lang)
    for english, theirs, flickr_id in sentences:
        tokens = caption_tokens(theirs)
        if flickr_id is not None:
            name = by_id.get(flickr_id)
        else:
            owners = by_caption.get(" ".join(caption_tokens(english)), ())
            name = next(iter(owners)) if len(owners) == 1 else None
        if name is not None and tokens:
            found.setdefault(name, []).append((tokens, theirs.strip()))
    if not found:
        raise CaptionDataError(
            f"data.multi30k {inert(root)}: none of its sentences is a caption of a Flickr8k photo of data.root"
        )
    out = {s: [replace(it, captions=[t for t, _ in found[it.path.name]], boxes=None)
               for it in items[s] if it.path.name in found] for s in SPLITS}  # fmt: skip
    for split in ("train", "val"):
        if not out[split]:
            raise CaptionDataError(f"data.multi30k {inert(root)}: no Flickr8k {split} photo has a sentence in it")
    train_text = [raw for it in out["train"] for _, raw in found[it.path.name]]
    how = "image lists" if any(i is not None for *_, i in sentences) else "their English sentence"
    counts = ", ".join(f"{s} {len(out[s]):,}" for s in SPLITS)
    line = (
        f"{LANGUAGES[lang]} captions from Multi30k for {sum(map(len, out.values())):,} of {len(photos):,} Flickr8k "
        f"photos, found by {how} ({counts}); the others are left out"
    )
    return Translated(out, train_text, line)
