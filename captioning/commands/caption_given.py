"""``caption --given`` / ``--given-file``: captions someone wrote, read by the model instead of written
(Captioner.read_texts): the options checked and the file read before the model loads, the notes on unknown words,
each photo's readings ranked, and a reading's part of a record."""

from __future__ import annotations

import argparse
import gzip
import re
import sys
import unicodedata
import zlib
from pathlib import Path
from typing import Any

from text_attn.core.arrays import digits6
from text_attn.core.errors import fail, given_text
from text_attn.core.json_numbers import json_score
from text_attn.core.os_text import lone_surrogate, stdin_bytes, utf8_name
from text_attn.core.ranks import first_process
from text_attn.core.safe_files import inert
from text_attn.core.search_options import search_flags_given

_KEY = re.compile(r"#\d+$")  # Flickr8k's token file names a caption "photo.jpg#2": the photo is "photo.jpg"


def photo_key(path: str) -> str:
    """What a photo is found by in a file of captions: its file name, its bytes read as UTF-8 whatever the locale, and
    composed (NFC): a name stored or typed decomposed (macOS's file names, text copied from there) is the same name
    (it was "names none of the photos given", the name shown looking the same)."""
    return unicodedata.normalize("NFC", utf8_name(Path(path).name))


def check_given(args: argparse.Namespace) -> None:
    """--given / --given-file: one of them, each caption with a word, no option of the search that writes the model's
    own caption, not --demo shapes. --given-file is read here: ``args.given_by_name`` (file name -> its captions)
    and ``args.given_lines`` (file name -> their line numbers)."""
    args.given_by_name = args.given_lines = None
    if not (args.given or args.given_file):
        return
    from captioning.model.reading import caption_tokens  # no torch there

    if args.given and args.given_file:
        fail("caption", "give --given (read for every image) or --given-file (each image's own), not both")
    for text in args.given or ():
        if lone_surrogate(text) is not None:  # a byte that was not UTF-8 in argv: the captioner refuses it (api_args)
            fail("caption", f"{given_text('--given', text)}: not valid UTF-8 text")
        if not caption_tokens(text):
            fail("caption", f"{given_text('--given', text)}: no words to read (punctuation is dropped)")
    flag = "--given" if args.given else "--given-file"
    refused = search_flags_given(args) + (["--max-len"] if args.max_len is not None else [])  # as translate's
    refused += ["--cuda-graphs"] if args.cuda_graphs else []
    if refused:
        fail("caption", f"{flag} reads the captions given; {refused[0]} is for the captions the model writes: drop one")
    if args.demo == "shapes":
        fail("caption", f"{flag} reads a caption of your images or the bundled photos; --demo shapes draws a scene "
             "with its own caption: drop one")  # fmt: skip
    if args.given_file and args.demo:
        fail("caption", "--given-file reads your images' own captions; --demo captions the bundled photos: give the "
             "photos, or --given with --demo")  # fmt: skip
    if args.given_file:
        args.given_by_name, args.given_lines = read_caption_file(Path(args.given_file))


def read_caption_file(path: Path, flag: str = "--given-file") -> tuple[dict[str, list[str]], dict[str, list[int]]]:
    """A file of ``name<TAB>caption`` lines, read as caption-train reads its folder's (captioning.training.caption_rows:
    a CSV, a header, Flickr30k's numbered third column, comments, a third column noted and not read; gzipped or not;
    Flickr8k's token file too: ``name#k``) -> each file name's captions, in file order, and their line numbers. A
    line without a photo and a caption, or a caption without a word, is one error line naming it (and ``flag``)."""
    from captioning.training.caption_rows import caption_rows

    try:
        raw = stdin_bytes() if str(path) == "-" else path.read_bytes()  # "-": stdin (a file named "-" is ./-)
    except FileNotFoundError:
        fail("caption", f"{flag} {path}: file not found")
    except IsADirectoryError:
        fail("caption", f"{flag} {path}: a folder; give the file of captions (name<TAB>caption lines)")
    except OSError as err:
        fail("caption", f"{flag} {path}: cannot read it ({err.strerror or type(err).__name__})")
    if raw[:2] == b"\x1f\x8b":  # gzipped (captions.tsv.gz), as caption-train reads it
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            fail("caption", f"{flag} {path}: not a whole gzip file ({err})")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:  # the line, for a file that is mostly text
        line = raw[: err.start].count(b"\n") + 1
        fail("caption", f"{flag} {path}: not UTF-8 text (line {line}, byte {err.start})")
    by_name: dict[str, list[str]] = {}
    lines: dict[str, list[int]] = {}
    seen: set[tuple[str, str]] = set()
    repeats, alike = [], []  # numbered lines again (dropped); unnumbered ones again (kept)

    def note(message: str) -> None:
        if first_process():
            print(f"caption: note: {flag} {message}", file=sys.stderr)

    try:
        for n, name, caption, _ in caption_rows(path, text, _RowError, note):
            named, said = unicodedata.normalize("NFC", name), unicodedata.normalize("NFC", caption)
            if (named, said) in seen:  # a file joined twice: each caption counted again (CIDEr-D moved)
                if _KEY.search(named):  # the same caption number: a copy, read once
                    repeats.append(n)
                    continue
                alike.append(n)  # no number: two people may have written the same caption (coco-caption counts both)
            seen.add((named, said))
            key = Path(_KEY.sub("", named)).name
            by_name.setdefault(key, []).append(caption)
            lines.setdefault(key, []).append(n)
    except _RowError as err:
        fail("caption", f"{flag} {err}")
    if not by_name:
        fail("caption", f"{flag} {path}: no name<TAB>caption line in it")
    for found, how in ((repeats, "read once"), (alike, "each read, as two people's (is the file joined twice?)")):
        if found:  # "#0" and "#1" with one caption are two people's: no repeat
            note(f"{inert(path)}: {len(found)} line(s) repeat an earlier line, its name and caption: {how} (the "
                 f"first: line {found[0]})")  # fmt: skip
    return by_name, lines


