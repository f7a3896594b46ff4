"""Caption file readers: a dataset as people have it -> ``ImageItem``s (an image file and its captions as tokens).

``read_karpathy`` and ``read_flickr8k`` return ``{"train", "val", "test": [ImageItem]}``, ``read_folder`` one list
that the data module splits (captioning.training.data), so every source feeds the same data module. A file that cannot
be used is a CaptionDataError naming it (and its line, or the image and sentence).

Karpathy-split JSON (``read_karpathy``: COCO, Flickr8k, Flickr30k): ``{"images": [{"filepath"?, "filename", "split",
"sentences": [{"tokens", "raw"}]}]}``; "restval" counts as train; files at image_root/filepath/filename. Optional,
for attention supervision (Flickr30k-Entities style), see "Boxes" below.

Folder + TSV (``read_folder``): a folder of images + a TSV of ``filename<TAB>caption`` lines (several per image
allowed), in order of first appearance (the data module orders them by a hash of its seed and each photo's name, and
splits them).

Missing image files (Karpathy JSON, folder + TSV) are skipped with one line on stderr, or a CaptionDataError when
``strict``.

Boxes (optional, Karpathy JSON): a sentence may carry ``"boxes": [[token_index, x0, y0, x1, y1], ...]``: token
``token_index`` (0-based, into the sentence's "tokens" -- or into the tokenized "raw" when it has no "tokens") names the
region (x0, y0, x1, y1), in pixels of the image as ``load_image`` returns it (EXIF orientation applied: for a file
without an orientation tag, its stored pixels), x1/y1 exclusive. A token may be listed with several boxes (a phrase
naming several objects: its target is their union); list every token of a phrase that should attend to it ("two brown
dogs": usually just the noun). An image may give its ``"width"`` and ``"height"`` in pixels (else they are read from the
file's header). Example::

    {"filename": "1000092795.jpg", "split": "train", "width": 500, "height": 375,
     "sentences": [{"tokens": ["two", "young", "guys", "near", "a", "bush"],
                    "boxes": [[2, 15, 40, 130, 370], [2, 140, 30, 290, 375], [5, 300, 0, 500, 200]]}]}

Flickr8k (``read_flickr8k``) as people actually have it: the original distribution and Kaggle's copy.

Original layout (the dataset's own download; the image folder's typo is the original's)::

    ROOT/Flicker8k_Dataset/*.jpg
    ROOT/Flickr8k_text/Flickr8k.token.txt           "<image>#<0-4><TAB><caption>"
    ROOT/Flickr8k_text/Flickr_8k.{train,dev,test}Images.txt   one image name a line (6000 / 1000 / 1000)

Kaggle layout (a CSV with a header line ``image,caption``; a caption may be quoted and hold commas)::

    ROOT/Images/*.jpg
    ROOT/captions.txt

Kaggle's copy ships no split: when the three split files above are found in ROOT or ROOT/Flickr8k_text they are used
(the standard split, the same as Karpathy's), else the images are shuffled once with ``seed`` and 1000 / 1000 of them
(an eighth each for a smaller set) held out for val / test, with one note on stderr: that split is not the standard
one, so its test photos are mostly standard train photos, which the bundled model and published ones trained on (its
scores compare with neither). ``has_standard_split`` tells which a ROOT gets. A photo listed in two split files (or
in two splits of a Karpathy JSON) is a CaptionDataError: it would be scored on what it trained on.

Real files carry junk: Flickr8k.token.txt has 505 lines naming images that are not in the folder
(``..._586949ec62.jpg.1#0``) and the split files list names that are not there either. Such lines are skipped and
counted in ONE stderr line per file; a missing folder, a missing or unreadable file, or a split left empty is a
CaptionDataError naming it.

Every reader's captions are lowercased and split into words, typographic apostrophes (’ ‘) read as ' ("aujourd’hui"
and "aujourd'hui" are one word); punctuation-only tokens are dropped (as in Karpathy's tokens, which coco-caption's PTB
tokenizer also strips before scoring): a model trained on your captions says words as the bundled one does, and one
started from it adds no "." to its vocabulary. Karpathy "raw" sentences (used where a
sentence has no "tokens") are tokenized with text_attn.core.vocab.tokenize; their boxes' token_index counts the
punctuation as the file has it, and is moved onto the words kept (a box on a punctuation token is dropped).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import unicodedata
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from captioning.model.reading import APOSTROPHES, caption_tokens
from captioning.training.attention_targets import TokenBoxes
from captioning.training.caption_rows import caption_rows
from text_attn.core.common_words import unspaced
from text_attn.core.ranks import say
from text_attn.core.safe_files import (
    UTF16_BOMS,
    UTF16_SAID,
    file_identity,
    inert,
    spans_note,
    table_rows,
    text_lines,
)
from text_attn.core.vocab import is_word, tokenize

SPLITS = ("train", "val", "test")
_KARPATHY_SPLITS = {"train": "train", "restval": "train", "val": "val", "test": "test"}
LAYOUTS = ("auto", "original", "kaggle")
ORIGINAL_IMAGES, ORIGINAL_TEXT = "Flicker8k_Dataset", "Flickr8k_text"
TOKEN_FILE = "Flickr8k.token.txt"
SPLIT_FILES = {
    "train": "Flickr_8k.trainImages.txt",
    "val": "Flickr_8k.devImages.txt",
    "test": "Flickr_8k.testImages.txt",
}
KAGGLE_IMAGES, KAGGLE_CAPTIONS = "Images", "captions.txt"
_HELD_OUT = 1000  # Flickr8k's val and test sizes, for a Kaggle copy without split files


class CaptionDataError(ValueError):
    """Caption data that cannot be used; the message is one line naming the input and what is wrong."""


@dataclass
class ImageItem:
    path: Path
    captions: list[list[str]]  # reference captions as token lists
    boxes: list[TokenBoxes] | None = None  # per caption, its token boxes (karpathy "boxes"); None: no sentence has any
    size: tuple[int, int] | None = None  # (width, height) in pixels when the JSON gives them
    raw: list[str] | None = None  # per caption, its text as written (folder, karpathy): the data module learns casing
    key: str = ""  # folder: the photo's name as its TSV gives it, normalised (_photo_key): what orders val and test


def _read_text(path: Path, what: str) -> str:
    """A text file the user wrote: UTF-8, a leading byte-order mark dropped (Windows editors and Excel's "UTF-8" CSV
    write one; kept, it would be part of the first file name or token); bytes that are not UTF-8 are one
    CaptionDataError naming the file and the line."""
    if not path.is_file():
        raise CaptionDataError(f"{path}: {what} {'is a folder' if path.is_dir() else 'not found'}")
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":  # gzipped (captions.tsv.gz), read through as text-train reads its pairs
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as err:
        raise CaptionDataError(f"{path}: cannot read {what} ({getattr(err, 'strerror', None) or err})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        if raw.startswith(UTF16_BOMS):  # "line 1: not UTF-8" said nothing of what it was
            raise CaptionDataError(f"{path}: {UTF16_SAID} ({what})") from None
        line = raw[: err.start].count(b"\n") + 1
        raise CaptionDataError(f"{path}: line {line}: not UTF-8 text ({what})") from None


# --- Karpathy JSON, folder + TSV --------------------------------------------------------------------------------------
FOLDER_HINT = "check data.image_dir, and that each line starts with the photo's file name"
KARPATHY_HINT = "check data.image_root, and each entry's 'filepath' and 'filename' below it"


def _check_files(items: list[ImageItem], source: Path, strict: bool, hint: str = FOLDER_HINT) -> list[ImageItem]:
    """Drop items whose image file is missing, with one stderr line (or a CaptionDataError when strict); ``hint``:
    where to look when none is found, in the reader's own options."""
    missing = [it for it in items if not it.path.is_file()]
    if not missing:
        return items
    near = _first_near(missing)  # the file a missing name most likely means, in words (or "")
    if len(missing) == len(items):  # not a few photos gone: the wrong folder, or names the file does not give alone
        raise CaptionDataError(
            f"{source}: none of the {len(items)} photos it names is in {missing[0].path.parent} (first: "
            f"{missing[0].path.name}{near}): {hint}"
        )
    if strict:
        raise CaptionDataError(
            f"{source}: {len(missing)} of {len(items)} image files are missing (first: {missing[0].path}{near})"
        )
    say(
        f"caption data: {source}: skipped {len(missing)} of {len(items)} images whose files are missing "
        f"(first: {inert(missing[0].path)}{inert(near)})"
    )
    gone = {id(it) for it in missing}
    return [it for it in items if id(it) not in gone]


