"""Readers for real parallel corpora: a TSV of pairs (Tatoeba / Anki) and line-aligned files (Multi30k's
``<split>.<lang>[.gz]``), gzipped or not, as :class:`~text_attn.translation.tasks.Example` pairs or raw sentences.
Misaligned files, an empty line on one side, bytes that are not UTF-8: a :class:`TaskError` naming the file and line,
never a silent shift.
"""

from __future__ import annotations

import codecs
import gzip
import re
import shlex
import stat
import zlib
from pathlib import Path

from text_attn.core.casing import shows_nothing, visible
from text_attn.core.os_text import stdin_bytes
from text_attn.core.ranks import say
from text_attn.core.safe_files import (
    SEMICOLONS,
    UTF16_BOMS,
    UTF16_SAID,
    empty_rows_note,
    inert,
    line_break,
    reads_as_csv,
    spans_note,
    table_rows,
)
from text_attn.core.vocab import tokenize
from text_attn.translation.pairs import Example, TaskError


def read_lines(path: str | Path, pairs: bool = False) -> list[str]:
    """UTF-8 lines without line endings (a gzipped file is read through: .gz or gzip's magic bytes); a decoding error
    names its line. ``-``: stdin's lines. ``pairs``: a training corpus's, where a carriage return inside a line is
    refused (two pairs were read as one); elsewhere (references, a translation given) it stays, as translate reads
    its input lines."""
    p, dash = Path(path), str(path) == "-"  # "-": stdin (a file named "-" is ./-)
    if not dash:
        if p.is_dir():
            raise TaskError(f"{p}: is a folder; give the file")
        if not p.exists():
            raise TaskError(f"{p}: file not found")
        if not (stat.S_ISREG(mode := p.stat().st_mode) or stat.S_ISFIFO(mode)):  # a pipe, <(zcat refs.gz), is read;
            raise TaskError(f"{p}: not a regular file or a pipe: not read")  # a device (/dev/zero) never ends
    try:
        raw = stdin_bytes() if dash else p.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise TaskError(f"{p}: cannot read it ({' '.join(str(e).split()) or type(e).__name__})") from None
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    elif raw.startswith(UTF16_BOMS):  # read line by line, "1: not valid UTF-8" said nothing of what it was
        raise TaskError(f"{p}: {UTF16_SAID}")
    chunks = raw.split(line_break(raw))  # not bytes.splitlines: it would also split on U+2028 etc.
    if chunks[-1] == b"":
        chunks.pop()  # the newline that ends the last line
    lines = []
    for i, chunk in enumerate(chunks, 1):
        try:
            line = chunk.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            # the usual cause: a file saved as Latin-1 / Windows-1252 (Excel's "CSV", older editors): said how to
            # convert it, as UTF-16's refusal does
            name = shlex.quote(str(p))
            out = shlex.quote(str(p.with_suffix("") if p.suffix == ".gz" else p) + ".utf8")
            read = (
                f"zcat {name} | iconv -f CP1252 -t UTF-8" if p.suffix == ".gz" else f"iconv -f CP1252 -t UTF-8 {name}"
            )
            raise TaskError(f"{p}:{i}: not valid UTF-8 ({e.reason}; saved as Latin-1 or Windows-1252? convert it, "
                            f"{read} > {out}, and give that file)") from None  # fmt: skip
        if pairs and "\r" in line:  # a classic Mac OS line end among line feeds: two pairs read as one
            raise TaskError(f"{p}:{i}: a carriage return inside the line: its lines end in line feeds and, here, "
                            "in a carriage return alone (a classic Mac OS line end); save it with one kind of line "
                            "end")  # fmt: skip
        lines.append(line)
    return lines


def _side(text: str) -> str:
    """One side of a pair as translate reads a line: stripped, without the characters no reader sees; "" for one of
    format characters alone (a zero-width space: an empty sentence)."""
    text = visible(text).strip()
    return "" if shows_nothing(text) else text