class _RowError(ValueError):
    """A line of a --given-file / --references FILE that is not a photo and its caption (caption_rows' message)."""


def given_notes(captioner, args: argparse.Namespace, names: set[str] | None = None) -> None:
    """One note a --given caption holding words the model does not know (they are read as <unk>); for --given-file,
    one note counting such lines among the captions of the photos ``names`` (file names; None: every line, when
    they are not known before reading, e.g. shard members), not the whole file's: Flickr8k's token file holds
    40,000 captions for a run of ten photos."""
    for text in args.given or ():
        unknown = captioner.unknown_words(text)
        if unknown:
            words = ", ".join(repr(inert(w)) for w in unknown)
            print(f"caption: note: --given {inert(repr(text))}: the model does not know {words}: read as <unk>",
                  file=sys.stderr)  # fmt: skip
    if args.given_by_name:
        lines = args.given_lines
        pairs = ((t, n) for name, texts in args.given_by_name.items() if names is None or name in names
                 for t, n in zip(texts, lines[name], strict=True))  # fmt: skip
        odd = sorted((n, unknown) for text, n in pairs if (unknown := captioner.unknown_words(text)))
        if odd:  # the first one's words named, as translate's note names its tokens
            first, unknown = odd[0]
            words = ", ".join(repr(inert(w)) for w in unknown)
            print(f"caption: note: {len(odd)} caption(s) of --given-file {inert(args.given_file)} hold words the model "
                  f"does not know, read as <unk> (the first: line {first}, {words})", file=sys.stderr)  # fmt: skip


def no_given_caption(name: str, args: argparse.Namespace) -> str | None:
    """Why image ``name`` has no caption to read in --given-file (None: it has, or no --given-file)."""
    by_name = getattr(args, "given_by_name", None)
    if by_name is None or photo_key(name) in by_name:
        return None
    return f"{name}: --given-file {args.given_file} has no caption for {Path(name).name}"


def read_given(captioner, features: Any, items: list[dict[str, Any]], args: argparse.Namespace) -> list | None:
    """Per photo (features (B, L, D), ``items`` in batch order) its readings, best score first (ties: in the order
    given): every --given caption read against all of them at once, or each photo's own captions of --given-file.
    None without either (the model writes its own)."""
    given, by_name = getattr(args, "given", None), getattr(args, "given_by_name", None)
    if given:
        readings = captioner.read_texts(features, given)  # K lists of B
        return [sorted((r[b] for r in readings), key=lambda c: -c.score) for b in range(features.size(0))]
    if by_name is None:
        return None
    out = []
    for b, item in enumerate(items):
        own = captioner.read_texts(features[b : b + 1], by_name[photo_key(item["name"])])  # K lists of 1
        out.append(sorted((r[0] for r in own), key=lambda c: -c.score))
    return out


def given_record(reading: Any) -> dict[str, Any]:
    """A read caption's part of a record: its text, score (mean log-probability of the words and the end), total
    log-probability, and each word's and the end's probability."""
    probs = [*reading.probs, reading.end_prob]
    return {
        "caption": " ".join(reading.words),
        "score": json_score(reading.score),
        "log_prob": json_score(reading.score * len(probs)),
        "word_probs": [digits6(p) for p in reading.probs],
        "end_prob": digits6(reading.end_prob),
    }