NEAR_TRIED = 200  # missing names looked at for a likely file: the first with one is said (ghost.jpg hid casedog.jpg)


def _first_near(missing: list[ImageItem]) -> str:
    """The hint for the first of the ``missing`` photos (up to NEAR_TRIED) whose name likely means a file there:
    said as the first's own, or naming it where another comes first."""
    listings: dict[str, tuple[list[str], list[str]]] = {}  # a folder listed once for all the names looked at
    for k, item in enumerate(missing[:NEAR_TRIED]):
        if near := _near_miss(item.path, listings):
            return near if k == 0 else f"; {item.path.name}{near.replace('; ', ': ', 1)}"
    return ""


def _listing(folder: str) -> tuple[list[str], list[str]]:
    """A folder's (file names, subfolder names); ([], []) where it cannot be listed (scandir: a folder of 100,000
    photos is listed without a stat each)."""
    try:
        with os.scandir(folder) as entries:
            found = [(e.name, e.is_dir()) for e in entries]
    except OSError:  # no such folder: nothing near
        return [], []
    return [n for n, d in found if not d], [n for n, d in found if d]


def _near_miss(path: Path, listings: dict[str, tuple[list[str], list[str]]] | None = None) -> str:
    """For a photo not found, the file its name most likely means (``; the folder has p.JPG``): a name in another
    case, without its extension or with another one (``p.jpeg``), or written with Windows' backslashes between
    folders; one in a subfolder (``2023/img_0.jpg``: the captions name photos by their paths from the folder); the
    folder's name twice (``photos/photos/x.jpg``: the file names them from the folder above); "" where none is
    found."""
    if "\\" in path.name and (slashed := path.parent / path.name.replace("\\", "/")).is_file():
        return f"; {slashed} exists: write / between folders, not \\"
    listings = {} if listings is None else listings  # ``listings``: the folders listed so far, reused
    if (folder := str(path.parent)) not in listings:
        listings[folder] = _listing(folder)
    names, subfolders = listings[folder]
    wanted, stem = path.name.casefold(), Path(path.name).stem.casefold()
    for how, same in (("in another case", lambda n: n.casefold() == wanted),
                      ("with an extension", lambda n: Path(n).stem.casefold() == wanted),
                      ("with another extension", lambda n: Path(n).stem.casefold() == stem)):  # fmt: skip
        if found := sorted(n for n in names if same(n)):
            return f"; the folder has {found[0]}, {how}"
    above = path.parent.parent
    if path.parent.name and path.parent.name == above.name and (above / path.name).is_file():
        return f"; {above / path.name} exists: the file names its photos from the folder above ({above.name}/ twice)"
    for sub in sorted(subfolders)[:NEAR_TRIED]:
        if (path.parent / sub / path.name).is_file():
            return f"; {sub}/{path.name} is in a subfolder: the file names photos by their paths from the folder"
    return ""


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def _sentence_boxes(raw, n_tokens: int, where: str) -> TokenBoxes:
    """A sentence's "boxes" ([[token_index, x0, y0, x1, y1], ...]) -> token boxes, checked."""
    if not isinstance(raw, list):
        raise CaptionDataError(f"{where}: 'boxes' must be a list of [token_index, x0, y0, x1, y1], got {raw!r:.60}")
    out: TokenBoxes = []
    for k, entry in enumerate(raw):
        if not isinstance(entry, list | tuple) or len(entry) != 5 or not all(_is_number(v) for v in entry):
            raise CaptionDataError(f"{where}: boxes[{k}] must be [token_index, x0, y0, x1, y1], got {entry!r:.60}")
        t, x0, y0, x1, y1 = entry
        if int(t) != t or not 0 <= t < n_tokens:
            raise CaptionDataError(f"{where}: boxes[{k}] names token {t}, but the sentence has {n_tokens} tokens")
        if not (x1 > x0 and y1 > y0):
            raise CaptionDataError(f"{where}: boxes[{k}] is empty: need x0 < x1 and y0 < y1, got {entry!r:.60}")
        out.append((int(t), (float(x0), float(y0), float(x1), float(y1))))
    return out