def _tokens(text: str, lower: bool, where: str) -> list[str]:
    toks = tokenize(text, lower=lower)
    if not toks:
        raise TaskError(f"{where}: empty sentence")
    return toks


# a TSV's header line, as a spreadsheet or pandas writes one: its columns' names, both read columns one of these
HEADERS = frozenset(
    "source target src tgt input output sentence translation text de en fr cs german english french czech deutsch "
    "englisch französisch tschechisch anglais allemand français tchèque němčina angličtina francouzština čeština"
    .split()
)  # fmt: skip


# words a column's name is made of beside HEADERS' ("source_text", "de_sentence", "English sentence", "src-lang")
NAME_PARTS = frozenset("text sentence sentences lang language col column string raw original translated side".split())


def _column_name(cell: str) -> bool:
    """Whether a cell of a TSV's first line is a column's name: one of HEADERS, or words of them and NAME_PARTS
    joined by "_", "-" or a space ("source_text" and "de_sentence" were trained as a pair); a sentence is
    not."""
    parts = [part for part in re.split(r"[_\-\s]+", cell.strip().lower()) if part]
    return bool(parts) and all(part in HEADERS or part in NAME_PARTS for part in parts)


def read_tsv_text(
    path: str | Path, src_col: int = 0, tgt_col: int = 1, max_pairs: int | None = None
) -> list[tuple[str, str, str]]:
    """Tab-separated pairs (Tatoeba/Anki: `English<TAB>French<TAB>attribution`) -> (source, target, "path:line");
    extra columns are ignored, blank lines skipped; an empty side is a TaskError naming the line. Lines of another
    number of columns than most get one note on stderr naming the first: a tab typed inside a sentence splits it, and
    the pair read there is half a sentence and its other half. A file named ``.csv`` (or ``.csv.gz``) is read as CSV:
    commas between columns, a sentence with a comma in quotes, as spreadsheets and pandas write it."""
    need = max(src_col, tgt_col) + 1
    lines = read_lines(path, pairs=True)
    comma = reads_as_csv(path, lines)
    kind = "comma-separated" if comma else "tab-separated"
    out: list[tuple[str, str, str]] = []
    widths: dict[int, list[int]] = {}  # columns -> the lines that have that many
    first = True  # the first line with content: a header ("German<TAB>English", as pandas writes one) is skipped
    spans: list[tuple[int, int]] = []  # CSV rows of more than one line: a cell's line breaks, or a stray quote
    empty_rows: list[int] = []  # lines of columns that are all empty (201 lines gave 200 pairs, unsaid)
    for i, cols in table_rows(lines, comma, lambda line, why: TaskError(f"{path}:{line}: {why}"), spans):
        if max_pairs is not None and len(out) >= max_pairs:
            break
        if not any(c.strip() for c in cols):
            if len(cols) > 1:  # a spreadsheet's empty row ("\t"), or a pair of blanks: skipped, counted
                empty_rows.append(i)
            continue
        if first and len(cols) >= need and _column_name(cols[src_col]) and _column_name(cols[tgt_col]):
            shown = inert(repr((", " if comma else "\t").join(cols)[:60]))
            say(f"text data: {inert(str(path))}: line {i} read as a header ({shown}): skipped")
            first = False
            continue
        first = False
        widths.setdefault(len(cols), []).append(i)
        where = f"{path}:{i}"
        if len(cols) < need:
            hint = "" if comma or "," not in cols[0] else " (commas between them? a .csv file is read as CSV)"
            hint = SEMICOLONS if comma and ";" in cols[0] else hint
            raise TaskError(f"{where}: expected at least {need} {kind} columns, found {len(cols)}{hint}")
        s, t = _side(cols[src_col]), _side(cols[tgt_col])
        if not s or not t:
            raise TaskError(f"{where}: empty sentence in column {src_col if not s else tgt_col}")
        out.append((s, t, where))
    if spans:
        say(f"text data: {inert(str(path))}: {spans_note(spans)}")
    if empty_rows:
        say(f"text data: {inert(str(path))}: {empty_rows_note(empty_rows)}")
    if not out:
        raise TaskError(f"{path}: no sentence pairs")
    if len(widths) > 1:
        usual = max(widths, key=lambda w: len(widths[w]))
        odd = sorted(n for w, lines in widths.items() if w != usual for n in lines)
        lines = sum(map(len, widths.values()))
        split = "a comma outside quotes" if comma else "a tab inside a sentence"
        say(f"text data: {inert(str(path))}: {len(odd)} of {lines} lines have another number of {kind} "
            f"columns than the others' {usual} (first: line {odd[0]}): {split} splits it; columns "
            f"{src_col} and {tgt_col} are read")  # fmt: skip
    return out


