"""The lines of a file of captions (``photo<TAB>caption``), read one way wherever such a file is read: caption-train's
folder data (readers.read_folder) and ``caption --references`` / ``--given-file``, whose reader knew fewer of the
forms a user's file comes in and read them wrong unsaid (a Flickr30k file's caption numbers scored as words of every
reference, a third column glued into the caption, ``#1 beach.jpg`` taken for a comment).

The forms: tab-separated, or CSV (a ``.csv`` name, or a first line that is a CSV header: Kaggle's ``captions.txt``);
a header line (``image<TAB>caption``) skipped with a note; Flickr30k's ``image<TAB>comment_number<TAB>comment`` (a
whole number in the second column of every line: the third is the caption, noted); lines without a tab that start
with "#" are comments (a photo named ``#1 beach.jpg`` has its tab); a TSV's quoted names unquoted; a third column and
beyond not read (noted); a line without a photo and a caption, or a caption of no words, one error naming its line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from captioning.model.reading import caption_tokens
from text_attn.core.safe_files import (
    SEMICOLONS,
    empty_rows_note,
    inert,
    reads_as_csv,
    spans_note,
    table_rows,
    text_lines,
)

# a captions file's header line, as a spreadsheet or pandas writes one: its two columns' names
_HEADER_NAMES = frozenset("image images image_name image_id img file filename file_name photo path name id".split())
_CAPTION_NAMES = frozenset("caption captions text description comment sentence label".split())


class CaptionRow(NamedTuple):
    line: int  # the line it ends on (a CSV cell's line breaks: the row's last line)
    name: str  # the photo's column, stripped (a TSV's quotes around it dropped); a caption's "#k" number kept
    caption: str  # the caption as written, stripped
    words: list[str]  # its words as training reads them (caption_tokens): never empty


def caption_rows(
    path: Path,
    text: str,
    error: Callable[[str], Exception],
    note: Callable[[str], None],
    is_photo: Callable[[str], bool] = lambda name: False,
) -> Iterator[CaptionRow]:
    """``text`` (the file at ``path``, decoded) -> its rows of a photo and a caption. ``error(message)``: the
    exception a malformed line raises (its message names ``path`` and the line); ``note(message)``: where the notes
    go (each names ``path``); ``is_photo(name)``: whether a first line that reads as a header names a photo instead
    (then it is read as one)."""
    lines = text_lines(text)
    # spreadsheets' and pandas' own: a caption in quotes; and a file of another name that starts with a CSV header
    comma = reads_as_csv(path.name.removesuffix(".gz"), lines) or _csv_header(lines)
    spans: list[tuple[int, int]] = []  # CSV rows of more than one line: a cell's line breaks, or a stray quote
    rows = list(table_rows(lines, comma, lambda line, why: error(f"{path}: line {line}: {why}"), spans))
    if spans:
        note(f"{inert(path)}: {spans_note(spans)}")
    at = _caption_column(rows)  # 2 where the second column numbers the captions (image, comment_number, comment)
    if at == 2:
        note(f"{inert(path)}: the second column is a number on every line (a caption's number, as Flickr30k's "
             "comment_number): the third column is read as the caption")  # fmt: skip
    first = True  # the first line with content: a header ("image<TAB>caption", as pandas writes one) is skipped
    wide: list[int] = []  # lines of more than two columns: only the photo's and the caption's read
    empty: list[int] = []  # lines of columns that are all empty
    for n, cols in rows:
        cols = [cols[0], *cols[at:]] if len(cols) > at else cols
        line = "\t".join(cols[:2])  # the photo's column and the caption's
        if not line.strip() and len(cols) > 1:  # a spreadsheet's empty row: skipped as a blank line, counted
            empty.append(n)
        if not line.strip() or (line.startswith("#") and "\t" not in line):  # a comment; "#1 beach.jpg<TAB>": a photo
            continue
        name, tab, caption = line.partition("\t")
        if first and _header(name, caption) and not is_photo(name.strip()):
            shown = line.strip().replace("\t", ", " if comma else "\t")  # as the file has it
            note(f"{inert(path)}: line {n} read as a header ({inert(repr(shown[:60]))}): skipped")
            first = False
            continue
        first = False
        if len(cols) > 2 and any(c.strip() for c in cols[2:]):
            wide.append(n)  # a third column (a photographer, a source) was read into the caption; a CSV's cut it
        words = caption_tokens(caption)
        if tab and name.strip() and not words:  # the line's shape is right; its caption has no word
            # an empty column and the caption in the next (two tabs, as an editor aligning columns writes them): the
            # line said "has no words (punctuation is dropped)" of a caption that is there
            later = next((c for c in cols[2:] if caption_tokens(c)), None) if not caption.strip() else None
            two = "commas" if comma else "tabs"  # a CSV file's "photo.png,,a cup"
            why = (f"is empty, and the next column holds words (two {two} between them?)" if later is not None
                   else "has no words (punctuation is dropped)")  # fmt: skip
            raise error(f"{path}: line {n}: the caption of {name.strip()!r} {why}")
        if not tab or not name.strip():
            raise error(f"{path}: line {n}: expected '{'filename,caption' if comma else 'filename<TAB>caption'}', "
                        f"got {line[:60]!r}{_shape_hint(line, comma, tab)}")  # fmt: skip
        name = name.strip()
        if len(name) > 1 and name[0] == name[-1] == '"' and not comma:  # a TSV written with quoted fields
            name = name[1:-1].replace('""', '"')
        yield CaptionRow(n, name, caption.strip(), words)
    if empty:
        note(f"{inert(path)}: {empty_rows_note(empty)}")
    if wide:
        split = "a comma outside quotes splits it" if comma else "a tab typed inside a caption splits it"
        note(f"{inert(path)}: {len(wide)} line(s) have more than two columns (first: line {wide[0]}): the first is the "
             f"photo, the second its caption, the rest not read ({split})")  # fmt: skip


def _shape_hint(line: str, comma: bool, tab: str) -> str:
    """What a line without a photo and a caption may be instead, for its error."""
    if line.lstrip()[:1] in ("{", "["):
        return (" (JSON is not read here: a TSV or CSV of file names and captions is; a Karpathy JSON is "
                "data.source karpathy)")  # fmt: skip
    if "|" in line and not tab:  # Flickr30k's results.csv: "image_name| comment_number| comment"
        return " (| between them? save it with tabs, or as a CSV with commas)"
    if comma and ";" in line and not tab:
        return SEMICOLONS
    return " (commas between them? a .csv file is read as CSV)" if not comma and "," in line else ""


def _caption_column(rows: list[tuple[int, list[str]]]) -> int:
    """Which column of a captions file holds the caption: 1, or 2 where every line (a header first aside) has three
    columns or more and a whole number in the second (``image<TAB>comment_number<TAB>comment``, as Flickr30k's
    results file numbers each photo's captions: the numbers 0-4 were trained as its captions)."""
    body = [cols for _, cols in rows if any(c.strip() for c in cols)][1:]  # the first may be a header
    numbered = body and all(len(cols) > 2 and cols[1].strip().isdigit() and cols[2].strip() for cols in body)
    return 2 if numbered else 1


def _csv_header(lines: list[str]) -> bool:
    """Whether a captions file's first line with content is a CSV header (``image,caption``) with no tab: its lines
    are CSV, whatever its name (Kaggle's Flickr8k ``captions.txt``)."""
    head = next((line for line in lines if line.strip()), "")
    if "\t" in head or "," not in head:
        return False
    name, _, caption = head.partition(",")
    return _header(name.strip().strip('"'), caption.split(",")[0].strip().strip('"'))


def _header(name: str, caption: str) -> bool:
    """Whether a captions file's first line is a header (``image<TAB>caption``): two column names, not a photo and
    its caption (the caller also checks no file is named so)."""
    return name.strip().lower() in _HEADER_NAMES and caption.strip().lower() in _CAPTION_NAMES