def _word_boxes(boxes: TokenBoxes, words: list[int]) -> TokenBoxes:
    """Boxes that index every token (punctuation counted, as the file gives them) -> boxes that index the words kept
    (``words``: the token indices that are words); a box on a punctuation token names no word and goes."""
    at = {k: w for w, k in enumerate(words)}
    return [(at[t], box) for t, box in boxes if t in at]


def _image_wh(entry: dict, where: str) -> tuple[int, int] | None:
    w, h = entry.get("width"), entry.get("height")
    if w is None and h is None:
        return None
    if not (_is_number(w) and _is_number(h) and w > 0 and h > 0):
        raise CaptionDataError(f"{where}: 'width' and 'height' must both be positive numbers, got {w!r}, {h!r}")
    return int(w), int(h)


def read_karpathy(json_path: str | Path, image_root: str | Path, strict: bool = False) -> dict[str, list[ImageItem]]:
    """Karpathy-split JSON -> {"train", "val", "test": [ImageItem]} ("restval" joins train).

    Sentence tokens come from "tokens" (lowercased), else from tokenizing "raw". Images without sentences are
    dropped. Missing image files are skipped with one line on stderr, or raise CaptionDataError when ``strict``.
    Optional per-sentence "boxes" and per-image "width" / "height" (module doc, "Boxes") are read and checked into
    ``ImageItem.boxes`` / ``.size``; a malformed one is a CaptionDataError naming the image and sentence.
    """
    json_path, root = Path(json_path), Path(image_root)
    if not json_path.is_file():
        raise CaptionDataError(f"captions file {json_path} does not exist")
    try:
        data = json.loads(_read_text(json_path, "captions file"))
    except json.JSONDecodeError as err:
        raise CaptionDataError(f"{json_path} is not valid JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise CaptionDataError(f"{json_path} has no 'images' list (expected a Karpathy-split JSON)")
    items: list[ImageItem] = []
    splits: list[str] = []
    for n, entry in enumerate(data["images"]):
        if not isinstance(entry, dict) or "filename" not in entry:
            raise CaptionDataError(f"{json_path}: images[{n}] has no 'filename'")
        for key in ("filename", "filepath"):  # a number there was a TypeError joining it to the folder
            if key in entry and not isinstance(entry[key], str):
                raise CaptionDataError(f"{json_path}: images[{n}].{key} is {entry[key]!r}, not a text")
        split = _KARPATHY_SPLITS.get(entry.get("split", ""))
        if split is None:
            raise CaptionDataError(
                f"{json_path}: images[{n}] has split {entry.get('split')!r}; expected train, restval, val or test"
            )
        caps, boxes, texts = [], [], []
        for s, sent in enumerate(entry.get("sentences", [])):
            sent = sent if isinstance(sent, dict) else {}
            if sent.get("tokens") and not isinstance(sent["tokens"], list):  # a text's letters were read as tokens
                raise CaptionDataError(f"{json_path}: images[{n}].sentences[{s}].tokens is not a list of words")
            # its tokens as given, in NFC as tokenize reads text (an NFD file's "malý" was <unk> to --given)
            given = [unicodedata.normalize("NFC", str(t)) for t in sent.get("tokens") or []]
            text = str(sent.get("raw", "")) if sent.get("raw") else " ".join(given)
            # apostrophes folded token by token, as caption_tokens reads them: token_index counts the tokens as split
            toks = [t.lower().translate(APOSTROPHES) for t in given or tokenize(text)]
            words = [k for k, t in enumerate(toks) if is_word(t)]  # "." and "," are no words to learn (module doc)
            if words:
                caps.append([toks[k] for k in words])
                texts.append(text)
                raw = sent.get("boxes")
                where = f"{json_path}: images[{n}].sentences[{s}]"
                boxes.append(None if raw is None else _word_boxes(_sentence_boxes(raw, len(toks), where), words))
        if caps:
            has_boxes = any(b is not None for b in boxes)
            item = ImageItem(
                root / entry.get("filepath", "") / entry["filename"],
                caps,
                [b or [] for b in boxes] if has_boxes else None,
                _image_wh(entry, f"{json_path}: images[{n}]"),
                texts,
            )
            items.append(item)
            splits.append(split)
    _one_split_each(((os.path.normpath(it.path), s) for it, s in zip(items, splits, strict=True)), json_path)
    kept = {id(it) for it in _check_files(items, json_path, strict, KARPATHY_HINT)}
    out: dict[str, list[ImageItem]] = {s: [] for s in SPLITS}
    for it, split in zip(items, splits, strict=True):
        if id(it) in kept:
            out[split].append(it)
    return out


def _one_split_each(named, source: Path) -> None:
    """(photo, split) pairs -> a CaptionDataError naming how many photos are in more than one split, and the first: a
    photo both trained on and scored would raise its test scores unseen (repeats within one split are the readers')."""
    splits: dict[str, list[str]] = {}
    for photo, split in named:
        if split not in splits.setdefault(str(photo), []):
            splits[str(photo)].append(split)
    both = {photo: s for photo, s in splits.items() if len(s) > 1}
    if both:
        photo, where = next(iter(both.items()))
        raise CaptionDataError(
            f"{source}: {len(both)} photo(s) are in more than one split (first: {Path(photo).name!r}, in "
            f"{' and '.join(where)}): a photo trained on and scored inflates its scores; list each in one split"
        )


_FLICKR_NUMBER = re.compile(r"#\d+$")  # a caption's number after the photo's name (Flickr8k's token file)


def _photo_key(name: str) -> str:
    """A photo's name as a TSV line gives it -> the one key of that photo: ``./p.jpg`` (as ``find .`` writes) and
    ``p.jpg`` name one photo, whose captions must not land in train and test apart; letters composed (NFC), so a name
    typed one way and another is one photo too; posix separators (the folder's path joins them on every system)."""
    return unicodedata.normalize("NFC", os.path.normpath(name).replace(os.sep, "/"))


class _Folder:
    """The files of an image folder by their composed (NFC) names, read only when a name is not found as given: macOS
    writes ``café.jpg`` decomposed (NFD), a TSV typed elsewhere names it composed, and the bytes differ."""

    def __init__(self, root: Path):
        self.root = root
        self.listed: dict[Path, dict[str, str]] = {}  # a folder -> its entries' names, by their NFC form

    def path(self, key: str) -> Path:
        path = self.root / key
        if path.is_file():
            return path
        found = self.root
        for part in key.split("/"):  # one folder at a time: a photo in a subfolder whose name is decomposed too
            if not found.is_dir():
                return path
            if found not in self.listed:
                self.listed[found] = {unicodedata.normalize("NFC", p.name): p.name for p in found.iterdir()}
            name = self.listed[found].get(part, part)
            found = found / name
        return found if found.is_file() else path


def read_folder(image_dir: str | Path, captions_tsv: str | Path, strict: bool = False) -> list[ImageItem]:
    """A folder of images + ``filename<TAB>caption`` lines -> [ImageItem], in order of first appearance.

    Captions are lowercased words, punctuation dropped (:func:`caption_tokens`); each item keeps its captions as
    written too (``raw``). Blank lines, and lines without a tab that start with "#", are ignored (a photo named
    ``#1 beach.jpg`` has a tab after its name); a line without a tab or with no word in its caption is an error naming
    its line number. A photo named two ways (``./p.jpg`` and ``p.jpg``; composed or decomposed letters) is one item.
    A header line first (``image<TAB>caption``) is skipped with a note; a ``.csv`` file (its first line without a
    tab) is read as CSV.
    """
    image_dir, tsv = Path(image_dir), Path(captions_tsv)
    if not tsv.is_file():
        raise CaptionDataError(f"captions file {tsv} {'is a folder' if tsv.is_dir() else 'does not exist'}")
    if not image_dir.is_dir():
        raise CaptionDataError(f"image folder {image_dir} {'is a file' if image_dir.exists() else 'does not exist'}")
    by_name: dict[str, ImageItem] = {}
    by_file: dict[tuple[int, int], str] = {}  # a file found -> the key it was first named by
    folder = _Folder(image_dir)
    repeated: list[int] = []  # lines of a photo and caption read before (a file joined to itself): read once
    rows = caption_rows(tsv, _read_text(tsv, "captions file"), CaptionDataError,
                        lambda message: say(f"caption data: {message}"),
                        lambda name: (image_dir / name).exists())  # fmt: skip
    for n, name, caption, toks in rows:
        name = _photo_key(_FLICKR_NUMBER.sub("", name))  # Flickr8k's token file writes "photo.jpg#0"
        if name not in by_name:
            try:
                path = folder.path(name)
                same = file_identity(path)
            except OSError as err:  # a caption in the name's column (columns swapped), longer than a name can be
                raise CaptionDataError(f"{tsv}: line {n}: {name[:60]!r} cannot name a photo "
                                       f"({err.strerror or err})") from None  # fmt: skip
            if same in by_file:  # one file named another way: by its absolute path, in another case on a disk that
                name = by_file[same]  # ignores case, through a link; its captions were one photo's in train and test
            else:
                if same is not None:
                    by_file[same] = name
                by_name[name] = ImageItem(path, [], raw=[], key=name)
        if caption in by_name[name].raw:  # its weight doubled, its words counted twice (min_freq)
            repeated.append(n)
            continue
        by_name[name].captions.append(toks)
        by_name[name].raw.append(caption)
    if not by_name:
        raise CaptionDataError(f"{tsv}: no captions")
    if repeated:
        say(f"caption data: {inert(tsv)}: {len(repeated)} line(s) repeat a photo and caption of a line before (first: "
            f"line {repeated[0]}): each read once")  # fmt: skip
    _unspaced_note(tsv, [raw for item in by_name.values() for raw in item.raw])
    _uncaptioned_note(image_dir, tsv, set(by_file))  # the files the lines name, found as they were read
    return _check_files(_copies_as_one(list(by_name.values()), tsv), tsv, strict)


def content_digest(path: Path) -> str | None:
    """A file's bytes as a SHA-256 digest (copies of a photo under other names are one photo); None where it cannot
    be read."""
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _copies_as_one(items: list[ImageItem], tsv: Path) -> list[ImageItem]:
    """Photos whose files hold the same bytes (``p.jpg`` and ``p copy.jpg``) as one photo, the first named, with the
    captions of all (a copy's repeated captions once), and one note counting them: split apart, a test photo's copy
    was a train photo, and the held-out scores were of photos the model had learned. Only files of one size are read
    to compare (a folder of photos has few)."""
    from collections import defaultdict

    by_size: dict[int, list[ImageItem]] = defaultdict(list)
    for item in items:
        try:
            by_size[item.path.stat().st_size].append(item)
        except OSError:  # missing: _check_files says so
            continue
    first: dict[str, ImageItem] = {}  # content digest -> the first photo holding it
    copies: list[tuple[ImageItem, ImageItem]] = []  # (copy, the photo it copies)
    for group in (g for g in by_size.values() if len(g) > 1):
        for item in group:
            if (digest := content_digest(item.path)) is None:
                continue
            if digest in first:
                copies.append((item, first[digest]))
            else:
                first[digest] = item
    if not copies:
        return items
    for copy, kept in copies:
        for toks, raw in zip(copy.captions, copy.raw, strict=True):
            if raw not in kept.raw:
                kept.captions.append(toks)
                kept.raw.append(raw)
    copy, kept = copies[0]
    say(f"caption data: {inert(tsv)}: {len(copies)} photo(s) hold the same bytes as another (first: "
        f"{inert(copy.path.name)}, a copy of {inert(kept.path.name)}): each read as that photo, with its captions, "
        "so that no copy is held out from its own original")  # fmt: skip
    gone = {id(copy) for copy, _ in copies}
    return [item for item in items if id(item) not in gone]


def _uncaptioned_note(image_dir: Path, tsv: Path, named: set[tuple[int, int]]) -> None:
    """One note counting the photos of the folder (its subfolders too, hidden ones aside) that no line of the captions
    file names (``named``: the files the lines name, by file_identity): they are not trained on, and nothing said so
    (a file naming 10 of 12 photos trained on 10)."""
    from captioning.photos.image_paths import image_paths  # the folder's photos, as caption lists them

    photos = image_paths([str(image_dir)])
    left = [os.path.relpath(path, image_dir) for path in photos if file_identity(path) not in named]
    if left:
        say(f"caption data: {inert(tsv)}: {len(left)} photo(s) in {inert(image_dir)} have no caption line (first: "
            f"{inert(left[0])}): not trained on")  # fmt: skip


def _unspaced_note(tsv: Path, captions: list[str]) -> None:
    """One note where the captions are one or two words each though long: a language written without spaces
    (Chinese, Japanese, Thai), each caption read as one word, every unseen one <unk>."""
    if found := unspaced([len(caption_tokens(c)) for c in captions], [len(c) for c in captions]):
        words, letters = found
        say(f"caption data: note: {inert(tsv)}: its captions are {words} word(s) each (the median; {letters} "
            "characters): a language written without spaces (Chinese, Japanese, Thai)? Captions are read as words "
            "between spaces, so each is one word; write them with a space between words (a word segmenter: jieba, "
            "MeCab)")  # fmt: skip


# --- Flickr8k ---------------------------------------------------------------------------------------------------------
def _note(path: Path, skipped: int, total: int, why: str, first: str) -> None:
    if skipped:
        say(f"caption data: {inert(path)}: skipped {skipped} of {total} lines {why} (first: {inert(repr(first))})")


def _image_names(folder: Path) -> set[str]:
    if not folder.is_dir():
        raise CaptionDataError(f"{folder}: image folder {'is a file' if folder.exists() else 'not found'}")
    names = {p.name for p in folder.iterdir() if p.is_file()}
    if not names:
        raise CaptionDataError(f"{folder}: image folder has no files")
    return names


def read_token_file(
    path: Path, images: set[str], read: Callable[[str], Any] = caption_tokens, folder: Path | None = None
) -> dict[str, list]:
    """``<image>#<n><TAB><caption>`` lines -> {image name: [tokens, ...]} in file order, for images in ``images``.
    ``read``: what each caption becomes (default: its tokens; ``str.strip``: its text, for a file written again).
    ``folder``: the images' folder, where none is named, to say which file the first name likely means."""
    text = _read_text(path, "captions file")
    captions: dict[str, list[list[str]]] = {}
    skipped, total, first, tabs, first_name = 0, 0, "", 0, ""
    for line in text_lines(text):
        if not line.strip():
            continue
        total += 1
        key, tab, caption = line.partition("\t")
        name = key.rsplit("#", 1)[0].strip()
        toks = read(caption)
        tabs += bool(tab)
        if not tab or name not in images or not toks:
            skipped, first = skipped + 1, first or line[:60]
            first_name = first_name or (name if tab else "")
            continue
        captions.setdefault(name, []).append(toks)
    _note(path, skipped, total, "that name no image in the folder or have no caption", first)
    if not captions:
        # why, where it can be told: spaces for the tab (a copy through an editor), or names the folder has otherwise
        why = "; no line has a tab after the photo's name" if total and not tabs else ""
        why = why or (_near_miss(folder / first_name) if folder is not None and first_name else "")
        raise CaptionDataError(f"{path}: no caption names an image of the folder{why}")
    return captions


def read_kaggle_captions(path: Path, images: set[str]) -> dict[str, list[list[str]]]:
    """Kaggle's ``image,caption`` CSV (header line first) -> {image name: [tokens, ...]}."""
    text = _read_text(path, "captions file")
    spans: list[tuple[int, int]] = []  # rows of more than one line: Kaggle's file has none, a stray quote makes one

    def not_csv(line: int, why: str) -> CaptionDataError:  # a field past csv's limit: the quote left open, say
        return CaptionDataError(f"{path}: line {line}: {why}")

    rows = table_rows(text_lines(text), True, not_csv, spans)
    header = next((row for _, row in rows), None)
    if header is None or [h.strip().lower() for h in header[:2]] != ["image", "caption"]:
        raise CaptionDataError(f"{path}: line 1: expected the header 'image,caption', got {','.join(header or [])!r}")
    captions: dict[str, list[list[str]]] = {}
    skipped, total, first = 0, 0, ""
    for _, row in rows:
        if not row or not "".join(row).strip():
            continue
        total += 1
        name = row[0].strip()
        toks = caption_tokens(",".join(row[1:]))  # an unquoted caption with commas spans several fields
        if name not in images or not toks:
            skipped, first = skipped + 1, first or ",".join(row)[:60]
            continue
        captions.setdefault(name, []).append(toks)
    if spans:
        say(f"caption data: {inert(path)}: {spans_note(spans)}")
    _note(path, skipped, total, "that name no image in the folder or have no caption", first)
    if not captions:
        raise CaptionDataError(f"{path}: no caption names an image of the folder")
    return captions


def read_split_file(path: Path, captioned: dict[str, list[list[str]]]) -> list[str]:
    """One image name a line -> the names that have captions (others skipped and counted), without repeats."""
    names, seen, skipped, total, first, repeats = [], set(), 0, 0, "", []
    for line in text_lines(_read_text(path, "split file")):
        name = line.strip()
        if not name:
            continue
        total += 1
        if name in seen:  # a captioned photo named again: read once (it was counted as no captioned image)
            repeats.append(name)
            continue
        if name not in captioned:
            skipped, first = skipped + 1, first or name[:60]
            continue
        seen.add(name)
        names.append(name)
    _note(path, skipped, total, "that name no captioned image of the folder", first)
    _note(path, len(repeats), total, "that name a photo of a line before (read once)", repeats[0] if repeats else "")
    if not names:
        raise CaptionDataError(f"{path}: the split is empty (no line names a captioned image)")
    return names


def detect_layout(root: Path) -> str:
    """``original`` or ``kaggle``, from what ROOT holds."""
    if not root.is_dir():
        raise CaptionDataError(f"{root}: data root {'is a file, not a folder' if root.exists() else 'not found'}")
    if (root / ORIGINAL_IMAGES).exists() or (root / ORIGINAL_TEXT).exists():
        return "original"
    if (root / KAGGLE_CAPTIONS).exists() or (root / KAGGLE_IMAGES).exists():
        return "kaggle"
    raise CaptionDataError(
        f"{root}: neither Flickr8k layout found (expected {ORIGINAL_IMAGES}/ and {ORIGINAL_TEXT}/, "
        f"or Kaggle's {KAGGLE_IMAGES}/ and {KAGGLE_CAPTIONS})"
    )


def _split_dir(root: Path) -> Path | None:
    for folder in (root / ORIGINAL_TEXT, root):
        if all((folder / f).is_file() for f in SPLIT_FILES.values()):
            return folder
    return None


def _layout(root: Path, layout: str) -> str:
    if layout not in LAYOUTS:
        raise CaptionDataError(f"unknown Flickr8k layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    return detect_layout(root) if layout == "auto" else layout


def has_standard_split(root: str | Path, layout: str = "auto") -> bool:
    """Whether :func:`read_flickr8k` reads ROOT's standard split files (the original layout always; a Kaggle copy when
    the three files lie in ROOT or ROOT/Flickr8k_text) rather than drawing a random split."""
    return _layout(Path(root), layout) == "original" or _split_dir(Path(root)) is not None


_DRAWN = re.compile(r"a random split \(seed \d+\)")  # how a model file's facts name a split drawn at random


def split_clash(start: str, info: dict, split: str | None, root: str) -> str | None:
    """Why a run from ``start`` (``model.init_from``; ``info``: its file's facts) cannot use data.root ``root``, read
    in Flickr8k's ``split`` (the data module's ``flickr8k_split``; None: other data): the start learned from Flickr8k's
    photos in another split, so this split's val and test photos are partly photos it trained on (the bundled model,
    which trained on the standard split, scored CIDEr-D 179 on a random split's test photos against 62 on the
    standard ones). None when they agree, or the start never saw Flickr8k (nor any model it started from)."""
    said = " ".join(str(info.get(key, "")) for key in ("training_data", "started_from", "earlier_starts"))
    if split is None or "Flickr8k" not in said:
        return None
    drawn = _DRAWN.search(said)
    learned = drawn.group(0) if drawn else "the standard split"
    if learned == split:
        return None
    fix = (f"put the standard split files ({', '.join(SPLIT_FILES.values())}) in it" if split != "the standard split"
           else "start from a model trained on the standard split")  # fmt: skip
    return (f"model.init_from {start} learned from Flickr8k's photos in {learned}, and data.root {root} reads them in "
            f"{split}: its val and test photos would be partly ones the start trained on, and score high for it; "
            f"{fix}")  # fmt: skip


def read_flickr8k(root: str | Path, layout: str = "auto", seed: int = 0) -> dict[str, list[ImageItem]]:
    """Flickr8k at ROOT (either layout, module doc) -> {"train", "val", "test": [ImageItem]}."""
    root = Path(root)
    layout = _layout(root, layout)
    if layout == "original":
        folder = root / ORIGINAL_IMAGES
        captions = read_token_file(root / ORIGINAL_TEXT / TOKEN_FILE, _image_names(folder), folder=folder)
        split_dir = root / ORIGINAL_TEXT
    else:
        folder = root / KAGGLE_IMAGES
        captions = read_kaggle_captions(root / KAGGLE_CAPTIONS, _image_names(folder))
        split_dir = _split_dir(root)
    if split_dir is not None:
        names = {s: read_split_file(split_dir / f, captions) for s, f in SPLIT_FILES.items()}
        _one_split_each(((n, SPLIT_FILES[s]) for s, v in names.items() for n in v), split_dir)
    else:
        pool = sorted(captions)
        random.Random(seed).shuffle(pool)
        held = min(_HELD_OUT, max(1, len(pool) // 8))
        if len(pool) < 3:
            raise CaptionDataError(f"{root / KAGGLE_CAPTIONS}: {len(pool)} captioned images are too few to split")
        names = {"val": pool[:held], "test": pool[held : 2 * held], "train": pool[2 * held :]}
        # a random split of Flickr8k's photos holds about 3 in 4 standard train photos in its test: the bundled model
        # scored CIDEr-D 179 there against 62 on the standard test photos, and only a count of skipped lines was said
        say(f"caption data: note: {inert(root)}: no standard split files ({', '.join(SPLIT_FILES.values())}) in it "
            f"or in {ORIGINAL_TEXT}/: val and test are {held:,} photos each drawn at random (seed {seed}), not the "
            "standard split: scores on them compare with neither published ones nor the bundled model's, which "
            "trained on most of them; put the three files there to use the standard split")  # fmt: skip
    return {s: [ImageItem(folder / n, captions[n]) for n in v] for s, v in names.items()}