def read_tsv_pairs(
    path: str | Path,
    src_col: int = 0,
    tgt_col: int = 1,
    lower: bool = True,
    max_pairs: int | None = None,
) -> list[Example]:
    """Tab-separated pairs as word tokens (read_tsv_text)."""
    return [
        Example(_tokens(s, lower, where), _tokens(t, lower, where), src_text=s, tgt_text=t)
        for s, t, where in read_tsv_text(path, src_col, tgt_col, max_pairs)
    ]


def _aligned_lines(src_path: str | Path, tgt_path: str | Path, max_pairs: int | None) -> list[tuple[int, str, str]]:
    """Two line-aligned files -> (line number, source, target) as written (ends stripped); see read_parallel_text."""
    src_lines, tgt_lines = read_lines(src_path, pairs=True), read_lines(tgt_path, pairs=True)
    if len(src_lines) != len(tgt_lines):
        raise TaskError(
            f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}; "
            "parallel files must have the same number of lines"
        )
    out: list[tuple[int, str, str]] = []
    for i, (s, t) in enumerate(zip(src_lines, tgt_lines, strict=True), 1):
        if max_pairs is not None and len(out) >= max_pairs:
            break
        s, t = _side(s), _side(t)
        if not s and not t:
            continue
        if not s or not t:
            empty, other = (src_path, tgt_path) if not s else (tgt_path, src_path)
            raise TaskError(f"{empty}:{i}: empty sentence (line {i} of {other} is not): the files are misaligned")
        out.append((i, s, t))
    if not out:
        raise TaskError(f"{src_path}: no sentence pairs")
    return out


def read_parallel_text(
    src_path: str | Path, tgt_path: str | Path, max_pairs: int | None = None
) -> list[tuple[str, str]]:
    """Two line-aligned files (Multi30k: train.de / train.en, gzipped or not) -> (source, target) sentences as written
    (whitespace at the ends stripped). Line pairs blank on both sides are skipped; a line blank on one side only, or
    files of different lengths, is a TaskError naming the file and line (never a silent shift)."""
    return [(s, t) for _, s, t in _aligned_lines(src_path, tgt_path, max_pairs)]


def read_parallel_files(
    src_path: str | Path, tgt_path: str | Path, lower: bool = True, max_pairs: int | None = None
) -> list[Example]:
    """Two line-aligned files as word tokens (read_parallel_text; a sentence without a word is a TaskError naming
    its line)."""
    return [
        Example(_tokens(s, lower, f"{src_path}:{i}"), _tokens(t, lower, f"{tgt_path}:{i}"), src_text=s, tgt_text=t)
        for i, s, t in _aligned_lines(src_path, tgt_path, max_pairs)
    ]


def corpus_file(root: str | Path, split: str, lang: str) -> Path:
    """``<root>/<split>.<lang>`` or ``<root>/<split>.<lang>.gz`` (Multi30k's layout); a TaskError names both."""
    root = Path(root)
    if not root.is_dir():
        said = "a file, not a folder" if root.exists() else "no such folder"
        raise TaskError(f"{root}: {said} (data.root: the corpus folder with <split>.<lang>[.gz] files)")
    for name in (f"{split}.{lang}", f"{split}.{lang}.gz"):
        if (root / name).is_file():
            return root / name
    raise TaskError(f"{root}: found neither {split}.{lang} nor {split}.{lang}.gz")
