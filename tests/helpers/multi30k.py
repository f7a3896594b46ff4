"""A Multi30k-shaped corpus for tests, written from a few German / English sentences (Multi30k's own never enter the
repository)."""

from __future__ import annotations

import gzip
from pathlib import Path

DE = [
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau liest ein Buch im Park.",
    "Drei Kinder essen Äpfel.",
    "Ein Mädchen springt über den Zaun.",
    "Der Hund läuft schnell.",
]
EN = [
    "A man rides a bike.",
    "Two dogs are playing in the snow.",
    "A woman is reading a book in the park.",
    "Three children eat apples.",
    "A girl jumps over the fence.",
    "The dog runs fast.",
]


FR = [
    "Un homme fait du vélo.",
    "Deux chiens jouent dans la neige.",
    "Une femme lit un livre dans le parc.",
    "Trois enfants mangent des pommes.",
    "Une fille saute par-dessus la clôture.",
    "Le chien court vite.",
]


def write_corpus(
    root: Path, splits: dict[str, int] | None = None, gz: bool = True, langs: tuple[str, ...] = ("de", "en")
) -> Path:
    """A Multi30k-shaped folder: <split>.<lang> for de / en (and fr), gzipped (or not), line-aligned."""
    root.mkdir(parents=True, exist_ok=True)
    text_of = {"de": DE, "en": EN, "fr": FR}
    for split, n in (splits or {"train": 6, "val": 2, "test_2016_flickr": 2}).items():
        for lang, lines in ((lang, text_of[lang]) for lang in langs):
            text = "".join(f"{lines[i % len(lines)]}\n" for i in range(n)).encode()
            path = root / f"{split}.{lang}{'.gz' if gz else ''}"
            path.write_bytes(gzip.compress(text) if gz else text)
    return root


def write_sentences(root: Path, splits: dict[str, list[tuple[str, str]]], lang: str = "de") -> Path:
    """A Multi30k-shaped folder of given (English, ``lang``) pairs a split: <split>.en.gz and <split>.<lang>.gz (val's
    as plain text, as a user may have unpacked them), line-aligned: the translations of chosen Flickr8k captions
    (captioning/training/multi30k.py finds their photos by the English)."""
    root.mkdir(parents=True, exist_ok=True)
    for split, pairs in splits.items():
        for code, lines in (("en", [e for e, _ in pairs]), (lang, [o for _, o in pairs])):
            data = ("\n".join(lines) + "\n").encode()
            path = root / f"{split}.{code}{'' if split == 'val' else '.gz'}"
            path.write_bytes(data if split == "val" else gzip.compress(data))
    return root


def write_unshared_pieces(root: Path) -> Path:
    """A Multi30k-shaped German -> English corpus whose joint subword model (data.subword_vocab 300) learns "gh" from
    the English side alone (through, rough, ...): its val and test sentence "Ein Mann in Pittsburgh." is split into a
    piece the German side never used, <unk> unless spelled from the German side's own pieces ("g", "h")."""
    train = [(e, d) for d, e in zip(DE, EN, strict=True)] * 2
    train += [("Dogs run through rough snow, though tough.", "Hunde laufen im Schnee.")] * 6
    held_out = [("A man in Pittsburgh.", "Ein Mann in Pittsburgh."), ("The dog runs.", "Der Hund läuft.")]
    return write_sentences(root, {"train": train, "val": held_out, "test_2016_flickr": held_out}, lang="de")
